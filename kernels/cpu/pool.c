/* cpu pooling: MaxPool (optional Indices output; the argmax is kept in aux for backward),
 * AveragePool (count_include_pad, ceil_mode, dilations) and GlobalAveragePool, 1-D/2-D,
 * forward and backward, by direct window loops over each (image, channel) plane. */
#include "cpu_math.h"
#include "window.h"

#include <float.h>

/* x, y: the input and output, or (backward) their gradients */
static pp_status pool_plan(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, pp_window *w,
                           pp_error *err)
{
    const int64_t *ks;
    int nk;
    int64_t ceil_mode;
    PP_CHECK(pp_attr_ints(c->attrs, c->nattrs, "kernel_shape", &ks, &nk, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "ceil_mode", 0, &ceil_mode, c->node, err));
    if (nk != x->rank - 2)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "node '%s' (%s): kernel_shape has %d values for input rank %d",
                            c->node, c->op_type, nk, x->rank);
    return pp_window_make(c, x, y, ks, (int)ceil_mode, w, err);
}

static pp_status pool_forward_plan(const pp_kernel_ctx *c, pp_window *w, pp_error *err)
{
    PP_CHECK(pp_cpu_want_inputs(c, 1, 1, err));
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, 0, err));
    return pool_plan(c, &c->in[0], &c->out[0], w, err);
}

/* Visits the window of output (oh, ow) of one plane: BODY sees ih, iw inside the input;
 * npad counts window positions inside the padded extent but outside the input. */
#define WINDOW_FOR(w, oh, ow, BODY)                                                     \
    for (int64_t ki = 0; ki < (w)->k[0]; ki++) {                                        \
        int64_t ih = (oh) * (w)->s[0] - (w)->pb[0] + ki * (w)->d[0];                    \
        for (int64_t kj = 0; kj < (w)->k[1]; kj++) {                                    \
            int64_t iw = (ow) * (w)->s[1] - (w)->pb[1] + kj * (w)->d[1];                \
            if (ih >= 0 && ih < (w)->in[0] && iw >= 0 && iw < (w)->in[1]) { BODY }      \
            else if (ih < (w)->in[0] + (w)->pe[0] && iw < (w)->in[1] + (w)->pe[1]) npad++; \
        }                                                                               \
    }

PP_AUX(pp_cpu_maxpool_aux) { return (size_t)pp_tensor_numel(&c->out[0]) * sizeof(int64_t); }

PP_FWD(pp_cpu_maxpool_forward)
{
    pp_window w;
    int64_t order;
    PP_CHECK(pool_forward_plan(c, &w, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "storage_order", 0, &order, c->node, err));
    if (c->nout > 1 && c->out[1].data && c->out[1].dtype != PP_DTYPE_I64)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' (MaxPool): Indices output has dtype %s, expected int64",
                            c->node, pp_dtype_name(c->out[1].dtype));
    const float *X = c->in[0].data;
    float *Y = c->out[0].data;
    int64_t *arg = c->aux, *ind = c->nout > 1 ? c->out[1].data : NULL;
    int64_t IHW = w.in[0] * w.in[1], OHW = w.out[0] * w.out[1];
    for (int64_t pl = 0; pl < w.N * w.C; pl++) {
        const float *x = X + pl * IHW;
        for (int64_t oh = 0; oh < w.out[0]; oh++)
            for (int64_t ow = 0; ow < w.out[1]; ow++) {
                float best = -FLT_MAX;
                int64_t at = -1, npad = 0;
                WINDOW_FOR(&w, oh, ow, {
                    float v = x[ih * w.in[1] + iw];
                    if (at < 0 || v > best) { best = v; at = ih * w.in[1] + iw; }
                })
                (void)npad;
                int64_t o = pl * OHW + oh * w.out[1] + ow;
                Y[o] = at < 0 ? 0.f : best;
                if (arg) arg[o] = at;
                if (ind) /* flat index into x; storage_order 1 counts columns first */
                    ind[o] = at < 0 ? -1 : pl * IHW + (order ? (at % w.in[1]) * w.in[0] + at / w.in[1] : at);
            }
    }
    return PP_OK;
}

PP_BWD(pp_cpu_maxpool_backward)
{
    const float *GY = grad_out[0].data;
    float *GX = grad_in[0].data;
    if (!GY || !GX) return PP_OK;
    if (!c->aux)
        return pp_error_set(err, PP_ERR_INTERNAL, "node '%s' (MaxPool): backward needs the argmax kept in aux", c->node);
    const int64_t *arg = c->aux;
    int64_t OHW = pp_tensor_numel(&grad_out[0]) / (grad_out[0].dims[0] * grad_out[0].dims[1]);
    int64_t IHW = pp_tensor_numel(&grad_in[0]) / (grad_in[0].dims[0] * grad_in[0].dims[1]);
    int64_t planes = grad_in[0].dims[0] * grad_in[0].dims[1];
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t o = 0; o < OHW; o++) {
            int64_t a = arg[pl * OHW + o];
            if (a >= 0) GX[pl * IHW + a] += GY[pl * OHW + o];
        }
    return PP_OK;
}

/* AveragePool divisor of window (oh, ow): positions inside the input, plus the padded
 * ones when count_include_pad. */
static pp_status avg_attrs(const pp_kernel_ctx *c, int64_t *include_pad, pp_error *err)
{
    return pp_attr_int(c->attrs, c->nattrs, "count_include_pad", 0, include_pad, c->node, err);
}

PP_FWD(pp_cpu_avgpool_forward)
{
    pp_window w;
    int64_t incl;
    PP_CHECK(pool_forward_plan(c, &w, err));
    PP_CHECK(avg_attrs(c, &incl, err));
    const float *X = c->in[0].data;
    float *Y = c->out[0].data;
    int64_t IHW = w.in[0] * w.in[1], OHW = w.out[0] * w.out[1];
    for (int64_t pl = 0; pl < w.N * w.C; pl++) {
        const float *x = X + pl * IHW;
        for (int64_t oh = 0; oh < w.out[0]; oh++)
            for (int64_t ow = 0; ow < w.out[1]; ow++) {
                float s = 0.f;
                int64_t n = 0, npad = 0;
                WINDOW_FOR(&w, oh, ow, {
                    s += x[ih * w.in[1] + iw];
                    n++;
                })
                int64_t div = n + (incl ? npad : 0);
                Y[pl * OHW + oh * w.out[1] + ow] = div ? s / (float)div : 0.f;
            }
    }
    return PP_OK;
}

PP_BWD(pp_cpu_avgpool_backward)
{
    const float *GY = grad_out[0].data;
    float *GX = grad_in[0].data;
    if (!GY || !GX) return PP_OK;
    pp_window w;
    int64_t incl;
    PP_CHECK(pool_plan(c, &grad_in[0], &grad_out[0], &w, err));
    PP_CHECK(avg_attrs(c, &incl, err));
    int64_t IHW = w.in[0] * w.in[1], OHW = w.out[0] * w.out[1];
    for (int64_t pl = 0; pl < w.N * w.C; pl++) {
        float *gx = GX + pl * IHW;
        for (int64_t oh = 0; oh < w.out[0]; oh++)
            for (int64_t ow = 0; ow < w.out[1]; ow++) {
                int64_t n = 0, npad = 0;
                WINDOW_FOR(&w, oh, ow, { n++; })
                int64_t div = n + (incl ? npad : 0);
                if (!div) continue;
                float g = GY[pl * OHW + oh * w.out[1] + ow] / (float)div;
                npad = 0;
                WINDOW_FOR(&w, oh, ow, { gx[ih * w.in[1] + iw] += g; })
            }
    }
    return PP_OK;
}

/* GlobalAveragePool: x (N, C, spatial...) -> y (N, C, 1, ...) */
static pp_status gap_plan(const pp_kernel_ctx *c, const pp_tensor *x, int64_t *planes, int64_t *hw, pp_error *err)
{
    if (x->rank < 3)
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (GlobalAveragePool): input rank %d, expected >= 3", c->node,
                            x->rank);
    *planes = x->dims[0] * x->dims[1];
    *hw = *planes ? pp_tensor_numel(x) / *planes : 0;
    return PP_OK;
}

PP_FWD(pp_cpu_gap_forward)
{
    int64_t planes = 0, hw = 0;
    PP_CHECK(pp_cpu_want_inputs(c, 1, 1, err));
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, 0, err));
    PP_CHECK(gap_plan(c, &c->in[0], &planes, &hw, err));
    const float *X = c->in[0].data;
    float *Y = c->out[0].data;
    for (int64_t pl = 0; pl < planes; pl++) {
        double s = 0;
        for (int64_t i = 0; i < hw; i++) s += X[pl * hw + i];
        Y[pl] = hw ? (float)(s / (double)hw) : 0.f;
    }
    return PP_OK;
}

PP_BWD(pp_cpu_gap_backward)
{
    const float *GY = grad_out[0].data;
    float *GX = grad_in[0].data;
    if (!GY || !GX) return PP_OK;
    int64_t planes = 0, hw = 0;
    PP_CHECK(gap_plan(c, &grad_in[0], &planes, &hw, err));
    for (int64_t pl = 0; pl < planes; pl++) {
        float g = GY[pl] / (float)hw;
        for (int64_t i = 0; i < hw; i++) GX[pl * hw + i] += g;
    }
    return PP_OK;
}
