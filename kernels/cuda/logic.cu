/* cuda predicates (Not, IsNaN, IsInf: kernels/element_ops.h's predicate list), the integer
 * paths of the `unary` and `binary` kernels, variadic Max / Min, and Clip, as kernels/cpu/logic.c: the same element functions, Clip's
 * bounds from host_in. */
#include "logic.cuh"

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

/* ---------------- unary ops on integers (kernels/element_ops.h) ---------------- */

template <typename T, typename Op> __global__ void k_unary_int(const T *x, T *y, int64_t n, Op op)
{
    CU_FOR(i, n) y[i] = (T)op((int64_t)x[i]);
}

template <typename Op> static pp_status unary_int(const pp_kernel_ctx *c, Op op, pp_error *err)
{
    const pp_dtype dt = c->in[0].dtype;
    const int64_t n = pp_tensor_numel(&c->in[0]);
    if (c->out[0].dtype != dt || pp_tensor_numel(&c->out[0]) != n)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output is %s with %lld elements, expected %s with %lld",
                            pp_dtype_name(c->out[0].dtype), (long long)pp_tensor_numel(&c->out[0]),
                            pp_dtype_name(dt), (long long)n);
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    cudaStream_t s = cu_of(c->dev)->stream;
    if (dt == PP_DTYPE_I64)
        k_unary_int<<<L.grid, L.block, 0, s>>>((const int64_t *)c->in[0].data, (int64_t *)c->out[0].data, n, op);
    else
        k_unary_int<<<L.grid, L.block, 0, s>>>((const int32_t *)c->in[0].data, (int32_t *)c->out[0].data, n, op);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_FWD(pp_cu_unary_int_forward)
{
    switch (c->op) {
#define INT_CASE(ID, EXPR) case PP_OP_##ID: return unary_int(c, el_int_unary_##ID(), err);
    PP_EL_INT_UNARY_LIST(INT_CASE)
#undef INT_CASE
    default: return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "integer inputs are not supported (float32 only)");
    }
}

/* ---------------- binary ops on integers (kernels/element_ops.h) ---------------- */

template <typename T, typename Op> __global__ void k_binary_int(pp_cu_bcast b, const T *x, const T *y, T *z, Op op)
{
    CU_FOR(i, b.n) {
        int64_t off[PP_CU_MAX_IN];
        bc_offsets(b, i, off);
        z[i] = (T)op((int64_t)x[off[0]], (int64_t)y[off[1]]);
    }
}

template <typename Op> static pp_status binary_int(const pp_kernel_ctx *c, Op op, pp_error *err)
{
    const pp_dtype dt = c->in[0].dtype;
    if (c->nin != 2 || c->in[1].dtype != dt || c->out[0].dtype != dt)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "%d inputs of %s and %s into %s: expected 2 of one integer "
                            "dtype", c->nin, pp_dtype_name(dt), pp_dtype_name(c->in[c->nin > 1].dtype),
                            pp_dtype_name(c->out[0].dtype));
    pp_cu_bcast b;
    const pp_tensor *ins[2] = {&c->in[0], &c->in[1]};
    PP_CHECK(pp_cu_bcast_init(&b, &c->out[0], ins, 2, c->node, err));
    if (!b.n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(b.n);
    cudaStream_t s = cu_of(c->dev)->stream;
    if (dt == PP_DTYPE_I64)
        k_binary_int<<<L.grid, L.block, 0, s>>>(b, (const int64_t *)c->in[0].data, (const int64_t *)c->in[1].data,
                                                (int64_t *)c->out[0].data, op);
    else
        k_binary_int<<<L.grid, L.block, 0, s>>>(b, (const int32_t *)c->in[0].data, (const int32_t *)c->in[1].data,
                                                (int32_t *)c->out[0].data, op);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_FWD(pp_cu_binary_int_forward)
{
    pp_el_params p;
    PP_CHECK(pp_el_params_read(c->op, c->attrs, c->nattrs, c->node, &p, err));
    switch (c->op) {
#define INT_CASE(ID, EXPR) case PP_OP_##ID: return binary_int(c, el_int_##ID{p}, err);
    PP_EL_INT_LIST(INT_CASE)
#undef INT_CASE
    default: return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "integer inputs are not supported (float32 only)");
    }
}

/* ---------------- Max / Min of 1 or more than 2 inputs ---------------- */

/* As kernels/cpu/logic.c: y = max(x0, x0) broadcast, then max(y, x_k) in place with the binary
 * kernel; the gradient of an element is split equally among the inputs equal to y there. */
PP_CU_FWD(pp_cu_minmax_forward)
{
    if (c->nin < 1) return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "no inputs, expected 1 or more");
    pp_tensor in2[2] = {c->in[0], c->in[0]};
    pp_kernel_ctx two = *c;
    two.in = in2;
    two.nin = 2;
    PP_CHECK(pp_cu_binary_forward(&two, err));
    in2[0] = c->out[0];
    for (int k = 1; k < c->nin; k++) {
        in2[1] = c->in[k];
        PP_CHECK(pp_cu_binary_forward(&two, err));
    }
    return PP_OK;
}

/* count[i] += x[i's element] == y[i] */
__global__ void k_count_equal(pp_cu_bcast b, const float *x, const float *y, float *count)
{
    CU_FOR(i, b.n) {
        int64_t off[PP_CU_MAX_IN];
        bc_offsets(b, i, off);
        count[i] += x[off[0]] == y[i];
    }
}

/* g[i] (+)= dy[i] / count[i] where x's element equals y[i], over y's index space */
__global__ void k_minmax_grad(pp_cu_bcast b, const float *x, const float *y, const float *count, const float *dy,
                              float *g, int accumulate)
{
    CU_FOR(i, b.n) {
        int64_t off[PP_CU_MAX_IN];
        bc_offsets(b, i, off);
        const float v = x[off[0]] == y[i] ? dy[i] / count[i] : 0.f;
        g[i] = accumulate ? g[i] + v : v;
    }
}

/* Recomputes y into the workspace (backward keeps no output), counts the inputs equal to it,
 * and adds dy / count to each: straight into an input of y's shape, else through the workspace
 * and a sum over its broadcast dims. */
PP_CU_BWD(pp_cu_minmax_backward)
{
    if (!grad_out[0].data) return PP_OK;
    const int64_t n = pp_tensor_numel(&grad_out[0]);
    if (!n) return PP_OK;
    void *ws;
    PP_CHECK(pp_cuda_workspace(c, 3 * (size_t)n * sizeof(float), &ws, err));
    float *y = (float *)ws, *count = y + n, *tmp = count + n;
    pp_tensor yt = grad_out[0];
    yt.dtype = PP_DTYPE_F32;
    yt.data = y;
    pp_kernel_ctx fwd = *c;
    fwd.out = &yt;
    fwd.nout = 1;
    PP_CHECK(pp_cu_minmax_forward(&fwd, err));
    cudaStream_t s = cu_of(c->dev)->stream;
    CU_TRY(c, cudaMemsetAsync(count, 0, (size_t)n * sizeof(float), s));
    pp_cu_launch L = pp_cu_launch_1d(n);
    for (int k = 0; k < c->nin; k++) {
        pp_cu_bcast b;
        const pp_tensor *one[1] = {&c->in[k]};
        PP_CHECK(pp_cu_bcast_init(&b, &yt, one, 1, c->node, err));
        k_count_equal<<<L.grid, L.block, 0, s>>>(b, (const float *)c->in[k].data, y, count);
        CU_LAUNCHED(c);
    }
    for (int k = 0; k < c->nin; k++) {
        if (!grad_in[k].data) continue;
        pp_cu_bcast b;
        const pp_tensor *one[1] = {&c->in[k]};
        PP_CHECK(pp_cu_bcast_init(&b, &yt, one, 1, c->node, err));
        const int direct = pp_tensor_numel(&grad_in[k]) == n;
        k_minmax_grad<<<L.grid, L.block, 0, s>>>(b, (const float *)c->in[k].data, y, count,
                                                 (const float *)grad_out[0].data,
                                                 direct ? (float *)grad_in[k].data : tmp, direct);
        CU_LAUNCHED(c);
        if (!direct) {
            pp_tensor t = yt;
            t.data = tmp;
            PP_CHECK(pp_cu_sum_into(c, &grad_in[k], &t, 1.f, err));
        }
    }
    return PP_OK;
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

/* the integer form (shape chains that do not fold) */
struct el_iclip {
    int64_t lo, hi;
    __device__ int64_t operator()(int64_t x) const { return pp_el_iclip(x, lo, hi); }
};

/* float32, and int64 / int32 */
PP_CU_FWD(pp_cu_clip_forward)
{
    const pp_dtype dt = c->in[0].dtype;
    if (dt == PP_DTYPE_I64 || dt == PP_DTYPE_I32) {
        el_iclip op;
        PP_CHECK(pp_args_clip_int(c, &op.lo, &op.hi, err));
        return unary_int(c, op, err);
    }
    float lo, hi;
    PP_CHECK(pp_args_clip(c, &lo, &hi, err));
    const int64_t n = pp_tensor_numel(&c->in[0]);
    if (dt != PP_DTYPE_F32)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input 0 has dtype %s, expected float32, int64 or int32",
                            pp_dtype_name(dt));
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
