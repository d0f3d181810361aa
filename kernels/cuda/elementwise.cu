/* cuda elementwise ops: activations, arithmetic with numpy broadcasting, and the
 * broadcast-gradient reduction, on float32, bfloat16 and float16 tensors (io.cuh: fp32 in
 * registers, one rounding per store, 128-bit accesses where launch_io.c allows). The
 * per-element math is element.h's PP_HD functions, the index plans are launch.c's
 * (pp_cu_bcast, pp_cu_reduce). */
#include "cuda_internal.h"
#include "ew_ops.cuh"
#include "io.cuh"
#include "lowp.h"
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

/* small reductions: one thread per output; dst (+)= scale * the sum, one rounding */
__global__ void k_reduce_thread(pp_cu_reduce r, cu_io src, cu_io dst, float scale)
{
    CU_FOR(o, r.nout) {
        const int64_t base = red_offset(r.krank, r.kdims, r.kst, o);
        float s = 0.f;
        for (int64_t j = 0; j < r.nred; j++) s += cu_ld(src, base + red_offset(r.rrank, r.rdims, r.rst, j));
        cu_put(dst, o, scale * s, 1);
    }
}

/* large reductions: one block per output */
__global__ void k_reduce_block(pp_cu_reduce r, cu_io src, cu_io dst, float scale)
{
    for (int64_t o = blockIdx.x; o < r.nout; o += gridDim.x) {
        const int64_t base = red_offset(r.krank, r.kdims, r.kst, o);
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < r.nred; j += blockDim.x)
            s += cu_ld(src, base + red_offset(r.rrank, r.rdims, r.rst, j));
        s = cu_block_reduce(s, cu_sum(), 0.f);
        if (threadIdx.x == 0) cu_put(dst, o, scale * s, 1);
    }
}

__global__ void k_axpy(cu_io y, cu_io x, int64_t n, float a)
{
    CU_FOR(i, n) cu_put(y, i, a * cu_ld(x, i), 1);
}

/* dst += scale * src summed by r (r NULL: src has dst's n elements); float32, bfloat16 or
 * float16 on either side, summed in fp32 */
static pp_status sum_run(const pp_kernel_ctx *c, const pp_cu_reduce *r, cu_io src, cu_io dst, int64_t n, float scale,
                         pp_error *err)
{
    cudaStream_t s = cu_of(c->dev)->stream;
    if (!cu_io_float(src.t) || !cu_io_float(dst.t))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "cannot sum a %s tensor into %s", pp_dtype_name(src.t),
                            pp_dtype_name(dst.t));
    if (r ? !r->nout : !n) return PP_OK;   /* an empty dst: a grid of 0 blocks is a launch error */
    if (!r) {
        pp_cu_launch L = pp_cu_launch_1d(n);
        k_axpy<<<L.grid, L.block, 0, s>>>(dst, src, n, scale);
    } else if (r->nred >= 256) {
        unsigned grid = r->nout < PP_CU_MAX_GRID ? (unsigned)r->nout : PP_CU_MAX_GRID;
        k_reduce_block<<<grid, PP_CU_BLOCK, 0, s>>>(*r, src, dst, scale);
    } else {
        pp_cu_launch L = pp_cu_launch_1d(r->nout);
        k_reduce_thread<<<L.grid, L.block, 0, s>>>(*r, src, dst, scale);
    }
    CU_LAUNCHED(c);
    return PP_OK;
}

pp_status pp_cu_reduce_launch(const pp_kernel_ctx *c, const pp_cu_reduce *r, const void *src, pp_dtype st, void *dst,
                              pp_dtype dt, float scale, pp_error *err)
{
    return sum_run(c, r, cu_io{(void *)src, st}, cu_io{dst, dt}, 0, scale, err);
}

pp_status pp_cu_sum_into(const pp_kernel_ctx *c, const pp_tensor *dst, const pp_tensor *src, float scale,
                         pp_error *err)
{
    const int64_t n = pp_tensor_numel(src);
    if (pp_tensor_numel(dst) == n) return sum_run(c, NULL, cu_io_of(*src), cu_io_of(*dst), n, scale, err);
    pp_cu_reduce r;
    PP_CHECK(pp_cu_reduce_to_shape(&r, dst, src, c->node, err));
    return sum_run(c, &r, cu_io_of(*src), cu_io_of(*dst), 0, scale, err);
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

__global__ void k_bcast_axpy(pp_cu_bcast b, cu_io x, cu_io y, float a)
{
    CU_FOR(i, b.n) {
        int64_t off[PP_CU_MAX_IN];
        bc_offsets(b, i, off);
        cu_put(y, i, a * cu_ld(x, off[0]), 1);
    }
}

pp_status pp_cu_broadcast_add(const pp_kernel_ctx *c, const pp_tensor *dst, const pp_tensor *src, float scale,
                              pp_error *err)
{
    pp_cu_bcast b;
    const pp_tensor *ins[1] = {src};
    PP_CHECK(pp_cu_bcast_init(&b, dst, ins, 1, c->node, err));
    if (!cu_io_float(src->dtype) || !cu_io_float(dst->dtype))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "cannot add a %s tensor into %s", pp_dtype_name(src->dtype),
                            pp_dtype_name(dst->dtype));
    if (!b.n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(b.n);
    k_bcast_axpy<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(b, cu_io_of(*src), cu_io_of(*dst), scale);
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

/* y = op(x), V elements per access (launch_io.c: 1, or PP_CU_VEC where aligned) */
template <typename Op, int V> __global__ void k_unary(cu_io x, cu_io y, int64_t n, Op op)
{
    CU_FOR(g, n / V) {
        float f[V];
        cu_ldv<V>(x, g * V, f);
        for (int k = 0; k < V; k++) f[k] = op.fwd(f[k]);
        cu_stv<V>(y, g * V, f);
    }
}
/* dx (+)= dy * op.grad(x, y), x and y the saved input and output where Op::reads says the
 * gradient reads them (the registry saves only those; the others are absent) */
template <typename Op, int V>
__global__ void k_unary_grad(cu_io x, cu_io y, cu_io dy, cu_io dx, int64_t n, Op op, int acc)
{
    CU_FOR(g, n / V) {
        float xv[V] = {0.f}, yv[V] = {0.f}, d[V];
        if (Op::reads & PP_EL_X) cu_ldv<V>(x, g * V, xv);
        if (Op::reads & PP_EL_Y) cu_ldv<V>(y, g * V, yv);
        cu_ldv<V>(dy, g * V, d);
        for (int k = 0; k < V; k++) d[k] = d[k] * op.grad(xv[k], yv[k]);
        cu_putv<V>(dx, g * V, d, acc);
    }
}

template <typename Op> static pp_status unary_fwd(const pp_kernel_ctx *c, Op op, pp_error *err)
{
    const int64_t n = pp_tensor_numel(&c->out[0]);
    if (!cu_io_float(c->in[0].dtype) || !cu_io_float(c->out[0].dtype))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "dtypes %s -> %s, expected float32, bfloat16 or float16",
                            pp_dtype_name(c->in[0].dtype), pp_dtype_name(c->out[0].dtype));
    if (pp_tensor_numel(&c->in[0]) != n)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output has %lld elements, input %lld", (long long)n,
                         (long long)pp_tensor_numel(&c->in[0]));
    if (!n) return PP_OK;
    const void *ptrs[2] = {c->in[0].data, c->out[0].data};
    const int vec = pp_cu_vec_of(n, ptrs, 2);
    pp_cu_launch L = pp_cu_launch_vec(n, vec);
    cudaStream_t s = cu_of(c->dev)->stream;
    if (vec == PP_CU_VEC) k_unary<Op, PP_CU_VEC><<<L.grid, L.block, 0, s>>>(cu_io_of(c->in[0]), cu_io_of(c->out[0]), n, op);
    else k_unary<Op, 1><<<L.grid, L.block, 0, s>>>(cu_io_of(c->in[0]), cu_io_of(c->out[0]), n, op);
    CU_LAUNCHED(c);
    return PP_OK;
}

template <typename Op>
static pp_status unary_bwd(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, Op op, pp_error *err)
{
    if (!gout[0].data || !gin[0].data) return PP_OK;
    const int64_t n = pp_tensor_numel(&gin[0]);
    const cu_io x = cu_io_of(c->in[0]), y = cu_io_of(c->out[0]), dy = cu_io_of(gout[0]), dx = cu_io_of(gin[0]);
    if (((Op::reads & PP_EL_X) && !x.p) || ((Op::reads & PP_EL_Y) && !y.p))
        return pp_args_fail(c, PP_ERR_INTERNAL, err, "backward needs a saved tensor that was not kept");
    if (!cu_io_float(dy.t) || !cu_io_float(dx.t))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "gradients of dtype %s -> %s", pp_dtype_name(dy.t),
                            pp_dtype_name(dx.t));
    if (!n) return PP_OK;
    const void *ptrs[4] = {Op::reads & PP_EL_X ? x.p : NULL, Op::reads & PP_EL_Y ? y.p : NULL, dy.p, dx.p};
    const int vec = pp_cu_vec_of(n, ptrs, 4);
    pp_cu_launch L = pp_cu_launch_vec(n, vec);
    cudaStream_t s = cu_of(c->dev)->stream;
    if (vec == PP_CU_VEC) k_unary_grad<Op, PP_CU_VEC><<<L.grid, L.block, 0, s>>>(x, y, dy, dx, n, op, 1);
    else k_unary_grad<Op, 1><<<L.grid, L.block, 0, s>>>(x, y, dy, dx, n, op, 1);
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

/* z = op(x, y) over the broadcast plan b; V > 1 only when every tensor has z's shape (b.same) */
template <typename Op, int V> __global__ void k_binary(pp_cu_bcast b, cu_io x, cu_io y, cu_io z, Op op)
{
    CU_FOR(g, b.n / V) {
        float u[V], w[V];
        if constexpr (V == 1) {
            int64_t off[PP_CU_MAX_IN];
            bc_offsets(b, g, off);
            u[0] = cu_ld(x, off[0]);
            w[0] = cu_ld(y, off[1]);
        } else {
            cu_ldv<V>(x, g * V, u);
            cu_ldv<V>(y, g * V, w);
        }
        for (int k = 0; k < V; k++) u[k] = op.fwd(u[k], w[k]);
        cu_stv<V>(z, g * V, u);
    }
}

/* gr (+)= d out / d input `which`, times dy, over out's index space */
template <typename Op, int V>
__global__ void k_binary_grad(pp_cu_bcast b, cu_io x, cu_io y, cu_io dy, cu_io gr, int which, int accumulate, Op op)
{
    CU_FOR(g, b.n / V) {
        float u[V] = {0.f}, w[V] = {0.f}, d[V];
        if constexpr (V == 1) {
            int64_t off[PP_CU_MAX_IN];
            bc_offsets(b, g, off);
            if (x.p) u[0] = cu_ld(x, off[0]);
            if (y.p) w[0] = cu_ld(y, off[1]);
        } else {
            if (x.p) cu_ldv<V>(x, g * V, u);
            if (y.p) cu_ldv<V>(y, g * V, w);
        }
        cu_ldv<V>(dy, g * V, d);
        for (int k = 0; k < V; k++) d[k] = d[k] * (which ? op.db(u[k], w[k]) : op.da(u[k], w[k]));
        cu_putv<V>(gr, g * V, d, accumulate);
    }
}

template <typename Op> static pp_status binary_fwd(const pp_kernel_ctx *c, Op op, pp_error *err)
{
    for (int k = 0; k < 3; k++) {
        const pp_dtype t = k < 2 ? c->in[k].dtype : c->out[0].dtype;
        if (!cu_io_float(t))
            return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "%s %d has dtype %s, expected float32, bfloat16 or float16",
                                k < 2 ? "input" : "output", k < 2 ? k : 0, pp_dtype_name(t));
    }
    pp_cu_bcast b;
    const pp_tensor *ins[2] = {&c->in[0], &c->in[1]};
    PP_CHECK(pp_cu_bcast_init(&b, &c->out[0], ins, 2, c->node, err));
    if (!b.n) return PP_OK;
    const void *ptrs[3] = {c->in[0].data, c->in[1].data, c->out[0].data};
    const int vec = b.same ? pp_cu_vec_of(b.n, ptrs, 3) : 1;
    pp_cu_launch L = pp_cu_launch_vec(b.n, vec);
    const cu_io x = cu_io_of(c->in[0]), y = cu_io_of(c->in[1]), z = cu_io_of(c->out[0]);
    cudaStream_t s = cu_of(c->dev)->stream;
    if (vec == PP_CU_VEC) k_binary<Op, PP_CU_VEC><<<L.grid, L.block, 0, s>>>(b, x, y, z, op);
    else k_binary<Op, 1><<<L.grid, L.block, 0, s>>>(b, x, y, z, op);
    CU_LAUNCHED(c);
    return PP_OK;
}

/* Each requested input gradient: straight into grad_in when the input has out's shape,
 * else through a float32 workspace and a reduction over its broadcast dims. */
template <typename Op>
static pp_status binary_bwd(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, Op op, pp_error *err)
{
    if (!gout[0].data) return PP_OK;
    pp_cu_bcast b;
    const pp_tensor *ins[2] = {&c->in[0], &c->in[1]};
    PP_CHECK(pp_cu_bcast_init(&b, &gout[0], ins, 2, c->node, err));
    cudaStream_t s = cu_of(c->dev)->stream;
    const cu_io x = cu_io_of(c->in[0]), y = cu_io_of(c->in[1]), dy = cu_io_of(gout[0]);
    for (int k = 0; k < 2; k++) {
        if (!gin[k].data || !b.n) continue;
        const int direct = pp_tensor_numel(&gin[k]) == b.n;
        cu_io g = cu_io_of(gin[k]);
        if (!direct) {
            g.t = PP_DTYPE_F32;
            PP_CHECK(pp_cuda_workspace(c, (size_t)b.n * sizeof(float), &g.p, err));
        }
        const void *ptrs[4] = {x.p, y.p, dy.p, g.p};
        const int vec = b.same ? pp_cu_vec_of(b.n, ptrs, 4) : 1;
        pp_cu_launch L = pp_cu_launch_vec(b.n, vec);
        if (vec == PP_CU_VEC) k_binary_grad<Op, PP_CU_VEC><<<L.grid, L.block, 0, s>>>(b, x, y, dy, g, k, direct, op);
        else k_binary_grad<Op, 1><<<L.grid, L.block, 0, s>>>(b, x, y, dy, g, k, direct, op);
        CU_LAUNCHED(c);
        if (!direct) {
            pp_tensor t = gout[0];
            t.data = g.p;
            t.dtype = PP_DTYPE_F32;
            PP_CHECK(pp_cu_sum_into(c, &gin[k], &t, 1.f, err));
        }
    }
    return PP_OK;
}

/* a variadic Max / Min (logic.cu) computes on float32 only: 16-bit ones go through the adapter */
static int lowp_variadic(const pp_kernel_ctx *c)
{
    for (int k = 0; k < c->nin; k++)
        if (c->in[k].dtype == PP_DTYPE_BF16 || c->in[k].dtype == PP_DTYPE_F16) return 1;
    return c->nout > 0 && (c->out[0].dtype == PP_DTYPE_BF16 || c->out[0].dtype == PP_DTYPE_F16);
}

PP_CU_FWD(pp_cu_binary_forward)
{
    if (c->nin != 2 && (c->op == PP_OP_MAX || c->op == PP_OP_MIN))
        return lowp_variadic(c) ? pp_lowp_forward(c, err) : pp_cu_minmax_forward(c, err);
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
        return lowp_variadic(c) ? pp_lowp_backward(c, grad_out, grad_in, err)
                                : pp_cu_minmax_backward(c, grad_out, grad_in, err);
    switch (c->op) {
#define GRAD_CASE(ID, FWD, DA, DB) case PP_OP_##ID: return binary_bwd(c, grad_out, grad_in, el_binary_##ID(), err);
    PP_EL_BINARY_LIST(GRAD_CASE)
#undef GRAD_CASE
    default: return pp_args_fail(c, PP_ERR_INTERNAL, err, "no element function (kernels/element_ops.h)");
    }
}
