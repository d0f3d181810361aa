/* Export of the inference model: the graph again with trained values (from a running
 * job's gathered parameters, or offline from a checkpoint's shards) as a plain ONNX file;
 * a parameter the file held twice (tied at load: copy_of) is saved twice again, both trained. */
#include "ckpt_internal.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/graph_ir.h>

pp_status pp_ckpt_write_model(const pp_graph *g, pp_ckpt_value_fn value_of, void *user, const char *path,
                              pp_error *err)
{
    pp_graph *e = NULL;
    pp_status st;
    PP_CHECK_GOTO(pp_graph_create(g->name, g->opset, &e, err), st, done);
    for (int i = 0; i < g->nopsets; i++)
        PP_CHECK_GOTO(pp_graph_add_opset(e, g->opsets[i].domain, g->opsets[i].version, err), st, done);
    for (int i = 0; i < g->nmeta; i++)
        PP_CHECK_GOTO(pp_graph_set_metadata(e, g->meta[i].key, g->meta[i].value, err), st, done);
    for (int i = 0; i < g->ninputs; i++) {
        const pp_value *v = &g->values[g->inputs[i]];
        PP_CHECK_GOTO(pp_graph_add_input(e, v->name, v->dtype, &v->shape, err), st, done);
    }
    for (int i = 0; i < g->ninits; i++) {
        const pp_initializer *in = &g->inits[i];
        const pp_value *v = &g->values[in->value];
        const void *data = value_of(user, v->name, in->t.nbytes);
        if (!data) data = in->t.data;
        PP_CHECK_GOTO(pp_graph_add_initializer(e, v->name, in->t.dtype, &in->t.shape, data, in->t.nbytes, 1, err),
                      st, done);
        if (v->folded) e->values[pp_graph_find_value(e, v->name)].folded = 1;
    }
    for (int i = 0; i < g->nnodes; i++) {
        const pp_node *n = &g->nodes[i];
        const char *ins[64], *outs[64];
        if (n->ninputs > 64 || n->noutputs > 64) {
            st = pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' has too many inputs to export", n->name);
            goto done;
        }
        for (int k = 0; k < n->ninputs; k++) ins[k] = n->inputs[k] >= 0 ? g->values[n->inputs[k]].name : "";
        for (int k = 0; k < n->noutputs; k++) outs[k] = n->outputs[k] >= 0 ? g->values[n->outputs[k]].name : "";
        int id;
        PP_CHECK_GOTO(pp_graph_add_node(e, n->op_type, n->domain, n->name, ins, n->ninputs, outs, n->noutputs,
                                        &id, err), st, done);
        for (int a = 0; a < n->nattrs; a++) PP_CHECK_GOTO(pp_graph_set_attr(e, id, &n->attrs[a], err), st, done);
        if (n->noutputs == 1 && n->outputs[0] >= 0 && g->values[n->outputs[0]].copy_of)   /* saved as the file had it */
            e->values[e->nodes[id].outputs[0]].copy_of = 1 + e->nodes[id].inputs[0];
    }
    for (int i = 0; i < g->noutputs; i++) {
        const pp_value *v = &g->values[g->outputs[i]];
        PP_CHECK_GOTO(pp_graph_add_output(e, v->name, v->dtype, &v->shape, err), st, done);
    }
    pp_graph_options opt = {.no_fold = 1, .allow_unknown_dims = 1};
    PP_CHECK_GOTO(pp_graph_finalize(e, &opt, err), st, done);
    st = pp_graph_save(e, path, NULL, err);
done:
    pp_graph_destroy(e);
    return st;
}

typedef struct from_ckpt {
    pp_ckpt *c;
    pp_status st;
    pp_error *err;
} from_ckpt;

/* The checkpoint's tensor of that name (parameters and buffers; never optimizer state),
 * in its mapped shard (checked whole before); NULL keeps the model's value. */
static const void *ckpt_value(void *user, const char *name, size_t nbytes)
{
    from_ckpt *f = user;
    const pp_ckpt_tensor *t = pp_ckpt_find_tensor(f->c, name);
    if (!t || t->state || f->st != PP_OK) return NULL;
    if ((size_t)t->nbytes != nbytes) {
        f->st = pp_error_set(f->err, PP_ERR_SHAPE, "checkpoint '%s': tensor '%s' has %lld bytes, the model's "
                             "initializer %zu", f->c->dir, name, (long long)t->nbytes, nbytes);
        return NULL;
    }
    return (const char *)f->c->maps[t->file] + t->offset;
}

static const char *rule(const pp_jvalue *params, const char *key)
{
    const pp_jvalue *v = params ? pp_json_get(params, key) : NULL;
    return v && v->type == PP_JSTR ? v->str : NULL;
}

/* What the job trained: the parameter rules it recorded (trainer.params: --trainable,
 * --frozen, --untie, --tie), so the model file loads with the same trained set and the
 * same untied copies (each an initializer of its own, read by its own node). */
static pp_param_rules recorded_rules(const pp_ckpt *c)
{
    const pp_jvalue *p = c->info.trainer ? pp_json_get(c->info.trainer, "params") : NULL;
    return (pp_param_rules){.trainable = rule(p, "trainable"), .frozen = rule(p, "frozen_globs"),
                            .untie = rule(p, "untie"), .tie = rule(p, "tie")};
}

/* The model is the checkpoint's when every parameter of one is a tensor of the other, of
 * the same dtype and shape: weights go by name. */
static pp_status same_parameters(const pp_ckpt *c, const pp_graph *model, const char *model_path, pp_error *err)
{
    char a[96], b[96];
    for (int v = 0; v < model->nvalues; v++) {
        const pp_value *x = &model->values[v];
        if (!x->is_param) continue;
        const pp_ckpt_tensor *t = pp_ckpt_find_tensor(c, x->name);
        if (!t)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "checkpoint '%s' has no tensor '%s' that '%s' trains: it is "
                                "of another model", c->dir, x->name, model_path);
        if (t->dtype != x->dtype || !pp_shape_equal(&t->shape, &x->shape))
            return pp_error_set(err, PP_ERR_SHAPE, "checkpoint '%s': tensor '%s' is %s %s, '%s' has %s %s: it is of "
                                "another model", c->dir, x->name, pp_dtype_name(t->dtype),
                                pp_shape_format(&t->shape, a, sizeof a), model_path, pp_dtype_name(x->dtype),
                                pp_shape_format(&x->shape, b, sizeof b));
    }
    for (int i = 0; i < c->info.ntensors; i++) {
        const pp_ckpt_tensor *t = &c->tensors[i];
        if (!t->state && pp_graph_find_value(model, t->name) < 0)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "checkpoint '%s' has tensor '%s', which '%s' does not: it is "
                                "of another model", c->dir, t->name, model_path);
    }
    return PP_OK;
}

pp_status pp_ckpt_export(const pp_ckpt *ck, const char *model_path, const char *path, pp_error *err)
{
    pp_ckpt *c = (pp_ckpt *)ck;   /* maps its shards */
    PP_CHECK(ck_check_listing(c, err));
    for (int f = 0; f < c->info.nfiles; f++) PP_CHECK(ck_check_file(c, f, err));
    pp_graph *model = NULL;
    pp_graph_options unbound = {.allow_unknown_dims = 1, .params = recorded_rules(c)};
    PP_CHECK(pp_graph_load(model_path, &unbound, &model, err));
    pp_status st = same_parameters(c, model, model_path, err);
    if (st == PP_OK && pp_graph_model_hash(model) != c->info.model_hash)
        pp_log(PP_LOG_WARN, "'%s' has model hash %016llx, checkpoint '%s' %016llx (its nodes that read parameters, "
               "or its inputs and outputs, differ in name or type): its parameters match by name, dtype and shape, "
               "so the export goes on", model_path, (unsigned long long)pp_graph_model_hash(model), c->dir,
               (unsigned long long)c->info.model_hash);
    from_ckpt f = {.c = c, .st = PP_OK, .err = err};
    if (st == PP_OK) st = pp_ckpt_write_model(model, ckpt_value, &f, path, err);
    if (f.st != PP_OK) st = f.st;
    pp_graph_destroy(model);
    return st;
}
