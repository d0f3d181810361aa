/* Finalizing a built or loaded graph: link values to producers and consumers, sort
 * topologically, check the op set, run inference (graph/infer.c), mark parameters. */
#include "graph_internal.h"

#include <stdlib.h>
#include <string.h>

/* Drops nodes whose op_type was cleared by a pass, keeping order. */
static void compact_nodes(pp_graph *g)
{
    int k = 0;
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].op_type) g->nodes[k++] = g->nodes[i];
        else {
            free(g->nodes[i].inputs);
            free(g->nodes[i].outputs);
            free(g->nodes[i].attrs);
        }
    }
    g->nnodes = k;
}

static pp_status link_values(pp_graph *g, pp_error *err)
{
    for (int v = 0; v < g->nvalues; v++) {
        free(g->values[v].consumers);
        g->values[v].consumers = NULL;
        g->values[v].nconsumers = 0;
        g->values[v].producer = -1;
    }
    int *count = calloc((size_t)g->nvalues + 1, sizeof *count);
    if (!count) return pp_error_set(err, PP_ERR_NOMEM, "out of memory linking graph");
    for (int i = 0; i < g->nnodes; i++) {
        const pp_node *n = &g->nodes[i];
        for (int k = 0; k < n->ninputs; k++)
            if (n->inputs[k] >= 0) count[n->inputs[k]]++;
        for (int k = 0; k < n->noutputs; k++) {
            int o = n->outputs[k];
            if (o < 0) continue;
            pp_value *v = &g->values[o];
            if (v->init >= 0) {
                free(count);
                return pp_error_set(err, PP_ERR_PARSE, "node '%s' (%s) writes '%s', which is an initializer",
                                    n->name, n->op_type, v->name);
            }
            if (v->kind == PP_VALUE_INPUT) {
                free(count);
                return pp_error_set(err, PP_ERR_PARSE, "node '%s' (%s) writes '%s', which is a graph input",
                                    n->name, n->op_type, v->name);
            }
            if (v->producer >= 0) {
                free(count);
                return pp_error_set(err, PP_ERR_PARSE, "value '%s' is produced by both node '%s' and node '%s'",
                                    v->name, g->nodes[v->producer].name, n->name);
            }
            v->producer = i;
        }
    }
    for (int v = 0; v < g->nvalues; v++) {
        if (!count[v]) continue;
        g->values[v].consumers = malloc((size_t)count[v] * sizeof(int));
        if (!g->values[v].consumers) {
            free(count);
            return pp_error_set(err, PP_ERR_NOMEM, "out of memory linking graph");
        }
    }
    free(count);
    for (int i = 0; i < g->nnodes; i++) {
        const pp_node *n = &g->nodes[i];
        for (int k = 0; k < n->ninputs; k++) {
            int in = n->inputs[k];
            if (in < 0) continue;
            pp_value *v = &g->values[in];
            if (v->producer < 0 && v->kind == PP_VALUE_NODE)
                return pp_error_set(err, PP_ERR_PARSE,
                                    "node '%s' (%s) reads '%s', which no node produces and which is neither "
                                    "a graph input nor an initializer", n->name, n->op_type, v->name);
            v->consumers[v->nconsumers++] = i;
        }
    }
    for (int k = 0; k < g->noutputs; k++) {
        const pp_value *v = &g->values[g->outputs[k]];
        if (v->producer < 0 && v->kind == PP_VALUE_NODE)
            return pp_error_set(err, PP_ERR_PARSE, "graph output '%s' is produced by no node", v->name);
    }
    return PP_OK;
}

/* A binary min-heap of node ids: among ready nodes the one earliest in the file goes
 * first, so a file already in topological order (ONNX requires it) keeps its order and
 * nodes that read only weights stay beside their consumers. */
static void heap_push(int *h, int *n, int x)
{
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > x) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static int heap_pop(int *h, int *n)
{
    int top = h[0], x = h[--*n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= x) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
    return top;
}

/* Kahn's algorithm with the heap above. On a cycle, names a node that could not be
 * scheduled. */
static pp_status topo_sort(pp_graph *g, pp_error *err)
{
    int n = g->nnodes;
    int sorted_already = 1;
    for (int i = 0; i < n && sorted_already; i++)
        for (int k = 0; k < g->nodes[i].ninputs; k++) {
            int in = g->nodes[i].inputs[k];
            if (in >= 0 && g->values[in].producer >= i) sorted_already = 0;
        }
    if (sorted_already) return PP_OK;
    int *indeg = calloc((size_t)n + 1, sizeof *indeg);
    int *heap = malloc(((size_t)n + 1) * sizeof *heap);
    int *order = malloc(((size_t)n + 1) * sizeof *order);
    pp_node *sorted = malloc(((size_t)n + 1) * sizeof *sorted);
    pp_status st = PP_OK;
    if (!indeg || !heap || !order || !sorted) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory sorting graph");
        goto done;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < g->nodes[i].ninputs; k++) {
            int in = g->nodes[i].inputs[k];
            if (in >= 0 && g->values[in].producer >= 0) indeg[i]++;
        }
    int nheap = 0, done_n = 0;
    for (int i = 0; i < n; i++)
        if (!indeg[i]) heap_push(heap, &nheap, i);
    while (nheap) {
        int i = heap_pop(heap, &nheap);
        order[done_n++] = i;
        for (int k = 0; k < g->nodes[i].noutputs; k++) {
            int o = g->nodes[i].outputs[k];
            if (o < 0) continue;
            for (int c = 0; c < g->values[o].nconsumers; c++)
                if (--indeg[g->values[o].consumers[c]] == 0) heap_push(heap, &nheap, g->values[o].consumers[c]);
        }
    }
    if (done_n < n) {
        int stuck = -1;
        for (int i = 0; i < n && stuck < 0; i++)
            if (indeg[i] > 0) stuck = i;
        st = pp_error_set(err, PP_ERR_PARSE, "the graph has a cycle through node '%s' (%s)",
                          g->nodes[stuck].name, g->nodes[stuck].op_type);
        goto done;
    }
    for (int i = 0; i < n; i++) sorted[i] = g->nodes[order[i]];
    memcpy(g->nodes, sorted, (size_t)n * sizeof *sorted);
    int *where = indeg;  /* reuse: old id -> new id */
    for (int i = 0; i < n; i++) where[order[i]] = i;
    for (int v = 0; v < g->nvalues; v++) {
        pp_value *val = &g->values[v];
        if (val->producer >= 0) val->producer = where[val->producer];
        for (int c = 0; c < val->nconsumers; c++) val->consumers[c] = where[val->consumers[c]];
    }
done:
    free(indeg);
    free(heap);
    free(order);
    free(sorted);
    return st;
}

pp_status graph_link(pp_graph *g, pp_error *err)
{
    compact_nodes(g);
    PP_CHECK(link_values(g, err));
    return topo_sort(g, err);
}

static pp_status check_ops(const pp_graph *g, pp_error *err)
{
    for (int i = 0; i < g->nnodes; i++) {
        const pp_node *n = &g->nodes[i];
        if (!pp_op_supported(n->domain, n->op_type))
            return pp_error_set(err, PP_ERR_UNSUPPORTED,
                                "node '%s': op %s (domain '%s') is not supported; onnxpipe supports the ai.onnx "
                                "ops listed in the README", n->name, n->op_type,
                                *n->domain ? n->domain : "ai.onnx");
    }
    return PP_OK;
}

/* Walks backward from differentiable node inputs: an initializer is a parameter when
 * a chain of differentiable inputs leads from it to some node. A floating-point
 * initializer only read as a shape, index or mask is not trained. */
void graph_mark_params(pp_graph *g)
{
    g->nparams = 0;
    g->param_bytes = 0;
    for (int v = 0; v < g->nvalues; v++) g->values[v].is_param = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const pp_node *n = &g->nodes[i];
        for (int k = 0; k < n->ninputs; k++) {
            int in = n->inputs[k];
            if (in < 0 || !pp_op_input_differentiable(n->op_type, k)) continue;
            pp_value *v = &g->values[in];
            if (v->init >= 0 && !v->folded && pp_dtype_is_float(v->dtype) && !v->is_param) {
                v->is_param = 1;
                g->nparams += pp_shape_numel(&v->shape);
                g->param_bytes += (int64_t)g->inits[v->init].t.nbytes;
            }
        }
    }
}

pp_status pp_graph_finalize(pp_graph *g, const pp_graph_options *opt, pp_error *err)
{
    static const pp_graph_options defaults = {0};
    if (!opt) opt = &defaults;
    if (g->finalized) return PP_OK;
    /* graph inputs that also have an initializer are initializers with a default */
    int k = 0;
    for (int i = 0; i < g->ninputs; i++)
        if (g->values[g->inputs[i]].init < 0) g->inputs[k++] = g->inputs[i];
    g->ninputs = k;
    PP_CHECK(check_ops(g, err));
    PP_CHECK(graph_link(g, err));
    PP_CHECK(graph_infer(g, opt, err));
    graph_mark_params(g);
    g->finalized = 1;
    return PP_OK;
}
