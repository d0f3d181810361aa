/* pp_partition_create: checks the options, makes the cost model of the balance
 * (balance.c) over the memory model (memory.c), places the cuts (place.c: the exact split,
 * over the orders searched; or the user's manual cuts), then hands over to the cut
 * analysis (analyze.c). */
#include "partition_internal.h"

#include <math.h>
#include <string.h>
#include <onnxpipe/graph_ir.h>

static const char *const balance_names[] = {"params", "flops", "memory", "uniform", "time"};
static const char *const order_names[] = {"search", "graph"};

const char *pp_balance_name(pp_balance b)
{
    return (unsigned)b < sizeof balance_names / sizeof balance_names[0] ? balance_names[b] : "?";
}

int pp_balance_parse(const char *s, pp_balance *out)
{
    for (int i = 0; i < (int)(sizeof balance_names / sizeof balance_names[0]); i++)
        if (s && !strcmp(s, balance_names[i])) {
            *out = (pp_balance)i;
            return 1;
        }
    return 0;
}

const char *pp_order_mode_name(pp_order_mode m)
{
    return (unsigned)m < sizeof order_names / sizeof order_names[0] ? order_names[m] : "?";
}

int pp_order_mode_parse(const char *s, pp_order_mode *out)
{
    for (int i = 0; i < (int)(sizeof order_names / sizeof order_names[0]); i++)
        if (s && !strcmp(s, order_names[i])) {
            *out = (pp_order_mode)i;
            return 1;
        }
    return 0;
}

/* The bound max(largest node, ceil(total / P)) that no split can beat, with the last
 * (smallest) coefficients (cut terms only add). */
static void bounds(pp_partition *p, const balance_model *m)
{
    int n = p->graph->nnodes, P = p->nstages;
    int64_t total = 0, big = 0;
    for (int i = 0; i < n; i++) {
        int64_t x = m->ca[P - 1] * m->a[i] + (m->b ? m->cb[P - 1] * m->b[i] : 0);
        total += x;
        if (x > big) big = x;
    }
    int64_t avg = (total + P - 1) / P;
    p->lower_bound = (big > avg ? big : avg) + m->fixed;
}

/* The activation edges of g, in value id order; *out is malloc'ed (room for one per
 * value: pages past the last edge are never touched). */
static pp_status collect_edges(const pp_graph *g, act_edge **out, int *n, pp_error *err)
{
    *n = 0;
    if (!(*out = malloc(((size_t)g->nvalues + 1) * sizeof **out)))
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory collecting cut tensors");
    for (int v = 0; v < g->nvalues; v++) {
        const int from = g->values[v].producer, last = pp_value_last_reader(g, v);
        if (last == from) continue;   /* not made here (-1), or read by no later node */
        (*out)[(*n)++] = (act_edge){v, from, last, value_bytes(g, v)};
    }
    return PP_OK;
}

/* Manual cuts: a node name or a tensor name each; ends[s] = last node of stage s. */
static pp_status manual_ends(const pp_graph *g, int P, const pp_partition_options *o, int *ends,
                             pp_error *err)
{
    if (o->ncuts != P - 1)
        return pp_error_set(err, PP_ERR_INVALID_ARG,
                            "%d manual cut%s make%s %d stages, but %d stages were asked for",
                            o->ncuts, o->ncuts == 1 ? "" : "s", o->ncuts == 1 ? "s" : "", o->ncuts + 1, P);
    for (int k = 0; k < o->ncuts; k++) {
        const char *name = o->cuts[k];
        int pos = pp_graph_find_node(g, name);
        if (pos < 0) {
            int v = pp_graph_find_value(g, name);
            if (v < 0)
                return pp_error_set(err, PP_ERR_INVALID_ARG,
                                    "manual cut '%s' names no node and no tensor of '%s'", name, g->name);
            pos = g->values[v].producer;
            if (pos < 0)
                return pp_error_set(err, PP_ERR_INVALID_ARG,
                                    "manual cut '%s' is a graph input or initializer; name a node or a "
                                    "tensor a node produces", name);
        }
        if (pos >= g->nnodes - 1)
            return pp_error_set(err, PP_ERR_INVALID_ARG,
                                "manual cut '%s' is after the last node '%s': the last stage would be empty",
                                name, g->nodes[g->nnodes - 1].name);
        if (k && pos <= ends[k - 1])
            return pp_error_set(err, PP_ERR_INVALID_ARG,
                                "manual cut '%s' (after node %d '%s') does not come after cut '%s' (after node "
                                "%d '%s'); give cuts in topological order", name, pos, g->nodes[pos].name,
                                o->cuts[k - 1], ends[k - 1], g->nodes[ends[k - 1]].name);
        ends[k] = pos;
    }
    ends[P - 1] = g->nnodes - 1;
    return PP_OK;
}

/* The split of o->same_split, a partition of a graph with g's nodes at other shapes:
 * its order and stage ends. */
static pp_status same_ends(pp_partition *p, const pp_partition_options *o, int *ends, pp_error *err)
{
    const pp_partition *like = o->same_split;
    const pp_graph *g = p->graph, *h = like->graph;
    if (like->nstages != p->nstages)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "the split to follow has %d stages, not %d", like->nstages,
                            p->nstages);
    if (h->nnodes != g->nnodes)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "the split to follow is of '%s' with %d nodes, this graph has %d "
                            "(the model folds differently at this shape)", h->name, h->nnodes, g->nnodes);
    for (int i = 0; i < g->nnodes; i++)
        if (strcmp(g->nodes[i].name, h->nodes[i].name) || strcmp(g->nodes[i].op_type, h->nodes[i].op_type))
            return pp_error_set(err, PP_ERR_INVALID_ARG, "node %d is '%s' (%s) here but '%s' (%s) in the split to "
                                "follow (the model folds differently at this shape)", i, g->nodes[i].name,
                                g->nodes[i].op_type, h->nodes[i].name, h->nodes[i].op_type);
    memcpy(p->order, like->order, (size_t)g->nnodes * sizeof *p->order);
    for (int s = 0; s < p->nstages; s++) ends[s] = like->stages[s].last_node;
    p->reordered = like->reordered;
    p->order_searched = like->order_searched;
    return PP_OK;
}

static pp_status check_options(const pp_graph *g, int nstages, const pp_partition_options *o, pp_error *err)
{
    if (!g->finalized)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "graph '%s' is not finalized (call pp_graph_finalize)",
                            g->name);
    if (nstages < 1 || nstages > g->nnodes)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%d stages out of range (1..%d, the node count of '%s')",
                            nstages, g->nnodes, g->name);
    if ((unsigned)o->balance >= sizeof balance_names / sizeof balance_names[0])
        return pp_error_set(err, PP_ERR_INVALID_ARG, "balance %d out of range (params, flops, memory, uniform, time)",
                            (int)o->balance);
    if ((unsigned)o->order >= sizeof order_names / sizeof order_names[0])
        return pp_error_set(err, PP_ERR_INVALID_ARG, "order mode %d out of range (search, graph)", (int)o->order);
    if (!o->cuts && o->balance == PP_BALANCE_PARAMS && g->nparams == 0 && nstages > 1)   /* one stage: nothing to balance */
        return pp_error_set(err, PP_ERR_INVALID_ARG,
                            "model '%s' has no trainable parameters to balance; use --balance flops or "
                            "uniform, or give manual cuts", g->name);
    if (o->microbatches < 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%lld microbatches (expected >= 1)", (long long)o->microbatches);
    if (!(o->tolerance >= 0 && o->tolerance <= 10))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "balance tolerance %g out of range (0..10, a fraction of the "
                            "optimum: 0.02 is 2%%)", o->tolerance);
    const double x[3] = {o->gflops, o->link_gbps, o->op_overhead};
    const char *const what[3] = {"gflops", "link bandwidth (GB/s)", "per-node overhead (s)"};
    for (int k = 0; k < 3; k++)
        if (!(x[k] >= 0 && x[k] <= 1e12))
            return pp_error_set(err, PP_ERR_INVALID_ARG, "time balance: %s %g out of range (0..1e12; 0: the default)",
                                what[k], x[k]);
    return PP_OK;
}

pp_status pp_partition_create(const pp_graph *g, int nstages, const pp_partition_options *opt,
                              pp_partition **out, pp_error *err)
{
    static const pp_partition_options defaults = {0};
    if (!opt) opt = &defaults;
    *out = NULL;
    PP_CHECK(check_options(g, nstages, opt, err));
    pp_partition *p = calloc(1, sizeof *p);
    int *ends = malloc((size_t)nstages * sizeof *ends);
    int64_t *weights = malloc((size_t)nstages * sizeof *weights);
    balance_model m = {0};
    act_edge *edges = NULL;
    int nedges = 0;
    pp_status st = PP_OK;
    if (!p || !ends || !weights) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory partitioning '%s'", g->name);
        goto fail;
    }
    p->graph = g;
    p->nstages = nstages;
    p->balance = opt->balance;
    p->microbatches = opt->microbatches ? opt->microbatches : nstages;
    p->recompute = opt->recompute;
    p->manual = opt->cuts != NULL;
    p->tolerance = opt->tolerance;
    p->gflops = opt->gflops > 0 ? opt->gflops : 100.0;
    p->link_gbps = opt->link_gbps;
    p->op_overhead = opt->op_overhead;
    p->costs = malloc((size_t)g->nnodes * sizeof *p->costs);
    p->order = malloc(((size_t)g->nnodes + 1) * sizeof *p->order);
    if (!p->costs || !p->order) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory partitioning '%s'", g->name);
        goto fail;
    }
    for (int i = 0; i < g->nnodes; i++) p->order[i] = i;
    PP_CHECK_GOTO(pp_partition_costs(g, p->costs, err), st, fail);
    /* the memory model: the caller's profile, else (for the memory balance) an estimate */
    if (opt->memory) PP_CHECK_GOTO(memory_profile_copy(g, opt->memory, &p->memory, err), st, fail);
    else if (p->balance == PP_BALANCE_MEMORY)
        PP_CHECK_GOTO(memory_profile_estimate(g, p->costs, p->recompute, &p->memory, err), st, fail);
    PP_CHECK_GOTO(balance_make(p, &m, err), st, fail);
    bounds(p, &m);
    PP_CHECK_GOTO(collect_edges(g, &edges, &nedges, err), st, fail);
    if (opt->same_split) PP_CHECK_GOTO(same_ends(p, opt, ends, err), st, fail);
    else if (p->manual) PP_CHECK_GOTO(manual_ends(g, nstages, opt, ends, err), st, fail);
    else PP_CHECK_GOTO(place_cuts(p, &m, opt->order, ends, err), st, fail);
    PP_CHECK_GOTO(partition_analyze(p, ends, edges, nedges, err), st, fail);
    int64_t worst = balance_stage_costs(p, &m, ends, weights);
    if (p->manual || opt->same_split) p->bottleneck = worst;
    if (opt->same_split) p->optimum = worst;   /* not searched at this shape */
    p->total_weight = 0;   /* what the stages weigh (with the cut terms and slots they pay) */
    for (int s = 0; s < nstages; s++) {
        p->stages[s].weight = weights[s];
        p->total_weight = p->total_weight > INT64_MAX - weights[s] ? INT64_MAX : p->total_weight + weights[s];
        if (p->balance == PP_BALANCE_TIME) p->stages[s].seconds = (double)weights[s] / (p->gflops * 1e9);
    }
    *out = p;
    p = NULL;
fail:
    if (st != PP_OK) pp_error_prefix(err, "partitioning '%s' into %d stages: ", g->name, nstages);
    balance_free(&m);
    free(edges);
    free(ends);
    free(weights);
    pp_partition_destroy(p);
    return st;
}

static void value_stages_free(pp_value_stages *v, int n)
{
    for (int i = 0; v && i < n; i++) free(v[i].stages);
    free(v);
}

void pp_partition_destroy(pp_partition *p)
{
    if (!p) return;
    for (int s = 0; p->stages && s < p->nstages; s++) {
        free(p->stages[s].inputs);
        free(p->stages[s].outputs);
        free(p->stages[s].params_held);
    }
    for (int b = 0; p->boundaries && b < p->nstages - 1; b++) free(p->boundaries[b].tensors);
    free(p->stages);
    free(p->boundaries);
    free(p->node_stage);
    free(p->costs);
    free(p->cuts);
    free(p->order);
    pp_memory_profile_destroy(p->memory);
    value_stages_free(p->tied, p->ntied);
    value_stages_free(p->inputs, p->ninputs);
    free(p);
}

