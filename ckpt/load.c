/* Loading a checkpoint into this rank's stages, whatever layout wrote it: every
 * parameter, optimizer state slot and buffer is found by name and its shape and dtype
 * checked, and every shard that holds one checksummed whole, before a single byte is
 * copied in. */
#include "ckpt_internal.h"

#include <string.h>
#include <onnxpipe/stage_lib.h>

/* The tensor NAME[.state], checked against what the stage holds; its shard mapped and
 * checked whole. */
static pp_status find(pp_ckpt *c, const char *param, const char *state, pp_dtype dt, const pp_shape *shape,
                      const pp_ckpt_tensor **out, pp_error *err)
{
    char name[1024];
    snprintf(name, sizeof name, state ? "%s.%s" : "%s", param, state);
    const pp_ckpt_tensor *t = pp_ckpt_find_tensor(c, name);
    if (!t)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "checkpoint '%s' has no tensor '%s'%s", c->dir, name,
                            state ? ": it was written with other optimizer settings (sgd momentum needs momentum "
                                    "> 0 in both runs)" : " that the model needs");
    char a[96], b[96];
    if (t->dtype != dt || !pp_shape_equal(&t->shape, shape))
        return pp_error_set(err, PP_ERR_SHAPE, "checkpoint '%s': tensor '%s' is %s %s, the model's is %s %s", c->dir,
                            name, pp_dtype_name(t->dtype), pp_shape_format(&t->shape, a, sizeof a), pp_dtype_name(dt),
                            pp_shape_format(shape, b, sizeof b));
    PP_CHECK(ck_check_file(c, t->file, err));
    *out = t;
    return PP_OK;
}

/* copy 0: finds and checks; 1: copies in what the first pass checked */
static pp_status copy_in(pp_ckpt *c, int copy, pp_device *dev, void *dst, const pp_ckpt_tensor *t, pp_error *err)
{
    if (!copy) return PP_OK;
    return pp_device_copy_from_host(dev, dst, (const char *)c->maps[t->file] + t->offset, (size_t)t->nbytes, err);
}

static pp_status load_stage(pp_ckpt *c, int copy, pp_stage *s, pp_error *err)
{
    pp_device *dev = pp_stage_device(s);
    const pp_optim_hparams *h = pp_stage_optim(s);
    int slots = pp_stage_optim_slots(s);
    float *params = pp_stage_params(s), *state = pp_stage_optim_state(s);
    for (int k = 0; k < pp_stage_num_params(s); k++) {
        const pp_stage_param *p = pp_stage_param_at(s, k);
        const pp_ckpt_tensor *t;
        PP_CHECK(find(c, p->name, NULL, PP_DTYPE_F32, &p->shape, &t, err));
        PP_CHECK(copy_in(c, copy, dev, params + p->offset, t, err));
        for (int j = 0; j < slots; j++) {
            const char *sn = h->kind == PP_OPTIM_SGD ? "momentum" : j == 0 ? "exp_avg" : "exp_avg_sq";
            PP_CHECK(find(c, p->name, sn, PP_DTYPE_F32, &p->shape, &t, err));
            PP_CHECK(copy_in(c, copy, dev, state + (size_t)slots * (size_t)p->offset + (size_t)j * (size_t)p->numel, t, err));
        }
    }
    for (int k = 0; k < pp_stage_num_buffers(s); k++) {
        pp_stage_buffer b;
        const pp_ckpt_tensor *t;
        PP_CHECK(pp_stage_buffer_at(s, k, &b, err));
        PP_CHECK(find(c, b.name, NULL, b.dtype, &b.shape, &t, err));
        PP_CHECK(copy_in(c, copy, dev, b.data, t, err));
    }
    return PP_OK;
}

pp_status pp_ckpt_load(pp_ckpt *c, const pp_ckpt_part *part, pp_error *err)
{
    const pp_ckpt_meta *m = &c->info.meta;
    uint64_t mine = pp_graph_model_hash(part->partition->graph);
    if (mine != c->info.model_hash)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "checkpoint '%s' is of another model: its model hash is %016llx "
                            "('%s'), this model's is %016llx: resume with the model it was written from", c->dir,
                            (unsigned long long)c->info.model_hash, m->model_path ? m->model_path : "?",
                            (unsigned long long)mine);
    PP_CHECK(ck_check_listing(c, err));
    for (int copy = 0; copy < 2; copy++)
        for (int i = 0; i < part->nstages; i++) {
            const pp_optim_hparams *h = pp_stage_optim(part->stages[i]);
            if (h->kind != m->optim.kind)
                return pp_error_set(err, PP_ERR_INVALID_ARG, "checkpoint '%s' was written with optimizer %s, this run "
                                    "uses %s: resume with --optimizer %s", c->dir, pp_optim_kind_name(m->optim.kind),
                                    pp_optim_kind_name(h->kind), pp_optim_kind_name(m->optim.kind));
            pp_status st = load_stage(c, copy, part->stages[i], err);
            if (st != PP_OK) {
                pp_error_prefix(err, "stage %d: ", part->stage_index[i]);
                return st;
            }
        }
    return PP_OK;
}
