/* Where the cuts go. The exact split of the graph's own order (pp_linear_solve); unless
 * the order is fixed, the split over every order (order.c) of the graph with each node that
 * reads no activation glued to its first reader; the tolerance counts from the better of
 * the two optima, and of the two orders the one whose split within it crosses the fewest
 * bytes wins (then the smaller largest stage, then the graph's own order). */
#include "partition_internal.h"

#include <string.h>
#include <onnxpipe/graph_ir.h>

#define ORDER_WORDS ((int64_t)1 << 25)   /* 64-bit words of downset bitsets the search may write */

/* The linear problem of the model over an order (pos[node]: its place): items in that
 * order, each value's tail, head and bytes on every cut between its producer and its last
 * reader. */
typedef struct chain {
    int64_t *a, *b, *tail, *head, *cut;
} chain;

static void chain_free(chain *c) { free(c->a), free(c->b), free(c->tail), free(c->head), free(c->cut); }

static pp_status chain_make(const pp_partition *p, const balance_model *m, const int *order, const int *pos,
                            chain *c, pp_error *err)
{
    const pp_graph *g = p->graph;
    size_t n = (size_t)g->nnodes + 1;
    memset(c, 0, sizeof *c);
    c->a = malloc(n * 8), c->b = m->b ? malloc(n * 8) : NULL;
    c->tail = m->vtail ? calloc(n, 8) : NULL, c->head = m->vhead ? calloc(n, 8) : NULL, c->cut = calloc(n, 8);
    if (!c->a || (m->b && !c->b) || (m->vtail && !c->tail) || (m->vhead && !c->head) || !c->cut)
        return PP_NOMEM(err);
    for (int k = 0; k < g->nnodes; k++) {
        c->a[k] = m->a[order[k]];
        if (c->b) c->b[k] = m->b[order[k]];
    }
    for (int v = 0; v < g->nvalues; v++) {   /* difference arrays: +w on [producer, last reader - 1] */
        const pp_value *val = &g->values[v];
        if (val->producer < 0) continue;
        int from = pos[val->producer], to = from;
        for (int k = 0; k < val->nconsumers; k++)
            if (pos[val->consumers[k]] > to) to = pos[val->consumers[k]];
        if (to == from) continue;
        int64_t w[3] = {m->vtail ? m->vtail[v] : 0, m->vhead ? m->vhead[v] : 0, balance_cut_bytes(g, v)};
        int64_t *d[3] = {c->tail, c->head, c->cut};
        for (int k = 0; k < 3; k++)
            if (d[k]) d[k][from] += w[k], d[k][to] -= w[k];
    }
    for (int k = 1; k < g->nnodes; k++) {
        c->cut[k] += c->cut[k - 1];
        if (c->tail) c->tail[k] += c->tail[k - 1];
        if (c->head) c->head[k] += c->head[k - 1];
    }
    return PP_OK;
}

/* The split of an order's chain within bound (0: by tolerance alone). */
static pp_status chain_solve(const pp_partition *p, const balance_model *m, const chain *c, double tolerance,
                             int64_t bound, int *ends, pp_linear_result *r, pp_error *err)
{
    pp_linear_problem x = {.n = p->graph->nnodes, .nstages = p->nstages, .a = c->a, .b = c->b, .coef_a = m->ca,
                           .coef_b = m->cb, .tail = m->vtail ? c->tail : NULL, .head = m->vhead ? c->head : NULL,
                           .coef_tail = m->ct, .coef_head = m->ch, .cut_cost = c->cut, .tolerance = tolerance,
                           .bound = bound};
    return pp_linear_solve(&x, ends, r, err);
}

/* ---- the order search's problem: nodes glued into groups ---------------------- */

typedef struct groups {
    int n;                      /* groups */
    int *of;                    /* [nnodes] group of each node */
    int *pred_start, *preds;
    order_value *values;
    int nvalues;
    int *consumers;             /* the values' consumer lists */
    int64_t *a, *b;
} groups;

static void groups_free(groups *q)
{
    free(q->of), free(q->pred_start), free(q->preds), free(q->values), free(q->consumers), free(q->a), free(q->b);
}

/* What a node reads: 2 only initializers and what constant nodes make (a constant chain,
 * a Transpose of a weight); 1 also graph inputs (an embedding lookup, Shape(input)); 0 an
 * activation of the data. Such nodes (1 or 2) join their first reader's group. */
static char reads_no_activation(const pp_graph *g, const char *src, int i)
{
    const pp_node *nd = &g->nodes[i];
    char r = 2;
    for (int k = 0; k < nd->ninputs; k++) {
        int v = nd->inputs[k];
        if (v < 0 || g->values[v].init >= 0) continue;
        if (g->values[v].producer < 0) r = 1;                       /* a graph input */
        else if (src[g->values[v].producer] != 2) return 0;         /* data flows in */
    }
    return r;
}

/* The groups (q->n = 0 when there would be more than max_groups: no search). */
static pp_status groups_make(const pp_partition *p, const balance_model *m, int64_t max_groups, groups *q,
                             pp_error *err)
{
    const pp_graph *g = p->graph;
    int n = g->nnodes;
    memset(q, 0, sizeof *q);
    char *src = calloc((size_t)n + 1, 1);
    int *rep = malloc(((size_t)n + 1) * sizeof *rep), *stamp = malloc(((size_t)n + 1) * sizeof *stamp);
    q->of = malloc(((size_t)n + 1) * sizeof *q->of);
    pp_status st = src && rep && stamp && q->of ? PP_OK : PP_NOMEM(err);
    if (st != PP_OK) goto done;
    for (int i = 0; i < n; i++) src[i] = reads_no_activation(g, src, i);
    /* a source joins the group of its first reader (readers come later: reverse order) */
    for (int i = n - 1; i >= 0; i--) {
        rep[i] = i;
        if (!src[i]) continue;
        int first = -1;
        for (int k = 0; k < g->nodes[i].noutputs; k++) {
            int v = g->nodes[i].outputs[k];
            for (int c = 0; v >= 0 && c < g->values[v].nconsumers; c++)
                if (first < 0 || g->values[v].consumers[c] < first) first = g->values[v].consumers[c];
        }
        if (first > i) rep[i] = rep[first];
    }
    for (int i = 0; i < n; i++) q->of[i] = rep[i] == i ? q->n++ : -1;
    if (q->n > max_groups) {
        q->n = 0;
        goto done;
    }
    for (int i = 0; i < n; i++) q->of[i] = q->of[rep[i]];
    /* the groups' predecessors, weights and the values crossing between groups */
    int ng = q->n, np = 0, nc = 0;
    q->pred_start = calloc((size_t)ng + 1, sizeof *q->pred_start);
    q->a = calloc((size_t)ng + 1, 8), q->b = m->b ? calloc((size_t)ng + 1, 8) : NULL;
    for (int v = 0; v < g->nvalues; v++) nc += g->values[v].nconsumers;
    q->preds = malloc(((size_t)nc + 1) * sizeof *q->preds);
    q->consumers = malloc(((size_t)nc + 1) * sizeof *q->consumers);
    q->values = malloc(((size_t)g->nvalues + 1) * sizeof *q->values);
    if (!q->pred_start || !q->a || (m->b && !q->b) || !q->preds || !q->consumers || !q->values) {
        st = PP_NOMEM(err);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        q->a[q->of[i]] += m->a[i];
        if (q->b) q->b[q->of[i]] += m->b[i];
    }
    /* predecessors grouped by group: nodes in id order visit their group's inputs */
    int *members = rep;   /* reuse: nodes sorted by group (stable) */
    int *count = calloc((size_t)ng + 1, sizeof *count);
    if (!count) {
        st = PP_NOMEM(err);
        goto done;
    }
    for (int i = 0; i < n; i++) count[q->of[i] + 1]++;
    for (int k = 0; k < ng; k++) count[k + 1] += count[k];
    for (int i = 0; i < n; i++) members[count[q->of[i]]++] = i;
    for (int k = 0; k < n; k++) stamp[k] = -1;
    for (int gi = 0, k = 0; gi < ng; gi++) {
        q->pred_start[gi] = np;
        for (; k < n && q->of[members[k]] == gi; k++) {
            const pp_node *nd = &g->nodes[members[k]];
            for (int j = 0; j < nd->ninputs; j++) {
                int v = nd->inputs[j], pr = v >= 0 ? g->values[v].producer : -1;
                if (pr < 0 || q->of[pr] == gi || stamp[q->of[pr]] == gi) continue;
                stamp[q->of[pr]] = gi;
                q->preds[np++] = q->of[pr];
            }
        }
    }
    q->pred_start[ng] = np;
    free(count);
    nc = 0;
    for (int v = 0; v < g->nvalues; v++) {
        const pp_value *val = &g->values[v];
        if (val->producer < 0) continue;
        int from = q->of[val->producer], first = nc;
        for (int c = 0; c < val->nconsumers; c++) {
            int to = q->of[val->consumers[c]], dup = to == from;
            for (int d = first; d < nc && !dup; d++) dup = q->consumers[d] == to;
            if (!dup) q->consumers[nc++] = to;
        }
        if (nc == first) continue;
        q->values[q->nvalues++] = (order_value){from, q->consumers + first, nc - first, m->vtail ? m->vtail[v] : 0,
                                                m->vhead ? m->vhead[v] : 0, balance_cut_bytes(g, v)};
    }
done:
    free(src), free(rep), free(stamp);
    return st;
}

/* The order search over the groups q: *found, the node order of its chain (stages in
 * turn, nodes by id within each) and its optimum. */
static pp_status search(pp_partition *p, const balance_model *m, const groups *q, int64_t cap,
                        int64_t graph_optimum, int *order, int *found, int64_t *optimum, pp_error *err)
{
    const pp_graph *g = p->graph;
    int *stage = malloc(((size_t)q->n + 1) * sizeof *stage);
    *found = 0;
    if (!stage) return PP_NOMEM(err);
    order_problem x = {.n = q->n, .nstages = p->nstages, .pred_start = q->pred_start, .preds = q->preds,
                       .values = q->values, .nvalues = q->nvalues, .a = q->a, .b = q->b, .coef_a = m->ca,
                       .coef_b = m->cb, .coef_tail = m->vtail ? m->ct : NULL, .coef_head = m->vhead ? m->ch : NULL,
                       .tolerance = p->tolerance, .upper = graph_optimum, .max_states = cap, .fixed = m->fixed,
                       .other_optimum = graph_optimum};
    order_result r;
    pp_status st = order_search(&x, stage, &r, err);
    p->order_states = r.states;
    pp_log(PP_LOG_DEBUG, "partition: order search over %d groups of %d nodes: %s after %lld downsets, %lld edges",
           q->n, g->nnodes, st != PP_OK ? "failed" : r.found ? "done" : "gave up", (long long)r.states,
           (long long)r.edges);
    if (st == PP_OK && r.found) {
        *found = 1;
        *optimum = r.optimum;
        for (int s = 0, k = 0; s < p->nstages; s++)
            for (int i = 0; i < g->nnodes; i++)
                if (stage[q->of[i]] == s) order[k++] = i;
    }
    free(stage);
    return st;
}

pp_status place_cuts(pp_partition *p, const balance_model *m, pp_order_mode mode, int *ends, pp_error *err)
{
    const pp_graph *g = p->graph;
    int n = g->nnodes, P = p->nstages;
    int *order = malloc(((size_t)n + 1) * sizeof *order), *pos = malloc(((size_t)n + 1) * sizeof *pos);
    int *lends = malloc((size_t)P * sizeof *lends);
    groups q = {0};
    chain cg = {0}, cl = {0};
    pp_status st = order && pos && lends ? PP_OK : PP_NOMEM(err);
    if (st != PP_OK) goto done;
    for (int i = 0; i < n; i++) p->order[i] = pos[i] = i;
    /* each downset is a bitset of the groups: at most ORDER_WORDS words of them in all, and a
       chain of n groups alone has n + 1 downsets, so a graph past either is not searched */
    int64_t words = (n + 63) / 64, cap = PP_ORDER_MAX_STATES;
    if (ORDER_WORDS / words < cap) cap = ORDER_WORDS / words;
    /* (nodes that read no activation are few once constants are folded: past 2 x cap nodes,
       there would be more groups than the search could take) */
    int try = mode == PP_ORDER_SEARCH && P > 1 && n <= 2 * cap;
    if (try) PP_CHECK_GOTO(groups_make(p, m, cap - 1, &q, err), st, done);
    if (mode == PP_ORDER_SEARCH && P > 1 && !q.n)
        pp_log(PP_LOG_DEBUG, "partition: no order search: %d nodes make more than %lld groups", n, (long long)cap - 1);
    PP_CHECK_GOTO(chain_make(p, m, p->order, pos, &cg, err), st, done);
    pp_linear_result rg, rl;
    if (q.n < P && !m->fixed) {   /* the graph's order alone: one solve with the tolerance */
        PP_CHECK_GOTO(chain_solve(p, m, &cg, p->tolerance, 0, ends, &rg, err), st, done);
        p->optimum = rg.optimum;
        goto chosen;
    }
    PP_CHECK_GOTO(chain_solve(p, m, &cg, 0, 0, ends, &rg, err), st, done);
    int64_t best = rg.optimum, lo = 0;
    int found = 0;
    if (q.n >= P) {
        PP_CHECK_GOTO(search(p, m, &q, cap, rg.optimum, order, &found, &lo, err), st, done);
        if (found && lo < best) best = lo;
    }
    p->order_searched = found;
    int64_t lim = linear_tie_limit(best + m->fixed, p->tolerance, 0) - m->fixed;
    if (rg.optimum <= lim && lim > rg.optimum) PP_CHECK_GOTO(chain_solve(p, m, &cg, 0, lim, ends, &rg, err), st, done);
    int use_l = 0;
    if (found) {
        for (int k = 0; k < n; k++) pos[order[k]] = k;
        PP_CHECK_GOTO(chain_make(p, m, order, pos, &cl, err), st, done);
        PP_CHECK_GOTO(chain_solve(p, m, &cl, 0, lim, lends, &rl, err), st, done);
        int g_ok = rg.bottleneck <= lim, l_ok = rl.bottleneck <= lim;
        use_l = l_ok && (!g_ok || rl.cut_sum < rg.cut_sum ||
                         (rl.cut_sum == rg.cut_sum && rl.bottleneck < rg.bottleneck));
    }
    if (use_l) {
        memcpy(p->order, order, (size_t)n * sizeof *order);
        memcpy(ends, lends, (size_t)P * sizeof *ends);
        rg = rl;
    }
    p->optimum = best;
chosen:
    p->optimum += m->fixed;
    p->bottleneck = rg.bottleneck + m->fixed;
    p->tiebreak = rg.tiebreak;
    p->reordered = 0;
    for (int k = 0; k < n; k++) p->reordered += p->order[k] != k;
done:
    free(order), free(pos), free(lends);
    groups_free(&q);
    chain_free(&cg), chain_free(&cl);
    return st;
}
