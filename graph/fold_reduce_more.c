/* Constant evaluation of ReduceMax, ReduceMin, ReduceProd and ArgMax (lengths and masks in
 * exporters' shape chains): float32 by kernels/index_ops.h's element steps, as the kernels
 * compute; integers in int64. Other dtypes are left to the kernels. */
#include "infer.h"

#include <onnxpipe/index_ops.h>

#include <string.h>

static int is_int(pp_dtype dt) { return dt == PP_DTYPE_I64 || dt == PP_DTYPE_I32; }

static int64_t step_i(int kind, int64_t acc, int64_t v)
{
    return kind == PP_RED_PROD ? acc * v : kind == PP_RED_MAX ? (v > acc ? v : acc) : (v < acc ? v : acc);
}

pp_status fold_reduce_more(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    const pp_const_tensor *x = infer_const(c, n->inputs[0]);
    if (x->dtype != PP_DTYPE_F32 && !is_int(x->dtype)) return PP_OK;
    int64_t axes[PP_MAX_RANK], noop;
    int naxes, known, reduced[PP_MAX_RANK];
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "noop_with_empty_axes", 0, &noop, n->name, err));
    PP_CHECK(infer_axes(c, n, "axes", 1, axes, &naxes, &known, err));
    for (int d = 0; d < x->shape.rank; d++) reduced[d] = naxes == 0 && !noop;
    for (int i = 0; i < naxes; i++) {
        int ax;
        PP_CHECK(infer_axis(n, axes[i], x->shape.rank, &ax, err));
        reduced[ax] = 1;
    }
    const pp_ix_red p = pp_ix_red_of(x->shape.rank, x->shape.dims, reduced);
    const int kind = n->op == PP_OP_REDUCE_MAX ? PP_RED_MAX : n->op == PP_OP_REDUCE_MIN ? PP_RED_MIN : PP_RED_PROD;
    if (p.nred == 0 && kind != PP_RED_PROD)
        return infer_fail(n, PP_ERR_SHAPE, err, "reduces an empty set of values (no maximum or minimum)");
    for (int64_t o = 0; o < p.nout; o++) {
        const int64_t b = pp_ix_red_base(&p, o);
        float af = pp_ix_red_init(kind);
        int64_t ai = kind == PP_RED_PROD ? 1 : const_i64(x, b);
        for (int64_t r = 0; r < p.nred; r++) {
            const int64_t e = b + pp_ix_red_off(&p, r);
            if (is_int(x->dtype)) ai = step_i(kind, ai, const_i64(x, e));
            else af = pp_ix_red_step(kind, af, ((const float *)x->data)[e]);
        }
        const_store(out->dtype, (void *)out->data, o, is_int(x->dtype) ? (double)ai : (double)af, ai);
    }
    *done = 1;
    return PP_OK;
}

pp_status fold_argmax(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    const pp_const_tensor *x = infer_const(c, n->inputs[0]);
    if (x->dtype != PP_DTYPE_F32 && !is_int(x->dtype)) return PP_OK;
    int64_t axis, last;
    int ax;
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "axis", 0, &axis, n->name, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "select_last_index", 0, &last, n->name, err));
    PP_CHECK(infer_axis(n, axis, x->shape.rank, &ax, err));
    int64_t len = x->shape.dims[ax], inner = 1;
    for (int d = ax + 1; d < x->shape.rank; d++) inner *= x->shape.dims[d];
    if (len == 0) return infer_fail(n, PP_ERR_SHAPE, err, "axis %d is empty: no maximum", ax);
    for (int64_t o = 0; o < pp_shape_numel(&out->shape); o++) {
        const int64_t b = (o / inner) * len * inner + o % inner;
        int64_t best = 0;
        for (int64_t i = 1; i < len; i++) {
            const int64_t e = b + i * inner, eb = b + best * inner;
            const int better = is_int(x->dtype) ? (last ? const_i64(x, e) >= const_i64(x, eb)
                                                        : const_i64(x, e) > const_i64(x, eb))
                                                : pp_ix_arg_better(((const float *)x->data)[e],
                                                                   ((const float *)x->data)[eb], (int)last);
            if (better) best = i;
        }
        ((int64_t *)out->data)[o] = best;
    }
    *done = 1;
    return PP_OK;
}
