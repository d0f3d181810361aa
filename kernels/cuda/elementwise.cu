/* cuda elementwise ops: activations, arithmetic with numpy broadcasting, and the
 * broadcast-gradient reduction. The per-element math is element.h's PP_HD functions, the
 * index plans are launch.c's (pp_cu_bcast, pp_cu_reduce). */
#include "cuda_internal.h"
#include "ew_ops.cuh"
#include "logic.cuh"   /* the integer paths, variadic Max / Min */
#include "reduce.cuh"

#include <string.h>
#include <onnxpipe/backend/kernels_backend.h>

/* ---------------- broadcast index walk and reductions ---------------- */

__device__ inline int64_t red_offset(int rank, const int64_t *dims, const int64_t *st, int64_t i)
{
    int64_t off = 0;
    for (int d = rank - 1; d >= 0; d--) {
        int64_t q = i / dims[d];
        off += (i - q * dims[d]) * st[d];
        i = q;
    }
    return off;
}

/* element i of a float32, bfloat16 or float16 buffer, widened exactly (element.h) */
template <pp_dtype T> __device__ inline float widen(const void *p, int64_t i)
{
    if constexpr (T == PP_DTYPE_F32) return ((const float *)p)[i];
    else if constexpr (T == PP_DTYPE_BF16) return pp_el_f32_from_bf16(((const uint16_t *)p)[i]);
    else return pp_el_f32_from_f16(((const uint16_t *)p)[i]);
}

/* small reductions: one thread per output */
template <pp_dtype T> __global__ void k_reduce_thread(pp_cu_reduce r, const void *src, float *dst, float scale)
{
    CU_FOR(o, r.nout) {
        const int64_t base = red_offset(r.krank, r.kdims, r.kst, o);
        float s = 0.f;
        for (int64_t j = 0; j < r.nred; j++) s += widen<T>(src, base + red_offset(r.rrank, r.rdims, r.rst, j));
        dst[o] += scale * s;
    }
}

/* large reductions: one block per output */
template <pp_dtype T> __global__ void k_reduce_block(pp_cu_reduce r, const void *src, float *dst, float scale)
{
    for (int64_t o = blockIdx.x; o < r.nout; o += gridDim.x) {
        const int64_t base = red_offset(r.krank, r.kdims, r.kst, o);
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < r.nred; j += blockDim.x)
            s += widen<T>(src, base + red_offset(r.rrank, r.rdims, r.rst, j));
        s = cu_block_reduce(s, cu_sum(), 0.f);
        if (threadIdx.x == 0) dst[o] += scale * s;
    }
}

template <pp_dtype T> __global__ void k_axpy(float *y, const void *x, int64_t n, float a)
{
    CU_FOR(i, n) y[i] += a * widen<T>(x, i);
}

/* dst += scale * src summed by r (r NULL: src has dst's elements) */
template <pp_dtype T>
static void sum_launch(cudaStream_t s, const pp_cu_reduce *r, const void *src, float *dst, int64_t n, float scale)
{
    if (!r) {
        pp_cu_launch L = pp_cu_launch_1d(n);
        k_axpy<T><<<L.grid, L.block, 0, s>>>(dst, src, n, scale);
    } else if (r->nred >= 256) {
        unsigned grid = r->nout < PP_CU_MAX_GRID ? (unsigned)r->nout : PP_CU_MAX_GRID;
        k_reduce_block<T><<<grid, PP_CU_BLOCK, 0, s>>>(*r, src, dst, scale);
    } else {
        pp_cu_launch L = pp_cu_launch_1d(r->nout);
        k_reduce_thread<T><<<L.grid, L.block, 0, s>>>(*r, src, dst, scale);
    }
}

/* float32 dst from a float32, bfloat16 or float16 src (a 16-bit gradient into fp32) */
static pp_status sum_run(const pp_kernel_ctx *c, const pp_cu_reduce *r, const void *src, pp_dtype st, float *dst,
                         int64_t n, float scale, pp_error *err)
{
    cudaStream_t s = cu_of(c->dev)->stream;
    if (r ? !r->nout : !n) return PP_OK;   /* an empty dst: a grid of 0 blocks is a launch error */
    switch (st) {
    case PP_DTYPE_F32: sum_launch<PP_DTYPE_F32>(s, r, src, dst, n, scale); break;
    case PP_DTYPE_BF16: sum_launch<PP_DTYPE_BF16>(s, r, src, dst, n, scale); break;
    case PP_DTYPE_F16: sum_launch<PP_DTYPE_F16>(s, r, src, dst, n, scale); break;
    default: return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "cannot sum a %s tensor", pp_dtype_name(st));
    }
    CU_LAUNCHED(c);
    return PP_OK;
}

pp_status pp_cu_reduce_launch(const pp_kernel_ctx *c, const pp_cu_reduce *r, const void *src, pp_dtype st,
                              float *dst, float scale, pp_error *err)
{
    return sum_run(c, r, src, st, dst, 0, scale, err);
}

pp_status pp_cu_sum_into(const pp_kernel_ctx *c, const pp_tensor *dst, const pp_tensor *src, float scale,
                         pp_error *err)
{
    if (dst->dtype != PP_DTYPE_F32)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "a gradient sum into %s (float32 only)",
                            pp_dtype_name(dst->dtype));
    const int64_t n = pp_tensor_numel(src);
    if (pp_tensor_numel(dst) == n) return sum_run(c, NULL, src->data, src->dtype, (float *)dst->data, n, scale, err);
    pp_cu_reduce r;
    PP_CHECK(pp_cu_reduce_to_shape(&r, dst, src, c->node, err));
    return sum_run(c, &r, src->data, src->dtype, (float *)dst->data, 0, scale, err);
}

template <typename T> __global__ void k_bcast_copy(pp_cu_bcast b, const T *x, T *y)
{
    CU_FOR(i, b.n) {
        int64_t off[PP_CU_MAX_IN];
        bc_offsets(b, i, off);
        y[i] = x[off[0]];
    }
}

/* a broadcast copy that changes the dtype (a bias rounded into a 16-bit output): Cast's function */
__global__ void k_bcast_cast(pp_cu_bcast b, pp_dtype from, const void *x, int64_t xsize, pp_dtype to, void *y,
                             int64_t ysize)
{
    CU_FOR(i, b.n) {
        int64_t off[PP_CU_MAX_IN];
        bc_offsets(b, i, off);
        pp_el_cast(from, to, (const char *)x + off[0] * xsize, (char *)y + i * ysize, 0);
    }
}

template <typename T> __global__ void k_bcast_axpy(pp_cu_bcast b, const float *x, float *y, float a)
{
    CU_FOR(i, b.n) {
        int64_t off[PP_CU_MAX_IN];
        bc_offsets(b, i, off);
        y[i] += a * x[off[0]];
    }
}

pp_status pp_cu_broadcast_add(const pp_kernel_ctx *c, const pp_tensor *dst, const pp_tensor *src, float scale,
                              pp_error *err)
{
    pp_cu_bcast b;
    const pp_tensor *ins[1] = {src};
    PP_CHECK(pp_cu_bcast_init(&b, dst, ins, 1, c->node, err));
    if (!b.n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(b.n);
    k_bcast_axpy<float><<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(b, (const float *)src->data, (float *)dst->data,
                                                                        scale);
    CU_LAUNCHED(c);
    return PP_OK;
}

pp_status pp_cu_broadcast_copy(const pp_kernel_ctx *c, const pp_tensor *out, const pp_tensor *in, pp_error *err)
{
    pp_cu_bcast b;
    const pp_tensor *ins[1] = {in};
    PP_CHECK(pp_cu_bcast_init(&b, out, ins, 1, c->node, err));
    pp_cu_launch L = pp_cu_launch_1d(b.n);
    cudaStream_t s = cu_of(c->dev)->stream;
    if (in->dtype != out->dtype) {
        if (!pp_dtype_is_float(in->dtype) || !pp_dtype_is_float(out->dtype))
            return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "cannot broadcast %s into %s", pp_dtype_name(in->dtype),
                                pp_dtype_name(out->dtype));
        k_bcast_cast<<<L.grid, L.block, 0, s>>>(b, in->dtype, in->data, (int64_t)pp_dtype_size(in->dtype), out->dtype,
                                                 out->data, (int64_t)pp_dtype_size(out->dtype));
        CU_LAUNCHED(c);
        return PP_OK;
    }
    switch (pp_dtype_size(out->dtype)) {
    case 1: k_bcast_copy<uint8_t><<<L.grid, L.block, 0, s>>>(b, (const uint8_t *)in->data, (uint8_t *)out->data); break;
    case 2: k_bcast_copy<uint16_t><<<L.grid, L.block, 0, s>>>(b, (const uint16_t *)in->data, (uint16_t *)out->data); break;
    case 4: k_bcast_copy<float><<<L.grid, L.block, 0, s>>>(b, (const float *)in->data, (float *)out->data); break;
    case 8: k_bcast_copy<int64_t><<<L.grid, L.block, 0, s>>>(b, (const int64_t *)in->data, (int64_t *)out->data); break;
    default:
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "dtype %s cannot be broadcast here", pp_dtype_name(out->dtype));
    }
    CU_LAUNCHED(c);
    return PP_OK;
}

/* ---------------- unary ops (kernels/element_ops.h) ---------------- */

template <typename Op> __global__ void k_unary(const float *x, float *y, int64_t n, Op op)
{
    CU_FOR(i, n) y[i] = op.fwd(x[i]);
}
/* dx += dy * op.grad(x, y), x and y the saved input and output where Op::reads says the
 * gradient reads them (the registry saves only those; the others are NULL) */
template <typename Op> __global__ void k_unary_grad(const float *x, const float *y, const float *dy, float *dx, int64_t n, Op op)
{
    CU_FOR(i, n) dx[i] += dy[i] * op.grad(Op::reads & PP_EL_X ? x[i] : 0.f, Op::reads & PP_EL_Y ? y[i] : 0.f);
}

template <typename Op> static pp_status unary_fwd(const pp_kernel_ctx *c, Op op, pp_error *err)
{
    const int64_t n = pp_tensor_numel(&c->out[0]);
    if (c->in[0].dtype != PP_DTYPE_F32)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input has dtype %s, expected float32", pp_dtype_name(c->in[0].dtype));
    if (pp_tensor_numel(&c->in[0]) != n)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output has %lld elements, input %lld", (long long)n,
                         (long long)pp_tensor_numel(&c->in[0]));
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_unary<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>((const float *)c->in[0].data, (float *)c->out[0].data, n, op);
    CU_LAUNCHED(c);
    return PP_OK;
}

template <typename Op>
static pp_status unary_bwd(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, Op op, pp_error *err)
{
    if (!gout[0].data || !gin[0].data) return PP_OK;
    const int64_t n = pp_tensor_numel(&gin[0]);
    const float *x = (const float *)c->in[0].data, *y = (const float *)c->out[0].data;
    if (((Op::reads & PP_EL_X) && !x) || ((Op::reads & PP_EL_Y) && !y))
        return pp_args_fail(c, PP_ERR_INTERNAL, err, "backward needs a saved tensor that was not kept");
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_unary_grad<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(x, y, (const float *)gout[0].data, (float *)gin[0].data,
                                                                 n, op);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_FWD(pp_cu_unary_forward)
{
    if (c->nin == 1 && (c->in[0].dtype == PP_DTYPE_I64 || c->in[0].dtype == PP_DTYPE_I32))
        return pp_cu_unary_int_forward(c, err);
    pp_el_params p;
    PP_CHECK(pp_el_params_read(c->op, c->attrs, c->nattrs, c->node, &p, err));
    switch (c->op) {
#define FWD_CASE(ID, READS, FWD, GRAD) case PP_OP_##ID: return unary_fwd(c, el_unary_##ID{p}, err);
    PP_EL_UNARY_LIST(FWD_CASE)
#undef FWD_CASE
    default: return pp_args_fail(c, PP_ERR_INTERNAL, err, "no element function (kernels/element_ops.h)");
    }
}

PP_CU_BWD(pp_cu_unary_backward)
{
    pp_el_params p;
    PP_CHECK(pp_el_params_read(c->op, c->attrs, c->nattrs, c->node, &p, err));
    switch (c->op) {
#define GRAD_CASE(ID, READS, FWD, GRAD) case PP_OP_##ID: return unary_bwd(c, grad_out, grad_in, el_unary_##ID{p}, err);
    PP_EL_UNARY_LIST(GRAD_CASE)
#undef GRAD_CASE
    default: return pp_args_fail(c, PP_ERR_INTERNAL, err, "no element function (kernels/element_ops.h)");
    }
}

/* Identity copies any dtype, as the cpu kernel does; its gradient passes through */
PP_CU_FWD(pp_cu_identity_forward)
{
    if (c->in[0].dtype != c->out[0].dtype || pp_tensor_nbytes(&c->in[0]) != pp_tensor_nbytes(&c->out[0]))
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output dtype/size differs from the input");
    return pp_device_copy(c->dev, c->out[0].data, c->in[0].data, pp_tensor_nbytes(&c->in[0]), err);
}
PP_CU_BWD(pp_cu_identity_backward) { return pp_cu_unary_backward(c, grad_out, grad_in, err); }

/* ---------------- binary arithmetic with broadcasting ---------------- */

template <typename Op> __global__ void k_binary(pp_cu_bcast b, const float *x, const float *y, float *z, Op op)
{
    CU_FOR(i, b.n) {
        int64_t off[PP_CU_MAX_IN];
        bc_offsets(b, i, off);
        z[i] = op.fwd(x[off[0]], y[off[1]]);
    }
}

/* g[i] (+)= d out / d input `which` at i, times dy[i], over out's index space */
template <typename Op>
__global__ void k_binary_grad(pp_cu_bcast b, const float *x, const float *y, const float *dy, float *g, int which,
                              int accumulate, Op op)
{
    CU_FOR(i, b.n) {
        int64_t off[PP_CU_MAX_IN];
        bc_offsets(b, i, off);
        const float xv = x ? x[off[0]] : 0.f, yv = y ? y[off[1]] : 0.f;
        const float v = dy[i] * (which ? op.db(xv, yv) : op.da(xv, yv));
        g[i] = accumulate ? g[i] + v : v;
    }
}

template <typename Op> static pp_status binary_fwd(const pp_kernel_ctx *c, Op op, pp_error *err)
{
    for (int k = 0; k < 2; k++)
        if (c->in[k].dtype != PP_DTYPE_F32)
            return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input %d has dtype %s, expected float32", k,
                             pp_dtype_name(c->in[k].dtype));
    pp_cu_bcast b;
    const pp_tensor *ins[2] = {&c->in[0], &c->in[1]};
    PP_CHECK(pp_cu_bcast_init(&b, &c->out[0], ins, 2, c->node, err));
    if (!b.n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(b.n);
    k_binary<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(b, (const float *)c->in[0].data,
                                                             (const float *)c->in[1].data, (float *)c->out[0].data, op);
    CU_LAUNCHED(c);
    return PP_OK;
}

/* Each requested input gradient: straight into grad_in when the input has out's shape,
 * else through the workspace and a reduction over its broadcast dims. */
template <typename Op>
static pp_status binary_bwd(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, Op op, pp_error *err)
{
    if (!gout[0].data) return PP_OK;
    pp_cu_bcast b;
    const pp_tensor *ins[2] = {&c->in[0], &c->in[1]};
    PP_CHECK(pp_cu_bcast_init(&b, &gout[0], ins, 2, c->node, err));
    pp_cu_launch L = pp_cu_launch_1d(b.n);
    cudaStream_t s = cu_of(c->dev)->stream;
    for (int k = 0; k < 2; k++) {
        if (!gin[k].data || !b.n) continue;
        const int direct = pp_tensor_numel(&gin[k]) == b.n;
        void *ws = gin[k].data;
        if (!direct) PP_CHECK(pp_cuda_workspace(c, (size_t)b.n * sizeof(float), &ws, err));
        k_binary_grad<<<L.grid, L.block, 0, s>>>(b, (const float *)c->in[0].data, (const float *)c->in[1].data,
                                                 (const float *)gout[0].data, (float *)ws, k, direct, op);
        CU_LAUNCHED(c);
        if (!direct) {
            pp_tensor t = gout[0];
            t.data = ws;
            PP_CHECK(pp_cu_sum_into(c, &gin[k], &t, 1.f, err));
        }
    }
    return PP_OK;
}

PP_CU_FWD(pp_cu_binary_forward)
{
    if (c->nin != 2 && (c->op == PP_OP_MAX || c->op == PP_OP_MIN)) return pp_cu_minmax_forward(c, err);
    if (c->nin == 2 && (c->in[0].dtype == PP_DTYPE_I64 || c->in[0].dtype == PP_DTYPE_I32))
        return pp_cu_binary_int_forward(c, err);
    switch (c->op) {
#define FWD_CASE(ID, FWD, DA, DB) case PP_OP_##ID: return binary_fwd(c, el_binary_##ID(), err);
    PP_EL_BINARY_LIST(FWD_CASE)
#undef FWD_CASE
    default: return pp_args_fail(c, PP_ERR_INTERNAL, err, "no element function (kernels/element_ops.h)");
    }
}

PP_CU_BWD(pp_cu_binary_backward)
{
    if (c->nin != 2 && (c->op == PP_OP_MAX || c->op == PP_OP_MIN))
        return pp_cu_minmax_backward(c, grad_out, grad_in, err);
    switch (c->op) {
#define GRAD_CASE(ID, FWD, DA, DB) case PP_OP_##ID: return binary_bwd(c, grad_out, grad_in, el_binary_##ID(), err);
    PP_EL_BINARY_LIST(GRAD_CASE)
#undef GRAD_CASE
    default: return pp_args_fail(c, PP_ERR_INTERNAL, err, "no element function (kernels/element_ops.h)");
    }
}
