/* Export of the inference model: the graph again with trained values (from a running
 * job's gathered parameters, or offline from a checkpoint's shards) as a plain ONNX file. */
#include "ckpt_internal.h"

#include <stdlib.h>
#include <string.h>

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
 * mapped and checksummed; NULL keeps the model's value. */
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
    if ((f->st = ck_map_file(f->c, t->file, f->err)) != PP_OK) return NULL;
    if ((f->st = ck_check_tensor(f->c, t, f->err)) != PP_OK) return NULL;
    return (const char *)f->c->maps[t->file] + t->offset;
}

pp_status pp_ckpt_export(const pp_ckpt *c, const char *model_path, const char *path, pp_error *err)
{
    pp_graph *model = NULL;
    pp_graph_options unbound = {.allow_unknown_dims = 1};
    PP_CHECK(pp_graph_load(model_path, &unbound, &model, err));
    pp_status st;
    uint64_t mine = pp_graph_model_hash(model);
    if (mine != c->info.model_hash) {
        st = pp_error_set(err, PP_ERR_INVALID_ARG, "checkpoint '%s' is of another model: its model hash is %016llx, "
                          "'%s' has %016llx", c->dir, (unsigned long long)c->info.model_hash, model_path,
                          (unsigned long long)mine);
        goto done;
    }
    for (int v = 0; v < model->nvalues; v++)
        if (model->values[v].is_param && !pp_ckpt_find_tensor(c, model->values[v].name)) {
            st = pp_error_set(err, PP_ERR_INVALID_ARG, "checkpoint '%s' has no tensor '%s' that the model needs",
                              c->dir, model->values[v].name);
            goto done;
        }
    from_ckpt f = {.c = (pp_ckpt *)c, .st = PP_OK, .err = err};
    st = pp_ckpt_write_model(model, ckpt_value, &f, path, err);
    if (f.st != PP_OK) st = f.st;
done:
    pp_graph_destroy(model);
    return st;
}
