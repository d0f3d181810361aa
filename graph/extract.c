/* Subgraph extraction: a finalized graph holding some nodes of a finalized graph, with
 * the values they read from outside as inputs and chosen values as outputs. The
 * partitioner cuts a model into stages with it. */
#include "graph_internal.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/graph_ir.h>

/* Gives sub's value `name` the dtype and shape of g's value v (symbolic names copied). */
static pp_status copy_type(pp_graph *sub, const pp_graph *g, int v, pp_error *err)
{
    int s = pp_graph_value(sub, g->values[v].name);
    if (s < 0) return PP_NOMEM(err);
    pp_value *dst = &sub->values[s];
    const pp_value *src = &g->values[v];
    dst->dtype = src->dtype;
    dst->shape = src->shape;
    for (int i = 0; i < src->shape.rank; i++)
        if (src->shape.syms[i] && !(dst->shape.syms[i] = pp_graph_strdup(sub, src->shape.syms[i])))
            return PP_NOMEM(err);
    return PP_OK;
}

/* Makes g's value v available in sub without a producer: as a borrowed initializer
 * when it is constant, as a graph input otherwise. */
static pp_status import_value(pp_graph *sub, const pp_graph *g, int v, pp_error *err)
{
    const pp_value *val = &g->values[v];
    if (val->init >= 0) {
        const pp_const_tensor *t = &g->inits[val->init].t;
        PP_CHECK(pp_graph_add_initializer(sub, val->name, t->dtype, &t->shape, t->data, t->nbytes, 0, err));
        pp_value *dst = &sub->values[pp_graph_find_value(sub, val->name)];
        dst->folded = val->folded;
        return PP_OK;
    }
    return pp_graph_add_input(sub, val->name, val->dtype, &val->shape, err);
}

static pp_status check_ids(const pp_graph *g, const int *nodes, int nnodes, const int *out_values, int nout,
                           char *picked, pp_error *err)
{
    for (int i = 0; i < nnodes; i++) {
        if (nodes[i] < 0 || nodes[i] >= g->nnodes)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "node id %d out of range (0..%d)", nodes[i], g->nnodes - 1);
        if (picked[nodes[i]])
            return pp_error_set(err, PP_ERR_INVALID_ARG, "node '%s' is listed twice", g->nodes[nodes[i]].name);
        picked[nodes[i]] = 1;
    }
    for (int i = 0; i < nout; i++)
        if (out_values[i] < 0 || out_values[i] >= g->nvalues)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "output value id %d out of range (0..%d)", out_values[i],
                                g->nvalues - 1);
    return PP_OK;
}

/* Adds node n of g to sub with its attributes, typing its outputs from g. */
static pp_status copy_node(pp_graph *sub, const pp_graph *g, const pp_node *n, pp_error *err)
{
    const char *stack_names[16];
    int count = n->ninputs + n->noutputs;
    const char **names = count <= 16 ? stack_names : malloc((size_t)count * sizeof *names);
    if (!names) return PP_NOMEM(err);
    for (int k = 0; k < n->ninputs; k++) names[k] = n->inputs[k] >= 0 ? g->values[n->inputs[k]].name : "";
    for (int k = 0; k < n->noutputs; k++)
        names[n->ninputs + k] = n->outputs[k] >= 0 ? g->values[n->outputs[k]].name : "";
    int id;
    pp_status st = pp_graph_add_node(sub, n->op_type, n->domain, n->name, names, n->ninputs, names + n->ninputs,
                                     n->noutputs, &id, err);
    if (names != stack_names) free(names);
    PP_CHECK(st);
    for (int k = 0; k < n->nattrs; k++) PP_CHECK(pp_graph_set_attr(sub, id, &n->attrs[k], err));
    for (int k = 0; k < n->noutputs; k++)
        if (n->outputs[k] >= 0) PP_CHECK(copy_type(sub, g, n->outputs[k], err));
    return PP_OK;
}

pp_status pp_graph_extract(const pp_graph *g, const int *nodes, int nnodes, const int *out_values, int nout,
                           const char *name, pp_graph **out, pp_error *err)
{
    *out = NULL;
    pp_graph *sub = NULL;
    /* per value of g: 1 produced by a picked node, 2 already imported into sub */
    char *state = calloc((size_t)g->nvalues + 1, 1), *picked = calloc((size_t)g->nnodes + 1, 1);
    pp_status st = PP_OK;
    if (!state || !picked) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory extracting subgraph");
        goto done;
    }
    PP_CHECK_GOTO(check_ids(g, nodes, nnodes, out_values, nout, picked, err), st, done);
    PP_CHECK_GOTO(pp_graph_create(name, g->opset, &sub, err), st, done);
    sub->ir_version = g->ir_version;
    sub->producer_name = pp_graph_strdup(sub, g->producer_name);
    for (int i = 0; i < g->nopsets; i++)
        PP_CHECK_GOTO(pp_graph_add_opset(sub, g->opsets[i].domain, g->opsets[i].version, err), st, done);
    for (int i = 0; i < nnodes; i++) {
        const pp_node *n = &g->nodes[nodes[i]];
        for (int k = 0; k < n->noutputs; k++)
            if (n->outputs[k] >= 0) state[n->outputs[k]] = 1;
    }
    /* inputs and initializers first, in first-use order, so they keep their kinds */
    for (int i = 0; i < nnodes; i++) {
        const pp_node *n = &g->nodes[nodes[i]];
        for (int k = 0; k < n->ninputs; k++) {
            int v = n->inputs[k];
            if (v < 0 || state[v]) continue;
            state[v] = 2;
            PP_CHECK_GOTO(import_value(sub, g, v, err), st, done);
        }
    }
    /* an output no picked node produces passes through as an input (a skip connection) */
    for (int i = 0; i < nout; i++) {
        int v = out_values[i];
        if (!state[v]) {
            state[v] = 2;
            PP_CHECK_GOTO(import_value(sub, g, v, err), st, done);
        }
    }
    for (int i = 0; i < nnodes; i++) PP_CHECK_GOTO(copy_node(sub, g, &g->nodes[nodes[i]], err), st, done);
    for (int i = 0; i < nout; i++) {
        const pp_value *v = &g->values[out_values[i]];
        PP_CHECK_GOTO(pp_graph_add_output(sub, v->name, v->dtype, &v->shape, err), st, done);
    }
    /* shapes are already known from g: no folding, and unbound dims stay as g had them */
    const pp_graph_options opt = {.no_fold = 1, .allow_unknown_dims = 1};
    PP_CHECK_GOTO(pp_graph_finalize(sub, &opt, err), st, done);
    *out = sub;
    sub = NULL;
done:
    if (st != PP_OK) pp_error_prefix(err, "extracting subgraph '%s': ", name ? name : "graph");
    pp_graph_destroy(sub);
    free(state);
    free(picked);
    return st;
}
