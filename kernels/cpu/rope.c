/* RotaryEmbedding on the cpu (opset 23): each head's first rd elements turn in pairs by the
 * cached angles of its position (layout: kernels/op_args_nn.c; math: element_nn.h's
 * pp_rope_re / pp_rope_im); backward turns the gradient back. The caches carry no gradient. */
#include "cpu_math.h"
#include <onnxpipe/element_nn.h>
#include "op_args_nn.h"

/* the cache row of (b, s); an error for a position outside the caches */
static pp_status cache_row(const pp_kernel_ctx *c, const pp_rope_args *a, int64_t b, int64_t s, int64_t *row,
                           pp_error *err)
{
    *row = a->npos ? ((const int64_t *)c->in[3].data)[b * a->s + s] : pp_rope_row(a, b, s);
    if (a->npos && (*row < 0 || *row >= a->npos))
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "position_ids[%lld, %lld] = %lld is outside the caches' "
                            "%lld rows", (long long)b, (long long)s, (long long)*row, (long long)a->npos);
    return PP_OK;
}

/* One head's n pairs (x[k st], x[k st + o2]) turned into y's by (c[k], sign s[k]), y
 * assigned or (add) accumulated; inlined with constant st and add, so that the split
 * layout's loop (st 1) vectorizes. */
static inline void turn_pairs(const float *restrict x, float *restrict y, const float *restrict c,
                              const float *restrict s, int64_t n, int64_t st, int64_t o2, float sign, int add)
{
    for (int64_t k = 0; k < n; k++) {
        const float x1 = x[k * st], x2 = x[k * st + o2], sn = sign * s[k];
        const float re = pp_rope_re(x1, x2, c[k], sn), im = pp_rope_im(x1, x2, c[k], sn);
        y[k * st] = add ? y[k * st] + re : re;
        y[k * st + o2] = add ? y[k * st + o2] + im : im;
    }
}

/* y (+)= x turned by the angles of (cos, sin) * sign, over every head: forward (sign 1,
 * assign) and backward (sign -1, accumulate) */
static pp_status turn(const pp_kernel_ctx *c, const pp_rope_args *a, const float *x, float *y, float sign, int add,
                      pp_error *err)
{
    /* the fp32 table's kernel; under bfloat16 / float16 the adapter hands it fp32 copies of
     * every tensor, 16-bit caches (computed in the graph) included */
    if (c->in[1].dtype != PP_DTYPE_F32 || c->in[2].dtype != PP_DTYPE_F32)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "cos_cache and sin_cache must be float32 (got %s, %s)",
                            pp_dtype_name(c->in[1].dtype), pp_dtype_name(c->in[2].dtype));
    const float *cosc = c->in[1].data, *sinc = c->in[2].data;
    const int64_t half = a->rd / 2;
    for (int64_t b = 0; b < a->b; b++)
        for (int64_t s = 0; s < a->s; s++) {
            int64_t row;
            PP_CHECK(cache_row(c, a, b, s, &row, err));
            const float *cr = cosc + row * a->crow, *sr = sinc + row * a->crow;
            for (int64_t h = 0; h < a->h; h++) {
                const int64_t o = b * a->sb + h * a->sh + s * a->ss;
                const float *xr = x + o;
                float *yr = y + o;
                if (a->interleaved && add) turn_pairs(xr, yr, cr, sr, half, 2, 1, sign, 1);
                else if (a->interleaved) turn_pairs(xr, yr, cr, sr, half, 2, 1, sign, 0);
                else if (add) turn_pairs(xr, yr, cr, sr, half, 1, half, sign, 1);
                else turn_pairs(xr, yr, cr, sr, half, 1, half, sign, 0);
                for (int64_t i = a->rd; i < a->d; i++) yr[i] = add ? yr[i] + xr[i] : xr[i];
            }
        }
    return PP_OK;
}

PP_FWD(pp_cpu_rope_forward)
{
    pp_rope_args a;
    PP_CHECK(pp_args_rope(c, &a, err));
    return turn(c, &a, c->in[0].data, c->out[0].data, 1.0f, 0, err);
}

PP_BWD(pp_cpu_rope_backward)
{
    pp_rope_args a;
    PP_CHECK(pp_args_rope(c, &a, err));
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    return turn(c, &a, grad_out[0].data, grad_in[0].data, -1.0f, 1, err);
}
