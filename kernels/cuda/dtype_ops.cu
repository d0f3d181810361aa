/* cuda ops on non-float dtypes: Equal (broadcast comparison to bool), Cast (float32,
 * float64, bfloat16, int64, int32, bool, converting as the cpu kernel does) and the
 * shape-valued ops Shape, ConstantOfShape and Range, which graph loading folds away; when
 * one is left, the cpu kernel computes it from the host copies of its constant inputs and
 * the result is uploaded. */
#include "cuda_internal.h"
#include "element.h"
#include "ew_ops.cuh"
#include "nn_cuda.h"
#include "reduce.cuh"

#include <stdlib.h>

#define FOLD_MAX_IN 3     /* Range's start, limit, delta */

/* ---------------- Equal ---------------- */

template <typename T> __global__ void k_equal(pp_cu_bcast b, const T *x, const T *y, uint8_t *z)
{
    CU_FOR(i, b.n) {
        int64_t off[PP_CU_MAX_IN];
        bc_offsets(b, i, off);
        z[i] = x[off[0]] == y[off[1]];
    }
}

PP_CU_FWD(pp_cu_equal_forward)
{
    if (c->nin != 2) return pp_cu_bad(c, err, PP_ERR_INVALID_ARG, "%d inputs, expected 2", c->nin);
    const pp_dtype dt = c->in[0].dtype;
    if (c->in[1].dtype != dt)
        return pp_cu_bad(c, err, PP_ERR_UNSUPPORTED, "inputs have dtypes %s and %s, expected the same",
                         pp_dtype_name(dt), pp_dtype_name(c->in[1].dtype));
    if (c->out[0].dtype != PP_DTYPE_BOOL)
        return pp_cu_bad(c, err, PP_ERR_UNSUPPORTED, "output dtype %s, expected bool", pp_dtype_name(c->out[0].dtype));
    pp_cu_bcast b;
    const pp_tensor *ins[2] = {&c->in[0], &c->in[1]};
    PP_CHECK(pp_cu_bcast_init(&b, &c->out[0], ins, 2, c->node, err));
    if (!b.n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(b.n);
    cudaStream_t s = cu_of(c->dev)->stream;
    const void *x = c->in[0].data, *y = c->in[1].data;
    uint8_t *z = (uint8_t *)c->out[0].data;
    switch (dt) {
    case PP_DTYPE_F32: k_equal<<<L.grid, L.block, 0, s>>>(b, (const float *)x, (const float *)y, z); break;
    case PP_DTYPE_I64: k_equal<<<L.grid, L.block, 0, s>>>(b, (const int64_t *)x, (const int64_t *)y, z); break;
    case PP_DTYPE_I32: k_equal<<<L.grid, L.block, 0, s>>>(b, (const int32_t *)x, (const int32_t *)y, z); break;
    case PP_DTYPE_BOOL: k_equal<<<L.grid, L.block, 0, s>>>(b, (const uint8_t *)x, (const uint8_t *)y, z); break;
    default:
        return pp_cu_bad(c, err, PP_ERR_UNSUPPORTED, "dtype %s is not supported (float32, int64, int32, bool)",
                         pp_dtype_name(dt));
    }
    CU_LAUNCHED(c);
    return PP_OK;
}

/* ---------------- Cast ---------------- */

__global__ void k_cast(pp_dtype from, pp_dtype to, const void *x, void *y, int64_t n)
{
    CU_FOR(i, n) pp_el_cast(from, to, x, y, i);
}

PP_CU_FWD(pp_cu_cast_forward)
{
    if (c->nin != 1) return pp_cu_bad(c, err, PP_ERR_INVALID_ARG, "%d inputs, expected 1", c->nin);
    const pp_dtype from = c->in[0].dtype, to = c->out[0].dtype;
    int64_t to_attr;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "to", to, &to_attr, c->node, err));
    if (to_attr != (int64_t)to)
        return pp_cu_bad(c, err, PP_ERR_INVALID_ARG, "attribute to=%lld but the output is %s", (long long)to_attr,
                         pp_dtype_name(to));
    if (!pp_el_cast_supported(from) || !pp_el_cast_supported(to))
        return pp_cu_bad(c, err, PP_ERR_UNSUPPORTED,
                         "%s -> %s is not supported (float32, float64, bfloat16, int64, int32, bool)",
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

__global__ void k_cast_grad(pp_dtype gt, const void *gy, float *gx, int64_t n)
{
    CU_FOR(i, n) gx[i] += (float)pp_el_cast_read(gt, gy, i);
}

/* float32 input: dx += dy converted back to float32 */
PP_CU_BWD(pp_cu_cast_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    const pp_dtype gt = grad_out[0].dtype;
    if (!pp_dtype_is_float(gt) || !pp_el_cast_supported(gt))
        return pp_cu_bad(c, err, PP_ERR_UNSUPPORTED, "no gradient through a %s output", pp_dtype_name(gt));
    const int64_t n = pp_tensor_numel(&grad_in[0]);
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_cast_grad<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(gt, grad_out[0].data, (float *)grad_in[0].data, n);
    CU_LAUNCHED(c);
    return PP_OK;
}

/* ---------------- Shape, ConstantOfShape, Range ---------------- */

/* Runs the cpu kernel on host memory and uploads its one output. values: 1 when the cpu
 * kernel reads the inputs' values (then they must have host copies), 0 when only shapes. */
static pp_status host_fold(const pp_kernel_ctx *c, int values, pp_error *err)
{
    const pp_kernel *k = pp_kernel_find(c->op, PP_DEVICE_CPU, PP_DTYPE_F32);
    if (!k || c->nout != 1 || c->nin > FOLD_MAX_IN)
        return pp_cu_bad(c, err, PP_ERR_INTERNAL, "no cpu kernel to fold this node with");
    pp_tensor in[FOLD_MAX_IN], out = c->out[0];
    for (int i = 0; i < c->nin; i++) {
        in[i] = c->in[i];
        if (values && in[i].data) PP_CHECK(pp_cu_host_input(c, i, "a shape-valued input", (const void **)&in[i].data, err));
    }
    const size_t nb = pp_tensor_nbytes(&out);
    void *host = malloc(nb ? nb : 1);
    if (!host) return pp_cu_bad(c, err, PP_ERR_NOMEM, "out of host memory");
    out.data = host;
    pp_kernel_ctx h = *c;
    h.in = in;
    h.out = &out;
    h.host_in = NULL;
    h.aux = NULL;
    pp_status st = k->forward(&h, err);
    if (st == PP_OK && nb) st = pp_device_copy_from_host(c->dev, c->out[0].data, host, nb, err);
    free(host);
    return st;
}

PP_CU_FWD(pp_cu_shape_forward) { return host_fold(c, 0, err); }
PP_CU_FWD(pp_cu_fold_forward) { return host_fold(c, 1, err); }
