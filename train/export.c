/* Export of the trained model: the graph again, with every trained parameter's
 * current value from the stages that hold it, as a plain ONNX file. */
#include <onnxpipe/train.h>

#include <stdlib.h>
#include <string.h>

/* Host copy of parameter `value` from the first stage holding it, or NULL. */
static pp_status trained_value(pp_stage *const *stages, int nstages, int value, size_t nbytes, void **out,
                               pp_error *err)
{
    *out = NULL;
    for (int s = 0; s < nstages; s++)
        for (int i = 0; i < pp_stage_num_params(stages[s]); i++) {
            const pp_stage_param *p = pp_stage_param_at(stages[s], i);
            if (p->value != value) continue;
            void *buf = malloc(nbytes ? nbytes : 1);
            if (!buf) return pp_error_set(err, PP_ERR_NOMEM, "out of memory exporting");
            pp_status st = pp_device_copy_to_host(pp_stage_device(stages[s]), buf,
                                                  pp_stage_params(stages[s]) + p->offset, nbytes, err);
            if (st != PP_OK) {
                free(buf);
                return st;
            }
            *out = buf;
            return PP_OK;
        }
    return PP_OK;
}

pp_status pp_train_export(const pp_graph *g, pp_stage *const *stages, int nstages, const char *path,
                          pp_error *err)
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
        void *trained = NULL;
        if (v->is_param) PP_CHECK_GOTO(trained_value(stages, nstages, in->value, in->t.nbytes, &trained, err), st, done);
        st = pp_graph_add_initializer(e, v->name, in->t.dtype, &in->t.shape, trained ? trained : in->t.data,
                                      in->t.nbytes, 1, err);
        free(trained);
        if (st != PP_OK) goto done;
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
    pp_graph_options opt = {.no_fold = 1};
    PP_CHECK_GOTO(pp_graph_finalize(e, &opt, err), st, done);
    st = pp_graph_save(e, path, NULL, err);
done:
    pp_graph_destroy(e);
    return st;
}
