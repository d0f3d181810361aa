/* Export of the trained model: the graph again, with every trained parameter's
 * current value, as a plain ONNX file. */
#include <onnxpipe/train.h>

#include <stdlib.h>
#include <string.h>

pp_status pp_train_export(const pp_graph *g, const pp_graph *trained, const float *values, const int64_t *offset,
                          const char *path, pp_error *err)
{
    pp_graph *e = NULL;
    pp_status st;
    PP_CHECK_GOTO(pp_graph_create(g->name, g->opset, &e, err), st, done);
    for (int i = 0; i < g->nopsets; i++)
        PP_CHECK_GOTO(pp_graph_add_opset(e, g->opsets[i].domain, g->opsets[i].version, err), st, done);
    for (int i = 0; i < g->ninputs; i++) {
        const pp_value *v = &g->values[g->inputs[i]];
        PP_CHECK_GOTO(pp_graph_add_input(e, v->name, v->dtype, &v->shape, err), st, done);
    }
    for (int i = 0; i < g->ninits; i++) {
        const pp_initializer *in = &g->inits[i];
        const pp_value *v = &g->values[in->value];
        int tv = pp_graph_find_value(trained, v->name);
        const void *data = tv >= 0 && offset[tv] >= 0 ? (const void *)(values + offset[tv]) : in->t.data;
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
