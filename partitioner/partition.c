/* pp_partition_create: turns the balance mode into per-node weights and per-stage
 * coefficients, places the cuts (exact linear partition, or the user's manual cuts),
 * then hands over to the cut analysis (analyze.c). Also the memory estimate. */
#include "partition_internal.h"

#include <string.h>

static const char *const balance_names[] = {"params", "flops", "memory", "uniform"};

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

static int inflight(int nstages, int stage, int64_t microbatches)
{
    int64_t k = nstages - stage;
    return (int)(k < microbatches ? k : microbatches);
}

/* The balance as pp_linear_partition sees it: weights a (and b) per node and
 * coefficients per stage. */
typedef struct weights {
    int64_t *a, *b;     /* [nnodes]; b NULL unless memory */
    int64_t *ca, *cb;   /* [nstages] */
} weights;

static void weights_free(weights *w)
{
    free(w->a);
    free(w->b);
    free(w->ca);
    free(w->cb);
}

static pp_status weights_make(const pp_partition *p, weights *w, pp_error *err)
{
    const pp_graph *g = p->graph;
    int n = g->nnodes, P = p->nstages;
    memset(w, 0, sizeof *w);
    int mem = p->balance == PP_BALANCE_MEMORY;
    w->a = malloc((size_t)n * sizeof *w->a);
    w->b = mem ? malloc((size_t)n * sizeof *w->b) : NULL;
    w->ca = malloc((size_t)P * sizeof *w->ca);
    w->cb = malloc((size_t)P * sizeof *w->cb);
    if (!w->a || (mem && !w->b) || !w->ca || !w->cb)
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory partitioning '%s'", g->name);
    for (int i = 0; i < n; i++) {
        const pp_node_cost *c = &p->costs[i];
        int64_t unknown = p->balance == PP_BALANCE_FLOPS ? c->flops : mem ? c->act_bytes : 0;
        if (unknown < 0)
            return pp_error_set(err, PP_ERR_SHAPE,
                                "the %s balance needs known shapes, but node '%s' (%s) has an unknown %s; "
                                "bind the batch and symbolic dims (--batch, --dim NAME=V)",
                                pp_balance_name(p->balance), g->nodes[i].name, g->nodes[i].op_type,
                                p->balance == PP_BALANCE_FLOPS ? "FLOP count" : "output size");
        switch (p->balance) {
        case PP_BALANCE_PARAMS: w->a[i] = c->params; break;
        case PP_BALANCE_FLOPS: w->a[i] = c->flops; break;
        case PP_BALANCE_MEMORY: w->a[i] = c->param_bytes; w->b[i] = c->act_bytes; break;
        case PP_BALANCE_UNIFORM: w->a[i] = 1; break;
        }
    }
    for (int s = 0; s < P; s++) {
        w->ca[s] = mem ? 4 : 1;   /* param + grad + Adam m + v */
        w->cb[s] = mem ? inflight(P, s, p->microbatches) : 0;
    }
    return PP_OK;
}

/* Largest single node, total (with the last, smallest coefficients) and the bound
 * max(largest node, ceil(total / P)) that no split can beat. */
static void bounds(pp_partition *p, const weights *w)
{
    int n = p->graph->nnodes, P = p->nstages;
    int64_t total = 0, big = 0;
    for (int i = 0; i < n; i++) {
        int64_t x = w->ca[P - 1] * w->a[i] + (w->b ? w->cb[P - 1] * w->b[i] : 0);
        total += x;
        if (x > big) big = x;
    }
    int64_t avg = (total + P - 1) / P;
    p->total_weight = total;
    p->lower_bound = big > avg ? big : avg;
}

/* The activation edges of g, in value id order; *out is malloc'ed (room for one per
 * value: pages past the last edge are never touched). */
static pp_status collect_edges(const pp_graph *g, act_edge **out, int *n, pp_error *err)
{
    *n = 0;
    if (!(*out = malloc(((size_t)g->nvalues + 1) * sizeof **out)))
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory collecting cut tensors");
    for (int v = 0; v < g->nvalues; v++) {
        const pp_value *val = &g->values[v];
        if (val->producer < 0) continue;
        int last = val->producer;
        for (int k = 0; k < val->nconsumers; k++)
            if (val->consumers[k] > last) last = val->consumers[k];
        if (last == val->producer) continue;
        (*out)[(*n)++] = (act_edge){v, val->producer, last, value_bytes(g, v)};
    }
    return PP_OK;
}

/* Bytes crossing a cut after node c, for every c: each activation counts at every
 * cut between its producer and its last consumer (unbound dims counted as 1).
 * cut[nnodes] (last unused). */
static void cut_costs(const pp_graph *g, const act_edge *e, int ne, int64_t *cut)
{
    memset(cut, 0, (size_t)g->nnodes * sizeof *cut);
    for (int k = 0; k < ne; k++) {
        int64_t b = e[k].bytes >= 0 ? e[k].bytes : value_bytes_per_sample(g, e[k].value);
        cut[e[k].producer] += b;   /* difference array: +b on [producer, last-1] */
        cut[e[k].last] -= b;
    }
    for (int i = 1; i < g->nnodes; i++) cut[i] += cut[i - 1];
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

/* Largest stage weight of a given split. */
static int64_t split_bottleneck(const weights *w, const int *ends, int P)
{
    int64_t best = 0;
    for (int s = 0, i = 0; s < P; s++) {
        int64_t sa = 0, sb = 0;
        for (; i <= ends[s]; i++) {
            sa += w->a[i];
            sb += w->b ? w->b[i] : 0;
        }
        int64_t x = w->ca[s] * sa + w->cb[s] * sb;
        if (x > best) best = x;
    }
    return best;
}

pp_status pp_partition_create(const pp_graph *g, int nstages, const pp_partition_options *opt,
                              pp_partition **out, pp_error *err)
{
    static const pp_partition_options defaults = {0};
    if (!opt) opt = &defaults;
    *out = NULL;
    if (!g->finalized)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "graph '%s' is not finalized (call pp_graph_finalize)",
                            g->name);
    if (nstages < 1 || nstages > g->nnodes)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%d stages out of range (1..%d, the node count of '%s')",
                            nstages, g->nnodes, g->name);
    if (!opt->cuts && opt->balance == PP_BALANCE_PARAMS && g->nparams == 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG,
                            "model '%s' has no trainable parameters to balance; use --balance flops or "
                            "uniform, or give manual cuts", g->name);
    if (opt->microbatches < 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%lld microbatches (expected >= 1)",
                            (long long)opt->microbatches);
    pp_partition *p = calloc(1, sizeof *p);
    int *ends = malloc((size_t)nstages * sizeof *ends);
    int64_t *cut = malloc((size_t)g->nnodes * sizeof *cut);
    weights w = {0};
    act_edge *edges = NULL;
    int nedges = 0;
    pp_status st = PP_OK;
    if (!p || !ends || !cut) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory partitioning '%s'", g->name);
        goto fail;
    }
    p->graph = g;
    p->nstages = nstages;
    p->balance = opt->balance;
    p->microbatches = opt->microbatches ? opt->microbatches : nstages;
    p->recompute = opt->recompute;
    p->manual = opt->cuts != NULL;
    p->costs = malloc((size_t)g->nnodes * sizeof *p->costs);
    if (!p->costs) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory partitioning '%s'", g->name);
        goto fail;
    }
    PP_CHECK_GOTO(pp_partition_costs(g, p->costs, err), st, fail);
    PP_CHECK_GOTO(weights_make(p, &w, err), st, fail);
    bounds(p, &w);
    PP_CHECK_GOTO(collect_edges(g, &edges, &nedges, err), st, fail);
    cut_costs(g, edges, nedges, cut);
    if (p->manual) {
        PP_CHECK_GOTO(manual_ends(g, nstages, opt, ends, err), st, fail);
        p->bottleneck = split_bottleneck(&w, ends, nstages);
    } else {
        pp_linear_result r;
        PP_CHECK_GOTO(pp_linear_partition(w.a, w.b, g->nnodes, nstages, w.ca, w.b ? w.cb : NULL, cut, ends,
                                          &r, err), st, fail);
        p->bottleneck = r.bottleneck;
        p->tiebreak = r.tiebreak;
    }
    PP_CHECK_GOTO(partition_analyze(p, ends, edges, nedges, err), st, fail);
    *out = p;
    p = NULL;
fail:
    if (st != PP_OK) pp_error_prefix(err, "partitioning '%s' into %d stages: ", g->name, nstages);
    weights_free(&w);
    free(edges);
    free(ends);
    free(cut);
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
    value_stages_free(p->tied, p->ntied);
    value_stages_free(p->inputs, p->ninputs);
    free(p);
}

pp_recompute_estimate pp_partition_recompute_estimate(const pp_partition *p, int stage, pp_recompute r)
{
    pp_recompute_estimate e = {0};
    if (!p || stage < 0 || stage >= p->nstages) return e;
    const pp_stage_info *s = &p->stages[stage];
    if (r == PP_RECOMPUTE_NONE) {
        e.stash_bytes = s->act_bytes;
        return e;
    }
    e.arena_bytes = s->act_bytes;
    e.stash_bytes = s->send_bytes;
    for (int i = 0; i < s->ninputs; i++) e.stash_bytes = add_known(e.stash_bytes, value_bytes(p->graph, s->inputs[i]));
    for (int i = s->first_node; i <= s->last_node; i++) {
        int keep = r == PP_RECOMPUTE_SELECTIVE && (pp_op_get(p->graph->nodes[i].op)->flags & PP_OPF_KEEP_ON_RECOMPUTE);
        if (keep)
            e.stash_bytes = add_known(e.stash_bytes, p->costs[i].act_bytes);
        else
            e.flops = add_known(e.flops, p->costs[i].flops);
    }
    return e;
}

pp_stage_memory pp_partition_stage_memory(const pp_partition *p, int stage, int64_t microbatches)
{
    pp_stage_memory m = {0};
    if (!p || stage < 0 || stage >= p->nstages) return m;
    if (microbatches < 1) microbatches = p->microbatches;
    const pp_stage_info *s = &p->stages[stage];
    m.param_bytes = s->param_bytes;
    m.grad_bytes = s->param_bytes;
    m.optimizer_bytes = 2 * s->param_bytes;
    m.inflight = inflight(p->nstages, stage, microbatches);
    /* held at INT64_MAX where the microbatches in flight (the caller's number) make it overflow */
    pp_recompute_estimate r = pp_partition_recompute_estimate(p, stage, p->recompute);
    int64_t stash, total;
    if (__builtin_mul_overflow(r.stash_bytes, (int64_t)m.inflight, &stash)) stash = INT64_MAX;
    m.stash_bytes = r.stash_bytes < 0 ? -1 : stash;
    m.recompute_bytes = r.arena_bytes;
    if (__builtin_add_overflow(4 * s->param_bytes, m.stash_bytes < 0 ? 0 : m.stash_bytes, &total) ||
        __builtin_add_overflow(total, r.arena_bytes < 0 ? 0 : r.arena_bytes, &total))
        total = INT64_MAX;
    m.total_bytes = total;
    return m;
}
