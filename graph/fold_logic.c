/* Constant evaluation of the comparisons, logic and more elementwise ops that sit in shape and
 * mask chains: Not / IsNaN / IsInf, variadic Max / Min (integers in int64, floats in float32
 * with the kernels' element functions) and Clip. The rest fold in graph/fold_math.c. */
#include "infer.h"

#include <onnxpipe/element_ops.h>

/* Not, IsNaN, IsInf: element_ops.h's predicate of each element as a float, as the kernels do. */
pp_status fold_predicate(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    const pp_const_tensor *x = infer_const(c, n->inputs[0]);
    pp_el_params p;
    PP_CHECK(pp_el_params_read(n->op, n->attrs, n->nattrs, n->name, &p, err));
    const int64_t cnt = pp_shape_numel(&out->shape);
    for (int64_t i = 0; i < cnt; i++) {
        const float x_i = (float)const_f64(x, i);
        int r;
        switch (n->op) {
#define PRED_CASE(ID, DT, EXPR)                                                                                       \
    case PP_OP_##ID: {                                                                                                \
        const float x = x_i;                                                                                          \
        r = (EXPR) != 0;                                                                                              \
        break;                                                                                                        \
    }
            PP_EL_PREDICATE_LIST(PRED_CASE)
#undef PRED_CASE
        default: return infer_fail(n, PP_ERR_INTERNAL, err, "no predicate in kernels/element_ops.h to fold");
        }
        const_store(out->dtype, (void *)out->data, i, r, r);
    }
    *done = 1;
    return PP_OK;
}

/* Max / Min of 1..N inputs with numpy broadcasting, in the inputs' dtype. */
pp_status fold_minmax(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    (void)err;
    enum { MAX_FOLD_IN = 16 };
    if (n->ninputs > MAX_FOLD_IN) return PP_OK;   /* left to the kernels, which report it */
    const pp_const_tensor *t[MAX_FOLD_IN];
    infer_iter it[MAX_FOLD_IN];
    for (int k = 0; k < n->ninputs; k++) {
        t[k] = infer_const(c, n->inputs[k]);
        const pp_shape *sh = &t[k]->shape;
        iter_init(&it[k], &out->shape, &sh, 1);
    }
    const int fl = pp_dtype_is_float(out->dtype), is_max = n->op == PP_OP_MAX;
    const int64_t cnt = pp_shape_numel(&out->shape);
    for (int64_t i = 0; i < cnt; i++) {
        float f = (float)const_f64(t[0], it[0].off[0]);
        int64_t v = const_i64(t[0], it[0].off[0]);
        for (int k = 1; k < n->ninputs; k++) {
            if (fl) {
                const float b = (float)const_f64(t[k], it[k].off[0]);
                f = is_max ? pp_el_max(f, b) : pp_el_min(f, b);
            } else {
                const int64_t b = const_i64(t[k], it[k].off[0]);
                v = is_max ? (b > v ? b : v) : (b < v ? b : v);
            }
        }
        const_store(out->dtype, (void *)out->data, i, fl ? f : (double)v, v);
        for (int k = 0; k < n->ninputs; k++) iter_next(&it[k]);
    }
    *done = 1;
    return PP_OK;
}

/* Clip(x, min?, max?): floats with element.h's pp_el_clip, integers in int64 in its order. */
pp_status fold_clip(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    (void)err;
    const pp_const_tensor *x = infer_const(c, n->inputs[0]);
    const pp_const_tensor *lo = infer_has_input(n, 1) ? infer_const(c, n->inputs[1]) : NULL;
    const pp_const_tensor *hi = infer_has_input(n, 2) ? infer_const(c, n->inputs[2]) : NULL;
    const int64_t cnt = pp_shape_numel(&out->shape);
    if (pp_dtype_is_float(x->dtype)) {
        const float l = lo ? (float)const_f64(lo, 0) : -INFINITY, h = hi ? (float)const_f64(hi, 0) : INFINITY;
        for (int64_t i = 0; i < cnt; i++)
            const_store(out->dtype, (void *)out->data, i, pp_el_clip((float)const_f64(x, i), l, h), 0);
    } else {
        for (int64_t i = 0; i < cnt; i++) {
            int64_t v = const_i64(x, i);
            if (lo && v < const_i64(lo, 0)) v = const_i64(lo, 0);
            if (hi && const_i64(hi, 0) < v) v = const_i64(hi, 0);
            const_store(out->dtype, (void *)out->data, i, (double)v, v);
        }
    }
    *done = 1;
    return PP_OK;
}
