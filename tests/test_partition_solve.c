/* The exact linear partition against brute force: thousands of random small
 * instances (n <= 12 items, <= 5 stages), every contiguous split enumerated, the
 * bottleneck compared exactly and then the smallest cut bytes among optimal splits; the
 * same for stage costs with a term per cut (what a stage sends on and back), growing
 * coefficients and a tolerance, where the tie-break looks at splits within it. */
#include <onnxpipe/partition_lib.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define MAXN 12
#define MAXP 5
#define MAXT 16

/* One random instance: items with weights a, b; stage coefficients; tensors
 * (producer item, last consumer item, bytes) whose crossings make the cut cost. */
typedef struct instance {
    int n, P, has_b, nt;
    int64_t a[MAXN], b[MAXN], ca[MAXP], cb[MAXP];
    int tp[MAXT], tq[MAXT];
    int64_t tb[MAXT];
} instance;

static uint64_t rng = 88172645463325252ull;
static int64_t rnd(int64_t k)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (int64_t)(rng % (uint64_t)k);
}

static void make_instance(instance *x)
{
    memset(x, 0, sizeof *x);
    x->n = 1 + (int)rnd(MAXN);
    x->P = 1 + (int)rnd(x->n < MAXP ? x->n : MAXP);
    x->has_b = rnd(3) == 0;
    int zeros = rnd(2) == 0;   /* many zero-weight items, as parameter-free nodes */
    for (int i = 0; i < x->n; i++) {
        x->a[i] = zeros && rnd(2) ? 0 : rnd(20);
        x->b[i] = rnd(10);
    }
    int64_t ca = 1 + rnd(4), cb = 1 + rnd(5);
    for (int s = 0; s < x->P; s++) {
        x->ca[s] = x->has_b ? ca : 1;
        x->cb[s] = cb;
        if (x->has_b && rnd(2) && cb > 1) cb--;   /* non-increasing, as min(P-s, M) */
        if (x->has_b && rnd(4) == 0 && ca > 1) ca--;
    }
    x->nt = x->n > 1 ? (int)rnd(MAXT) : 0;
    for (int t = 0; t < x->nt; t++) {
        x->tp[t] = (int)rnd(x->n - 1);
        x->tq[t] = x->tp[t] + 1 + (int)rnd(x->n - 1 - x->tp[t]);
        x->tb[t] = 1 + rnd(50);
    }
}

/* Cost of a split given by ends[], computed from scratch. */
static int64_t split_bottleneck(const instance *x, const int *ends)
{
    int64_t best = 0;
    for (int s = 0, i = 0; s < x->P; s++) {
        int64_t sa = 0, sb = 0;
        for (; i <= ends[s]; i++) {
            sa += x->a[i];
            sb += x->b[i];
        }
        int64_t c = x->ca[s] * sa + (x->has_b ? x->cb[s] * sb : 0);
        if (c > best) best = c;
    }
    return best;
}

/* Bytes crossing boundaries: each tensor counts once per boundary between the stage
 * of its producer and the stage of its last consumer. */
static int64_t split_cut_bytes(const instance *x, const int *ends)
{
    int stage[MAXN];
    for (int s = 0, i = 0; s < x->P; s++)
        for (; i <= ends[s]; i++) stage[i] = s;
    int64_t sum = 0;
    for (int t = 0; t < x->nt; t++) sum += (int64_t)(stage[x->tq[t]] - stage[x->tp[t]]) * x->tb[t];
    return sum;
}

/* Enumerates all splits; returns the best bottleneck and the least cut bytes among those. */
static void brute(const instance *x, int s, int start, int *ends, int64_t *bn, int64_t *cb, int *count)
{
    if (s == x->P - 1) {
        ends[s] = x->n - 1;
        int64_t b = split_bottleneck(x, ends), c = split_cut_bytes(x, ends);
        if (b < *bn || (b == *bn && c < *cb)) {
            *bn = b;
            *cb = c;
        }
        (*count)++;
        return;
    }
    for (int e = start; e <= x->n - (x->P - s); e++) {
        ends[s] = e;
        brute(x, s + 1, e + 1, ends, bn, cb, count);
    }
}

static void test_random_vs_brute_force(void **state)
{
    (void)state;
    int ninst = 20000, nsplits = 0, ntb = 0;
    int64_t maxdiff_b = 0, maxdiff_c = 0;
    for (int k = 0; k < ninst; k++) {
        instance x;
        make_instance(&x);
        int64_t cut[MAXN] = {0};
        for (int t = 0; t < x.nt; t++)
            for (int c = x.tp[t]; c < x.tq[t]; c++) cut[c] += x.tb[t];
        int ends[MAXP], bends[MAXP];
        pp_linear_result r;
        pp_error err = {0};
        pp_status st = pp_linear_partition(x.a, x.has_b ? x.b : NULL, x.n, x.P, x.ca, x.has_b ? x.cb : NULL,
                                           cut, ends, &r, &err);
        if (st != PP_OK) {
            printf("n=%d P=%d b=%d %s a:", x.n, x.P, x.has_b, err.msg);
            for (int i = 0; i < x.n; i++) printf(" %lld/%lld", (long long)x.a[i], (long long)x.b[i]);
            for (int s = 0; s < x.P; s++) printf(" c%lld/%lld", (long long)x.ca[s], (long long)x.cb[s]);
            printf("\n");
        }
        assert_int_equal(st, PP_OK);
        int64_t bn = INT64_MAX, cb = INT64_MAX;
        brute(&x, 0, 0, bends, &bn, &cb, &nsplits);
        /* the returned split is valid and achieves what it claims */
        for (int s = 0; s < x.P; s++) assert_true(ends[s] >= (s ? ends[s - 1] + 1 : 0));
        assert_int_equal(ends[x.P - 1], x.n - 1);
        assert_int_equal(split_bottleneck(&x, ends), r.bottleneck);
        assert_int_equal(split_cut_bytes(&x, ends), r.cut_sum);
        assert_int_equal(r.tiebreak, 1);
        int64_t db = llabs(r.bottleneck - bn), dc = llabs(r.cut_sum - cb);
        if (db > maxdiff_b) maxdiff_b = db;
        if (dc > maxdiff_c) maxdiff_c = dc;
        if (r.bottleneck != bn || r.cut_sum != cb)
            fail_msg("instance %d (n=%d, P=%d): bottleneck %lld vs brute %lld, cut %lld vs brute %lld", k, x.n,
                     x.P, (long long)r.bottleneck, (long long)bn, (long long)r.cut_sum, (long long)cb);
        ntb += x.nt > 0;
        /* without cut costs: the backward-greedy split, as good a bottleneck, no DP */
        int gends[MAXP];
        pp_linear_result gr;
        assert_int_equal(pp_linear_partition(x.a, x.has_b ? x.b : NULL, x.n, x.P, x.ca, x.has_b ? x.cb : NULL, NULL,
                                             gends, &gr, &err), PP_OK);
        for (int s = 0; s < x.P; s++) assert_true(gends[s] >= (s ? gends[s - 1] + 1 : 0));
        assert_int_equal(gends[x.P - 1], x.n - 1);
        assert_int_equal(gr.bottleneck, bn);
        assert_int_equal(split_bottleneck(&x, gends), bn);
        assert_int_equal(gr.cut_sum, 0);
    }
    printf("compared %d random instances (%d with cut tensors, %d splits enumerated): "
           "max |bottleneck - brute| = %lld, max |cut bytes - brute| = %lld; without cut costs the greedy split's "
           "bottleneck is the brute force's on all\n",
           ninst, ntb, nsplits, (long long)maxdiff_b, (long long)maxdiff_c);
}

/* ---- costs with cut terms and a tolerance --------------------------------------- */

typedef struct general {
    instance x;
    int64_t tail[MAXN], head[MAXN], ct[MAXP], ch[MAXP], cut[MAXN];
    int has_tail, has_head;
    double tol;
} general;

static void make_general(general *g)
{
    memset(g, 0, sizeof *g);
    make_instance(&g->x);
    instance *x = &g->x;
    x->has_b = rnd(2);
    for (int s = 0; s < x->P; s++) {   /* any coefficients >= 0, growing ones too */
        x->ca[s] = rnd(4);
        x->cb[s] = rnd(4);
        g->ct[s] = rnd(3);
        g->ch[s] = rnd(3);
    }
    if (rnd(4) == 0) x->ca[0] = 1 + rnd(3);
    g->has_tail = rnd(3) != 0;
    g->has_head = rnd(3) != 0;
    for (int i = 0; i < x->n; i++) {
        g->tail[i] = rnd(40);
        g->head[i] = rnd(40);
    }
    for (int t = 0; t < x->nt; t++)
        for (int c = x->tp[t]; c < x->tq[t]; c++) g->cut[c] += x->tb[t];
    static const double tols[] = {0, 0, 0.02, 0.1, 0.5};
    g->tol = tols[rnd(5)];
}

static int64_t general_cost(const general *g, int s, int i, int j)
{
    const instance *x = &g->x;
    int64_t sa = 0, sb = 0;
    for (int k = i; k <= j; k++) {
        sa += x->a[k];
        sb += x->b[k];
    }
    int64_t c = x->ca[s] * sa + (x->has_b ? x->cb[s] * sb : 0);
    if (g->has_tail && j < x->n - 1) c += g->ct[s] * g->tail[j];
    if (g->has_head && i > 0) c += g->ch[s] * g->head[i - 1];
    return c;
}

static int64_t general_bottleneck(const general *g, const int *ends)
{
    int64_t best = 0;
    for (int s = 0, i = 0; s < g->x.P; i = ends[s++] + 1) {
        int64_t c = general_cost(g, s, i, ends[s]);
        if (c > best) best = c;
    }
    return best;
}

/* Every split: pass 0 finds the optimum, pass 1 the least cut cost within lim. */
static void brute_general(const general *g, int s, int start, int *ends, int pass, int64_t lim, int64_t *best)
{
    const instance *x = &g->x;
    if (s == x->P - 1) {
        ends[s] = x->n - 1;
        int64_t b = general_bottleneck(g, ends), c = 0;
        for (int k = 0; k + 1 < x->P; k++) c += g->cut[ends[k]];
        if (pass == 0 && b < *best) *best = b;
        if (pass == 1 && b <= lim && c < *best) *best = c;
        return;
    }
    for (int e = start; e <= x->n - (x->P - s); e++) {
        ends[s] = e;
        brute_general(g, s + 1, e + 1, ends, pass, lim, best);
    }
}

static void test_general_vs_brute_force(void **state)
{
    (void)state;
    int ninst = 20000, ntol = 0, nwide = 0;
    for (int k = 0; k < ninst; k++) {
        general g;
        make_general(&g);
        const instance *x = &g.x;
        pp_linear_problem lp = {.n = x->n, .nstages = x->P, .a = x->a, .b = x->has_b ? x->b : NULL,
                                .coef_a = x->ca, .coef_b = x->cb, .tail = g.has_tail ? g.tail : NULL,
                                .head = g.has_head ? g.head : NULL, .coef_tail = g.ct, .coef_head = g.ch,
                                .cut_cost = g.cut, .tolerance = g.tol};
        int ends[MAXP], bends[MAXP];
        pp_linear_result r;
        pp_error err = {0};
        assert_int_equal(pp_linear_solve(&lp, ends, &r, &err), PP_OK);
        int64_t opt = INT64_MAX, cut = INT64_MAX;
        brute_general(&g, 0, 0, bends, 0, 0, &opt);
        int64_t lim = opt + (int64_t)((double)opt * g.tol);
        brute_general(&g, 0, 0, bends, 1, lim, &cut);
        for (int s = 0; s < x->P; s++) assert_true(ends[s] >= (s ? ends[s - 1] + 1 : 0));
        assert_int_equal(ends[x->P - 1], x->n - 1);
        int64_t mycut = 0;
        for (int s = 0; s + 1 < x->P; s++) mycut += g.cut[ends[s]];
        if (r.optimum != opt || r.cut_sum != cut || mycut != cut || general_bottleneck(&g, ends) != r.bottleneck ||
            r.bottleneck > lim)
            fail_msg("instance %d (n=%d, P=%d, tol %g): optimum %lld vs brute %lld, cut %lld (recounted %lld) vs "
                     "brute %lld, bottleneck %lld (recounted %lld, limit %lld)", k, x->n, x->P, g.tol,
                     (long long)r.optimum, (long long)opt, (long long)r.cut_sum, (long long)mycut, (long long)cut,
                     (long long)r.bottleneck, (long long)general_bottleneck(&g, ends), (long long)lim);
        assert_int_equal(r.tiebreak, 1);
        ntol += g.tol > 0;
        nwide += r.bottleneck > r.optimum;
    }
    printf("compared %d random instances with cut terms and growing coefficients against brute force "
           "(%d with a tolerance, %d of them chose a split above the optimum for fewer cut bytes): all equal\n",
           ninst, ntol, nwide);
}

/* The fast path (sums of item weights, non-increasing coefficients) with a tolerance. */
static void test_fast_tolerance_vs_brute_force(void **state)
{
    (void)state;
    int ninst = 20000, nwide = 0;
    static const double tols[] = {0.01, 0.05, 0.2, 1.0};
    for (int k = 0; k < ninst; k++) {
        general g;
        memset(&g, 0, sizeof g);
        make_instance(&g.x);
        const instance *x = &g.x;
        for (int t = 0; t < x->nt; t++)
            for (int c = x->tp[t]; c < x->tq[t]; c++) g.cut[c] += x->tb[t];
        g.tol = tols[rnd(4)];
        pp_linear_problem lp = {.n = x->n, .nstages = x->P, .a = x->a, .b = x->has_b ? x->b : NULL,
                                .coef_a = x->ca, .coef_b = x->cb, .cut_cost = g.cut, .tolerance = g.tol};
        int ends[MAXP], bends[MAXP];
        pp_linear_result r;
        assert_int_equal(pp_linear_solve(&lp, ends, &r, NULL), PP_OK);
        int64_t opt = INT64_MAX, cut = INT64_MAX;
        brute_general(&g, 0, 0, bends, 0, 0, &opt);
        int64_t lim = opt + (int64_t)((double)opt * g.tol);
        brute_general(&g, 0, 0, bends, 1, lim, &cut);
        if (r.optimum != opt || r.cut_sum != cut || general_bottleneck(&g, ends) != r.bottleneck || r.bottleneck > lim)
            fail_msg("instance %d: optimum %lld vs %lld, cut %lld vs %lld", k, (long long)r.optimum, (long long)opt,
                     (long long)r.cut_sum, (long long)cut);
        nwide += r.bottleneck > r.optimum;
    }
    printf("fast path with a tolerance: %d random instances equal to brute force (%d chose a split above the "
           "optimum for fewer cut bytes)\n", ninst, nwide);
}

/* The tolerance on the fast path: a split one unit above the optimum that cuts a cheap
 * tensor wins over the optimal one that cuts an expensive one. */
static void test_tolerance_closed_form(void **state)
{
    (void)state;
    int64_t a[4] = {50, 50, 1, 50}, one[2] = {1, 1}, cut[4] = {5, 100, 1, 0};
    int ends[2];
    pp_linear_result r;
    pp_linear_problem x = {.n = 4, .nstages = 2, .a = a, .coef_a = one, .cut_cost = cut};
    assert_int_equal(pp_linear_solve(&x, ends, &r, NULL), PP_OK);   /* {50,50} | {1,50} */
    assert_int_equal(r.optimum, 100);
    assert_int_equal(r.bottleneck, 100);
    assert_int_equal(ends[0], 1);
    x.tolerance = 0.02;   /* up to 102: {50} | {50,1,50} (cut 5) or {50,50,1} | {50} (cut 1) */
    assert_int_equal(pp_linear_solve(&x, ends, &r, NULL), PP_OK);
    assert_int_equal(r.optimum, 100);
    assert_int_equal(r.bottleneck, 101);
    assert_int_equal(r.cut_sum, 1);
    assert_int_equal(ends[0], 2);
    x.bound = 100;   /* a bound below the optimum's tolerance does not narrow it */
    assert_int_equal(pp_linear_solve(&x, ends, &r, NULL), PP_OK);
    assert_int_equal(r.cut_sum, 1);
    x.tolerance = 0;   /* the bound alone: exactly the optimal splits */
    assert_int_equal(pp_linear_solve(&x, ends, &r, NULL), PP_OK);
    assert_int_equal(r.cut_sum, 100);
    printf("tolerance 2%%: optimum 100 cutting 100 bytes, chosen 101 cutting 1 byte\n");
}

/* Closed forms: equal weights split evenly; one heavy item is its own lower bound. */
static void test_closed_forms(void **state)
{
    (void)state;
    int64_t a[12], one[4] = {1, 1, 1, 1};
    for (int i = 0; i < 12; i++) a[i] = 5;
    int ends[4];
    pp_linear_result r;
    assert_int_equal(pp_linear_partition(a, NULL, 12, 4, one, NULL, NULL, ends, &r, NULL), PP_OK);
    assert_int_equal(r.bottleneck, 15);
    assert_int_equal(ends[0], 2);
    assert_int_equal(ends[1], 5);
    assert_int_equal(ends[2], 8);
    a[7] = 100;
    assert_int_equal(pp_linear_partition(a, NULL, 12, 4, one, NULL, NULL, ends, &r, NULL), PP_OK);
    assert_int_equal(r.bottleneck, 100);
    printf("closed forms: 12 x 5 into 4 -> 15, with one item of 100 -> 100\n");
}

static void test_errors(void **state)
{
    (void)state;
    int64_t a[3] = {1, 2, 3}, neg[3] = {1, -2, 3}, one[4] = {1, 1, 1, 1}, up[2] = {1, 2};
    int ends[4];
    pp_error err = {0};
    assert_int_equal(pp_linear_partition(a, NULL, 3, 0, one, NULL, NULL, ends, NULL, &err), PP_ERR_INVALID_ARG);
    assert_int_equal(pp_linear_partition(a, NULL, 3, 4, one, NULL, NULL, ends, NULL, &err), PP_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "4 non-empty stages"));
    assert_int_equal(pp_linear_partition(neg, NULL, 3, 2, one, NULL, NULL, ends, NULL, &err), PP_ERR_INVALID_ARG);
    assert_int_equal(pp_linear_partition(a, NULL, 3, 2, up, NULL, NULL, ends, NULL, &err), PP_ERR_INVALID_ARG);
    int64_t huge[2] = {INT64_MAX / 2 + 1, INT64_MAX / 2 + 1};
    assert_int_equal(pp_linear_partition(huge, NULL, 2, 2, one, NULL, NULL, ends, NULL, &err), PP_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "overflow"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_vs_brute_force),
        cmocka_unit_test(test_general_vs_brute_force),
        cmocka_unit_test(test_fast_tolerance_vs_brute_force),
        cmocka_unit_test(test_tolerance_closed_form),
        cmocka_unit_test(test_closed_forms),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
