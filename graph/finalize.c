/* Finalizing a built or loaded graph: link values to producers and consumers, sort
 * topologically, check the op set, run inference (graph/infer.c), decide what is trained
 * (graph/params.c). */
#include "graph_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>

/* Drops nodes whose op_type was cleared by a pass, keeping order. */
static void compact_nodes(pp_graph *g)
{
    int k = 0;
    for (int i = 0; i < g->nnodes; i++) {
        if (!g->nodes[i].op_type) free(g->nodes[i].attrs);   /* inputs and outputs live in the arena */
        else if (k++ != i) g->nodes[k - 1] = g->nodes[i];
    }
    g->nnodes = k;
}

/* Producers and consumer lists from the node list; the checks of single producers and
 * of reads of values nobody makes. One pass over the values (they are 192 bytes each). */
static pp_status link_values(pp_graph *g, pp_error *err)
{
    int *count = calloc((size_t)g->nvalues + 1, sizeof *count);
    int *prod = malloc(((size_t)g->nvalues + 1) * sizeof *prod);
    pp_status st = PP_OK;
    if (!count || !prod) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory linking graph");
        goto done;
    }
    memset(prod, 0xff, (size_t)g->nvalues * sizeof *prod);   /* -1: no producer */
    for (int i = 0; i < g->nnodes; i++) {
        const pp_node *n = &g->nodes[i];
        for (int k = 0; k < n->ninputs; k++)
            if (n->inputs[k] >= 0) count[n->inputs[k]]++;
        for (int k = 0; k < n->noutputs; k++) {
            int o = n->outputs[k];
            if (o < 0) continue;
            const pp_value *v = &g->values[o];
            if (v->init >= 0) {
                st = pp_error_set(err, PP_ERR_PARSE, "node '%s' (%s) writes '%s', which is an initializer",
                                  n->name, n->op_type, v->name);
                goto done;
            }
            if (v->kind == PP_VALUE_INPUT) {
                st = pp_error_set(err, PP_ERR_PARSE, "node '%s' (%s) writes '%s', which is a graph input",
                                  n->name, n->op_type, v->name);
                goto done;
            }
            if (prod[o] >= 0) {
                st = pp_error_set(err, PP_ERR_PARSE, "value '%s' is produced by both node '%s' and node '%s'",
                                  v->name, g->nodes[prod[o]].name, n->name);
                goto done;
            }
            prod[o] = i;
        }
    }
    size_t total = 0;
    for (int v = 0; v < g->nvalues; v++) total += (size_t)count[v];
    int *block = malloc((total ? total : 1) * sizeof *block);
    if (!block) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory linking graph");
        goto done;
    }
    free(g->store->consumers);   /* every value's consumer list, in one block (until here the old one) */
    g->store->consumers = block;
    for (int v = 0; v < g->nvalues; v++) {
        pp_value *val = &g->values[v];
        val->producer = prod[v];
        val->consumers = count[v] ? block : NULL;
        val->nconsumers = 0;
        block += count[v];
    }
    for (int i = 0; i < g->nnodes; i++) {
        const pp_node *n = &g->nodes[i];
        for (int k = 0; k < n->ninputs; k++) {
            int in = n->inputs[k];
            if (in < 0) continue;
            pp_value *v = &g->values[in];
            if (v->producer < 0 && v->kind == PP_VALUE_NODE) {
                st = pp_error_set(err, PP_ERR_PARSE,
                                  "node '%s' (%s) reads '%s', which no node produces and which is neither "
                                  "a graph input nor an initializer", n->name, n->op_type, v->name);
                goto done;
            }
            v->consumers[v->nconsumers++] = i;
        }
    }
    for (int k = 0; k < g->noutputs; k++) {
        const pp_value *v = &g->values[g->outputs[k]];
        if (v->producer < 0 && v->kind == PP_VALUE_NODE) {
            st = pp_error_set(err, PP_ERR_PARSE, "graph output '%s' is produced by no node", v->name);
            goto done;
        }
    }
done:
    free(count);
    free(prod);
    return st;
}

/* A binary min-heap of node ids ordered by key[id] (ties by id). */
typedef struct heap {
    int *h, n;
    const int64_t *key;
} heap;

static int heap_less(const heap *q, int a, int b)
{
    return q->key[a] < q->key[b] || (q->key[a] == q->key[b] && a < b);
}

static void heap_push(heap *q, int x)
{
    int i = q->n++;
    while (i > 0 && heap_less(q, x, q->h[(i - 1) / 2])) {
        q->h[i] = q->h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    q->h[i] = x;
}

static int heap_pop(heap *q)
{
    int top = q->h[0], x = q->h[--q->n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= q->n) break;
        if (c + 1 < q->n && heap_less(q, q->h[c + 1], q->h[c])) c++;
        if (!heap_less(q, q->h[c], x)) break;
        q->h[i] = q->h[c];
        i = c;
    }
    q->h[i] = x;
    return top;
}

/* Kahn's algorithm taking the ready node with the smallest key first. Fills order[n];
 * on a cycle, names a node that could not be scheduled. */
static pp_status kahn(const pp_graph *g, const int64_t *key, int *order, int *indeg, int *hbuf, pp_error *err)
{
    int n = g->nnodes;
    memset(indeg, 0, (size_t)n * sizeof *indeg);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < g->nodes[i].ninputs; k++) {
            int in = g->nodes[i].inputs[k];
            if (in >= 0 && g->values[in].producer >= 0) indeg[i]++;
        }
    heap q = {hbuf, 0, key};
    int done_n = 0;
    for (int i = 0; i < n; i++)
        if (!indeg[i]) heap_push(&q, i);
    while (q.n) {
        int i = heap_pop(&q);
        order[done_n++] = i;
        for (int k = 0; k < g->nodes[i].noutputs; k++) {
            int o = g->nodes[i].outputs[k];
            if (o < 0) continue;
            for (int c = 0; c < g->values[o].nconsumers; c++)
                if (--indeg[g->values[o].consumers[c]] == 0) heap_push(&q, g->values[o].consumers[c]);
        }
    }
    if (done_n == n) return PP_OK;
    int stuck = -1;
    for (int i = 0; i < n && stuck < 0; i++)
        if (indeg[i] > 0) stuck = i;
    return pp_error_set(err, PP_ERR_PARSE, "the graph has a cycle through node '%s' (%s)", g->nodes[stuck].name,
                        g->nodes[stuck].op_type);
}

/* Nodes that read only initializers (a Transpose of a weight, a constant chain) go
 * right before their first consumer, so a pipeline split keeps them with it instead of
 * computing them in stage 0 and relaying them; all other nodes keep the file order.
 * key[i] = 2 x file index, and for such nodes 2 x (first consumer's index) - 1. */
static int constant_only(const pp_graph *g, const char *is_const, int i)
{
    const pp_node *nd = &g->nodes[i];
    for (int k = 0; k < nd->ninputs; k++) {
        int in = nd->inputs[k];
        if (in < 0) continue;
        const pp_value *v = &g->values[in];
        if (v->kind == PP_VALUE_INPUT || (v->producer >= 0 && !is_const[v->producer])) return 0;
    }
    return nd->ninputs > 0;
}

/* Where every node's inputs are produced by earlier nodes (or by none), so that Kahn's
 * algorithm would keep the file order: fills is_const[] in that order and returns how
 * many nodes are constant-only; else -1. */
static int consts_in_file_order(const pp_graph *g, char *is_const)
{
    int nconst = 0;
    for (int i = 0; i < g->nnodes; i++) {
        for (int k = 0; k < g->nodes[i].ninputs; k++) {
            int in = g->nodes[i].inputs[k];
            if (in >= 0 && g->values[in].producer >= i) return -1;
        }
        nconst += is_const[i] = (char)constant_only(g, is_const, i);
    }
    return nconst;
}

static pp_status topo_sort(pp_graph *g, pp_error *err)
{
    int n = g->nnodes;
    int64_t *key = malloc(((size_t)n + 1) * sizeof *key);
    int *order = malloc(((size_t)n + 1) * sizeof *order), *indeg = malloc(((size_t)n + 1) * sizeof *indeg);
    int *hbuf = malloc(((size_t)n + 1) * sizeof *hbuf);
    char *is_const = calloc((size_t)n + 1, 1);
    pp_node *sorted = NULL;
    pp_status st = PP_OK;
    if (!key || !order || !indeg || !hbuf || !is_const) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory sorting graph");
        goto done;
    }
    int nconst = consts_in_file_order(g, is_const);
    if (nconst == 0) goto done;   /* the file order stands */
    for (int i = 0; i < n; i++) key[i] = 2 * (int64_t)i;
    if (nconst > 0) {
        for (int i = 0; i < n; i++) order[i] = i;
    } else {
        PP_CHECK_GOTO(kahn(g, key, order, indeg, hbuf, err), st, done);
        nconst = 0;
        for (int j = 0; j < n; j++) nconst += is_const[order[j]] = (char)constant_only(g, is_const, order[j]);
    }
    if (nconst) {
        for (int j = n - 1; j >= 0; j--) {   /* consumers first: reverse topological order */
            int i = order[j];
            if (!is_const[i]) continue;
            int64_t first = INT64_MAX;
            for (int k = 0; k < g->nodes[i].noutputs; k++) {
                int o = g->nodes[i].outputs[k];
                for (int c = 0; o >= 0 && c < g->values[o].nconsumers; c++)
                    if (key[g->values[o].consumers[c]] < first) first = key[g->values[o].consumers[c]];
            }
            if (first != INT64_MAX) key[i] = first - 1;
        }
        PP_CHECK_GOTO(kahn(g, key, order, indeg, hbuf, err), st, done);
    }
    int identity = 1;
    for (int i = 0; i < n; i++) identity &= order[i] == i;
    if (identity) goto done;
    if (!(sorted = malloc(((size_t)n + 1) * sizeof *sorted))) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory sorting graph");
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
    free(key);
    free(order);
    free(indeg);
    free(hbuf);
    free(is_const);
    free(sorted);
    return st;
}

pp_status graph_link(pp_graph *g, pp_error *err)
{
    compact_nodes(g);
    PP_CHECK(link_values(g, err));
    return topo_sort(g, err);
}

/* Every node's op is in the registry (an op without a row has no folder either); an op
 * newer than the model's opset is read in the form onnxpipe knows, with one warning per op.
 * A fold-only op (no kernel) is checked where inference reaches it, after what it reads has
 * folded (graph/infer.c). */
static pp_status check_ops(const pp_graph *g, pp_error *err)
{
    unsigned char warned[PP_OP_COUNT] = {0};
    for (int i = 0; i < g->nnodes; i++) {
        const pp_node *n = &g->nodes[i];
        if (n->op == PP_OP_UNKNOWN)
            return pp_error_set(err, PP_ERR_UNSUPPORTED,
                                "node '%s': op %s (domain '%s') is not supported; onnxpipe supports the ai.onnx "
                                "ops listed in docs/ops.md (`onnxpipe ops`)", n->name, n->op_type,
                                *n->domain ? n->domain : "ai.onnx");
        const pp_op_info *op = pp_op_get(n->op);
        if (g->opset >= op->since || warned[n->op]) continue;
        warned[n->op] = 1;
        pp_log(PP_LOG_WARN, "node '%s': %s is in ai.onnx from opset %lld, but the model imports opset %lld; "
               "read as the opset %lld op", n->name, op->name, (long long)op->since, (long long)g->opset,
               (long long)op->since);
    }
    return PP_OK;
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
    if (!opt->no_fold) graph_compact_constants(g);
    PP_CHECK(graph_params(g, &opt->params, err));
    g->finalized = 1;
    return PP_OK;
}
