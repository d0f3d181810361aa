/* The split over every topological order (partitioner/order.c) against an exhaustive
 * search: random small DAGs (<= 7 items), every topological order enumerated and every
 * split of each into contiguous stages costed from scratch (item weights, growing or
 * shrinking stage coefficients, what each stage sends on and back, a tolerance for the
 * tie-break on cut costs); the search must find the same optimum and the same least cut
 * cost within the tolerance, and a valid split that has them. */
#include "partition_internal.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define MAXN 7
#define MAXP 4
#define MAXV 10

typedef struct dag {
    int n, P, nv;
    int pred[MAXN][MAXN], npred[MAXN];
    int64_t a[MAXN], b[MAXN], ca[MAXP], cb[MAXP], ct[MAXP], ch[MAXP];
    int prod[MAXV], cons[MAXV][MAXN], ncons[MAXV];
    int64_t tail[MAXV], head[MAXV], cut[MAXV];
    double tol;
    int has_b;
} dag;

static uint64_t rng = 0x2545f4914f6cdd1dull;
static int64_t rnd(int64_t k)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (int64_t)(rng % (uint64_t)k);
}

static void make_dag(dag *d)
{
    memset(d, 0, sizeof *d);
    d->n = 1 + (int)rnd(MAXN);
    d->P = 1 + (int)rnd(d->n < MAXP ? d->n : MAXP);
    int link[MAXN][MAXN] = {{0}};
    /* values: a producer and some later consumers (the DAG's edges come from them) */
    d->nv = (int)rnd(MAXV + 1);
    for (int v = 0; v < d->nv; v++) {
        int p = (int)rnd(d->n);
        d->prod[v] = p;
        for (int c = p + 1; c < d->n; c++)
            if (rnd(3) == 0) d->cons[v][d->ncons[v]++] = c, link[p][c] = 1;
        d->tail[v] = rnd(30);
        d->head[v] = rnd(30);
        d->cut[v] = 1 + rnd(40);
    }
    for (int i = 0; i < d->n; i++)
        for (int j = i + 1; j < d->n; j++)
            if (rnd(8) == 0) link[i][j] = 1;   /* an order without a value */
    for (int j = 0; j < d->n; j++)
        for (int i = 0; i < j; i++)
            if (link[i][j]) d->pred[j][d->npred[j]++] = i;
    d->has_b = (int)rnd(2);
    for (int i = 0; i < d->n; i++) {
        d->a[i] = rnd(3) ? rnd(20) : 0;
        d->b[i] = rnd(10);
    }
    for (int s = 0; s < d->P; s++) {
        d->ca[s] = 1 + rnd(3);
        d->cb[s] = rnd(4);
        d->ct[s] = rnd(3);
        d->ch[s] = rnd(3);
    }
    static const double tols[] = {0, 0, 0.05, 0.2, 1.0};
    d->tol = tols[rnd(5)];
}

/* ---- the exhaustive reference ---------------------------------------------------- */

/* Terms of the downset in[] (the items of stages 0..s): what crosses its cut. */
static void cut_terms(const dag *d, const int *in, int64_t *t, int64_t *h, int64_t *c)
{
    *t = *h = *c = 0;
    for (int v = 0; v < d->nv; v++) {
        int out = 0;
        for (int k = 0; k < d->ncons[v]; k++) out |= !in[d->cons[v][k]];
        if (in[d->prod[v]] && out) *t += d->tail[v], *h += d->head[v], *c += d->cut[v];
    }
}

/* Largest stage cost and cut sum of stage[] (the stage of every item). */
static void split_costs(const dag *d, const int *stage, int64_t *bottleneck, int64_t *cutsum)
{
    int64_t prev_h = 0;
    *bottleneck = 0, *cutsum = 0;
    for (int s = 0; s < d->P; s++) {
        int in[MAXN];
        int64_t sa = 0, sb = 0, t, h, c;
        for (int i = 0; i < d->n; i++) {
            in[i] = stage[i] <= s;
            if (stage[i] == s) sa += d->a[i], sb += d->b[i];
        }
        cut_terms(d, in, &t, &h, &c);
        int64_t cost = d->ca[s] * sa + (d->has_b ? d->cb[s] * sb : 0) + (s > 0 ? d->ch[s] * prev_h : 0) +
                       (s < d->P - 1 ? d->ct[s] * t : 0);
        if (cost > *bottleneck) *bottleneck = cost;
        if (s < d->P - 1) *cutsum += c;
        prev_h = h;
    }
}

typedef struct ref {
    int pass;
    int64_t lim, best;
    long orders, splits;
} ref;

static void splits_of(const dag *d, const int *order, int s, int start, int *stage, ref *r)
{
    if (s == d->P - 1) {
        for (int k = start; k < d->n; k++) stage[order[k]] = s;
        int64_t b, c;
        split_costs(d, stage, &b, &c);
        r->splits++;
        if (r->pass == 0 && b < r->best) r->best = b;
        if (r->pass == 1 && b <= r->lim && c < r->best) r->best = c;
        return;
    }
    for (int e = start; e <= d->n - (d->P - s); e++) {
        stage[order[e]] = s;
        splits_of(d, order, s + 1, e + 1, stage, r);
    }
}

static void orders_of(const dag *d, int *order, int k, int *placed, ref *r)
{
    if (k == d->n) {
        int stage[MAXN];
        r->orders++;
        splits_of(d, order, 0, 0, stage, r);
        return;
    }
    for (int i = 0; i < d->n; i++) {
        if (placed[i]) continue;
        int ready = 1;
        for (int p = 0; p < d->npred[i]; p++) ready &= placed[d->pred[i][p]];
        if (!ready) continue;
        placed[i] = 1;
        order[k] = i;
        orders_of(d, order, k + 1, placed, r);
        placed[i] = 0;
    }
}

/* ---- the search -------------------------------------------------------------------- */

static pp_status search(const dag *d, int64_t max_states, int64_t work, int *stage, order_result *res)
{
    int pred_start[MAXN + 1], preds[MAXN * MAXN], np = 0;
    for (int i = 0; i < d->n; i++) {
        pred_start[i] = np;
        for (int p = 0; p < d->npred[i]; p++) preds[np++] = d->pred[i][p];
    }
    pred_start[d->n] = np;
    order_value vals[MAXV];
    for (int v = 0; v < d->nv; v++)
        vals[v] = (order_value){d->prod[v], d->cons[v], d->ncons[v], d->tail[v], d->head[v], d->cut[v]};
    order_problem x = {.n = d->n, .nstages = d->P, .pred_start = pred_start, .preds = preds, .values = vals,
                       .nvalues = d->nv, .a = d->a, .b = d->has_b ? d->b : NULL, .coef_a = d->ca, .coef_b = d->cb,
                       .coef_tail = d->ct, .coef_head = d->ch, .tolerance = d->tol, .max_states = max_states,
                       .tiebreak_work = work};
    pp_error err = {0};
    pp_status st = order_search(&x, stage, res, &err);
    if (st != PP_OK) printf("order_search: %s\n", err.msg);
    return st;
}

static void test_random_dags_vs_every_order(void **state)
{
    (void)state;
    int ninst = 4000, nwide = 0, nplain = 0;
    long orders = 0, splits = 0;
    int64_t states = 0;
    for (int k = 0; k < ninst; k++) {
        dag d;
        make_dag(&d);
        int stage[MAXN];
        order_result res;
        /* every fourth without the tie-break (its work budget at one visit): an optimal split */
        int64_t work = k % 4 == 3 ? 1 : 0;
        assert_int_equal(search(&d, 0, work, stage, &res), PP_OK);
        assert_int_equal(res.found, 1);
        if (work && !res.tiebreak) {
            int64_t b, c;
            split_costs(&d, stage, &b, &c);
            assert_int_equal(b, res.optimum);
            assert_int_equal(c, res.cut_sum);
            nplain++;
            continue;
        }
        assert_int_equal(res.tiebreak, 1);
        ref r = {0, 0, INT64_MAX, 0, 0};
        int order[MAXN], placed[MAXN] = {0};
        orders_of(&d, order, 0, placed, &r);
        int64_t opt = r.best;
        r.pass = 1, r.lim = opt + (int64_t)((double)opt * d.tol), r.best = INT64_MAX;
        orders_of(&d, order, 0, placed, &r);
        orders += r.orders, splits += r.splits, states += res.states;
        /* the split is valid: every stage non-empty, every edge forward or inside a stage */
        int count[MAXP] = {0};
        for (int i = 0; i < d.n; i++) {
            assert_true(stage[i] >= 0 && stage[i] < d.P);
            count[stage[i]]++;
            for (int p = 0; p < d.npred[i]; p++) assert_true(stage[d.pred[i][p]] <= stage[i]);
        }
        for (int s = 0; s < d.P; s++) assert_true(count[s] > 0);
        int64_t b, c;
        split_costs(&d, stage, &b, &c);
        if (res.optimum != opt || res.cut_sum != r.best || b != res.bottleneck || c != res.cut_sum || b > r.lim)
            fail_msg("instance %d (n=%d, P=%d, tol %g): optimum %lld vs every order %lld; cut %lld (recounted %lld) "
                     "vs %lld; bottleneck %lld (recounted %lld, limit %lld)", k, d.n, d.P, d.tol,
                     (long long)res.optimum, (long long)opt, (long long)res.cut_sum, (long long)c,
                     (long long)r.best, (long long)res.bottleneck, (long long)b, (long long)r.lim);
        nwide += res.bottleneck > res.optimum;
    }
    printf("%d random DAGs: the search over %lld downsets equals the exhaustive search over %ld topological "
           "orders and %ld splits (optimum and least cut cost within the tolerance; %d chose a split above the "
           "optimum); %d more without the tie-break found an optimal split\n", ninst - nplain, (long long)states,
           orders, splits, nwide, nplain);
}

/* A budget smaller than the downsets: nothing found, no error. An antichain of n items
 * has 2^n downsets. */
static void test_budget(void **state)
{
    (void)state;
    dag d;
    memset(&d, 0, sizeof d);
    d.n = 6, d.P = 2, d.ca[0] = d.ca[1] = 1;
    for (int i = 0; i < 6; i++) d.a[i] = i + 1;
    int stage[MAXN];
    order_result res;
    assert_int_equal(search(&d, 63, 0, stage, &res), PP_OK);
    assert_int_equal(res.found, 0);
    assert_int_equal(search(&d, 64, 0, stage, &res), PP_OK);
    assert_int_equal(res.found, 1);
    assert_int_equal(res.states, 64);
    assert_int_equal(res.optimum, 11);   /* 21 split as 10 | 11 */
    printf("budget: 64 downsets of 6 independent items need max_states >= 64; optimum 11 of 21\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_dags_vs_every_order),
        cmocka_unit_test(test_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
