/* The exact linear partition: checks, then the fast path for stage costs that are sums
 * of item weights (bisection on the bottleneck with a greedy feasibility check over prefix
 * sums, then a DP over the feasible cut windows that picks, among the splits within the
 * tolerance, the one whose cuts cost least); costs with a term per cut (what a stage sends)
 * go to solve_dp.c. */
#include "partition_internal.h"

#include <math.h>
#include <string.h>

typedef struct solver {
    int n, P;
    const int64_t *pa, *pb;     /* prefix sums [n+1] */
    const int64_t *ca, *cb;     /* per-stage coefficients [P] */
} solver;

/* Cost of items i..j (inclusive; empty when j < i) in stage s. */
static int64_t cost(const solver *S, int s, int i, int j)
{
    if (j < i) return 0;
    int64_t c = S->ca[s] * (S->pa[j + 1] - S->pa[i]);
    if (S->pb) c += S->cb[s] * (S->pb[j + 1] - S->pb[i]);
    return c;
}

/* The largest j in [i-1, n-1] with cost(s, i, j) <= B. */
static int reach(const solver *S, int s, int i, int64_t B)
{
    int lo = i - 1, hi = S->n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (cost(S, s, i, mid) <= B) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* The smallest i in [0, j+1] with cost(s, i, j) <= B. */
static int reach_back(const solver *S, int s, int j, int64_t B)
{
    int lo = 0, hi = j + 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cost(S, s, mid, j) <= B) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* Forward greedy with empty stages allowed: fwd[s] = the furthest end of stage s
 * over all splits with bottleneck <= B (each stage takes as much as fits). */
static void greedy_forward(const solver *S, int64_t B, int *fwd)
{
    for (int s = 0, i = 0; s < S->P; s++) {
        fwd[s] = reach(S, s, i, B);
        i = fwd[s] + 1;
    }
}

/* Backward greedy over non-empty stages: each stage from the last takes the longest
 * suffix that fits, leaving one item for each earlier stage. Exact feasibility test
 * for non-increasing coefficients: its start of stage s is never after that of any
 * split with bottleneck <= B (an item that fits in an earlier stage fits in a later
 * one). start[s] (may be NULL) gets the starts; returns 1 if a split exists. */
static int greedy_backward(const solver *S, int64_t B, int *start)
{
    int end = S->n - 1;
    for (int s = S->P - 1; s > 0; s--) {
        int i = reach_back(S, s, end, B);
        if (i < s) i = s;
        if (i > end) return 0;
        if (start) start[s] = i;
        end = i - 1;
    }
    if (start) start[0] = 0;
    return cost(S, 0, 0, end) <= B;
}

/* Sliding-window minimum over candidates c of prev[c - plo] + cut[c], as the window
 * [start(c') - 1, c' - 1] moves right with c'. One stage of the DP. */
static void dp_stage(const solver *S, int s, int64_t B, const int64_t *cut,
                     const int64_t *prev, int plo, int phi, int64_t *cur, int *arg, int lo, int hi,
                     int *dq)
{
    int head = 0, tail = 0, next = plo, start = plo + 1;
    for (int c = lo; c <= hi; c++) {
        while (next <= phi && next < c) {   /* admit candidate `next` */
            int64_t v = prev[next - plo];
            if (v != INT64_MAX) {
                v += cut ? cut[next] : 0;
                while (tail > head && prev[dq[tail - 1] - plo] + (cut ? cut[dq[tail - 1]] : 0) >= v) tail--;
                dq[tail++] = next;
            }
            next++;
        }
        while (start <= c && cost(S, s, start, c) > B) start++;
        while (tail > head && dq[head] < start - 1) head++;
        if (tail > head) {
            cur[c - lo] = prev[dq[head] - plo] + (cut ? cut[dq[head]] : 0);
            arg[c - lo] = dq[head];
        } else {
            cur[c - lo] = INT64_MAX;
            arg[c - lo] = -1;
        }
    }
}

/* Among the splits with bottleneck B, the one with the smallest sum of cut costs.
 * lo[s]..hi[s] bound the end of stage s. Returns 0 when the windows are too large. */
static pp_status tiebreak(const solver *S, int64_t B, const int64_t *cut, const int *lo, const int *hi,
                          int *ends, int64_t *best, int *done, pp_error *err)
{
    int P = S->P;
    int64_t cells = 0, wmax = 1;
    for (int s = 0; s < P; s++) {
        int64_t w = hi[s] - lo[s] + 1;
        cells += w;
        if (w > wmax) wmax = w;
    }
    *done = 0;
    if (cells > PP_TIEBREAK_CELLS) return PP_OK;
    int *args = malloc((size_t)cells * sizeof *args);
    /* calloc: gcc -O2 (no sanitizers) cannot see that va[0] is written before it is read */
    int64_t *va = calloc((size_t)wmax, sizeof *va), *vb = calloc((size_t)wmax, sizeof *vb);
    int *dq = malloc((size_t)wmax * sizeof *dq);
    int64_t *off = malloc((size_t)P * sizeof *off);
    pp_status st = PP_OK;
    if (!args || !va || !vb || !dq || !off) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory in the partition tie-break (%lld cells)",
                          (long long)cells);
        goto done;
    }
    int64_t o = 0;
    for (int s = 0; s < P; s++) {
        off[s] = o;
        o += hi[s] - lo[s] + 1;
    }
    for (int c = lo[0]; c <= hi[0]; c++) {
        va[c - lo[0]] = cost(S, 0, 0, c) <= B ? 0 : INT64_MAX;
        args[c - lo[0]] = -1;
    }
    for (int s = 1; s < P; s++) {
        dp_stage(S, s, B, cut, va, lo[s - 1], hi[s - 1], vb, args + off[s], lo[s], hi[s], dq);
        int64_t *t = va;
        va = vb;
        vb = t;
    }
    if (va[0] == INT64_MAX) {
        st = pp_error_set(err, PP_ERR_INTERNAL, "partition tie-break found no split with bottleneck %lld",
                          (long long)B);
        goto done;
    }
    *best = va[0];
    ends[P - 1] = S->n - 1;
    for (int s = P - 1; s > 0; s--) ends[s - 1] = args[off[s] + ends[s] - lo[s]];
    *done = 1;
done:
    free(args);
    free(va);
    free(vb);
    free(dq);
    free(off);
    return st;
}

int64_t linear_tie_limit(int64_t optimum, double tolerance, int64_t bound)
{
    int64_t lim = optimum;
    if (tolerance > 0) {
        double extra = floor((double)optimum * tolerance);
        lim = extra >= (double)(INT64_MAX / 2) ? INT64_MAX / 2 : optimum + (int64_t)extra;
    }
    return bound > lim ? bound : lim;
}

static pp_status check_args(const pp_linear_problem *x, pp_error *err)
{
    int n = x->n, P = x->nstages;
    if (P < 1 || P > n)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "cannot split %d items into %d non-empty stages", n, P);
    if (!x->a || !x->coef_a || (x->b && !x->coef_b))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "linear partition: item weights a and their coefficients are "
                            "required (and coef_b with b)");
    if (!(x->tolerance >= 0) || x->bound < 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "linear partition: tolerance %g and bound %lld must be >= 0",
                            x->tolerance, (long long)x->bound);
    const int64_t *coefs[4] = {x->coef_a, x->b ? x->coef_b : NULL, x->tail ? x->coef_tail : NULL,
                               x->head ? x->coef_head : NULL};
    for (int k = 0; k < 4; k++)
        for (int s = 0; coefs[k] && s < P; s++)
            if (coefs[k][s] < 0)
                return pp_error_set(err, PP_ERR_INVALID_ARG, "stage %d: cost coefficients must be >= 0", s);
    const int64_t *items[4] = {x->a, x->b, x->tail, x->head};
    for (int k = 0; k < 4; k++)
        for (int i = 0; items[k] && i < n; i++)
            if (items[k][i] < 0) return pp_error_set(err, PP_ERR_INVALID_ARG, "item %d has a negative weight", i);
    return PP_OK;
}

/* Coefficients that never grow with the stage index: what the greedy check needs. */
static int non_increasing(const int64_t *c, int P)
{
    for (int s = 1; c && s < P; s++)
        if (c[s] > c[s - 1]) return 0;
    return 1;
}

/* Largest stage cost of the split ends[] (the fast path's costs: no tail, no head). */
static int64_t split_cost(const solver *S, const int *ends)
{
    int64_t best = 0;
    for (int s = 0, i = 0; s < S->P; s++) {
        int64_t c = cost(S, s, i, ends[s]);
        if (c > best) best = c;
        i = ends[s] + 1;
    }
    return best;
}

static pp_status solve_fast(const pp_linear_problem *x, int *ends, pp_linear_result *res, pp_error *err)
{
    int n = x->n, P = x->nstages;
    const int64_t *a = x->a, *b = x->b, *cut_cost = x->cut_cost;
    int64_t *pa = malloc(((size_t)n + 1) * sizeof *pa);
    int64_t *pb = b ? malloc(((size_t)n + 1) * sizeof *pb) : NULL;
    int *lo = malloc((size_t)P * sizeof *lo), *hi = malloc((size_t)P * sizeof *hi);
    pp_status st = PP_OK;
    if (!pa || (b && !pb) || !lo || !hi) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory partitioning %d items", n);
        goto done;
    }
    pa[0] = 0;
    if (pb) pb[0] = 0;
    int overflow = 0;
    for (int i = 0; i < n; i++) {
        overflow |= __builtin_add_overflow(pa[i], a[i], &pa[i + 1]);
        if (pb) overflow |= __builtin_add_overflow(pb[i], b[i], &pb[i + 1]);
    }
    int64_t top = 0, tb = 0;
    overflow |= __builtin_mul_overflow(pa[n], x->coef_a[0], &top);
    if (pb) overflow |= __builtin_mul_overflow(pb[n], x->coef_b[0], &tb) || __builtin_add_overflow(top, tb, &top);
    if (overflow) {
        st = pp_error_set(err, PP_ERR_INVALID_ARG, "partition weights overflow 64 bits");
        goto done;
    }
    solver S = {n, P, pa, pb, x->coef_a, pb ? x->coef_b : NULL};
    /* the smallest B with a split; top (each stage at most everything in stage 0) has one */
    int64_t l = 0, h = top;
    while (l < h) {
        int64_t mid = l + (h - l) / 2;
        if (greedy_backward(&S, mid, NULL)) h = mid;
        else l = mid + 1;
    }
    int64_t B = l, lim = linear_tie_limit(B, x->tolerance, x->bound);
    if (lim > top) lim = top;   /* every split costs at most top */
    /* stage s ends in [lo[s], hi[s]] in every split with bottleneck <= lim */
    greedy_forward(&S, lim, hi);
    greedy_backward(&S, lim, lo);
    for (int s = 0; s + 1 < P; s++) lo[s] = lo[s + 1] - 1;
    lo[P - 1] = n - 1;
    for (int s = 0; s < P; s++)
        if (hi[s] > n - P + s) hi[s] = n - P + s;
    int64_t best = 0;
    int done_tb = 0;
    /* without cut costs every split within the limit ties: the backward-greedy one at the
     * optimum, no DP (what the planner relies on to scan thousands of splits) */
    if (cut_cost) PP_CHECK_GOTO(tiebreak(&S, lim, cut_cost, lo, hi, ends, &best, &done_tb, err), st, done);
    if (!done_tb) {   /* the backward-greedy split at the optimum */
        greedy_backward(&S, B, lo);
        for (int s = 0; s + 1 < P; s++) ends[s] = lo[s + 1] - 1;
        ends[P - 1] = n - 1;
        best = 0;
        for (int s = 0; s + 1 < P; s++) best += cut_cost ? cut_cost[ends[s]] : 0;
    }
    if (res) *res = (pp_linear_result){split_cost(&S, ends), best, done_tb || !cut_cost, B};
done:
    free(pa);
    free(pb);
    free(lo);
    free(hi);
    return st;
}

pp_status pp_linear_solve(const pp_linear_problem *x, int *ends, pp_linear_result *res, pp_error *err)
{
    PP_CHECK(check_args(x, err));
    int P = x->nstages, general = !non_increasing(x->coef_a, P) || (x->b && !non_increasing(x->coef_b, P));
    for (int s = 0; s < P; s++)
        general |= (x->tail && (!x->coef_tail || x->coef_tail[s])) || (x->head && (!x->coef_head || x->coef_head[s]));
    return general ? linear_solve_dp(x, ends, res, err) : solve_fast(x, ends, res, err);
}

pp_status pp_linear_partition(const int64_t *a, const int64_t *b, int n, int nstages,
                              const int64_t *coef_a, const int64_t *coef_b,
                              const int64_t *cut_cost, int *ends, pp_linear_result *res,
                              pp_error *err)
{
    pp_linear_problem x = {.n = n, .nstages = nstages, .a = a, .b = b, .coef_a = coef_a, .coef_b = coef_b,
                           .cut_cost = cut_cost};
    PP_CHECK(check_args(&x, err));
    if (!non_increasing(coef_a, nstages) || (b && !non_increasing(coef_b, nstages))) {
        for (int s = 1; s < nstages; s++)
            if (coef_a[s] > coef_a[s - 1] || (b && coef_b[s] > coef_b[s - 1]))
                return pp_error_set(err, PP_ERR_INVALID_ARG,
                                    "stage %d: cost coefficients must be >= 0 and non-increasing", s);
    }
    return solve_fast(&x, ends, res, err);
}
