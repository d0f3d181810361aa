/* Shape rules of the arithmetic ops: elementwise (with numpy broadcasting), MatMul,
 * Gemm, normalization, reductions, softmax and the cross-entropy loss. */
#include "infer.h"

#include <string.h>

pp_status shape_unary(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, 0, err));
    infer_copy(c, n, 0, 0);
    return PP_OK;
}

/* Broadcast of the node's `count` inputs, into *out: all present, and no more (the
 * folders and kernels read inputs 0..count-1 of these fixed-arity ops). */
static pp_status broadcast_inputs(infer_ctx *c, const pp_node *n, int count, pp_shape *out, pp_error *err)
{
    if (n->ninputs != count)
        return infer_fail(n, PP_ERR_PARSE, err, "takes %d inputs, this node has %d", count, n->ninputs);
    PP_CHECK(infer_need(c, n, 0, 0, err));
    *out = *infer_shape_of(c, n, 0);
    for (int k = 1; k < count; k++) {
        PP_CHECK(infer_need(c, n, k, 0, err));
        PP_CHECK(infer_broadcast(n, out, infer_shape_of(c, n, k), out, err));
    }
    return PP_OK;
}

pp_status shape_binary(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(broadcast_inputs(c, n, 2, &c->os[0], err));
    c->odt[0] = infer_dtype_of(c, n, 0);
    if (n->op != PP_OP_POW) {
        pp_dtype a = infer_dtype_of(c, n, 0), b = infer_dtype_of(c, n, 1);
        if (a && b && a != b)
            return infer_fail(n, PP_ERR_SHAPE, err, "inputs have different dtypes: %s and %s",
                              pp_dtype_name(a), pp_dtype_name(b));
    }
    return PP_OK;
}

pp_status shape_compare(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(broadcast_inputs(c, n, 2, &c->os[0], err));
    c->odt[0] = PP_DTYPE_BOOL;
    return PP_OK;
}

/* Where(cond, X, Y): all three broadcast; the dtype is X's. */
pp_status shape_where(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(broadcast_inputs(c, n, 3, &c->os[0], err));
    c->odt[0] = infer_dtype_of(c, n, 1);
    return PP_OK;
}

pp_status shape_cast(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t to;
    PP_CHECK(infer_need(c, n, 0, 0, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "to", 0, &to, n->name, err));
    if (!pp_dtype_size((pp_dtype)to))
        return infer_fail(n, PP_ERR_UNSUPPORTED, err, "cast to dtype %lld is not supported", (long long)to);
    infer_copy(c, n, 0, 0);
    c->odt[0] = (pp_dtype)to;
    return PP_OK;
}

pp_status shape_softmax(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t axis;
    int ax;
    PP_CHECK(infer_need(c, n, 0, 0, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "axis", -1, &axis, n->name, err));
    PP_CHECK(infer_axis(n, axis, infer_shape_of(c, n, 0)->rank, &ax, err));
    infer_copy(c, n, 0, 0);
    return PP_OK;
}

/* Dropout(data, ratio?, training_mode?) -> output, mask? (bool) */
pp_status shape_dropout(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, 0, err));
    infer_copy(c, n, 0, 0);
    if (n->noutputs > 1) {
        c->os[1] = c->os[0];
        c->odt[1] = PP_DTYPE_BOOL;
    }
    return PP_OK;
}

static pp_status inner_mismatch(const pp_node *n, const pp_shape *a, const pp_shape *b, pp_error *err)
{
    char sa[256], sb[256];
    return infer_fail(n, PP_ERR_SHAPE, err, "inner dims differ: %s x %s", pp_shape_format(a, sa, sizeof sa),
                      pp_shape_format(b, sb, sizeof sb));
}

static int dims_differ(int64_t a, int64_t b)
{
    return a >= 0 && b >= 0 && a != b;
}

/* numpy matmul: 1-D operands gain (and then lose) a dim; batch dims broadcast.
 * a: (..., M, K), b: (..., K, N) -> (..., M, N) */
pp_status shape_matmul(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, 1, err));
    PP_CHECK(infer_need(c, n, 1, 1, err));
    const pp_shape *a = infer_shape_of(c, n, 0), *b = infer_shape_of(c, n, 1);
    int64_t ka = a->dims[a->rank - 1], kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2];
    if (dims_differ(ka, kb)) return inner_mismatch(n, a, b, err);
    pp_shape ba = *a, bb = *b, r;
    ba.rank = a->rank > 2 ? a->rank - 2 : 0;
    bb.rank = b->rank > 2 ? b->rank - 2 : 0;
    PP_CHECK(infer_broadcast(n, &ba, &bb, &r, err));
    if (r.rank + 2 > PP_MAX_RANK) return infer_fail(n, PP_ERR_UNSUPPORTED, err, "rank too large");
    if (a->rank >= 2) {
        r.dims[r.rank] = a->dims[a->rank - 2];
        r.syms[r.rank++] = a->syms[a->rank - 2];
    }
    if (b->rank >= 2) {
        r.dims[r.rank] = b->dims[b->rank - 1];
        r.syms[r.rank++] = b->syms[b->rank - 1];
    }
    c->os[0] = r;
    c->odt[0] = infer_dtype_of(c, n, 0);
    return PP_OK;
}

/* Gemm: A (M, K) or (K, M) with transA, B (K, N) or (N, K) with transB, C broadcast to (M, N). */
pp_status shape_gemm(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t ta, tb;
    PP_CHECK(infer_need(c, n, 0, 2, err));
    PP_CHECK(infer_need(c, n, 1, 2, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "transA", 0, &ta, n->name, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "transB", 0, &tb, n->name, err));
    const pp_shape *a = infer_shape_of(c, n, 0), *b = infer_shape_of(c, n, 1);
    if (a->rank != 2 || b->rank != 2)
        return infer_fail(n, PP_ERR_SHAPE, err, "inputs must be 2-D, got ranks %d and %d", a->rank, b->rank);
    int im = ta ? 1 : 0, in = tb ? 0 : 1;
    if (dims_differ(a->dims[1 - im], b->dims[1 - in])) return inner_mismatch(n, a, b, err);
    pp_shape r = *a;
    r.dims[0] = a->dims[im];
    r.syms[0] = a->syms[im];
    r.dims[1] = b->dims[in];
    r.syms[1] = b->syms[in];
    if (infer_has_input(n, 2)) {
        PP_CHECK(infer_need(c, n, 2, 0, err));
        pp_shape bc;
        if (!infer_fits(n, &r, infer_shape_of(c, n, 2), &bc)) {
            char s[256];
            return infer_fail(n, PP_ERR_SHAPE, err, "C of shape %s does not broadcast to (M, N)",
                              pp_shape_format(infer_shape_of(c, n, 2), s, sizeof s));
        }
    }
    c->os[0] = r;
    c->odt[0] = infer_dtype_of(c, n, 0);
    return PP_OK;
}

/* LayerNormalization(X, scale, B?) -> Y, Mean?, InvStdDev? (X.shape[:axis] + 1s) */
pp_status shape_layernorm(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t axis;
    int ax;
    PP_CHECK(infer_need(c, n, 0, 1, err));
    PP_CHECK(infer_need(c, n, 1, 0, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "axis", -1, &axis, n->name, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    PP_CHECK(infer_axis(n, axis, x->rank, &ax, err));
    infer_copy(c, n, 0, 0);
    for (int k = 1; k < 3 && k < n->ninputs; k++) {
        if (!infer_has_input(n, k)) continue;
        PP_CHECK(infer_need(c, n, k, 0, err));
        const pp_shape *p = infer_shape_of(c, n, k);
        pp_shape tail = *x, bc;
        tail.rank = x->rank - ax;
        memmove(tail.dims, x->dims + ax, (size_t)tail.rank * sizeof tail.dims[0]);
        memmove(tail.syms, x->syms + ax, (size_t)tail.rank * sizeof tail.syms[0]);
        if (infer_fits(n, &tail, p, &bc)) {
            /* a normalized dim not known here (dims unbound) is the parameter's where that is
               known (and not 1) */
            for (int i = 0; i < tail.rank; i++)
                if (tail.dims[i] < 0 && bc.dims[i] >= 0) {
                    c->os[0].dims[ax + i] = bc.dims[i];
                    c->os[0].syms[ax + i] = NULL;
                }
        } else {
            char s1[256], s2[256];
            return infer_fail(n, PP_ERR_SHAPE, err, "%s of shape %s does not fit normalized dims %s",
                              k == 1 ? "scale" : "bias", pp_shape_format(p, s1, sizeof s1),
                              pp_shape_format(&tail, s2, sizeof s2));
        }
    }
    pp_shape stat = c->os[0];
    for (int i = ax; i < x->rank; i++) {
        stat.dims[i] = 1;
        stat.syms[i] = NULL;
    }
    int64_t stash;
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "stash_type", PP_DTYPE_F32, &stash, n->name, err));
    for (int k = 1; k < 3 && k < n->noutputs; k++) {
        c->os[k] = stat;
        c->odt[k] = (pp_dtype)stash;
    }
    return PP_OK;
}

/* ReduceMean / ReduceSum: axes as attribute (ReduceMean < 18, ReduceSum < 13) or input 1. */
pp_status shape_reduce(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t keep, noop, axes[PP_MAX_RANK];
    int naxes, known;
    PP_CHECK(infer_need(c, n, 0, 0, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "keepdims", 1, &keep, n->name, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "noop_with_empty_axes", 0, &noop, n->name, err));
    PP_CHECK(infer_axes(c, n, "axes", 1, axes, &naxes, &known, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    c->odt[0] = infer_dtype_of(c, n, 0);
    if (!known) {
        c->os[0] = infer_unknown(keep ? x->rank : -1);
        return PP_OK;
    }
    if (naxes == 0 && noop) {
        c->os[0] = *x;
        return PP_OK;
    }
    int reduced[PP_MAX_RANK] = {0};
    for (int i = 0; i < naxes; i++) {
        int ax;
        PP_CHECK(infer_axis(n, axes[i], x->rank, &ax, err));
        reduced[ax] = 1;
    }
    pp_shape r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < x->rank; i++) {
        int red = naxes == 0 || reduced[i];
        if (red && !keep) continue;
        r.dims[r.rank] = red ? 1 : x->dims[i];
        r.syms[r.rank++] = red ? NULL : x->syms[i];
    }
    c->os[0] = r;
    return PP_OK;
}

/* SoftmaxCrossEntropyLoss(scores (N, C, D...), labels (N, D...), weights? (C))
 * -> loss (N, D...) with reduction none, else a scalar; log_prob? like scores. */
pp_status shape_sce_loss(infer_ctx *c, const pp_node *n, pp_error *err)
{
    const char *red;
    PP_CHECK(infer_need(c, n, 0, 2, err));
    PP_CHECK(infer_need(c, n, 1, 1, err));
    PP_CHECK(pp_attr_string(n->attrs, n->nattrs, "reduction", "mean", &red, n->name, err));
    const pp_shape *s = infer_shape_of(c, n, 0), *l = infer_shape_of(c, n, 1);
    pp_shape want = *s;
    want.rank = s->rank - 1;
    want.dims[0] = s->dims[0];
    for (int i = 1; i < want.rank; i++) {
        want.dims[i] = s->dims[i + 1];
        want.syms[i] = s->syms[i + 1];
    }
    int ok = l->rank == want.rank;
    for (int i = 0; ok && i < l->rank; i++) ok = !dims_differ(l->dims[i], want.dims[i]);
    if (!ok) {
        char s1[256], s2[256];
        return infer_fail(n, PP_ERR_SHAPE, err, "labels of shape %s do not fit scores of shape %s",
                          pp_shape_format(l, s1, sizeof s1), pp_shape_format(s, s2, sizeof s2));
    }
    pp_dtype ldt = infer_dtype_of(c, n, 1);
    if (ldt && ldt != PP_DTYPE_I64 && ldt != PP_DTYPE_I32)
        return infer_fail(n, PP_ERR_SHAPE, err, "labels have dtype %s, expected int64 or int32",
                          pp_dtype_name(ldt));
    if (!strcmp(red, "none")) c->os[0] = want;
    else if (!strcmp(red, "mean") || !strcmp(red, "sum")) c->os[0] = pp_shape_make(0, NULL);
    else return infer_fail(n, PP_ERR_UNSUPPORTED, err, "reduction '%s' (expected none, mean or sum)", red);
    c->odt[0] = infer_dtype_of(c, n, 0);
    if (n->noutputs > 1) infer_copy(c, n, 1, 0);
    return PP_OK;
}
