/* Shape rules of the indexing, padding, tiling and extra reduction ops: Tile, Pad,
 * GatherElements, GatherND, ArgMax and TopK (CumSum, Trilu and the scatters keep their
 * input's shape: shape_unary; ReduceMax/Min/Prod are shape_reduce). */
#include "infer.h"

#include <string.h>

/* a * b, unknown (-1) when either is */
static int64_t dim_mul(int64_t a, int64_t b) { return a < 0 || b < 0 ? -1 : a * b; }

/* Tile(input, repeats): dim d times repeats[d]. */
pp_status shape_tile(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t rep[PP_MAX_RANK];
    int nr, known;
    PP_CHECK(infer_need(c, n, 0, 0, err));
    PP_CHECK(infer_const_ints(c, n, 1, "repeats", rep, &nr, PP_MAX_RANK, &known, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    c->odt[0] = infer_dtype_of(c, n, 0);
    if (!known) {
        c->os[0] = infer_unknown(x->rank);
        return PP_OK;
    }
    if (nr != x->rank)
        return infer_fail(n, PP_ERR_SHAPE, err, "%d repeats for an input of rank %d", nr, x->rank);
    pp_shape r = *x;
    for (int d = 0; d < x->rank; d++) {
        if (rep[d] < 0) return infer_fail(n, PP_ERR_SHAPE, err, "repeats[%d] = %lld < 0", d, (long long)rep[d]);
        r.dims[d] = dim_mul(x->dims[d], rep[d]);
        if (rep[d] != 1) r.syms[d] = NULL;
    }
    c->os[0] = r;
    return PP_OK;
}

/* Pad(data, pads, constant_value?, axes?): pads [begin..., end...] over axes (every dim
 * when absent); the attribute `pads` below opset 11. */
pp_status shape_pad(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t pads[2 * PP_MAX_RANK], axes[PP_MAX_RANK];
    int np = 0, na = -1, known = 1, kax = 1;
    PP_CHECK(infer_need(c, n, 0, 0, err));
    PP_CHECK(infer_axes(c, n, "pads", 1, pads, &np, &known, err));
    if (infer_has_input(n, 3)) PP_CHECK(infer_const_ints(c, n, 3, "axes", axes, &na, PP_MAX_RANK, &kax, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    c->odt[0] = infer_dtype_of(c, n, 0);
    if (!known || !kax) {
        c->os[0] = infer_unknown(x->rank);
        return PP_OK;
    }
    const int nax = na >= 0 ? na : x->rank;
    if (np != 2 * nax) return infer_fail(n, PP_ERR_SHAPE, err, "%d pads for %d axes, expected %d", np, nax, 2 * nax);
    pp_shape r = *x;
    for (int i = 0; i < nax; i++) {
        int ax = i;
        if (na >= 0) PP_CHECK(infer_axis(n, axes[i], x->rank, &ax, err));
        const int64_t add = pads[i] + pads[nax + i];
        r.dims[ax] = x->dims[ax] < 0 ? -1 : x->dims[ax] + add;
        if (add) r.syms[ax] = NULL;
        if (r.dims[ax] < -1 || (x->dims[ax] >= 0 && r.dims[ax] < 0))
            return infer_fail(n, PP_ERR_SHAPE, err, "pads %lld and %lld crop dim %d of %lld below 0",
                              (long long)pads[i], (long long)pads[nax + i], ax, (long long)x->dims[ax]);
    }
    c->os[0] = r;
    return PP_OK;
}

static pp_status int_indices(const infer_ctx *c, const pp_node *n, pp_error *err)
{
    pp_dtype it = infer_dtype_of(c, n, 1);
    if (it && it != PP_DTYPE_I64 && it != PP_DTYPE_I32)
        return infer_fail(n, PP_ERR_SHAPE, err, "indices have dtype %s, expected int64 or int32", pp_dtype_name(it));
    return PP_OK;
}

/* GatherElements(data, indices): the indices' shape, data's dtype. */
pp_status shape_gather_elements(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, 1, err));
    PP_CHECK(infer_need(c, n, 1, 1, err));
    PP_CHECK(int_indices(c, n, err));
    const pp_shape *x = infer_shape_of(c, n, 0), *idx = infer_shape_of(c, n, 1);
    if (x->rank != idx->rank)
        return infer_fail(n, PP_ERR_SHAPE, err, "indices have rank %d, data %d: they must match", idx->rank, x->rank);
    c->os[0] = *idx;
    c->odt[0] = infer_dtype_of(c, n, 0);
    return PP_OK;
}

/* GatherND(data, indices [..., q]) with batch_dims b: indices.dims[:-1] + data.dims[b+q:]. */
pp_status shape_gather_nd(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t b;
    PP_CHECK(infer_need(c, n, 0, 1, err));
    PP_CHECK(infer_need(c, n, 1, 1, err));
    PP_CHECK(int_indices(c, n, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "batch_dims", 0, &b, n->name, err));
    const pp_shape *x = infer_shape_of(c, n, 0), *idx = infer_shape_of(c, n, 1);
    const int64_t q = idx->dims[idx->rank - 1];
    c->odt[0] = infer_dtype_of(c, n, 0);
    if (q < 0) {
        c->os[0] = infer_unknown(-1);
        return PP_OK;
    }
    if (b < 0 || b >= idx->rank || b + q > x->rank)
        return infer_fail(n, PP_ERR_SHAPE, err, "indices' last dim %lld with batch_dims %lld does not fit data of "
                          "rank %d", (long long)q, (long long)b, x->rank);
    const int rank = idx->rank - 1 + x->rank - (int)(b + q);
    if (rank > PP_MAX_RANK) return infer_fail(n, PP_ERR_UNSUPPORTED, err, "output rank %d > %d", rank, PP_MAX_RANK);
    pp_shape r;
    memset(&r, 0, sizeof r);
    for (int d = 0; d < idx->rank - 1; d++) r.dims[r.rank] = idx->dims[d], r.syms[r.rank++] = idx->syms[d];
    for (int d = (int)(b + q); d < x->rank; d++) r.dims[r.rank] = x->dims[d], r.syms[r.rank++] = x->syms[d];
    c->os[0] = r;
    return PP_OK;
}

/* The input's shape with dim `axis` set to len, or dropped when len < 0. */
static pp_shape along(const pp_shape *x, int ax, int64_t len)
{
    pp_shape r;
    memset(&r, 0, sizeof r);
    for (int d = 0; d < x->rank; d++) {
        if (d == ax && len < 0) continue;
        r.dims[r.rank] = d == ax ? len : x->dims[d];
        r.syms[r.rank++] = d == ax ? NULL : x->syms[d];
    }
    return r;
}

/* ArgMax(data): int64, dim axis kept as 1 (keepdims) or dropped. */
pp_status shape_argmax(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t axis, keep;
    int ax;
    PP_CHECK(infer_need(c, n, 0, 1, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "axis", 0, &axis, n->name, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "keepdims", 1, &keep, n->name, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    PP_CHECK(infer_axis(n, axis, x->rank, &ax, err));
    c->os[0] = along(x, ax, keep ? 1 : -1);
    c->odt[0] = PP_DTYPE_I64;
    return PP_OK;
}

/* TopK(X, K): values and int64 indices, dim axis (default -1) set to k. */
pp_status shape_topk(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t axis, k[1];
    int nk, known, ax;
    PP_CHECK(infer_need(c, n, 0, 1, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "axis", -1, &axis, n->name, err));
    PP_CHECK(infer_const_ints(c, n, 1, "k", k, &nk, 1, &known, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    PP_CHECK(infer_axis(n, axis, x->rank, &ax, err));
    if (known && nk != 1) return infer_fail(n, PP_ERR_SHAPE, err, "k has %d values, expected 1", nk);
    if (known && (k[0] < 0 || (x->dims[ax] >= 0 && k[0] > x->dims[ax])))
        return infer_fail(n, PP_ERR_SHAPE, err, "k = %lld for an axis of %lld elements", (long long)k[0],
                          (long long)x->dims[ax]);
    c->os[0] = c->os[1] = along(x, ax, known ? k[0] : -1);
    if (!known) c->os[0].dims[ax] = c->os[1].dims[ax] = -1;
    c->odt[0] = infer_dtype_of(c, n, 0);
    c->odt[1] = PP_DTYPE_I64;
    return PP_OK;
}
