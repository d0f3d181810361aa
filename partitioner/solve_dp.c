/* The linear partition when a stage's cost has a term per cut (what it sends on and
 * back) or coefficients that grow with the stage: solve.c's greedy check does not hold
 * there (a stage may fit ending at c+1 and not at c), so the bisection's check and the
 * tie-break are DPs over (stage, end). Stage s = items i..j costs X_s(j) - Y_s(i-1) with
 *   X_s(j) = ca_s*PA[j+1] + cb_s*PB[j+1] + ct_s*tail[j]   (no tail when j = n-1)
 *   Y_s(k) = ca_s*PA[k+1] + cb_s*PB[k+1] - ch_s*head[k]   (Y_s(-1) = 0)
 * so "stage s can end at j within B" is "max Y_s(k) over the ends k < j that stage s-1
 * can reach >= X_s(j) - B": a running maximum. */
#include "partition_internal.h"

#include <string.h>

typedef struct dp {
    int n, P;
    int64_t *pa, *pb;               /* prefix sums [n+1] */
    const pp_linear_problem *x;
} dp;

static int64_t coef(const int64_t *c, int s) { return c ? c[s] : 1; }

static int64_t X(const dp *d, int s, int j)
{
    const pp_linear_problem *x = d->x;
    int64_t v = x->coef_a[s] * d->pa[j + 1];
    if (x->b) v += x->coef_b[s] * d->pb[j + 1];
    if (x->tail && j < d->n - 1) v += coef(x->coef_tail, s) * x->tail[j];
    return v;
}

static int64_t Y(const dp *d, int s, int k)
{
    if (k < 0) return 0;
    const pp_linear_problem *x = d->x;
    int64_t v = x->coef_a[s] * d->pa[k + 1];
    if (x->b) v += x->coef_b[s] * d->pb[k + 1];
    if (x->head) v -= coef(x->coef_head, s) * x->head[k];
    return v;
}

/* Stage s ends in [s, n-P+s] (one item for each stage before and after it). */
static int last_end(const dp *d, int s) { return d->n - d->P + s; }

static int bit(const unsigned char *b, size_t i) { return b[i >> 3] >> (i & 7) & 1; }

/* Whether a split with every stage <= B exists. bits (may be NULL): bit s*n+j set when
 * stage s can end at j. cur, prev: [n] scratch. */
static int feasible(const dp *d, int64_t B, unsigned char *bits, char *prev, char *cur)
{
    int n = d->n, P = d->P;
    if (bits) memset(bits, 0, ((size_t)n * (size_t)P + 7) / 8);
    for (int s = 0; s < P; s++) {
        int64_t best = INT64_MIN;
        int any = 0;
        for (int j = s; j <= last_end(d, s); j++) {
            if (s == 0) {
                cur[j] = X(d, 0, j) <= B;
            } else {
                if (prev[j - 1]) {   /* admit k = j-1 */
                    int64_t y = Y(d, s, j - 1);
                    if (y > best) best = y;
                }
                cur[j] = best != INT64_MIN && best >= X(d, s, j) - B;
            }
            any |= cur[j];
            if (bits && cur[j]) bits[((size_t)s * n + j) >> 3] |= (unsigned char)(1u << (((size_t)s * n + j) & 7));
        }
        if (!any) return 0;
        char *t = prev;
        prev = cur;
        cur = t;
    }
    return prev[n - 1];
}

/* ---- tie-break: the fewest cut costs among the splits with every stage <= lim ---- */

typedef struct best_k {
    int64_t v;
    int k;
} best_k;

static int better(best_k a, best_k b) { return a.v < b.v || (a.v == b.v && a.k > b.k); }

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The first index of keys[m] (ascending) holding a value >= t, m if none. */
static int lower_bound(const int64_t *keys, int m, int64_t t)
{
    int lo = 0, hi = m;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (keys[mid] < t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* One stage of the tie-break: cur[j] = cut(j) + the smallest prev[k] over k < j whose
 * start term Y_s(k) >= X_s(j) - lim, through a Fenwick tree of minima over the ranks of
 * the start terms, largest first (so a prefix of the tree is "key >= t"). */
static void tb_stage(const dp *d, int s, int64_t lim, const int64_t *prev, int64_t *cur, int *arg, int64_t *keys,
                     best_k *fw)
{
    int lo = s - 1, hi = last_end(d, s - 1), m = 0;
    for (int k = lo; k <= hi; k++) keys[m++] = Y(d, s, k);
    qsort(keys, (size_t)m, sizeof *keys, cmp_i64);
    for (int i = 0; i < m; i++) fw[i] = (best_k){INT64_MAX, -1};
    const int64_t *cut = d->x->cut_cost;
    for (int j = s; j <= last_end(d, s); j++) {
        int k = j - 1;
        if (prev[k] != INT64_MAX)   /* insert k at the reversed rank of its key */
            for (int i = m - 1 - lower_bound(keys, m, Y(d, s, k)); i < m; i |= i + 1)
                if (better((best_k){prev[k], k}, fw[i])) fw[i] = (best_k){prev[k], k};
        best_k q = {INT64_MAX, -1};
        for (int i = m - 1 - lower_bound(keys, m, X(d, s, j) - lim); i >= 0; i = (i & (i + 1)) - 1)
            if (better(fw[i], q)) q = fw[i];
        int64_t c = s < d->P - 1 && cut ? cut[j] : 0;
        cur[j] = q.k < 0 ? INT64_MAX : q.v > INT64_MAX - c ? INT64_MAX - 1 : q.v + c;
        arg[j] = q.k;
    }
}

/* Fills ends with the split of the smallest cut cost with every stage <= lim; 0 when the
 * DP's cells exceed PP_TIEBREAK_CELLS. */
static pp_status tiebreak(const dp *d, int64_t lim, int *ends, int64_t *best, int *done, pp_error *err)
{
    int n = d->n, P = d->P;
    *done = 0;
    if ((int64_t)n * P > PP_TIEBREAK_CELLS) return PP_OK;
    int64_t *va = malloc((size_t)n * sizeof *va), *vb = malloc((size_t)n * sizeof *vb);
    int64_t *keys = malloc((size_t)n * sizeof *keys);
    best_k *fw = malloc((size_t)n * sizeof *fw);
    int *args = malloc((size_t)n * (size_t)P * sizeof *args);
    pp_status st = PP_OK;
    if (!va || !vb || !keys || !fw || !args) {
        st = PP_NOMEM(err);
        goto done;
    }
    const int64_t *cut = d->x->cut_cost;
    for (int j = 0; j <= last_end(d, 0); j++) {
        va[j] = X(d, 0, j) <= lim ? (P > 1 && cut ? cut[j] : 0) : INT64_MAX;
        args[j] = -1;
    }
    for (int s = 1; s < P; s++) {
        tb_stage(d, s, lim, va, vb, args + (size_t)s * n, keys, fw);
        int64_t *t = va;
        va = vb;
        vb = t;
    }
    if (va[n - 1] == INT64_MAX) {
        st = pp_error_set(err, PP_ERR_INTERNAL, "partition tie-break found no split with stages <= %lld",
                          (long long)lim);
        goto done;
    }
    *best = va[n - 1];
    ends[P - 1] = n - 1;
    for (int s = P - 1; s > 0; s--) ends[s - 1] = args[(size_t)s * n + ends[s]];
    *done = 1;
done:
    free(va);
    free(vb);
    free(keys);
    free(fw);
    free(args);
    return st;
}

/* A split with every stage <= B from the reachability bits of feasible(B). */
static void reconstruct(const dp *d, int64_t B, const unsigned char *bits, int *ends)
{
    int n = d->n;
    ends[d->P - 1] = n - 1;
    for (int s = d->P - 1; s > 0; s--) {
        int j = ends[s], k = j - 1;
        while (k >= s - 1 && !(bit(bits, (size_t)(s - 1) * n + k) && Y(d, s, k) >= X(d, s, j) - B)) k--;
        ends[s - 1] = k;
    }
}

static int64_t split_cost(const dp *d, const int *ends)
{
    int64_t best = 0;
    for (int s = 0, k = -1; s < d->P; k = ends[s++]) {
        int64_t c = X(d, s, ends[s]) - Y(d, s, k);
        if (c > best) best = c;
    }
    return best;
}

static int64_t max_of(const int64_t *v, int n)
{
    int64_t m = 0;
    for (int i = 0; v && i < n; i++)
        if (v[i] > m) m = v[i];
    return m;
}

/* The largest cost any stage can have (top) and whether the terms stay far from overflow. */
static int bound_costs(const dp *d, int64_t *top)
{
    const pp_linear_problem *x = d->x;
    int64_t mt = max_of(x->tail, d->n), mh = max_of(x->head, d->n), worst = 0;
    for (int s = 0; s < d->P; s++) {
        int64_t t[4], sum = 0;
        int over = __builtin_mul_overflow(x->coef_a[s], d->pa[d->n], &t[0]);
        over |= __builtin_mul_overflow(x->b ? x->coef_b[s] : 0, x->b ? d->pb[d->n] : 0, &t[1]);
        over |= __builtin_mul_overflow(x->tail ? coef(x->coef_tail, s) : 0, mt, &t[2]);
        over |= __builtin_mul_overflow(x->head ? coef(x->coef_head, s) : 0, mh, &t[3]);
        for (int k = 0; k < 4; k++) over |= __builtin_add_overflow(sum, t[k], &sum);
        if (over || sum > INT64_MAX / 4) return 0;
        if (sum > worst) worst = sum;
    }
    *top = worst;
    return 1;
}

pp_status linear_solve_dp(const pp_linear_problem *x, int *ends, pp_linear_result *res, pp_error *err)
{
    int n = x->n, P = x->nstages;
    dp d = {n, P, malloc(((size_t)n + 1) * sizeof(int64_t)), x->b ? malloc(((size_t)n + 1) * sizeof(int64_t)) : NULL, x};
    char *prev = malloc((size_t)n), *cur = malloc((size_t)n);
    unsigned char *bits = malloc(((size_t)n * (size_t)P + 7) / 8);
    pp_status st = PP_OK;
    if (!d.pa || (x->b && !d.pb) || !prev || !cur || !bits) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory partitioning %d items into %d stages", n, P);
        goto done;
    }
    d.pa[0] = 0;
    if (d.pb) d.pb[0] = 0;
    int over = 0;
    for (int i = 0; i < n; i++) {
        over |= __builtin_add_overflow(d.pa[i], x->a[i], &d.pa[i + 1]);
        if (d.pb) over |= __builtin_add_overflow(d.pb[i], x->b[i], &d.pb[i + 1]);
    }
    int64_t top = 0;
    if (over || !bound_costs(&d, &top)) {
        st = pp_error_set(err, PP_ERR_INVALID_ARG, "partition weights overflow 64 bits");
        goto done;
    }
    int64_t l = 0, h = top;   /* every split has every stage <= top */
    while (l < h) {
        int64_t mid = l + (h - l) / 2;
        if (feasible(&d, mid, NULL, prev, cur)) h = mid;
        else l = mid + 1;
    }
    int64_t B = l, lim = linear_tie_limit(B, x->tolerance, x->bound), best = 0;
    if (lim > top) lim = top;
    int done_tb = 0;
    PP_CHECK_GOTO(tiebreak(&d, lim, ends, &best, &done_tb, err), st, done);
    if (!done_tb) {
        feasible(&d, B, bits, prev, cur);
        reconstruct(&d, B, bits, ends);
        best = 0;
        for (int s = 0; s + 1 < P; s++) best += x->cut_cost ? x->cut_cost[ends[s]] : 0;
    }
    if (res) *res = (pp_linear_result){split_cost(&d, ends), best, done_tb, B};
done:
    free(d.pa);
    free(d.pb);
    free(prev);
    free(cur);
    free(bits);
    return st;
}
