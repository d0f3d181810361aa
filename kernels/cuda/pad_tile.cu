/* cuda CumSum, Trilu, Tile and Pad, as kernels/cpu/pad_tile.c with the same index math
 * (kernels/index_ops.h): one thread per output element (CumSum: per row), element types by
 * size; backward adds through the same map, by atomicAdd where several outputs share an
 * input (Tile, Pad's edge / reflect / wrap). */
#include "cuda_internal.h"
#include "nn_cuda.h"
#include "op_args_index.h"
#include "reduce.cuh"

#include <string.h>

/* ---------------- CumSum: one thread per row ---------------- */

__device__ inline void scan_row(float *y, const float *x, pp_rows r, int ex, int rev, int acc)
{
    pp_ix_cumsum_f32(y, x, r.n, r.inner, ex, rev, acc);
}
__device__ inline void scan_row(int64_t *y, const int64_t *x, pp_rows r, int ex, int rev, int acc)
{
    pp_ix_cumsum_i64(y, x, r.n, r.inner, ex, rev, acc);
}
__device__ inline void scan_row(int32_t *y, const int32_t *x, pp_rows r, int ex, int rev, int acc)
{
    pp_ix_cumsum_i32(y, x, r.n, r.inner, ex, rev, acc);
}

template <typename T> __global__ void k_cumsum(T *y, const T *x, pp_rows r, int ex, int rev, int acc)
{
    CU_FOR(i, r.outer * r.inner) {
        const int64_t b = (i / r.inner) * r.n * r.inner + i % r.inner;
        scan_row(y + b, x + b, r, ex, rev, acc);
    }
}

static pp_status cumsum(const pp_kernel_ctx *c, void *y, const void *x, pp_dtype dt, pp_rows r, int ex, int rev,
                        int acc, pp_error *err)
{
    if (!r.outer || !r.inner) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(r.outer * r.inner);
    cudaStream_t st = cu_of(c->dev)->stream;
    if (dt == PP_DTYPE_F32) k_cumsum<float><<<L.grid, L.block, 0, st>>>((float *)y, (const float *)x, r, ex, rev, acc);
    else if (dt == PP_DTYPE_I64)
        k_cumsum<int64_t><<<L.grid, L.block, 0, st>>>((int64_t *)y, (const int64_t *)x, r, ex, rev, acc);
    else if (dt == PP_DTYPE_I32)
        k_cumsum<int32_t><<<L.grid, L.block, 0, st>>>((int32_t *)y, (const int32_t *)x, r, ex, rev, acc);
    else
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input dtype %s (float32, int64 and int32 are)",
                            pp_dtype_name(dt));
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_FWD(pp_cu_cumsum_forward)
{
    pp_rows r;
    int ex, rev;
    PP_CHECK(pp_args_cumsum(c, &c->in[0], &r, &ex, &rev, err));
    return cumsum(c, c->out[0].data, c->in[0].data, c->in[0].dtype, r, ex, rev, 0, err);
}

PP_CU_BWD(pp_cu_cumsum_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    pp_rows r;
    int ex, rev;
    PP_CHECK(pp_args_cumsum(c, &grad_in[0], &r, &ex, &rev, err));
    return cumsum(c, grad_in[0].data, grad_out[0].data, PP_DTYPE_F32, r, ex, !rev, 1, err);
}

/* ---------------- the maps: y[i] = x[src(i)] or fill; dx[src(i)] += dy[i] ---------------- */

enum { MAP_TRILU, MAP_TILE, MAP_PAD };

struct ix_map {
    int kind;
    pp_ix x, y;
    int64_t begin[PP_MAX_RANK];     /* Pad */
    int mode;                       /* Pad */
    int64_t rows, cols, k;          /* Trilu */
    int upper;
};

__device__ inline int64_t map_src(const ix_map &m, int64_t i)
{
    if (m.kind == MAP_TRILU) return pp_ix_trilu_keep(i, m.rows, m.cols, m.k, m.upper) ? i : -1;
    if (m.kind == MAP_TILE) return pp_ix_tile_src(&m.x, &m.y, i);
    return pp_ix_pad_src(&m.x, &m.y, m.begin, m.mode, i);
}

template <typename T> __global__ void k_map(ix_map m, const T *x, T *y, T fill, int64_t n)
{
    CU_FOR(i, n) {
        const int64_t s = map_src(m, i);
        y[i] = s >= 0 ? x[s] : fill;
    }
}

/* unique: every x element is read by at most one output (no atomics needed) */
__global__ void k_map_back(ix_map m, const float *dy, float *dx, int64_t n, int unique)
{
    CU_FOR(i, n) {
        const int64_t s = map_src(m, i);
        if (s < 0) continue;
        if (unique) dx[s] += dy[i];
        else atomicAdd(dx + s, dy[i]);
    }
}

static pp_status map_forward(const pp_kernel_ctx *c, const ix_map *m, float value, pp_error *err)
{
    const pp_tensor *x = &c->in[0], *y = &c->out[0];
    const int64_t n = pp_tensor_numel(y);
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    cudaStream_t st = cu_of(c->dev)->stream;
    switch (pp_dtype_size(x->dtype)) {
    case 8: {
        const int64_t f = x->dtype == PP_DTYPE_I64 ? (int64_t)value : 0;
        k_map<int64_t><<<L.grid, L.block, 0, st>>>(*m, (const int64_t *)x->data, (int64_t *)y->data, f, n);
        break;
    }
    case 4:
        if (x->dtype == PP_DTYPE_F32)
            k_map<float><<<L.grid, L.block, 0, st>>>(*m, (const float *)x->data, (float *)y->data, value, n);
        else
            k_map<int32_t><<<L.grid, L.block, 0, st>>>(*m, (const int32_t *)x->data, (int32_t *)y->data,
                                                       x->dtype == PP_DTYPE_I32 ? (int32_t)value : 0, n);
        break;
    case 2:
        k_map<uint16_t><<<L.grid, L.block, 0, st>>>(*m, (const uint16_t *)x->data, (uint16_t *)y->data, 0, n);
        break;
    case 1:
        k_map<uint8_t><<<L.grid, L.block, 0, st>>>(*m, (const uint8_t *)x->data, (uint8_t *)y->data,
                                                   (uint8_t)(value != 0.f), n);
        break;
    default:
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "dtype %s cannot be moved here", pp_dtype_name(x->dtype));
    }
    CU_LAUNCHED(c);
    return PP_OK;
}

static pp_status map_backward(const pp_kernel_ctx *c, const ix_map *m, const pp_tensor *dy, pp_tensor *dx, int unique,
                              pp_error *err)
{
    const int64_t n = pp_tensor_numel(dy);
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_map_back<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(*m, (const float *)dy->data, (float *)dx->data, n,
                                                               unique);
    CU_LAUNCHED(c);
    return PP_OK;
}

static ix_map map_of(int kind, const pp_tensor *x, const pp_tensor *y)
{
    ix_map m;
    memset(&m, 0, sizeof m);
    m.kind = kind;
    m.x = pp_ix_of(x->rank, x->dims);
    m.y = pp_ix_of(y->rank, y->dims);
    return m;
}

static pp_status trilu_map(const pp_kernel_ctx *c, const pp_tensor *x, ix_map *m, pp_error *err)
{
    *m = map_of(MAP_TRILU, x, x);
    return pp_args_trilu(c, x, &m->rows, &m->cols, &m->k, &m->upper, err);
}

static pp_status pad_map(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, ix_map *m, float *value,
                         pp_error *err)
{
    *m = map_of(MAP_PAD, x, y);
    return pp_args_pad(c, x, y, m->begin, &m->mode, value, err);
}

PP_CU_FWD(pp_cu_trilu_forward)
{
    ix_map m;
    PP_CHECK(trilu_map(c, &c->in[0], &m, err));
    return map_forward(c, &m, 0.f, err);
}

PP_CU_BWD(pp_cu_trilu_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    ix_map m;
    PP_CHECK(trilu_map(c, &grad_in[0], &m, err));
    return map_backward(c, &m, &grad_out[0], &grad_in[0], 1, err);
}

PP_CU_FWD(pp_cu_tile_forward)
{
    PP_CHECK(pp_args_tile(c, &c->in[0], &c->out[0], err));
    ix_map m = map_of(MAP_TILE, &c->in[0], &c->out[0]);
    return map_forward(c, &m, 0.f, err);
}

PP_CU_BWD(pp_cu_tile_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    PP_CHECK(pp_args_tile(c, &grad_in[0], &grad_out[0], err));
    ix_map m = map_of(MAP_TILE, &grad_in[0], &grad_out[0]);
    return map_backward(c, &m, &grad_out[0], &grad_in[0], 0, err);
}

PP_CU_FWD(pp_cu_pad_forward)
{
    ix_map m;
    float value;
    PP_CHECK(pad_map(c, &c->in[0], &c->out[0], &m, &value, err));
    return map_forward(c, &m, value, err);
}

PP_CU_BWD(pp_cu_pad_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    ix_map m;
    float value;
    PP_CHECK(pad_map(c, &grad_in[0], &grad_out[0], &m, &value, err));
    return map_backward(c, &m, &grad_out[0], &grad_in[0], m.mode == PP_PAD_CONSTANT, err);
}
