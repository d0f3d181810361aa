/* cuda GatherElements, GatherND, ScatterElements and ScatterND, as kernels/cpu/index.c with
 * the same index math (kernels/index_ops.h). One map serves the four: element k of the
 * indices-shaped side (the gathers' output, the scatters' updates) pairs with data element
 * dst(k). Indices live on the device, so an out-of-range one cannot fail the call: a float
 * gather reads NaN there (as Gather, so that the loss shows it), other types 0, and a scatter
 * skips it (the cpu kernels report it). */
#include "cuda_internal.h"
#include "nn_cuda.h"
#include "op_args_index.h"
#include "reduce.cuh"

#include <string.h>

struct ix_dst {
    int nd, ax, i64;
    pp_ix data, idx;
    pp_ix_nd p;
    int64_t n;          /* elements of the indices-shaped side */
};

__device__ inline int64_t index_val(const void *ind, int i64, int64_t j)
{
    return i64 ? ((const int64_t *)ind)[j] : ((const int32_t *)ind)[j];
}

/* the data element paired with element k, or -1 (an index out of range) */
__device__ inline int64_t dst_of(const ix_dst &d, const void *ind, int64_t k)
{
    if (!d.nd) {
        const int64_t v = pp_ix_wrap(index_val(ind, d.i64, k), d.data.dims[d.ax]);
        return v < 0 ? -1 : pp_ix_elements_dst(&d.data, &d.idx, d.ax, v, k);
    }
    int64_t tup[PP_MAX_RANK];
    const int64_t t = k / d.p.slice;
    for (int j = 0; j < d.p.q; j++) tup[j] = index_val(ind, d.i64, t * d.p.q + j);
    const int64_t base = pp_ix_nd_base(&d.p, t, tup);
    return base < 0 ? -1 : base + k % d.p.slice;
}

static pp_status dst_plan(const pp_kernel_ctx *c, const pp_tensor *data, const pp_tensor *idx, ix_dst *d, pp_error *err)
{
    memset(d, 0, sizeof *d);
    d->nd = c->op == PP_OP_GATHER_ND || c->op == PP_OP_SCATTER_ND;
    if (d->nd) PP_CHECK(pp_args_nd(c, data, idx, &d->p, err));
    else PP_CHECK(pp_args_elements(c, data, idx, &d->ax, err));
    d->i64 = idx->dtype == PP_DTYPE_I64;
    d->data = pp_ix_of(data->rank, data->dims);
    d->idx = pp_ix_of(idx->rank, idx->dims);
    d->n = d->nd ? pp_tensor_numel(idx) / d->p.q * d->p.slice : pp_tensor_numel(idx);
    return PP_OK;
}

template <typename T> __device__ inline T out_of_range() { return T(0); }
template <> __device__ inline float out_of_range<float>() { return NAN; }

/* gather: y[k] = x[dst(k)] (out_of_range() there); scatter: y[dst(k)] = / += u[k], mask[dst(k)] = 1 */
template <typename T> __global__ void k_gather(ix_dst d, const void *ind, const T *x, T *y)
{
    CU_FOR(k, d.n) {
        const int64_t e = dst_of(d, ind, k);
        y[k] = e >= 0 ? x[e] : out_of_range<T>();
    }
}
template <typename T>
__global__ void k_scatter(ix_dst d, const void *ind, const T *u, T *y, unsigned char *mask, int add)
{
    CU_FOR(k, d.n) {
        const int64_t e = dst_of(d, ind, k);
        if (e < 0) continue;
        if (!add) y[e] = u[k];
        else if constexpr (sizeof(T) == 8) atomicAdd((unsigned long long *)(y + e), (unsigned long long)u[k]);
        else atomicAdd((float *)(y + e), (float)u[k]);
        if (mask) mask[e] = 1;
    }
}
/* gather backward: dx[dst(k)] += dy[k]; scatter backward: du[k] += dy[dst(k)] */
__global__ void k_gather_back(ix_dst d, const void *ind, const float *dy, float *dx)
{
    CU_FOR(k, d.n) {
        const int64_t e = dst_of(d, ind, k);
        if (e >= 0) atomicAdd(dx + e, dy[k]);
    }
}
__global__ void k_scatter_back_upd(ix_dst d, const void *ind, const float *dy, float *du)
{
    CU_FOR(k, d.n) {
        const int64_t e = dst_of(d, ind, k);
        if (e >= 0) du[k] += dy[e];
    }
}
__global__ void k_scatter_back_data(const float *dy, float *dx, const unsigned char *mask, int64_t n)
{
    CU_FOR(i, n) if (!mask || !mask[i]) dx[i] += dy[i];
}

/* ---------------- gathers ---------------- */

static pp_status gather_forward(const pp_kernel_ctx *c, pp_error *err)
{
    const pp_tensor *x = &c->in[0], *idx = &c->in[1];
    ix_dst d;
    PP_CHECK(dst_plan(c, x, idx, &d, err));
    if (pp_tensor_numel(&c->out[0]) != d.n)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output has %lld elements, expected %lld",
                            (long long)pp_tensor_numel(&c->out[0]), (long long)d.n);
    if (!d.n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(d.n);
    cudaStream_t st = cu_of(c->dev)->stream;
    return pp_cu_by_size(c, x->dtype, [&](auto z) {
        using T = decltype(z);
        k_gather<T><<<L.grid, L.block, 0, st>>>(d, idx->data, (const T *)x->data, (T *)c->out[0].data);
    }, err);
}

static pp_status gather_backward(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, pp_error *err)
{
    if (!gin[0].data || !gout[0].data) return PP_OK;
    ix_dst d;
    PP_CHECK(dst_plan(c, &gin[0], &c->in[1], &d, err));
    if (!d.n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(d.n);
    k_gather_back<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(d, c->in[1].data, (const float *)gout[0].data,
                                                                 (float *)gin[0].data);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_FWD(pp_cu_gather_elements_forward) { return gather_forward(c, err); }
PP_CU_BWD(pp_cu_gather_elements_backward) { return gather_backward(c, grad_out, grad_in, err); }
PP_CU_FWD(pp_cu_gather_nd_forward) { return gather_forward(c, err); }
PP_CU_BWD(pp_cu_gather_nd_backward) { return gather_backward(c, grad_out, grad_in, err); }

/* ---------------- scatters ---------------- */

/* aux: with reduction none, one byte per data element, 1 where the forward overwrote it */
PP_CU_AUX(pp_cu_scatter_aux)
{
    const char *r = "none";
    pp_error err;
    if (pp_attr_string(c->attrs, c->nattrs, "reduction", "none", &r, c->node, &err) != PP_OK) return 0;
    return strcmp(r, "none") ? 0 : (size_t)pp_tensor_numel(&c->in[0]);
}

static pp_status scatter_forward(const pp_kernel_ctx *c, pp_error *err)
{
    const pp_tensor *x = &c->in[0], *idx = &c->in[1], *u = &c->in[2], *y = &c->out[0];
    ix_dst d;
    int add;
    PP_CHECK(pp_args_scatter_add(c, &add, err));
    PP_CHECK(dst_plan(c, x, idx, &d, err));
    if (pp_tensor_numel(u) != d.n)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "updates have %lld elements, the indices address %lld",
                            (long long)pp_tensor_numel(u), (long long)d.n);
    if (add && x->dtype != PP_DTYPE_F32 && x->dtype != PP_DTYPE_I64)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "reduction add on dtype %s (float32 and int64 are)",
                            pp_dtype_name(x->dtype));
    unsigned char *mask = add ? NULL : (unsigned char *)c->aux;
    PP_CHECK(pp_device_copy(c->dev, y->data, x->data, pp_tensor_nbytes(y), err));
    if (mask) PP_CHECK(pp_device_memset(c->dev, mask, 0, (size_t)pp_tensor_numel(x), err));
    if (!d.n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(d.n);
    cudaStream_t st = cu_of(c->dev)->stream;
    return pp_cu_by_size(c, x->dtype, [&](auto z) {
        using T = decltype(z);
        k_scatter<T><<<L.grid, L.block, 0, st>>>(d, idx->data, (const T *)u->data, (T *)y->data, mask, add);
    }, err);
}

static pp_status scatter_backward(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, pp_error *err)
{
    if (!gout[0].data) return PP_OK;
    ix_dst d;
    int add;
    PP_CHECK(pp_args_scatter_add(c, &add, err));
    PP_CHECK(dst_plan(c, &gout[0], &c->in[1], &d, err));
    const unsigned char *mask = add ? NULL : (const unsigned char *)c->aux;
    if (!add && !mask && gin[0].data)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "backward needs the forward's aux memory (reduction none)");
    cudaStream_t st = cu_of(c->dev)->stream;
    const int64_t n = pp_tensor_numel(&gout[0]);
    if (gin[0].data && n) {
        pp_cu_launch L = pp_cu_launch_1d(n);
        k_scatter_back_data<<<L.grid, L.block, 0, st>>>((const float *)gout[0].data, (float *)gin[0].data, mask, n);
        CU_LAUNCHED(c);
    }
    if (gin[2].data && d.n) {
        pp_cu_launch L = pp_cu_launch_1d(d.n);
        k_scatter_back_upd<<<L.grid, L.block, 0, st>>>(d, c->in[1].data, (const float *)gout[0].data,
                                                       (float *)gin[2].data);
        CU_LAUNCHED(c);
    }
    return PP_OK;
}

PP_CU_FWD(pp_cu_scatter_nd_forward) { return scatter_forward(c, err); }
PP_CU_BWD(pp_cu_scatter_nd_backward) { return scatter_backward(c, grad_out, grad_in, err); }
PP_CU_FWD(pp_cu_scatter_elements_forward) { return scatter_forward(c, err); }
PP_CU_BWD(pp_cu_scatter_elements_backward) { return scatter_backward(c, grad_out, grad_in, err); }
