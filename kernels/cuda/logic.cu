/* cuda predicates (Not, IsNaN, IsInf: kernels/element_ops.h's predicate list) and Clip, as
 * kernels/cpu/logic.c: the same element functions, Clip's bounds from host_in. */
#include "cuda_internal.h"
#include "ew_ops.cuh"
#include "nn_cuda.h"
#include "op_args_logic.h"
#include "reduce.cuh"   /* CU_FOR */

/* ---------------- predicates (kernels/element_ops.h) ---------------- */

template <typename T, typename Op> __global__ void k_predicate(const T *x, uint8_t *y, int64_t n, Op op)
{
    CU_FOR(i, n) y[i] = op((float)x[i]);
}

template <typename Op> static pp_status predicate(const pp_kernel_ctx *c, pp_dtype want, Op op, pp_error *err)
{
    if (c->nin != 1) return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "%d inputs, expected 1", c->nin);
    const int64_t n = pp_tensor_numel(&c->in[0]);
    if (c->in[0].dtype != want)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input has dtype %s, expected %s",
                            pp_dtype_name(c->in[0].dtype), pp_dtype_name(want));
    if (c->out[0].dtype != PP_DTYPE_BOOL || pp_tensor_numel(&c->out[0]) != n)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output is %s with %lld elements, expected bool with %lld",
                            pp_dtype_name(c->out[0].dtype), (long long)pp_tensor_numel(&c->out[0]), (long long)n);
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    cudaStream_t s = cu_of(c->dev)->stream;
    uint8_t *y = (uint8_t *)c->out[0].data;
    if (want == PP_DTYPE_BOOL) k_predicate<<<L.grid, L.block, 0, s>>>((const uint8_t *)c->in[0].data, y, n, op);
    else k_predicate<<<L.grid, L.block, 0, s>>>((const float *)c->in[0].data, y, n, op);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_FWD(pp_cu_predicate_forward)
{
    pp_el_params p;
    PP_CHECK(pp_el_params_read(c->op, c->attrs, c->nattrs, c->node, &p, err));
    switch (c->op) {
#define PRED_CASE(ID, DT, EXPR) case PP_OP_##ID: return predicate(c, DT, el_predicate_##ID{p}, err);
    PP_EL_PREDICATE_LIST(PRED_CASE)
#undef PRED_CASE
    default: return pp_args_fail(c, PP_ERR_INTERNAL, err, "no element function (kernels/element_ops.h)");
    }
}

/* ---------------- Clip(x, min?, max?) ---------------- */

__global__ void k_clip(const float *x, float *y, int64_t n, float lo, float hi)
{
    CU_FOR(i, n) y[i] = pp_el_clip(x[i], lo, hi);
}

__global__ void k_clip_grad(const float *x, const float *dy, float *dx, int64_t n, float lo, float hi)
{
    CU_FOR(i, n) dx[i] += dy[i] * pp_el_clip_grad(x[i], lo, hi);
}

PP_CU_FWD(pp_cu_clip_forward)
{
    float lo, hi;
    PP_CHECK(pp_args_clip(c, &lo, &hi, err));
    const int64_t n = pp_tensor_numel(&c->in[0]);
    if (c->in[0].dtype != PP_DTYPE_F32)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input 0 has dtype %s, expected float32",
                            pp_dtype_name(c->in[0].dtype));
    if (pp_tensor_numel(&c->out[0]) != n)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output has %lld elements, input %lld",
                            (long long)pp_tensor_numel(&c->out[0]), (long long)n);
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_clip<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>((const float *)c->in[0].data, (float *)c->out[0].data, n,
                                                           lo, hi);
    CU_LAUNCHED(c);
    return PP_OK;
}

/* dx += dy where min <= x <= max */
PP_CU_BWD(pp_cu_clip_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    float lo, hi;
    PP_CHECK(pp_args_clip(c, &lo, &hi, err));
    const int64_t n = pp_tensor_numel(&grad_in[0]);
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_clip_grad<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>((const float *)c->in[0].data,
                                                                (const float *)grad_out[0].data,
                                                                (float *)grad_in[0].data, n, lo, hi);
    CU_LAUNCHED(c);
    return PP_OK;
}
