/* cpu predicates (Not, IsNaN, IsInf: one input to bool, kernels/element_ops.h's predicate list)
 * and Clip, whose bounds are inputs (kernels/op_args_logic.c) and whose element functions are
 * element.h's. */
#include "cpu_math.h"
#include "element_ops.h"
#include "op_args_logic.h"

#include <string.h>

/* ---------------- predicates (kernels/element_ops.h) ---------------- */

#define PRED_LOOP(T, EXPR)                                                              \
    for (int64_t i = 0; i < n; i++) {                                                   \
        const float x = (float)((const T *)c->in[0].data)[i];                           \
        Y[i] = (EXPR) != 0;                                                             \
    }

PP_FWD(pp_cpu_predicate_forward)
{
    PP_CHECK(pp_cpu_want_inputs(c, 1, 1, err));
    if (c->out[0].dtype != PP_DTYPE_BOOL || pp_tensor_numel(&c->out[0]) != pp_tensor_numel(&c->in[0]))
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output is %s with %lld elements, expected bool with %lld",
                            pp_dtype_name(c->out[0].dtype), (long long)pp_tensor_numel(&c->out[0]),
                            (long long)pp_tensor_numel(&c->in[0]));
    pp_el_params p;
    PP_CHECK(pp_el_params_read(c->op, c->attrs, c->nattrs, c->node, &p, err));
    const int64_t n = pp_tensor_numel(&c->in[0]);
    uint8_t *Y = c->out[0].data;
    switch (c->op) {
#define PRED_CASE(ID, DT, EXPR)                                                         \
    case PP_OP_##ID:                                                                    \
        PP_CHECK(pp_cpu_want_dtype(c, 0, DT, 0, err));                                  \
        if ((DT) == PP_DTYPE_BOOL) PRED_LOOP(uint8_t, EXPR) else PRED_LOOP(float, EXPR) \
        break;
    PP_EL_PREDICATE_LIST(PRED_CASE)
#undef PRED_CASE
    default: return pp_args_fail(c, PP_ERR_INTERNAL, err, "no element function (kernels/element_ops.h)");
    }
    (void)p;
    return PP_OK;
}

/* ---------------- Clip(x, min?, max?) ---------------- */

static pp_status clip_prepare(const pp_kernel_ctx *c, float *lo, float *hi, pp_error *err)
{
    PP_CHECK(pp_cpu_want_inputs(c, 1, 3, err));
    return pp_args_clip(c, lo, hi, err);
}

PP_FWD(pp_cpu_clip_forward)
{
    float lo, hi;
    PP_CHECK(clip_prepare(c, &lo, &hi, err));
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, 0, err));
    if (pp_tensor_numel(&c->in[0]) != pp_tensor_numel(&c->out[0]))
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output has %lld elements, input %lld",
                            (long long)pp_tensor_numel(&c->out[0]), (long long)pp_tensor_numel(&c->in[0]));
    const float *X = c->in[0].data;
    float *Y = c->out[0].data;
    const int64_t n = pp_tensor_numel(&c->in[0]);
    for (int64_t i = 0; i < n; i++) Y[i] = pp_el_clip(X[i], lo, hi);
    return PP_OK;
}

/* dx += dy where min <= x <= max */
PP_BWD(pp_cpu_clip_backward)
{
    float *GX = grad_in[0].data;
    const float *GY = grad_out[0].data, *X = c->in[0].data;
    if (!GX || !GY) return PP_OK;
    float lo, hi;
    PP_CHECK(clip_prepare(c, &lo, &hi, err));
    const int64_t n = pp_tensor_numel(&grad_in[0]);
    for (int64_t i = 0; i < n; i++) GX[i] += GY[i] * pp_el_clip_grad(X[i], lo, hi);
    return PP_OK;
}
