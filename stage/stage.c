/* Creating and destroying a stage, its flat parameter / gradient / optimizer-state
 * buffers, and the optimizer step over them. */
#include "stage_build.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/backend/device_backend.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/kernels.h>

/* A stage buffer is never empty (64 bytes then), so every pointer is distinct. */
static size_t buf_bytes(size_t n) { return n ? n : 64; }

/* The 16-bit copy of the flat parameters, when a matrix product reads one (precision.c). */
static size_t param16_bytes(const pp_stage *s)
{
    for (int t = 0; t < s->nt; t++)
        if (s->t[t].master >= 0) return (size_t)s->param_elems * pp_dtype_size(s->opt.precision);
    return 0;
}

/* The flat gradients and, after them, the later uses' (uses.c). */
static size_t grad_bytes(const pp_stage *s) { return (size_t)(s->param_elems + s->use_elems) * sizeof(float); }

/* The optimizer state's slots and, after them, the step's pp_optim_step (what the update
 * kernels read: pp_stage_set_step). */
static size_t optim_state_bytes(const pp_stage *s) { return (size_t)s->param_elems * sizeof(float) * (size_t)s->optim_slots; }
static size_t optim_bytes(const pp_stage *s) { return optim_state_bytes(s) + sizeof(pp_optim_step); }

static pp_status alloc_zeroed(pp_device *dev, pp_mem_category c, size_t n, void **out, pp_error *err)
{
    PP_CHECK(pp_device_alloc_as(dev, c, buf_bytes(n), out, err));
    return pp_device_memset(dev, *out, 0, buf_bytes(n), err);
}

/* A buffer of n bytes: the one the stage shares (share.c) when it has one, else its own. */
static pp_status alloc_or_share(pp_stage *s, int which, pp_mem_category c, size_t n, void **out, pp_error *err)
{
    if ((*out = stage_shared_buffer(s, which, buf_bytes(n)))) return PP_OK;
    return alloc_zeroed(s->dev, c, n, out, err);
}

/* Copies parameters (unless it shares another stage's: those hold the trained values) and
 * constants from the graph's initializers onto the device. */
static pp_status load_persistent(pp_stage *s, pp_error *err)
{
    for (int t = 0; t < s->nt; t++) {
        const tslot *ts = &s->t[t];
        if ((ts->at.loc != LOC_PARAM || s->opt.share) && ts->at.loc != LOC_CONST) continue;
        if (ts->view_of >= 0) continue;   /* its base is loaded (a folded weight Transpose's result) */
        const pp_const_tensor *c = pp_graph_const(s->g, ts->value);
        PP_CHECK(pp_device_copy_from_host(s->dev, stage_ptr(s, 0, ts->at), c->data, c->nbytes, err));
    }
    return PP_OK;
}

/* The stage placed (ports, ops, tensor places, buffer sizes) on a device of dev's kind;
 * with alloc, its buffers allocated and loaded too. pp_stage_estimate places without
 * allocating, so what it reports is what pp_stage_create would allocate. Its nodes are ids
 * [first, end), or those of them side[] (owned from here on, may be NULL) says are its own. */
static pp_status stage_build(const pp_graph *g, int first, int end, signed char *side, int last, pp_device *dev,
                             int alloc, const pp_stage_options *opt, pp_stage **out, pp_error *err)
{
    *out = NULL;
    pp_status st = PP_OK;
    if (!g->finalized) st = pp_error_set(err, PP_ERR_INVALID_ARG, "the graph is not finalized");
    else if (first < 0 || end > g->nnodes || first >= end)
        st = pp_error_set(err, PP_ERR_INVALID_ARG, "stage node range [%d, %d) out of range (graph has %d nodes)",
                          first, end, g->nnodes);
    else if (opt->slots < 1 || opt->microbatch < 1 || opt->global_batch < opt->microbatch)
        st = pp_error_set(err, PP_ERR_INVALID_ARG,
                          "stage options: slots %d, microbatch %lld, global batch %lld (need slots >= 1 and "
                          "global batch >= microbatch >= 1)", opt->slots, (long long)opt->microbatch,
                          (long long)opt->global_batch);
    pp_stage *s = st == PP_OK ? calloc(1, sizeof *s) : NULL;
    if (st == PP_OK && !s) st = pp_error_set(err, PP_ERR_NOMEM, "out of memory creating stage");
    if (st != PP_OK) {
        free(side);
        return st;
    }
    s->side = side;
    s->g = g;
    s->dev = dev;
    s->opt = *opt;
    s->first = first;
    s->end = end;
    s->last = last;
    PP_CHECK_GOTO(stage_place_tensors(s, err), st, fail);
    s->optim_slots = pp_optim_state_slots(&opt->optim);
    if (!alloc) {
        s->dev = NULL;   /* planning read only its kind */
        *out = s;
        return PP_OK;
    }
    if (opt->share) PP_CHECK_GOTO(stage_check_share(s, err), st, fail);
    size_t pbytes = (size_t)s->param_elems * sizeof(float);
    PP_CHECK_GOTO(alloc_or_share(s, SHARE_PARAMS, PP_MEM_PARAMS, pbytes, (void **)&s->param_buf, err), st, fail);
    PP_CHECK_GOTO(alloc_or_share(s, SHARE_GRADS, PP_MEM_GRADS, grad_bytes(s), (void **)&s->grad_buf, err), st, fail);
    PP_CHECK_GOTO(alloc_or_share(s, SHARE_OPTIM, PP_MEM_OPTIMIZER, optim_bytes(s), (void **)&s->optim_buf, err), st,
                  fail);
    PP_CHECK_GOTO(alloc_zeroed(dev, PP_MEM_OTHER, s->const_bytes, &s->const_buf, err), st, fail);
    PP_CHECK_GOTO(alloc_or_share(s, SHARE_STASH, PP_MEM_STASH, s->slot_bytes * (size_t)opt->slots, &s->slot_buf, err),
                  st, fail);
    PP_CHECK_GOTO(alloc_or_share(s, SHARE_FWD, PP_MEM_SCRATCH, s->fwd_bytes, &s->fwd_buf, err), st, fail);
    PP_CHECK_GOTO(alloc_or_share(s, SHARE_BWD, PP_MEM_SCRATCH, s->bwd_bytes, &s->bwd_buf, err), st, fail);
    if (param16_bytes(s))
        PP_CHECK_GOTO(alloc_or_share(s, SHARE_PARAM16, PP_MEM_PARAMS, param16_bytes(s), &s->param16_buf, err), st, fail);
    if (s->recomp_bytes)
        PP_CHECK_GOTO(alloc_or_share(s, SHARE_RECOMP, PP_MEM_STASH, s->recomp_bytes, &s->recomp_buf, err), st, fail);
    s->recomp_owner = -1;
    if (s->work_bytes) PP_CHECK_GOTO(pp_device_work_reserve(dev, s->work_bytes, err), st, fail);
    PP_CHECK_GOTO(load_persistent(s, err), st, fail);
    s->param16_stale = 1;
    s->loss_scale = 1.0f;
    s->slot_step = calloc((size_t)opt->slots, sizeof *s->slot_step);
    s->slot_mb = calloc((size_t)opt->slots, sizeof *s->slot_mb);
    s->slot_seed = calloc((size_t)opt->slots, sizeof *s->slot_seed);
    for (int i = 0; s->slot_seed && i < opt->slots; i++) s->slot_seed[i] = s->loss_seed;
    if (!s->slot_step || !s->slot_mb || !s->slot_seed) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory creating stage");
        goto fail;
    }
    *out = s;
    return PP_OK;
fail:
    pp_stage_destroy(s);
    return st;
}

pp_status pp_stage_create_range(const pp_graph *g, int first, int end, int last, pp_device *dev,
                                const pp_stage_options *opt, pp_stage **out, pp_error *err)
{
    return stage_build(g, first, end, NULL, last, dev, 1, opt, out, err);
}

pp_status stage_place_whole(const pp_graph *g, pp_device_kind kind, const pp_stage_options *opt, pp_stage **out,
                           pp_error *err)
{
    pp_device planner = {.kind = kind};   /* planning asks the device only its kind */
    return stage_build(g, 0, g->nnodes, NULL, 1, &planner, 0, opt, out, err);
}

/* Stage `index` of part, built by stage_build; errors say the stage. */
static pp_status build_part(const pp_partition *part, int index, pp_device *dev, int alloc,
                            const pp_stage_options *opt, pp_stage **out, pp_error *err)
{
    *out = NULL;
    if (index < 0 || index >= part->nstages)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "stage %d out of range (0..%d)", index, part->nstages - 1);
    const pp_stage_info *si = &part->stages[index];
    const pp_graph *g = part->graph;
    int first = g->nnodes, end = 0;
    for (int k = si->first_node; k <= si->last_node; k++) {
        int i = part->order ? part->order[k] : k;
        if (i < first) first = i;
        if (i >= end) end = i + 1;
    }
    signed char *side = NULL;
    if (part->reordered) {   /* the searched order: the stage's nodes are not all of [first, end) */
        if (!(side = malloc((size_t)g->nnodes + 1))) return pp_error_set(err, PP_ERR_NOMEM, "out of memory creating stage");
        for (int i = 0; i < g->nnodes; i++)
            side[i] = (signed char)((part->node_stage[i] > index) - (part->node_stage[i] < index));
    }
    pp_status st = stage_build(g, first, end, side, index == part->nstages - 1, dev, alloc, opt, out, err);
    if (st != PP_OK) pp_error_prefix(err, "stage %d: ", index);
    return st;
}

pp_status pp_stage_create(const pp_partition *part, int index, pp_device *dev, const pp_stage_options *opt,
                          pp_stage **out, pp_error *err)
{
    return build_part(part, index, dev, 1, opt, out, err);
}

pp_status pp_stage_estimate(const pp_partition *part, int index, pp_device_kind kind, const pp_stage_options *opt,
                            pp_stage_bytes *out, pp_error *err)
{
    memset(out, 0, sizeof *out);
    if ((int)kind < 0 || kind >= PP_DEVICE_KIND_COUNT)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "device kind %d out of range", (int)kind);
    /* planning asks the device only its kind (which kernels, hence which fusions and aux
     * sizes); the stage forgets this one before it returns */
    pp_device planner = {.kind = kind};
    pp_stage *s = NULL;
    PP_CHECK(build_part(part, index, &planner, 0, opt, &s, err));
    pp_stage_allocation(s, out);
    pp_stage_destroy(s);
    return PP_OK;
}

void pp_stage_destroy(pp_stage *s)
{
    if (!s) return;
    void *bufs[] = {s->param_buf, s->grad_buf, s->optim_buf, s->const_buf, s->slot_buf, s->fwd_buf, s->bwd_buf,
                    s->param16_buf, s->recomp_buf};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (stage_owns(s, bufs[i])) pp_device_free(s->dev, bufs[i]);
    for (int o = 0; o < s->nops; o++) {
        free(s->ops[o].in);
        free(s->ops[o].out);
        free(s->ops[o].host_in);
        free(s->ops[o].grad_at);
    }
    free(s->uses);
    free(s->ops);
    free(s->t);
    free(s->t_of_value);
    free(s->inputs);
    free(s->outputs);
    free(s->input_t);
    free(s->output_t);
    free(s->params);
    free(s->param_ready);
    free(s->slot_step);
    free(s->slot_seed);
    free(s->slot_mb);
    for (int i = 0; i < s->nnames; i++) free(s->names[i]);
    free(s->names);
    stage_profile_free(s);
    free(s->side);
    free(s);
}

pp_device *pp_stage_device(const pp_stage *s) { return s->dev; }
void pp_stage_set_training(pp_stage *s, int on) { s->opt.training = on != 0; }

void pp_stage_allocation(const pp_stage *s, pp_stage_bytes *out)
{
    size_t p = (size_t)s->param_elems * sizeof(float), port = 0;
    for (int i = 0; i < s->ninputs; i++) port = s->inputs[i].nbytes > port ? s->inputs[i].nbytes : port;
    for (int i = 0; i < s->noutputs; i++) port = s->outputs[i].nbytes > port ? s->outputs[i].nbytes : port;
    *out = (pp_stage_bytes){
        .params = (int64_t)buf_bytes(p), .grads = (int64_t)buf_bytes(grad_bytes(s)),
        .optimizer = (int64_t)buf_bytes(optim_bytes(s)), .slots = s->opt.slots,
        .stash = (int64_t)buf_bytes(s->slot_bytes * (size_t)s->opt.slots),
        .scratch = (int64_t)(buf_bytes(s->fwd_bytes) + buf_bytes(s->bwd_bytes) + s->work_bytes),
        .constants = (int64_t)buf_bytes(s->const_bytes), .port_max = (int64_t)port,
        .recompute = (int64_t)s->recomp_bytes, .param_copy = (int64_t)param16_bytes(s), .work = (int64_t)s->work_bytes,
    };
    out->total = out->params + out->grads + out->optimizer + out->stash + out->scratch + out->constants +
                 out->recompute + out->param_copy;
}

int64_t pp_stage_bytes_category(const pp_stage_bytes *b, pp_mem_category c)
{
    switch (c) {
    case PP_MEM_PARAMS: return b->params + b->param_copy;
    case PP_MEM_GRADS: return b->grads;
    case PP_MEM_OPTIMIZER: return b->optimizer;
    case PP_MEM_STASH: return b->stash + b->recompute;
    case PP_MEM_SCRATCH: return b->scratch;
    case PP_MEM_OTHER: return b->constants;
    default: return 0;
    }
}
int pp_stage_num_inputs(const pp_stage *s) { return s->ninputs; }
const pp_stage_port *pp_stage_input(const pp_stage *s, int i) { return i >= 0 && i < s->ninputs ? &s->inputs[i] : NULL; }
int pp_stage_num_outputs(const pp_stage *s) { return s->noutputs; }
const pp_stage_port *pp_stage_output(const pp_stage *s, int i) { return i >= 0 && i < s->noutputs ? &s->outputs[i] : NULL; }
int pp_stage_num_params(const pp_stage *s) { return s->nparams; }
const pp_stage_param *pp_stage_param_at(const pp_stage *s, int i) { return i >= 0 && i < s->nparams ? &s->params[i] : NULL; }
int64_t pp_stage_param_elems(const pp_stage *s) { return s->param_elems; }
float *pp_stage_params(pp_stage *s)
{
    s->param16_stale = 1;   /* the caller may write them (a checkpoint load): the 16-bit copy follows */
    return s->param_buf;
}
float *pp_stage_grads(pp_stage *s) { return s->grad_buf; }
float *pp_stage_optim_state(pp_stage *s) { return s->optim_buf; }
int pp_stage_optim_slots(const pp_stage *s) { return s->optim_slots; }
const pp_optim_hparams *pp_stage_optim(const pp_stage *s) { return &s->opt.optim; }
const pp_graph *pp_stage_graph(const pp_stage *s) { return s->g; }

pp_status pp_stage_zero_grads(pp_stage *s, pp_error *err)
{
    return pp_device_memset(s->dev, s->grad_buf, 0, grad_bytes(s), err);
}

pp_status pp_stage_grad_sumsq(pp_stage *s, double *out, pp_error *err)
{
    /* alignment gaps stay zero, so one pass over the flat buffer is exact */
    return pp_kernel_sumsq(s->dev, s->grad_buf, s->param_elems, out, err);
}

pp_status pp_stage_check_grads(pp_stage *s, int64_t step, pp_error *err)
{
    int64_t bad = -1;   /* one scan (one device sync); per parameter only to name the culprit */
    PP_CHECK(pp_kernel_find_nonfinite(s->dev, s->grad_buf, s->param_elems, &bad, err));
    if (bad < 0) return PP_OK;
    for (int i = 0; i < s->nparams; i++) {
        PP_CHECK(pp_kernel_find_nonfinite(s->dev, s->grad_buf + s->params[i].offset, s->params[i].numel, &bad, err));
        if (bad < 0) continue;
        const char *reader = "?", *op = "?";   /* the first node that reads the parameter */
        for (int o = 0; o < s->nops && !strcmp(reader, "?"); o++)
            for (int k = 0; k < s->ops[o].nin; k++)
                if (s->ops[o].in[k] >= 0 && s->t[s->ops[o].in[k]].param == i) {
                    reader = s->ops[o].name;
                    op = s->ops[o].op_type;
                    break;
                }
        return pp_error_set(err, PP_ERR_NUMERIC, "step %lld: the gradient of parameter '%s' (read by node '%s' (%s)) "
                            "is NaN or Inf at element %lld", (long long)step, s->params[i].name, reader, op,
                            (long long)bad);
    }
    return PP_OK;
}

pp_status pp_stage_set_step(pp_stage *s, float lr, float grad_scale, int64_t step, pp_error *err)
{
    pp_optim_hparams h = s->opt.optim;
    h.lr = lr;
    h.step = step;
    PP_CHECK(pp_optim_check(&h, s->optim_buf, s->param_elems, err));
    const pp_optim_step t = pp_optim_step_at(&h, grad_scale);
    s->step_lr = lr;
    return pp_device_copy_from_host(s->dev, pp_stage_optim_step(s), &t, sizeof t, err);
}

pp_optim_step *pp_stage_optim_step(pp_stage *s) { return (pp_optim_step *)((char *)s->optim_buf + optim_state_bytes(s)); }

pp_status pp_stage_update(pp_stage *s, int64_t step, pp_error *err)
{
    pp_optim_hparams h = s->opt.optim;
    h.lr = s->step_lr;
    h.step = step;
    const pp_optim_step *t = pp_stage_optim_step(s);
    for (int i = 0; i < s->nparams; i++) {
        const pp_stage_param *p = &s->params[i];
        /* a tensor's state slots (Adam: m then v) lie back to back at slots x offset */
        float *state = s->optim_buf + (size_t)s->optim_slots * (size_t)p->offset;
        PP_CHECK(pp_kernel_optim_update(s->dev, &h, t, s->param_buf + p->offset, s->grad_buf + p->offset, state,
                                        p->numel, err));
    }
    s->param16_stale = 1;
    return PP_OK;
}

pp_status pp_stage_step(pp_stage *s, float lr, float grad_scale, int64_t step, pp_error *err)
{
    PP_CHECK(pp_stage_set_step(s, lr, grad_scale, step, err));
    return pp_stage_update(s, step, err);
}

int pp_stage_graph_refusal(const pp_stage *s, char *why, size_t len)
{
    for (int o = 0; s->opt.training && o < s->nops; o++)
        if (s->ops[o].k && (s->ops[o].k->caps & PP_KCAP_STEP_RANDOM)) {
            snprintf(why, len, "node '%s' (%s) draws random numbers keyed by the step", s->ops[o].name,
                     s->ops[o].op_type);
            return 1;
        }
    return 0;
}

/* The stage options a trainer starts from (pp_stage_options_default): a plain fp32
 * training stage with AdamW at PyTorch's defaults, so a custom trainer sets only its
 * batch sizes and what it changes. */
pp_stage_options pp_stage_options_default(void)
{
    return (pp_stage_options){
        .slots = 1,
        .microbatch = 1,
        .global_batch = 1,
        .optim = {.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f},
        .loss = {.ignore_index = -100},
        .training = 1,
        .precision = PP_DTYPE_F32,
    };
}
