/* CumSum, Trilu, Tile and Pad on the cpu: which element goes where is kernels/index_ops.h's
 * (shared with the cuda twins in kernels/cuda/pad_tile.cu and the constant folder). The
 * data-movement ops take any element type; backward adds dy into dx through the same map
 * (Tile, and Pad's edge / reflect / wrap, add several dy into one dx). */
#include "cpu_math.h"
#include "nn_util.h"
#include "op_args_index.h"

#include <string.h>

static void put(void *dst, int64_t i, const void *src, int64_t j, size_t es)
{
    memcpy((char *)dst + (size_t)i * es, (const char *)src + (size_t)j * es, es);
}

/* ---------------- CumSum ---------------- */

/* y (+)= cumsum of x over rows r, float32, int64 or int32 */
static pp_status cumsum(const pp_kernel_ctx *c, void *y, const void *x, pp_dtype dt, pp_rows r, int ex, int rev,
                        int acc, pp_error *err)
{
    for (int64_t o = 0; o < r.outer; o++)
        for (int64_t in = 0; in < r.inner; in++) {
            const int64_t b = o * r.n * r.inner + in;
            if (dt == PP_DTYPE_F32) pp_ix_cumsum_f32((float *)y + b, (const float *)x + b, r.n, r.inner, ex, rev, acc);
            else if (dt == PP_DTYPE_I64)
                pp_ix_cumsum_i64((int64_t *)y + b, (const int64_t *)x + b, r.n, r.inner, ex, rev, acc);
            else if (dt == PP_DTYPE_I32)
                pp_ix_cumsum_i32((int32_t *)y + b, (const int32_t *)x + b, r.n, r.inner, ex, rev, acc);
            else
                return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input dtype %s (float32, int64 and int32 are)",
                                    pp_dtype_name(dt));
        }
    return PP_OK;
}

PP_FWD(pp_cpu_cumsum_forward)
{
    pp_rows r;
    int ex, rev;
    PP_CHECK(pp_args_cumsum(c, &c->in[0], &r, &ex, &rev, err));
    return cumsum(c, c->out[0].data, c->in[0].data, c->in[0].dtype, r, ex, rev, 0, err);
}

/* dx += cumsum of dy in the other direction */
PP_BWD(pp_cpu_cumsum_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    pp_rows r;
    int ex, rev;
    PP_CHECK(pp_args_cumsum(c, &grad_in[0], &r, &ex, &rev, err));
    return cumsum(c, grad_in[0].data, grad_out[0].data, PP_DTYPE_F32, r, ex, !rev, 1, err);
}

/* ---------------- Trilu ---------------- */

PP_FWD(pp_cpu_trilu_forward)
{
    const pp_tensor *x = &c->in[0];
    int64_t rows, cols, k;
    int upper;
    PP_CHECK(pp_args_trilu(c, x, &rows, &cols, &k, &upper, err));
    const size_t es = pp_dtype_size(x->dtype);
    memset(c->out[0].data, 0, pp_tensor_nbytes(&c->out[0]));
    for (int64_t i = 0; i < pp_tensor_numel(x); i++)
        if (pp_ix_trilu_keep(i, rows, cols, k, upper)) put(c->out[0].data, i, x->data, i, es);
    return PP_OK;
}

PP_BWD(pp_cpu_trilu_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    int64_t rows, cols, k;
    int upper;
    PP_CHECK(pp_args_trilu(c, &grad_in[0], &rows, &cols, &k, &upper, err));
    float *dx = grad_in[0].data;
    const float *dy = grad_out[0].data;
    for (int64_t i = 0; i < pp_tensor_numel(&grad_in[0]); i++)
        if (pp_ix_trilu_keep(i, rows, cols, k, upper)) dx[i] += dy[i];
    return PP_OK;
}

/* ---------------- Tile ---------------- */

PP_FWD(pp_cpu_tile_forward)
{
    const pp_tensor *x = &c->in[0], *y = &c->out[0];
    PP_CHECK(pp_args_tile(c, x, y, err));
    const pp_ix xi = pp_ix_of(x->rank, x->dims), yi = pp_ix_of(y->rank, y->dims);
    const size_t es = pp_dtype_size(x->dtype);
    for (int64_t i = 0; i < pp_tensor_numel(y); i++) put(y->data, i, x->data, pp_ix_tile_src(&xi, &yi, i), es);
    return PP_OK;
}

/* dx[src(i)] += dy[i]: every tile adds into the same dx */
PP_BWD(pp_cpu_tile_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    const pp_tensor *x = &grad_in[0], *y = &grad_out[0];
    PP_CHECK(pp_args_tile(c, x, y, err));
    const pp_ix xi = pp_ix_of(x->rank, x->dims), yi = pp_ix_of(y->rank, y->dims);
    float *dx = x->data;
    const float *dy = y->data;
    for (int64_t i = 0; i < pp_tensor_numel(y); i++) dx[pp_ix_tile_src(&xi, &yi, i)] += dy[i];
    return PP_OK;
}

/* ---------------- Pad ---------------- */

/* Constant padding without crops (CNNs' "same" pads): x sits in y as a block at offset *at,
 * y's strides in ys and x's in xs, so both directions are one strided copy (nn_util.h). */
static int pad_block(const pp_tensor *x, const pp_tensor *y, const int64_t *begin, int mode, int64_t *ys,
                     int64_t *xs, int64_t *at)
{
    if (mode != PP_PAD_CONSTANT) return 0;
    for (int d = 0; d < x->rank; d++)
        if (begin[d] < 0 || y->dims[d] < x->dims[d] + begin[d]) return 0;
    nn_strides(y->rank, y->dims, ys);
    nn_strides(x->rank, x->dims, xs);
    *at = 0;
    for (int d = 0; d < x->rank; d++) *at += begin[d] * ys[d];
    return 1;
}

PP_FWD(pp_cpu_pad_forward)
{
    const pp_tensor *x = &c->in[0], *y = &c->out[0];
    int64_t begin[PP_MAX_RANK];
    int mode;
    float value;
    PP_CHECK(pp_args_pad(c, x, y, begin, &mode, &value, err));
    const pp_ix xi = pp_ix_of(x->rank, x->dims), yi = pp_ix_of(y->rank, y->dims);
    const size_t es = pp_dtype_size(x->dtype);
    const float f = value;
    const int64_t i64 = (int64_t)value;
    const int32_t i32 = (int32_t)value;
    const void *fill = x->dtype == PP_DTYPE_F32 ? (const void *)&f : x->dtype == PP_DTYPE_I64 ? (const void *)&i64
                     : x->dtype == PP_DTYPE_I32 ? (const void *)&i32 : NULL;
    if (!fill && value != 0.f)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "a non-zero constant_value on dtype %s",
                            pp_dtype_name(x->dtype));
    int64_t ys[PP_MAX_RANK], xs[PP_MAX_RANK], at;
    if (pad_block(x, y, begin, mode, ys, xs, &at)) {
        if (value == 0.f) memset(y->data, 0, pp_tensor_nbytes(y));
        else
            for (int64_t i = 0; i < pp_tensor_numel(y); i++) put(y->data, i, fill, 0, es);
        nn_copy_strided((char *)y->data + (size_t)at * es, ys, x->data, xs, x->dims, x->rank, es);
        return PP_OK;
    }
    for (int64_t i = 0; i < pp_tensor_numel(y); i++) {
        const int64_t s = pp_ix_pad_src(&xi, &yi, begin, mode, i);
        if (s >= 0) put(y->data, i, x->data, s, es);
        else if (fill) put(y->data, i, fill, 0, es);
        else memset((char *)y->data + (size_t)i * es, 0, es);
    }
    return PP_OK;
}

/* dx[src(i)] += dy[i] for every output element read from x (the constant has no gradient) */
PP_BWD(pp_cpu_pad_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    const pp_tensor *x = &grad_in[0], *y = &grad_out[0];
    int64_t begin[PP_MAX_RANK];
    int mode;
    float value;
    PP_CHECK(pp_args_pad(c, x, y, begin, &mode, &value, err));
    const pp_ix xi = pp_ix_of(x->rank, x->dims), yi = pp_ix_of(y->rank, y->dims);
    float *dx = x->data;
    const float *dy = y->data;
    int64_t ys[PP_MAX_RANK], xs[PP_MAX_RANK], at;
    if (pad_block(x, y, begin, mode, ys, xs, &at)) {
        nn_add_strided(dx, xs, dy + at, ys, x->dims, x->rank, 1.0f);
        return PP_OK;
    }
    for (int64_t i = 0; i < pp_tensor_numel(y); i++) {
        const int64_t s = pp_ix_pad_src(&xi, &yi, begin, mode, i);
        if (s >= 0) dx[s] += dy[i];
    }
    return PP_OK;
}
