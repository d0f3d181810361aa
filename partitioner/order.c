/* The split over every topological order (partition_internal.h: order_search): the
 * downsets of the DAG enumerated breadth first (layer k: the downsets of k items; an edge
 * adds one ready item), the bottleneck found by bisection with a check that propagates,
 * for each stage, the best start term over the sub-downsets the stage before can end at;
 * then the chain with the fewest cut costs among those within the tolerance, by a DP whose
 * candidates for a stage ending at E are E's sub-downsets walked down from E while their
 * start term can still reach E's end term. Items within a layer are bitsets of W words,
 * hashed with one random key per item (XOR, so a successor's hash is one XOR away). */
#include "partition_internal.h"

#include <string.h>

#define TIEBREAK_WORK ((int64_t)1 << 27)   /* order_problem.tiebreak_work's default */

typedef struct lat {
    int n, W;
    int64_t S, E;               /* states, edges */
    int64_t *A, *B, *T, *H, *C; /* [S]: item sums and cut terms of each downset */
    uint64_t *hash;
    int *parent, *item;         /* [S]: the state it was first reached from, and the item added */
    int64_t *in_start;          /* [S+1]: CSR of the predecessor states */
    int *in;
    int full;                   /* the state holding every item */
} lat;

static void lat_free(lat *L)
{
    free(L->A), free(L->B), free(L->T), free(L->H), free(L->C);
    free(L->hash), free(L->parent), free(L->item), free(L->in_start), free(L->in);
}

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int has(const uint64_t *set, int i) { return set[i >> 6] >> (i & 63) & 1; }

/* CSR lists built from (key, value) pairs: start[nkeys+1], list[npairs]. */
typedef struct csr {
    int *start, *list;
} csr;

static void csr_free(csr *c) { free(c->start), free(c->list); }

/* ---- enumeration ------------------------------------------------------------- */

typedef struct layer {
    uint64_t *sets;             /* [count * W] */
    int *ready_start, *ready;   /* each state's ready items */
    int64_t first, count, rcap, scap, rscap;
    int nready;
} layer;

static void layer_free(layer *l) { free(l->sets), free(l->ready_start), free(l->ready); }

typedef struct enum_ctx {
    const order_problem *x;
    lat *L;
    csr succ, outv, inv;        /* successors, values produced, values consumed per item */
    int *efrom, *eto;           /* edges as built: predecessor state, successor state */
    int64_t ecap, scap, max_states;
    int *table;                 /* the next layer's open-addressing table of state ids (-1 empty) */
    int64_t tcap;
} enum_ctx;

static pp_status grow(void **p, int64_t *cap, int64_t need, size_t elem, pp_error *err)
{
    if (need <= *cap) return PP_OK;
    int64_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return PP_NOMEM(err);
    *p = q;
    *cap = c;
    return PP_OK;
}

static pp_status grow_states(enum_ctx *c, int64_t need, pp_error *err)
{
    if (need <= c->scap) return PP_OK;
    int64_t cap = c->scap ? 2 * c->scap : 1024;
    while (cap < need) cap *= 2;
    lat *L = c->L;
    void **arrs[] = {(void **)&L->A, (void **)&L->B, (void **)&L->T, (void **)&L->H, (void **)&L->C,
                     (void **)&L->hash, (void **)&L->parent, (void **)&L->item};
    const size_t sizes[] = {8, 8, 8, 8, 8, 8, sizeof(int), sizeof(int)};
    for (int k = 0; k < 8; k++) {
        void *q = realloc(*arrs[k], (size_t)cap * sizes[k]);
        if (!q) return PP_NOMEM(err);
        *arrs[k] = q;
    }
    c->scap = cap;
    return PP_OK;
}

static pp_status build_csr(int nkeys, int npairs, const int *key, const int *val, csr *out, pp_error *err)
{
    out->start = calloc((size_t)nkeys + 1, sizeof *out->start);
    out->list = malloc(((size_t)npairs + 1) * sizeof *out->list);
    if (!out->start || !out->list) return PP_NOMEM(err);
    for (int k = 0; k < npairs; k++) out->start[key[k] + 1]++;
    for (int i = 0; i < nkeys; i++) out->start[i + 1] += out->start[i];
    int *fill = malloc(((size_t)nkeys + 1) * sizeof *fill);
    if (!fill) return PP_NOMEM(err);
    memcpy(fill, out->start, (size_t)nkeys * sizeof *fill);
    for (int k = 0; k < npairs; k++) out->list[fill[key[k]]++] = val[k];
    free(fill);
    return PP_OK;
}

/* The item lists the enumeration walks: successors, values made and values read. */
static pp_status item_lists(enum_ctx *c, pp_error *err)
{
    const order_problem *x = c->x;
    int n = x->n, np = x->pred_start[n], nr = 0;
    for (int v = 0; v < x->nvalues; v++) nr += x->values[v].nconsumers;
    int *k1 = malloc(((size_t)np + 1) * sizeof *k1), *v1 = malloc(((size_t)np + 1) * sizeof *v1);
    int *k2 = malloc(((size_t)x->nvalues + 1) * sizeof *k2), *v2 = malloc(((size_t)x->nvalues + 1) * sizeof *v2);
    int *k3 = malloc(((size_t)nr + 1) * sizeof *k3), *v3 = malloc(((size_t)nr + 1) * sizeof *v3);
    pp_status st = k1 && v1 && k2 && v2 && k3 && v3 ? PP_OK : PP_NOMEM(err);
    for (int i = 0, k = 0; st == PP_OK && i < n; i++)
        for (int e = x->pred_start[i]; e < x->pred_start[i + 1]; e++, k++) k1[k] = x->preds[e], v1[k] = i;
    for (int v = 0, k = 0; st == PP_OK && v < x->nvalues; v++) {
        k2[v] = x->values[v].producer, v2[v] = v;
        for (int j = 0; j < x->values[v].nconsumers; j++, k++) k3[k] = x->values[v].consumers[j], v3[k] = v;
    }
    if (st == PP_OK) st = build_csr(n, np, k1, v1, &c->succ, err);
    if (st == PP_OK) st = build_csr(n, x->nvalues, k2, v2, &c->outv, err);
    if (st == PP_OK) st = build_csr(n, nr, k3, v3, &c->inv, err);
    free(k1), free(v1), free(k2), free(v2), free(k3), free(v3);
    return st;
}

/* The state E = D + item i, created: its sums, cut terms and ready items (set: E's bits). */
static pp_status new_state(enum_ctx *c, int64_t d, int i, const uint64_t *set, const int *dready, int ndready,
                           layer *nx, pp_error *err)
{
    const order_problem *x = c->x;
    lat *L = c->L;
    int64_t e = L->S;
    PP_CHECK(grow_states(c, e + 1, err));
    L->A[e] = L->A[d] + x->a[i];
    L->B[e] = L->B[d] + (x->b ? x->b[i] : 0);
    int64_t t = L->T[d], h = L->H[d], cu = L->C[d];
    for (int k = c->outv.start[i]; k < c->outv.start[i + 1]; k++) {
        const order_value *v = &x->values[c->outv.list[k]];
        if (v->nconsumers) t += v->tail, h += v->head, cu += v->cut;
    }
    for (int k = c->inv.start[i]; k < c->inv.start[i + 1]; k++) {
        const order_value *v = &x->values[c->inv.list[k]];
        int inside = 1;
        for (int j = 0; j < v->nconsumers && inside; j++) inside = has(set, v->consumers[j]);
        if (inside) t -= v->tail, h -= v->head, cu -= v->cut;
    }
    L->T[e] = t, L->H[e] = h, L->C[e] = cu;
    L->hash[e] = L->hash[d] ^ mix((uint64_t)i);
    L->parent[e] = (int)d;
    L->item[e] = i;
    int64_t li = e - nx->first;
    PP_CHECK(grow((void **)&nx->sets, &nx->scap, (li + 1) * c->L->W, sizeof *nx->sets, err));
    memcpy(nx->sets + li * c->L->W, set, (size_t)c->L->W * sizeof *set);
    int64_t rneed = nx->nready + ndready + (c->succ.start[i + 1] - c->succ.start[i]);
    PP_CHECK(grow((void **)&nx->ready, &nx->rcap, rneed, sizeof *nx->ready, err));
    PP_CHECK(grow((void **)&nx->ready_start, &nx->rscap, li + 2, sizeof *nx->ready_start, err));
    nx->ready_start[li] = nx->nready;
    for (int k = 0; k < ndready; k++)
        if (dready[k] != i) nx->ready[nx->nready++] = dready[k];
    for (int k = c->succ.start[i]; k < c->succ.start[i + 1]; k++) {
        int y = c->succ.list[k], ok = 1;
        for (int p = x->pred_start[y]; p < x->pred_start[y + 1] && ok; p++) ok = has(set, x->preds[p]);
        if (ok) nx->ready[nx->nready++] = y;   /* y's last missing predecessor was i */
    }
    nx->ready_start[li + 1] = nx->nready;
    nx->count = li + 1;
    L->S = e + 1;
    return PP_OK;
}

static pp_status add_edge(enum_ctx *c, int64_t d, int64_t e, pp_error *err)
{
    int64_t k = c->L->E;
    if (k >= c->ecap) {
        int64_t cap = c->ecap;
        PP_CHECK(grow((void **)&c->efrom, &cap, k + 1, sizeof *c->efrom, err));
        cap = c->ecap;
        PP_CHECK(grow((void **)&c->eto, &cap, k + 1, sizeof *c->eto, err));
        c->ecap = cap;
    }
    c->efrom[k] = (int)d;
    c->eto[k] = (int)e;
    c->L->E = k + 1;
    return PP_OK;
}

/* Layer by layer; *found = 0 when the states pass max_states. */
static pp_status enumerate(enum_ctx *c, int *found, pp_error *err)
{
    const order_problem *x = c->x;
    lat *L = c->L;
    int n = x->n, W = L->W;
    layer cur = {0}, nx = {0};
    uint64_t *set = calloc((size_t)W, sizeof *set);
    pp_status st = set ? PP_OK : PP_NOMEM(err);
    *found = 1;
    /* the empty downset, ready: the items without predecessors */
    if (st == PP_OK) st = grow_states(c, 1, err);
    if (st == PP_OK) {
        L->A[0] = L->B[0] = L->T[0] = L->H[0] = L->C[0] = 0;
        L->hash[0] = 0, L->parent[0] = -1, L->item[0] = -1, L->S = 1;
        cur.sets = calloc((size_t)W, sizeof *cur.sets);
        cur.ready_start = calloc(2, sizeof *cur.ready_start);
        cur.ready = malloc(((size_t)n + 1) * sizeof *cur.ready);
        if (!cur.sets || !cur.ready_start || !cur.ready) st = PP_NOMEM(err);
        for (int i = 0; st == PP_OK && i < n; i++)
            if (x->pred_start[i] == x->pred_start[i + 1]) cur.ready[cur.nready++] = i;
        cur.ready_start[1] = cur.nready;
        cur.count = 1;
    }
    for (int k = 0; st == PP_OK && k < n; k++) {
        nx.first = L->S, nx.count = 0, nx.nready = 0;
        /* table for the next layer: twice the largest it can get from this one */
        int64_t want = 2 * (int64_t)cur.nready + 16, tcap = 16;
        while (tcap < want) tcap *= 2;
        if (tcap > c->tcap) {
            free(c->table);
            if (!(c->table = malloc((size_t)tcap * sizeof *c->table))) {
                st = PP_NOMEM(err);
                break;
            }
            c->tcap = tcap;
        }
        for (int64_t t = 0; t < tcap; t++) c->table[t] = -1;
        for (int64_t li = 0; st == PP_OK && li < cur.count; li++) {
            int64_t d = cur.first + li;
            const uint64_t *dset = cur.sets + li * W;
            const int *dr = cur.ready + cur.ready_start[li];
            int ndr = cur.ready_start[li + 1] - cur.ready_start[li];
            for (int r = 0; st == PP_OK && r < ndr; r++) {
                int i = dr[r];
                memcpy(set, dset, (size_t)W * sizeof *set);
                set[i >> 6] |= 1ull << (i & 63);
                uint64_t hv = L->hash[d] ^ mix((uint64_t)i);
                int64_t slot = (int64_t)(hv & (uint64_t)(tcap - 1)), e = -1;
                for (;; slot = (slot + 1) & (tcap - 1)) {
                    int id = c->table[slot];
                    if (id < 0) break;
                    if (L->hash[id] == hv && !memcmp(nx.sets + (id - nx.first) * W, set, (size_t)W * sizeof *set)) {
                        e = id;
                        break;
                    }
                }
                if (e < 0) {
                    if (L->S >= c->max_states) {
                        *found = 0;
                        goto done;
                    }
                    e = L->S;
                    st = new_state(c, d, i, set, dr, ndr, &nx, err);
                    c->table[slot] = (int)e;
                }
                if (st == PP_OK) st = add_edge(c, d, e, err);
            }
        }
        layer t = cur;
        cur = nx;
        nx = t;
    }
    if (st == PP_OK) L->full = (int)(L->S - 1);
done:
    layer_free(&cur);
    layer_free(&nx);
    free(set);
    return st;
}

/* The predecessor states of every state, from the edge list. */
static pp_status in_edges(enum_ctx *c, pp_error *err)
{
    lat *L = c->L;
    L->in_start = calloc((size_t)L->S + 1, sizeof *L->in_start);
    L->in = malloc(((size_t)L->E + 1) * sizeof *L->in);
    int64_t *fill = malloc(((size_t)L->S + 1) * sizeof *fill);
    if (!L->in_start || !L->in || !fill) return free(fill), PP_NOMEM(err);
    for (int64_t k = 0; k < L->E; k++) L->in_start[c->eto[k] + 1]++;
    for (int64_t e = 0; e < L->S; e++) L->in_start[e + 1] += L->in_start[e];
    memcpy(fill, L->in_start, (size_t)L->S * sizeof *fill);
    for (int64_t k = 0; k < L->E; k++) L->in[fill[c->eto[k]]++] = c->efrom[k];
    free(fill);
    return PP_OK;
}

/* ---- the solver over the lattice --------------------------------------------- */

typedef struct solver {
    const order_problem *x;
    const lat *L;
    int P;
} solver;

static int64_t cf(const int64_t *c, int s, int64_t dflt) { return c ? c[s] : dflt; }

/* End term of a stage s ending at e, and start terms of one starting after d (its upper
 * bound without the head term, which only grows with d). */
static int64_t Xe(const solver *v, int s, int64_t e)
{
    const order_problem *x = v->x;
    return x->coef_a[s] * v->L->A[e] + cf(x->coef_b, s, 0) * v->L->B[e] + cf(x->coef_tail, s, 0) * v->L->T[e];
}
static int64_t Yub(const solver *v, int s, int64_t d)
{
    return v->x->coef_a[s] * v->L->A[d] + cf(v->x->coef_b, s, 0) * v->L->B[d];
}
static int64_t Yd(const solver *v, int s, int64_t d) { return Yub(v, s, d) - cf(v->x->coef_head, s, 0) * v->L->H[d]; }

/* Whether a chain with every stage <= B exists; bits (may be NULL): [P * S] reachability. */
static int check(const solver *v, int64_t B, char *bits, char *prev, char *cur, int64_t *m)
{
    const lat *L = v->L;
    if (bits) memset(bits, 0, (size_t)v->P * (size_t)L->S);
    for (int s = 0; s < v->P; s++) {
        int any = 0;
        for (int64_t e = 0; e < L->S; e++) {
            if (s == 0) {
                cur[e] = e != 0 && Xe(v, 0, e) <= B;
            } else {
                int64_t best = INT64_MIN;
                for (int64_t k = L->in_start[e]; k < L->in_start[e + 1]; k++)
                    if (m[L->in[k]] > best) best = m[L->in[k]];
                cur[e] = best != INT64_MIN && best >= Xe(v, s, e) - B;
                int64_t own = prev[e] ? Yd(v, s, e) : INT64_MIN;
                m[e] = best > own ? best : own;
            }
            any |= cur[e];
        }
        if (bits) memcpy(bits + (size_t)s * (size_t)L->S, cur, (size_t)L->S);
        char *t = prev;
        prev = cur;
        cur = t;
        if (!any) return 0;
    }
    return prev[L->full];
}

/* The sub-downsets d of e (proper) with Yub(s, d) >= theta, walked down from e; calls back
 * each. Returns 0 when the work budget ran out. */
typedef struct walk {
    int *stamp, *stack;
    int tick;
    int64_t work;
} walk;

static int64_t candidates(const lat *L, walk *w, int64_t e, int64_t theta, const int64_t *yub, const int64_t *yd,
                          const int64_t *val, const char *ok, int64_t *arg)
{
    int64_t best = INT64_MAX;
    int sp = 0;
    *arg = -1;
    w->tick++;
    for (int64_t k = L->in_start[e]; k < L->in_start[e + 1]; k++) {
        int d = L->in[k];
        if (w->stamp[d] != w->tick && yub[d] >= theta) w->stamp[d] = w->tick, w->stack[sp++] = d;
    }
    while (sp) {
        int d = w->stack[--sp];
        if (ok[d] && yd[d] >= theta && (!val || val[d] != INT64_MAX)) {
            int64_t c = val ? val[d] : 0;
            if (c < best || (c == best && d > *arg)) best = c, *arg = d;
            if (!val) return best;   /* any one will do */
        }
        w->work += L->in_start[d + 1] - L->in_start[d];
        for (int64_t k = L->in_start[d]; k < L->in_start[d + 1]; k++) {
            int p = L->in[k];
            if (w->stamp[p] != w->tick && yub[p] >= theta) w->stamp[p] = w->tick, w->stack[sp++] = p;
        }
    }
    return best;
}

/* Stage s's start terms of every state, and their upper bound without the head term. */
static void start_terms(const solver *v, int s, int64_t *yub, int64_t *yd)
{
    for (int64_t d = 0; d < v->L->S; d++) {
        yub[d] = Yub(v, s, d);
        yd[d] = Yd(v, s, d);
    }
}

/* Keeps of the reachability bits (bits[s*S + e]: stage s can end at e within lim) only the
 * ends from which the later stages can still finish within lim: the least end term - lim
 * over the proper supersets stage s+1 can end at, walked down from the full set. */
static void complete(const solver *v, int64_t lim, char *bits, int64_t *mn)
{
    const lat *L = v->L;
    int P = v->P;
    char *q = bits + (size_t)(P - 1) * L->S;
    for (int64_t e = 0; e < L->S; e++) q[e] = q[e] && e == L->full;
    for (int s = P - 2; s >= 0; s--) {
        const char *next = bits + (size_t)(s + 1) * L->S;
        char *here = bits + (size_t)s * L->S;
        for (int64_t e = 0; e < L->S; e++) mn[e] = INT64_MAX;
        for (int64_t f = L->S - 1; f >= 0; f--) {   /* supersets come first: larger ids */
            int64_t own = next[f] ? Xe(v, s + 1, f) - lim : INT64_MAX, m = own < mn[f] ? own : mn[f];
            for (int64_t k = L->in_start[f]; k < L->in_start[f + 1]; k++)
                if (m < mn[L->in[k]]) mn[L->in[k]] = m;
        }
        for (int64_t e = 0; e < L->S; e++) here[e] = here[e] && mn[e] != INT64_MAX && mn[e] <= Yd(v, s + 1, e);
    }
}

/* The chain (chain[s] = the downset stage s ends at) with the fewest cut costs among
 * those with every stage <= lim (ok: complete()'s bits at lim); *done = 0 when its work
 * or cells pass the budget. */
static pp_status tiebreak(const solver *v, int64_t lim, const char *ok, walk *w, int64_t *chain, int64_t *best,
                          int *done, pp_error *err)
{
    const lat *L = v->L;
    int P = v->P;
    *done = 0;
    if ((int64_t)P * L->S > PP_TIEBREAK_CELLS) return PP_OK;
    int64_t *va = malloc((size_t)L->S * sizeof *va), *vb = malloc((size_t)L->S * sizeof *vb);
    int64_t *yub = malloc((size_t)L->S * sizeof *yub), *yd = malloc((size_t)L->S * sizeof *yd);
    int *args = malloc((size_t)P * (size_t)L->S * sizeof *args);
    pp_status st = va && vb && yub && yd && args ? PP_OK : PP_NOMEM(err);
    for (int64_t e = 0; st == PP_OK && e < L->S; e++) {
        va[e] = ok[e] ? (P > 1 ? L->C[e] : 0) : INT64_MAX;
        args[e] = -1;
    }
    for (int s = 1; st == PP_OK && s < P; s++) {
        start_terms(v, s, yub, yd);
        const char *here = ok + (size_t)s * L->S, *before = ok + (size_t)(s - 1) * L->S;
        for (int64_t e = 0; e < L->S; e++) {
            int64_t a = -1, c = INT64_MAX;
            if (here[e]) c = candidates(L, w, e, Xe(v, s, e) - lim, yub, yd, va, before, &a);
            vb[e] = c == INT64_MAX ? INT64_MAX : c + (s < P - 1 ? L->C[e] : 0);
            args[(size_t)s * L->S + e] = (int)a;
            if (w->work > (v->x->tiebreak_work > 0 ? v->x->tiebreak_work : TIEBREAK_WORK)) goto out;
        }
        int64_t *t = va;
        va = vb;
        vb = t;
    }
    if (st == PP_OK && va[L->full] == INT64_MAX)
        st = pp_error_set(err, PP_ERR_INTERNAL, "order search: no chain with stages <= %lld", (long long)lim);
    if (st == PP_OK) {
        *best = va[L->full];
        chain[P - 1] = L->full;
        for (int s = P - 1; s > 0; s--) chain[s - 1] = args[(size_t)s * L->S + chain[s]];
        *done = 1;
    }
out:
    free(va), free(vb), free(yub), free(yd), free(args);
    return st;
}

pp_status order_search(const order_problem *x, int *stage, order_result *res, pp_error *err)
{
    memset(res, 0, sizeof *res);
    int n = x->n, P = x->nstages;
    if (P < 1 || P > n)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "cannot split %d items into %d non-empty stages", n, P);
    lat L = {.n = n, .W = (n + 63) / 64};
    enum_ctx c = {.x = x, .L = &L, .max_states = x->max_states > 0 ? x->max_states : INT32_MAX / 2};
    char *bits = NULL, *prev = NULL, *cur = NULL;
    int64_t *m = NULL, *chain = NULL;
    walk w = {0};
    int found = 0;
    pp_status st = item_lists(&c, err);
    if (st == PP_OK) st = enumerate(&c, &found, err);
    if (st == PP_OK && !found) {
        res->states = L.S;
        goto done;
    }
    if (st != PP_OK) goto done;
    PP_CHECK_GOTO(in_edges(&c, err), st, done);
    res->states = L.S, res->edges = L.E;
    solver v = {x, &L, P};
    /* every stage costs at most top; far from overflow */
    int64_t top = 0, mt = 0, mh = 0;
    for (int64_t e = 0; e < L.S; e++) {
        if (L.T[e] > mt) mt = L.T[e];
        if (L.H[e] > mh) mh = L.H[e];
    }
    for (int s = 0; s < P; s++) {
        int64_t t[4], sum = 0;
        int over = __builtin_mul_overflow(x->coef_a[s], L.A[L.full], &t[0]);
        over |= __builtin_mul_overflow(cf(x->coef_b, s, 0), L.B[L.full], &t[1]);
        over |= __builtin_mul_overflow(cf(x->coef_tail, s, 0), mt, &t[2]);
        over |= __builtin_mul_overflow(cf(x->coef_head, s, 0), mh, &t[3]);
        for (int k = 0; k < 4; k++) over |= __builtin_add_overflow(sum, t[k], &sum);
        if (over || sum > INT64_MAX / 4) {
            st = pp_error_set(err, PP_ERR_INVALID_ARG, "partition weights overflow 64 bits");
            goto done;
        }
        if (sum > top) top = sum;
    }
    prev = malloc((size_t)L.S), cur = malloc((size_t)L.S);
    m = malloc((size_t)L.S * sizeof *m);
    chain = malloc((size_t)P * sizeof *chain);
    w.stamp = calloc((size_t)L.S, sizeof *w.stamp), w.stack = malloc((size_t)L.S * sizeof *w.stack);
    if (!prev || !cur || !m || !chain || !w.stamp || !w.stack) {
        st = PP_NOMEM(err);
        goto done;
    }
    int64_t lo = 0, hi = top;
    if (x->upper > 0 && x->upper < hi && check(&v, x->upper, NULL, prev, cur, m)) hi = x->upper;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (check(&v, mid, NULL, prev, cur, m)) hi = mid;
        else lo = mid + 1;
    }
    int64_t B = lo, ref = x->other_optimum > 0 && x->other_optimum < B ? x->other_optimum : B;
    int64_t lim = linear_tie_limit(ref + x->fixed, x->tolerance, 0) - x->fixed, best = 0;
    if (lim < B) lim = B;
    if (lim < x->bound) lim = x->bound;
    if (lim > top) lim = top;
    int done_tb = 0;
    if (!(bits = malloc((size_t)P * (size_t)L.S))) {
        st = PP_NOMEM(err);
        goto done;
    }
    check(&v, lim, bits, prev, cur, m);   /* where each stage can end within lim, and finish */
    complete(&v, lim, bits, m);
    PP_CHECK_GOTO(tiebreak(&v, lim, bits, &w, chain, &best, &done_tb, err), st, done);
    if (!done_tb) {   /* an optimal chain, from the reachability at B */
        int64_t *yub = malloc((size_t)L.S * sizeof *yub), *yd = malloc((size_t)L.S * sizeof *yd);
        if (!yub || !yd) {
            free(yub), free(yd);
            st = PP_NOMEM(err);
            goto done;
        }
        check(&v, B, bits, prev, cur, m);
        chain[P - 1] = L.full;
        for (int s = P - 1; s > 0; s--) {
            int64_t a = -1;
            start_terms(&v, s, yub, yd);
            candidates(&L, &w, chain[s], Xe(&v, s, chain[s]) - B, yub, yd, NULL, bits + (size_t)(s - 1) * L.S, &a);
            chain[s - 1] = a;
        }
        free(yub), free(yd);
        best = 0;
        for (int s = 0; s + 1 < P; s++) best += L.C[chain[s]];
    }
    /* items: the first stage whose downset holds them */
    for (int i = 0; i < n; i++) stage[i] = -1;
    int64_t worst = 0;
    for (int s = 0; s < P; s++) {
        for (int64_t e = chain[s]; e > 0; e = L.parent[e])
            if (stage[L.item[e]] < 0) stage[L.item[e]] = s;
        int64_t cost = Xe(&v, s, chain[s]) - (s ? Yd(&v, s, chain[s - 1]) : 0);
        if (cost > worst) worst = cost;
    }
    res->found = 1;
    res->optimum = B;
    res->bottleneck = worst;
    res->cut_sum = best;
    res->tiebreak = done_tb;
done:
    lat_free(&L);
    csr_free(&c.succ), csr_free(&c.outv), csr_free(&c.inv);
    free(c.efrom), free(c.eto), free(c.table);
    free(bits), free(prev), free(cur), free(m), free(chain), free(w.stamp), free(w.stack);
    if (st != PP_OK) memset(res, 0, sizeof *res);
    return st;
}
