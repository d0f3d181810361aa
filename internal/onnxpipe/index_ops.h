/* Per-element index math of the indexing, padding, tiling and reduction ops, shared by the
 * cpu kernels, their cuda twins and the constant folder (DESIGN.md "one element function,
 * two devices"): which source element an output element reads, which triangle Trilu keeps,
 * which elements a reduction visits, and TopK's order. Static inline and PP_HD, no state. */
#ifndef PP_KERNELS_INDEX_OPS_H
#define PP_KERNELS_INDEX_OPS_H

#include <onnxpipe/core.h>
#include <onnxpipe/tensor.h>

#include <math.h>
#include <stdint.h>

/* A row-major shape, passed by value to cuda kernels. */
typedef struct pp_ix {
    int rank;
    int64_t dims[PP_MAX_RANK];
} pp_ix;

static inline pp_ix pp_ix_of(int rank, const int64_t *dims)
{
    pp_ix s;
    s.rank = rank;
    for (int d = 0; d < PP_MAX_RANK; d++) s.dims[d] = d < rank ? dims[d] : 1;
    return s;
}

/* Tile: output element i of y reads x at each coordinate modulo x's dim. */
static inline PP_HD int64_t pp_ix_tile_src(const pp_ix *x, const pp_ix *y, int64_t i)
{
    int64_t src = 0, st = 1;
    for (int d = y->rank - 1; d >= 0; d--) {
        const int64_t c = i % y->dims[d];
        i /= y->dims[d];
        src += (c % x->dims[d]) * st;
        st *= x->dims[d];
    }
    return src;
}

/* Pad modes (ONNX `mode`). */
enum { PP_PAD_CONSTANT = 0, PP_PAD_REFLECT, PP_PAD_EDGE, PP_PAD_WRAP };

/* Pad: the element of x that output element i of y reads, or -1 for the constant. begin[d]:
 * the pad before dim d (negative: a crop). Reflect mirrors about the edge without repeating
 * it (pads below the dim, as ONNX requires; larger ones fold again). */
static inline PP_HD int64_t pp_ix_pad_src(const pp_ix *x, const pp_ix *y, const int64_t *begin, int mode, int64_t i)
{
    int64_t src = 0, st = 1;
    for (int d = y->rank - 1; d >= 0; d--) {
        const int64_t n = x->dims[d];
        int64_t c = i % y->dims[d] - begin[d];
        i /= y->dims[d];
        if (c < 0 || c >= n) {
            if (mode == PP_PAD_CONSTANT) return -1;
            if (mode == PP_PAD_EDGE) c = c < 0 ? 0 : n - 1;
            else if (mode == PP_PAD_WRAP) c = ((c % n) + n) % n;
            else if (n == 1) c = 0;
            else {
                const int64_t period = 2 * (n - 1);
                c = ((c % period) + period) % period;
                if (c >= n) c = period - c;
            }
        }
        src += c * st;
        st *= n;
    }
    return src;
}

/* Trilu on the last two dims [rows, cols]: 1 when element i is kept (upper: col - row >= k,
 * lower: col - row <= k). */
static inline PP_HD int pp_ix_trilu_keep(int64_t i, int64_t rows, int64_t cols, int64_t k, int upper)
{
    const int64_t col = i % cols, row = (i / cols) % rows;
    return upper ? col - row >= k : col - row <= k;
}

/* CumSum of one row of n elements at stride st: y (+)= the running sum of x (exclusive:
 * before the element; reverse: from the end). The backward of a CumSum is the CumSum of
 * dy in the other direction. One body for each element type. */
#define PP_IX_CUMSUM_ROW(name, T)                                                                                   \
    static inline PP_HD void name(T *y, const T *x, int64_t n, int64_t st, int exclusive, int reverse, int acc)    \
    {                                                                                                               \
        T s = 0;                                                                                                    \
        for (int64_t j = 0; j < n; j++) {                                                                           \
            const int64_t e = (reverse ? n - 1 - j : j) * st;                                                       \
            const T v = x[e];                                                                                       \
            if (!exclusive) s += v;                                                                                 \
            y[e] = acc ? y[e] + s : s;                                                                              \
            if (exclusive) s += v;                                                                                  \
        }                                                                                                           \
    }
PP_IX_CUMSUM_ROW(pp_ix_cumsum_f32, float)
PP_IX_CUMSUM_ROW(pp_ix_cumsum_i64, int64_t)
PP_IX_CUMSUM_ROW(pp_ix_cumsum_i32, int32_t)

/* Index value v checked against [-n, n) and made non-negative; -1 when out of range. */
static inline PP_HD int64_t pp_ix_wrap(int64_t v, int64_t n)
{
    return v < -n || v >= n ? -1 : v < 0 ? v + n : v;
}

/* GatherElements / ScatterElements: the data element at index i of `indices` (shape idx)
 * with its coordinate on axis replaced by v (already wrapped). */
static inline PP_HD int64_t pp_ix_elements_dst(const pp_ix *data, const pp_ix *idx, int axis, int64_t v, int64_t i)
{
    int64_t dst = 0, st = 1;
    for (int d = idx->rank - 1; d >= 0; d--) {
        const int64_t c = i % idx->dims[d];
        i /= idx->dims[d];
        dst += (d == axis ? v : c) * st;
        st *= data->dims[d];
    }
    return dst;
}

/* GatherND / ScatterND over data with indices [..., q]: tuple t of the indices (t < prod of
 * indices' dims but the last) starts its slice of `slice` elements at the returned data
 * offset; batch_dims b leading dims are shared. -1: an index is out of range. ind: the q
 * values of tuple t (any integer type, as int64). */
typedef struct pp_ix_nd {
    int q, b;
    int64_t per_batch;              /* tuples per batch entry: prod(indices.dims[b:-1]) */
    int64_t batch_stride;           /* prod(data.dims[b:]) */
    int64_t slice;                  /* prod(data.dims[b+q:]) */
    int64_t dims[PP_MAX_RANK];      /* data.dims[b + j], j < q */
    int64_t st[PP_MAX_RANK];        /* data's element stride of dim b + j */
} pp_ix_nd;

static inline PP_HD int64_t pp_ix_nd_base(const pp_ix_nd *p, int64_t t, const int64_t *ind)
{
    int64_t off = (t / p->per_batch) * p->batch_stride;
    for (int j = 0; j < p->q; j++) {
        const int64_t v = pp_ix_wrap(ind[j], p->dims[j]);
        if (v < 0) return -1;
        off += v * p->st[j];
    }
    return off;
}

/* A reduction over some dims of x: output element o starts at x offset base(o); the
 * reduced elements sit at base(o) + off(r), r < nred. */
typedef struct pp_ix_red {
    int nk, nr;
    int64_t kdims[PP_MAX_RANK], kst[PP_MAX_RANK];   /* kept dims and their strides in x */
    int64_t rdims[PP_MAX_RANK], rst[PP_MAX_RANK];   /* reduced dims and their strides in x */
    int64_t nout, nred;
} pp_ix_red;

static inline pp_ix_red pp_ix_red_of(int rank, const int64_t *dims, const int *reduced)
{
    pp_ix_red p;
    int64_t st = 1, xst[PP_MAX_RANK];
    for (int d = rank - 1; d >= 0; d--) {
        xst[d] = st;
        st *= dims[d];
    }
    p.nk = p.nr = 0;
    p.nout = p.nred = 1;
    for (int d = 0; d < rank; d++) {
        if (reduced[d]) {
            p.rdims[p.nr] = dims[d];
            p.rst[p.nr++] = xst[d];
            p.nred *= dims[d];
        } else {
            p.kdims[p.nk] = dims[d];
            p.kst[p.nk++] = xst[d];
            p.nout *= dims[d];
        }
    }
    return p;
}

static inline PP_HD int64_t pp_ix_unravel_dot(int n, const int64_t *dims, const int64_t *st, int64_t i)
{
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        off += (i % dims[d]) * st[d];
        i /= dims[d];
    }
    return off;
}
static inline PP_HD int64_t pp_ix_red_base(const pp_ix_red *p, int64_t o)
{
    return pp_ix_unravel_dot(p->nk, p->kdims, p->kst, o);
}
static inline PP_HD int64_t pp_ix_red_off(const pp_ix_red *p, int64_t r)
{
    return pp_ix_unravel_dot(p->nr, p->rdims, p->rst, r);
}

/* ReduceMax / ReduceMin / ReduceProd: the identity and the combination (Max and Min
 * propagate NaN as torch.amax does). */
enum { PP_RED_MAX = 0, PP_RED_MIN, PP_RED_PROD };
static inline PP_HD float pp_ix_red_init(int kind)
{
    return kind == PP_RED_PROD ? 1.f : kind == PP_RED_MAX ? -INFINITY : INFINITY;
}
static inline PP_HD float pp_ix_red_step(int kind, float acc, float v)
{
    if (kind == PP_RED_PROD) return acc * v;
    if (v != v || acc != acc) return v != v ? v : acc;
    return kind == PP_RED_MAX ? (v > acc ? v : acc) : (v < acc ? v : acc);
}

/* ArgMax: 1 when v at index i replaces the best b at index bi (NaN counts as the largest,
 * as numpy; ties keep the first, or the last with select_last_index). */
static inline PP_HD int pp_ix_arg_better(float v, float b, int last)
{
    if (v != v) return b == b || last;
    if (b != b) return 0;
    return last ? v >= b : v > b;
}

/* TopK's order: 1 when (va, ia) comes before (vb, ib): larger (smaller) values first,
 * equal values by the lower index, as onnxruntime; NaN ranks above every number (as
 * ArgMax here and PyTorch's topk), so the order is total and every pick finds an element
 * (compared as numbers, a NaN came before nothing and nothing before it: the pick after
 * one found none, -1, and the kernels read and wrote before the row). */
static inline PP_HD int pp_ix_topk_before(float va, int64_t ia, float vb, int64_t ib, int largest)
{
    const int an = va != va, bn = vb != vb;
    if (an | bn) return an && bn ? ia < ib : largest ? an : bn;
    if (va != vb) return largest ? va > vb : va < vb;
    return ia < ib;
}

/* TopK: the row element that follows (pv, pi) in TopK's order (pi = -1: the first), of a
 * row of n at stride st; O(n) per pick, so a row's k picks cost O(n k) with no memory. */
static inline PP_HD int64_t pp_ix_topk_next(const float *x, int64_t n, int64_t st, float pv, int64_t pi, int largest)
{
    int64_t best = -1;
    float bv = 0.f;
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i * st];
        if (pi >= 0 && !pp_ix_topk_before(pv, pi, v, i, largest)) continue;
        if (best < 0 || pp_ix_topk_before(v, i, bv, best, largest)) {
            best = i;
            bv = v;
        }
    }
    return best;
}

#endif
