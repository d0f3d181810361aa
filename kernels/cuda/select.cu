/* cuda comparisons (kernels/element_ops.h, broadcast to bool), Cast (float32, float64, bfloat16, float16, int64,
 * int32, bool, converting as the cpu kernel does), Where and Dropout (the counter-based
 * RNG of element.h, so the GPU draws the cpu's mask), as kernels/cpu/select.c. */
#include "cuda_internal.h"
#include "io.cuh"
#include <onnxpipe/element.h>
#include "ew_ops.cuh"
#include "nn_cuda.h"
#include "reduce.cuh"

/* ---------------- comparisons (kernels/element_ops.h) ---------------- */

template <typename T, typename Op> __global__ void k_compare(pp_cu_bcast b, const T *x, const T *y, uint8_t *z, Op op)
{
    CU_FOR(i, b.n) {
        int64_t off[PP_CU_MAX_IN];
        bc_offsets(b, i, off);
        z[i] = op(x[off[0]], y[off[1]]);
    }
}

template <typename Op> static pp_status compare(const pp_kernel_ctx *c, Op op, pp_error *err)
{
    if (c->nin != 2) return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "%d inputs, expected 2", c->nin);
    const pp_dtype dt = c->in[0].dtype;
    if (c->in[1].dtype != dt)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "inputs have dtypes %s and %s, expected the same",
                         pp_dtype_name(dt), pp_dtype_name(c->in[1].dtype));
    if (c->out[0].dtype != PP_DTYPE_BOOL)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "output dtype %s, expected bool", pp_dtype_name(c->out[0].dtype));
    pp_cu_bcast b;
    const pp_tensor *ins[2] = {&c->in[0], &c->in[1]};
    PP_CHECK(pp_cu_bcast_init(&b, &c->out[0], ins, 2, c->node, err));
    if (!b.n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(b.n);
    cudaStream_t s = cu_of(c->dev)->stream;
    const void *x = c->in[0].data, *y = c->in[1].data;
    uint8_t *z = (uint8_t *)c->out[0].data;
    switch (dt) {
    case PP_DTYPE_F32: k_compare<<<L.grid, L.block, 0, s>>>(b, (const float *)x, (const float *)y, z, op); break;
    case PP_DTYPE_I64: k_compare<<<L.grid, L.block, 0, s>>>(b, (const int64_t *)x, (const int64_t *)y, z, op); break;
    case PP_DTYPE_I32: k_compare<<<L.grid, L.block, 0, s>>>(b, (const int32_t *)x, (const int32_t *)y, z, op); break;
    case PP_DTYPE_BOOL: k_compare<<<L.grid, L.block, 0, s>>>(b, (const uint8_t *)x, (const uint8_t *)y, z, op); break;
    default:
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "dtype %s is not supported (float32, int64, int32, bool)",
                         pp_dtype_name(dt));
    }
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_FWD(pp_cu_compare_forward)
{
    switch (c->op) {
#define CMP_CASE(ID, PRED) case PP_OP_##ID: return compare(c, el_compare_##ID(), err);
    PP_EL_COMPARE_LIST(CMP_CASE)
#undef CMP_CASE
    default: return pp_args_fail(c, PP_ERR_INTERNAL, err, "no element function (kernels/element_ops.h)");
    }
}

/* ---------------- Cast ---------------- */

__global__ void k_cast(pp_dtype from, pp_dtype to, const void *x, void *y, int64_t n)
{
    CU_FOR(i, n) pp_el_cast(from, to, x, y, i);
}

PP_CU_FWD(pp_cu_cast_forward)
{
    if (c->nin != 1) return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "%d inputs, expected 1", c->nin);
    const pp_dtype from = c->in[0].dtype, to = c->out[0].dtype;
    int64_t to_attr;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "to", to, &to_attr, c->node, err));
    if (to_attr != (int64_t)to)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "attribute to=%lld but the output is %s", (long long)to_attr,
                         pp_dtype_name(to));
    if (!pp_el_cast_supported(from) || !pp_el_cast_supported(to))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err,
                         "%s -> %s is not supported (float32, float64, bfloat16, float16, int64, int32, bool)",
                         pp_dtype_name(from), pp_dtype_name(to));
    const int64_t n = pp_tensor_numel(&c->in[0]);
    if (!n) return PP_OK;
    cudaStream_t s = cu_of(c->dev)->stream;
    if (from == to) {
        CU_TRY(c, cudaMemcpyAsync(c->out[0].data, c->in[0].data, pp_tensor_nbytes(&c->in[0]), cudaMemcpyDeviceToDevice, s));
        return PP_OK;
    }
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_cast<<<L.grid, L.block, 0, s>>>(from, to, c->in[0].data, c->out[0].data, n);
    CU_LAUNCHED(c);
    return PP_OK;
}

__global__ void k_cast_grad(pp_dtype gt, const void *gy, cu_io gx, int64_t n)
{
    CU_FOR(i, n) cu_put(gx, i, (float)pp_el_cast_read(gt, gy, i), 1);
}

/* a float input: dx += dy converted back to its dtype */
PP_CU_BWD(pp_cu_cast_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    const pp_dtype gt = grad_out[0].dtype;
    if (!pp_dtype_is_float(gt) || !pp_el_cast_supported(gt))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "no gradient through a %s output", pp_dtype_name(gt));
    if (!cu_io_float(grad_in[0].dtype))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "no gradient into a %s input", pp_dtype_name(grad_in[0].dtype));
    const int64_t n = pp_tensor_numel(&grad_in[0]);
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_cast_grad<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(gt, grad_out[0].data, cu_io_of(grad_in[0]), n);
    CU_LAUNCHED(c);
    return PP_OK;
}

/* ---------------- Where ---------------- */

__global__ void k_where(pp_cu_bcast b, const uint8_t *cond, cu_io x, cu_io y, cu_io z)
{
    CU_FOR(i, b.n) {
        int64_t off[PP_CU_MAX_IN];
        bc_offsets(b, i, off);
        cu_st(z, i, cond[off[0]] ? cu_ld(x, off[1]) : cu_ld(y, off[2]));
    }
}

/* the same for X, Y and Z of one other dtype (an int64 or bool mask chain not folded at
 * load), elements of T's size copied */
template <typename T> __global__ void k_where_raw(pp_cu_bcast b, const uint8_t *cond, const T *x, const T *y, T *z)
{
    CU_FOR(i, b.n) {
        int64_t off[PP_CU_MAX_IN];
        bc_offsets(b, i, off);
        z[i] = cond[off[0]] ? x[off[1]] : y[off[2]];
    }
}

/* g = dy where cond selects input `which` (1: X, 2: Y), else 0 (g float32) */
__global__ void k_where_grad(pp_cu_bcast b, const uint8_t *cond, cu_io dy, float *g, int which)
{
    CU_FOR(i, b.n) {
        int64_t off[PP_CU_MAX_IN];
        bc_offsets(b, i, off);
        g[i] = (cond[off[0]] != 0) == (which == 1) ? cu_ld(dy, i) : 0.f;
    }
}

PP_CU_FWD(pp_cu_where_forward)
{
    pp_cu_bcast b;
    const pp_tensor *ins[3] = {&c->in[0], &c->in[1], &c->in[2]};
    const pp_dtype xt = c->in[1].dtype, zt = c->out[0].dtype;
    const int fl = cu_io_float(xt) && cu_io_float(c->in[2].dtype) && cu_io_float(zt);
    if (pp_dtype_size(c->in[0].dtype) != 1 || (!fl && (xt != zt || c->in[2].dtype != zt)))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "expected a bool condition and float X, Y, or X, Y and Z of "
                            "one dtype (got %s, %s into %s)", pp_dtype_name(xt), pp_dtype_name(c->in[2].dtype),
                            pp_dtype_name(zt));
    PP_CHECK(pp_cu_bcast_init(&b, &c->out[0], ins, 3, c->node, err));
    if (!b.n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(b.n);
    cudaStream_t s = cu_of(c->dev)->stream;
    const uint8_t *cond = (const uint8_t *)c->in[0].data;
    if (!fl)
        return pp_cu_by_size(c, zt, [&](auto t) {
            using T = decltype(t);
            k_where_raw<T><<<L.grid, L.block, 0, s>>>(b, cond, (const T *)c->in[1].data, (const T *)c->in[2].data,
                                                      (T *)c->out[0].data);
        }, err);
    k_where<<<L.grid, L.block, 0, s>>>(b, cond, cu_io_of(c->in[1]), cu_io_of(c->in[2]), cu_io_of(c->out[0]));
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_BWD(pp_cu_where_backward)
{
    if (!grad_out[0].data) return PP_OK;
    pp_cu_bcast b;
    const pp_tensor *ins[3] = {&c->in[0], &c->in[1], &c->in[2]};
    PP_CHECK(pp_cu_bcast_init(&b, &grad_out[0], ins, 3, c->node, err));
    pp_cu_launch L = pp_cu_launch_1d(b.n);
    for (int k = 1; k <= 2 && b.n; k++) {
        if (!grad_in[k].data) continue;
        float *ws;
        PP_CHECK(pp_cuda_workspace(c, (size_t)b.n * sizeof(float), (void **)&ws, err));
        k_where_grad<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(b, (const uint8_t *)c->in[0].data,
                                                                     cu_io_of(grad_out[0]), ws, k);
        CU_LAUNCHED(c);
        pp_tensor t = grad_out[0];
        t.data = ws;
        t.dtype = PP_DTYPE_F32;
        PP_CHECK(pp_cu_sum_into(c, &grad_in[k], &t, 1.f, err));
    }
    return PP_OK;
}

/* ---------------- Dropout ---------------- */

__global__ void k_dropout(cu_io x, cu_io y, uint8_t *mask, int64_t n, uint64_t key, uint64_t base, float ratio,
                          float scale)
{
    CU_FOR(i, n) {
        const int keep = pp_el_rng_uniform(key, base + (uint64_t)i) >= ratio;
        cu_st(y, i, keep ? cu_ld(x, i) * scale : 0.f);
        if (mask) mask[i] = (uint8_t)keep;
    }
}

__global__ void k_dropout_grad(cu_io dy, cu_io dx, int64_t n, uint64_t key, uint64_t base, float ratio, float scale)
{
    CU_FOR(i, n) if (pp_el_rng_uniform(key, base + (uint64_t)i) >= ratio) cu_put(dx, i, cu_ld(dy, i) * scale, 1);
}

/* ratio (attribute or constant input 1) and whether this call drops (constant input 2) */
static pp_status dropout_plan(const pp_kernel_ctx *c, float *ratio, int *drop, pp_error *err)
{
    PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "ratio", 0.5f, ratio, c->node, err));
    const void *h;
    if (c->nin > 1 && c->in[1].data) {
        PP_CHECK(pp_cu_host_input(c, 1, "ratio", &h, err));
        if (c->in[1].dtype == PP_DTYPE_F32) *ratio = *(const float *)h;
        else if (c->in[1].dtype == PP_DTYPE_F64) *ratio = (float)*(const double *)h;
        else return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "ratio has dtype %s, expected float", pp_dtype_name(c->in[1].dtype));
    }
    if (!(*ratio >= 0.f && *ratio <= 1.f)) return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "ratio %g is outside [0, 1]", (double)*ratio);
    int mode = 1;
    if (c->nin > 2 && c->in[2].data) {
        PP_CHECK(pp_cu_host_input(c, 2, "training_mode", &h, err));
        mode = *(const uint8_t *)h != 0;
    }
    *drop = c->training && mode && *ratio > 0.f;
    return PP_OK;
}

PP_CU_FWD(pp_cu_dropout_forward)
{
    float ratio = 0.f;
    int drop = 0;
    PP_CHECK(dropout_plan(c, &ratio, &drop, err));
    const int64_t n = pp_tensor_numel(&c->in[0]);
    uint8_t *mask = c->nout > 1 ? (uint8_t *)c->out[1].data : NULL;
    if (!cu_io_float(c->in[0].dtype) || !cu_io_float(c->out[0].dtype))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "data of dtype %s (float32, bfloat16 or float16)",
                            pp_dtype_name(c->in[0].dtype));
    if (!drop && c->in[0].dtype != c->out[0].dtype)
        return pp_kernel_convert(c->dev, c->out[0].data, c->out[0].dtype, c->in[0].data, c->in[0].dtype, n, err);
    if (!drop) {
        PP_CHECK(pp_device_copy(c->dev, c->out[0].data, c->in[0].data, pp_tensor_nbytes(&c->in[0]), err));
        return mask ? pp_device_memset(c->dev, mask, 1, (size_t)n, err) : PP_OK;
    }
    if (!n) return PP_OK;
    const uint64_t key = pp_el_rng_key(c->rng.seed, c->rng.step, c->rng.node),
                   base = pp_el_rng_base(c->rng.sample, c->rng.samples, n);
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_dropout<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(cu_io_of(c->in[0]), cu_io_of(c->out[0]), mask, n, key, base,
                                                              ratio, ratio < 1.f ? 1.f / (1.f - ratio) : 0.f);
    CU_LAUNCHED(c);
    return PP_OK;
}

/* recomputes the mask from c->rng, which must be the forward call's */
PP_CU_BWD(pp_cu_dropout_backward)
{
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    float ratio = 0.f;
    int drop = 0;
    PP_CHECK(dropout_plan(c, &ratio, &drop, err));
    const int64_t n = pp_tensor_numel(&grad_out[0]);
    if (!drop) return pp_cu_sum_into(c, &grad_in[0], &grad_out[0], 1.f, err);
    if (!n) return PP_OK;
    const uint64_t key = pp_el_rng_key(c->rng.seed, c->rng.step, c->rng.node),
                   base = pp_el_rng_base(c->rng.sample, c->rng.samples, n);
    pp_cu_launch L = pp_cu_launch_1d(n);
    if (!cu_io_float(grad_out[0].dtype) || !cu_io_float(grad_in[0].dtype))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "gradients of dtype %s (float32, bfloat16 or float16)",
                            pp_dtype_name(grad_out[0].dtype));
    k_dropout_grad<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(cu_io_of(grad_out[0]), cu_io_of(grad_in[0]), n, key,
                                                                   base, ratio, ratio < 1.f ? 1.f / (1.f - ratio) : 0.f);
    CU_LAUNCHED(c);
    return PP_OK;
}
