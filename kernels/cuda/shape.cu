/* cuda data-movement ops: Reshape/Flatten/Squeeze/Unsqueeze (a copy), Transpose, Slice,
 * Concat, Split (launch.c's strided plan, forward a copy, backward an accumulation),
 * Gather (backward by atomicAdd into a float32 table gradient: indices may repeat) and
 * Expand, on float32, bfloat16 and float16 alike (io.cuh: gradients added in fp32 and
 * rounded once). They share the strided
 * plan, so they stay in one file where cpu/ has shape_ops.c, transpose.c,
 * slice_concat.c, gather.c and expand.c. */
#include "cuda_internal.h"
#include <onnxpipe/element.h>
#include "ew_ops.cuh"
#include "io.cuh"
#include "lowp.h"
#include "nn_cuda.h"
#include "op_args.h"
#include "reduce.cuh"

#include <string.h>

/* element offsets of index i of plan s in src and dst */
__device__ inline void strided_at(const pp_cu_strided &s, int64_t i, int64_t *so, int64_t *d_o)
{
    *so = *d_o = 0;
    for (int d = s.rank - 1; d >= 0; d--) {
        int64_t q = i / s.dims[d], idx = i - q * s.dims[d];
        i = q;
        *so += idx * s.src_st[d];
        *d_o += idx * s.dst_st[d];
    }
}

/* dst = src, elements of T's size */
template <typename T> __global__ void k_strided(pp_cu_strided s, const T *src, T *dst)
{
    CU_FOR(i, s.n) {
        int64_t so, d_o;
        strided_at(s, i, &so, &d_o);
        dst[d_o] = src[so];
    }
}

/* dst (+)= src between float dtypes (a gradient added, a piece converted) */
__global__ void k_strided_io(pp_cu_strided s, cu_io src, cu_io dst, int accumulate)
{
    CU_FOR(i, s.n) {
        int64_t so, d_o;
        strided_at(s, i, &so, &d_o);
        cu_put(dst, d_o, cu_ld(src, so), accumulate);
    }
}

/* dst (+)= src over plan s: a copy of any dtype, or (accumulate, or two float dtypes) in fp32 */
static pp_status strided(const pp_kernel_ctx *c, const pp_cu_strided *s, const void *src, pp_dtype st, void *dst,
                         pp_dtype dt, int accumulate, pp_error *err)
{
    if (!s->n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(s->n);
    cudaStream_t cs = cu_of(c->dev)->stream;
    const size_t esize = pp_dtype_size(st);
    if (accumulate || st != dt) {
        if (!cu_io_float(st) || !cu_io_float(dt))
            return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "cannot %s %s into %s", accumulate ? "add" : "move",
                                pp_dtype_name(st), pp_dtype_name(dt));
        k_strided_io<<<L.grid, L.block, 0, cs>>>(*s, cu_io{(void *)src, st}, cu_io{dst, dt}, accumulate);
    } else if (esize == 4)
        k_strided<float><<<L.grid, L.block, 0, cs>>>(*s, (const float *)src, (float *)dst);
    else if (esize == 2)
        k_strided<uint16_t><<<L.grid, L.block, 0, cs>>>(*s, (const uint16_t *)src, (uint16_t *)dst);
    else if (esize == 8)
        k_strided<int64_t><<<L.grid, L.block, 0, cs>>>(*s, (const int64_t *)src, (int64_t *)dst);
    else if (esize == 1)
        k_strided<uint8_t><<<L.grid, L.block, 0, cs>>>(*s, (const uint8_t *)src, (uint8_t *)dst);
    else
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "elements of %zu bytes cannot be moved here", esize);
    CU_LAUNCHED(c);
    return PP_OK;
}

static void strides_of(const pp_tensor *t, int64_t *st)
{
    int64_t s = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= t->dims[d];
    }
}

/* ---------------- copies ---------------- */

PP_CU_FWD(pp_cu_copy_forward)
{
    if (pp_tensor_numel(&c->in[0]) != pp_tensor_numel(&c->out[0]))
        return pp_args_fail(c, PP_ERR_SHAPE, err, "input has %lld elements, output %lld",
                         (long long)pp_tensor_numel(&c->in[0]), (long long)pp_tensor_numel(&c->out[0]));
    if (c->in[0].dtype != c->out[0].dtype)
        return pp_kernel_convert(c->dev, c->out[0].data, c->out[0].dtype, c->in[0].data, c->in[0].dtype,
                                 pp_tensor_numel(&c->out[0]), err);
    return pp_device_copy(c->dev, c->out[0].data, c->in[0].data, pp_tensor_nbytes(&c->out[0]), err);
}

PP_CU_BWD(pp_cu_copy_backward)
{
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    pp_tensor g = grad_out[0];
    g.rank = grad_in[0].rank;
    memcpy(g.dims, grad_in[0].dims, sizeof g.dims);
    return pp_cu_sum_into(c, &grad_in[0], &g, 1.f, err);
}

/* ---------------- Transpose ---------------- */

PP_CU_FWD(pp_cu_transpose_forward)
{
    int64_t perm[PP_MAX_RANK];
    PP_CHECK(pp_args_perm(c, c->in[0].rank, perm, err));
    pp_cu_strided s;
    pp_cu_strided_transpose(&s, &c->in[0], perm);
    return strided(c, &s, c->in[0].data, c->in[0].dtype, c->out[0].data, c->out[0].dtype, 0, err);
}

/* dx += dy transposed back by the inverse permutation */
PP_CU_BWD(pp_cu_transpose_backward)
{
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    int64_t perm[PP_MAX_RANK], inv[PP_MAX_RANK];
    PP_CHECK(pp_args_perm(c, grad_out[0].rank, perm, err));
    for (int d = 0; d < grad_out[0].rank; d++) inv[perm[d]] = d;
    pp_cu_strided s;
    pp_cu_strided_transpose(&s, &grad_out[0], inv);
    return strided(c, &s, grad_out[0].data, grad_out[0].dtype, grad_in[0].data, grad_in[0].dtype, 1, err);
}

/* ---------------- Slice ---------------- */

/* out[i] = x[base + i . src_st]: the strided plan of the slice kernels/op_args.c reads. */
static pp_status slice_plan(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, pp_cu_strided *s,
                            int64_t *base, pp_error *err)
{
    int64_t xst[PP_MAX_RANK], yst[PP_MAX_RANK], sst[PP_MAX_RANK], first[PP_MAX_RANK], step[PP_MAX_RANK],
        count[PP_MAX_RANK];
    PP_CHECK(pp_args_slice(c, x, y, first, step, count, err));
    strides_of(x, xst);
    strides_of(y, yst);
    *base = 0;
    for (int d = 0; d < x->rank; d++) {
        if (count[d] > 0) *base += first[d] * xst[d];
        sst[d] = xst[d] * step[d];
    }
    pp_cu_strided_init(s, y->rank, y->dims, yst, sst);
    return PP_OK;
}

PP_CU_FWD(pp_cu_slice_forward)
{
    pp_cu_strided s;
    int64_t base;
    PP_CHECK(slice_plan(c, &c->in[0], &c->out[0], &s, &base, err));
    const size_t es = pp_dtype_size(c->in[0].dtype);
    return strided(c, &s, (const char *)c->in[0].data + base * es, c->in[0].dtype, c->out[0].data, c->out[0].dtype, 0,
                   err);
}

/* dx[base + i . src_st] += dy[i]: the same plan with the roles swapped */
PP_CU_BWD(pp_cu_slice_backward)
{
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    pp_cu_strided s;
    int64_t base;
    PP_CHECK(slice_plan(c, &grad_in[0], &grad_out[0], &s, &base, err));
    pp_cu_strided r = s;
    memcpy(r.dst_st, s.src_st, sizeof r.dst_st);
    memcpy(r.src_st, s.dst_st, sizeof r.src_st);
    return strided(c, &r, grad_out[0].data, grad_out[0].dtype,
                   (char *)grad_in[0].data + base * (int64_t)pp_dtype_size(grad_in[0].dtype), grad_in[0].dtype, 1, err);
}

/* ---------------- Concat and Split: piece k sits at offset along axis ---------------- */

/* Moves piece p (shape of p) to/from whole w at `off` along axis: to_whole picks the direction. */
static pp_status piece(const pp_kernel_ctx *c, const pp_tensor *p, const pp_tensor *w, int axis, int64_t off,
                       int to_whole, int accumulate, pp_error *err)
{
    int64_t pst[PP_MAX_RANK], wst[PP_MAX_RANK];
    strides_of(p, pst);
    strides_of(w, wst);
    pp_cu_strided s;
    char *wbase = (char *)w->data + off * wst[axis] * (int64_t)pp_dtype_size(w->dtype);
    if (to_whole) {
        pp_cu_strided_init(&s, p->rank, p->dims, wst, pst);
        return strided(c, &s, p->data, p->dtype, wbase, w->dtype, accumulate, err);
    }
    pp_cu_strided_init(&s, p->rank, p->dims, pst, wst);
    return strided(c, &s, wbase, w->dtype, p->data, p->dtype, accumulate, err);
}

PP_CU_FWD(pp_cu_concat_forward)
{
    int ax = 0;
    PP_CHECK(pp_args_axis_attr(c, INT64_MIN, c->out[0].rank, &ax, err));
    int64_t off = 0;
    for (int k = 0; k < c->nin; k++) {
        PP_CHECK(piece(c, &c->in[k], &c->out[0], ax, off, 1, 0, err));
        off += c->in[k].dims[ax];
    }
    return PP_OK;
}

PP_CU_BWD(pp_cu_concat_backward)
{
    if (!grad_out[0].data) return PP_OK;
    int ax = 0;
    PP_CHECK(pp_args_axis_attr(c, INT64_MIN, grad_out[0].rank, &ax, err));
    int64_t off = 0;
    for (int k = 0; k < c->nin; k++) {
        if (grad_in[k].data) PP_CHECK(piece(c, &grad_in[k], &grad_out[0], ax, off, 0, 1, err));
        off += grad_in[k].dims[ax];
    }
    return PP_OK;
}

PP_CU_FWD(pp_cu_split_forward)
{
    int ax = 0;
    PP_CHECK(pp_args_axis_attr(c, 0, c->in[0].rank, &ax, err));
    int64_t off = 0;
    for (int k = 0; k < c->nout; k++) {
        if (c->out[k].data) PP_CHECK(piece(c, &c->out[k], &c->in[0], ax, off, 0, 0, err));
        off += c->out[k].dims[ax];
    }
    return PP_OK;
}

PP_CU_BWD(pp_cu_split_backward)
{
    if (!grad_in[0].data) return PP_OK;
    int ax = 0;
    PP_CHECK(pp_args_axis_attr(c, 0, grad_in[0].rank, &ax, err));
    int64_t off = 0;
    for (int k = 0; k < c->nout; k++) {
        if (grad_out[k].data) PP_CHECK(piece(c, &grad_out[k], &grad_in[0], ax, off, 1, 1, err));
        off += grad_out[k].dims[ax];
    }
    return PP_OK;
}

/* ---------------- Gather: data (outer, n, inner), indices (m) -> (outer, m, inner) ---------------- */

__device__ inline int64_t gather_index(const void *idx, int idx64, int64_t j, int64_t n)
{
    int64_t v = idx64 ? ((const int64_t *)idx)[j] : ((const int32_t *)idx)[j];
    return v < 0 ? v + n : v;
}

/* y = x's rows at the indices: an embedding lookup, converted where the table is the fp32
 * master and y 16-bit */
__global__ void k_gather(cu_io x, const void *idx, int idx64, cu_io y, int64_t m, int64_t n, int64_t inner,
                         int64_t total)
{
    CU_FOR(i, total) {
        const int64_t in = i % inner, j = (i / inner) % m, o = i / (inner * m);
        const int64_t v = gather_index(idx, idx64, j, n);
        cu_st(y, i, v >= 0 && v < n ? cu_ld(x, (o * n + v) * inner + in) : NAN);
    }
}

/* y = x's rows at the indices for data of any other dtype (an int64 shape or mask chain not
 * folded at load), elements of T's size copied; an index outside the rows gives 0 */
template <typename T>
__global__ void k_gather_raw(const T *x, const void *idx, int idx64, T *y, int64_t m, int64_t n, int64_t inner,
                             int64_t total)
{
    CU_FOR(i, total) {
        const int64_t in = i % inner, j = (i / inner) % m, o = i / (inner * m);
        const int64_t v = gather_index(idx, idx64, j, n);
        y[i] = v >= 0 && v < n ? x[(o * n + v) * inner + in] : T(0);
    }
}

/* the embedding's backward: dy (float32 or 16-bit) added into the float32 table gradient */
__global__ void k_gather_grad(cu_io dy, const void *idx, int idx64, float *dx, int64_t m, int64_t n, int64_t inner,
                              int64_t total)
{
    CU_FOR(i, total) {
        const int64_t in = i % inner, j = (i / inner) % m, o = i / (inner * m);
        const int64_t v = gather_index(idx, idx64, j, n);
        if (v >= 0 && v < n) atomicAdd(&dx[(o * n + v) * inner + in], cu_ld(dy, i));
    }
}

static pp_status gather_plan(const pp_kernel_ctx *c, const pp_tensor *x, int64_t *outer, int64_t *n, int64_t *inner,
                             int64_t *m, pp_error *err)
{
    int ax = 0;
    const pp_tensor *idx = &c->in[1];
    PP_CHECK(pp_args_gather(c, x, idx, &ax, err));
    pp_cu_rows r = pp_cu_rows_of(x->dims, x->rank, ax, ax + 1);
    *outer = r.outer;
    *n = r.n;
    *inner = r.inner;
    *m = pp_tensor_numel(idx);
    return PP_OK;
}

PP_CU_FWD(pp_cu_gather_forward)
{
    int64_t outer = 0, n = 0, inner = 0, m = 0;
    PP_CHECK(gather_plan(c, &c->in[0], &outer, &n, &inner, &m, err));
    const pp_dtype xt = c->in[0].dtype, yt = c->out[0].dtype;
    const int fl = cu_io_float(xt) && cu_io_float(yt);
    if (!fl && xt != yt)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "data of dtype %s into %s (floats, or one dtype, on cuda)",
                            pp_dtype_name(xt), pp_dtype_name(yt));
    const int64_t total = outer * m * inner;
    if (!total) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(total);
    cudaStream_t s = cu_of(c->dev)->stream;
    const void *idx = c->in[1].data;
    const int idx64 = c->in[1].dtype == PP_DTYPE_I64;
    if (!fl)
        return pp_cu_by_size(c, xt, [&](auto z) {
            using T = decltype(z);
            k_gather_raw<T><<<L.grid, L.block, 0, s>>>((const T *)c->in[0].data, idx, idx64, (T *)c->out[0].data, m, n,
                                                       inner, total);
        }, err);
    k_gather<<<L.grid, L.block, 0, s>>>(cu_io_of(c->in[0]), idx, idx64, cu_io_of(c->out[0]), m, n, inner, total);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_BWD(pp_cu_gather_backward)
{
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    /* atomics add into float32 only: a 16-bit data gradient (not an embedding's) goes through the adapter */
    if (grad_in[0].dtype != PP_DTYPE_F32 || !cu_io_float(grad_out[0].dtype))
        return pp_lowp_backward(c, grad_out, grad_in, err);
    int64_t outer = 0, n = 0, inner = 0, m = 0;
    PP_CHECK(gather_plan(c, &grad_in[0], &outer, &n, &inner, &m, err));
    const int64_t total = outer * m * inner;
    if (!total) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(total);
    k_gather_grad<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(cu_io_of(grad_out[0]), c->in[1].data,
                                                                  c->in[1].dtype == PP_DTYPE_I64,
                                                                  (float *)grad_in[0].data, m, n, inner, total);
    CU_LAUNCHED(c);
    return PP_OK;
}

/* ---------------- Expand ---------------- */

PP_CU_FWD(pp_cu_expand_forward) { return pp_cu_broadcast_copy(c, &c->out[0], &c->in[0], err); }

PP_CU_BWD(pp_cu_expand_backward)
{
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    return pp_cu_sum_into(c, &grad_in[0], &grad_out[0], 1.f, err);
}
