/* cuda pooling: MaxPool (optional Indices; the argmax per output kept in aux, as the cpu),
 * AveragePool (count_include_pad, ceil_mode, dilations, asymmetric pads) and
 * GlobalAveragePool, 1-D/2-D. Direct kernels rather than cuDNN pooling, which has no
 * ceil_mode, asymmetric pads or Indices and whose max backward needs X and Y kept (the
 * cpu table keeps neither). Backward gathers per input element (no atomics), so the
 * sums are deterministic. Window geometry: the cpu's pp_window, launch.h's span helpers. */
#include "cuda_internal.h"
#include "nn_cuda.h"
#include "reduce.cuh"

extern "C" {
#include "window.h"
}

/* x, y: the input and output, or (backward) their gradients */
static pp_status pool_plan(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, pp_window *w, pp_error *err)
{
    const int64_t *ks;
    int nk;
    int64_t ceil_mode;
    if (x->dtype != PP_DTYPE_F32)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input has dtype %s, expected float32", pp_dtype_name(x->dtype));
    PP_CHECK(pp_attr_ints(c->attrs, c->nattrs, "kernel_shape", &ks, &nk, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "ceil_mode", 0, &ceil_mode, c->node, err));
    if (nk != x->rank - 2)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "kernel_shape has %d values for input rank %d", nk, x->rank);
    return pp_window_make(c, x, y, ks, (int)ceil_mode, w, err);
}

static pp_status want_one_input(const pp_kernel_ctx *c, pp_error *err)
{
    if (c->nin != 1) return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "%d inputs, expected 1", c->nin);
    return PP_OK;
}

/* AveragePool's divisor of output (oh, ow) */
__device__ inline int64_t avg_div(const pp_window &w, int64_t oh, int64_t ow, int incl)
{
    int64_t nh, ph, nw, pw;
    pp_cu_window_span(oh, w.in[0], w.k[0], w.s[0], w.d[0], w.pb[0], w.pe[0], &nh, &ph);
    pp_cu_window_span(ow, w.in[1], w.k[1], w.s[1], w.d[1], w.pb[1], w.pe[1], &nw, &pw);
    return incl ? ph * pw : nh * nw;
}

/* one thread per output (plane, oh, ow); arg: index in the plane (-1: the window saw only
 * padding), ind: ONNX Indices (flat in x; storage_order 1 counts columns first) */
__global__ void k_maxpool(pp_window w, const float *x, float *y, int64_t *arg, int64_t *ind, int order)
{
    const int64_t OHW = w.out[0] * w.out[1], IHW = w.in[0] * w.in[1];
    CU_FOR(o, w.N * w.C * OHW) {
        const int64_t pl = o / OHW, oh = o % OHW / w.out[1], ow = o % w.out[1];
        const float *xp = x + pl * IHW;
        float best = 0.f;
        int64_t at = -1;
        for (int64_t ki = 0; ki < w.k[0]; ki++) {
            const int64_t ih = oh * w.s[0] - w.pb[0] + ki * w.d[0];
            if (ih < 0 || ih >= w.in[0]) continue;
            for (int64_t kj = 0; kj < w.k[1]; kj++) {
                const int64_t iw = ow * w.s[1] - w.pb[1] + kj * w.d[1];
                if (iw < 0 || iw >= w.in[1]) continue;
                const float v = xp[ih * w.in[1] + iw];
                if (at < 0 || v > best) {
                    best = v;
                    at = ih * w.in[1] + iw;
                }
            }
        }
        y[o] = at < 0 ? 0.f : best;
        if (arg) arg[o] = at;
        if (ind) ind[o] = at < 0 ? -1 : pl * IHW + (order ? (at % w.in[1]) * w.in[0] + at / w.in[1] : at);
    }
}

__global__ void k_avgpool(pp_window w, const float *x, float *y, int incl)
{
    const int64_t OHW = w.out[0] * w.out[1], IHW = w.in[0] * w.in[1];
    CU_FOR(o, w.N * w.C * OHW) {
        const int64_t pl = o / OHW, oh = o % OHW / w.out[1], ow = o % w.out[1];
        const float *xp = x + pl * IHW;
        float s = 0.f;
        for (int64_t ki = 0; ki < w.k[0]; ki++) {
            const int64_t ih = oh * w.s[0] - w.pb[0] + ki * w.d[0];
            if (ih < 0 || ih >= w.in[0]) continue;
            for (int64_t kj = 0; kj < w.k[1]; kj++) {
                const int64_t iw = ow * w.s[1] - w.pb[1] + kj * w.d[1];
                if (iw >= 0 && iw < w.in[1]) s += xp[ih * w.in[1] + iw];
            }
        }
        const int64_t div = avg_div(w, oh, ow, incl);
        y[o] = div ? s / (float)div : 0.f;
    }
}

/* one thread per input element: dx += the dy of every output whose window (max: whose
 * argmax) takes it. max: arg != NULL; else average with incl. */
__global__ void k_pool_grad(pp_window w, const float *dy, float *dx, const int64_t *arg, int incl)
{
    const int64_t OHW = w.out[0] * w.out[1], IHW = w.in[0] * w.in[1];
    CU_FOR(e, w.N * w.C * IHW) {
        const int64_t pl = e / IHW, at = e % IHW, ih = at / w.in[1], iw = at % w.in[1];
        float acc = 0.f;
        for (int64_t ki = 0; ki < w.k[0]; ki++) {
            const int64_t oh = pp_cu_window_out(ih, ki, w.out[0], w.s[0], w.d[0], w.pb[0]);
            if (oh < 0) continue;
            for (int64_t kj = 0; kj < w.k[1]; kj++) {
                const int64_t ow = pp_cu_window_out(iw, kj, w.out[1], w.s[1], w.d[1], w.pb[1]);
                if (ow < 0) continue;
                const int64_t o = pl * OHW + oh * w.out[1] + ow;
                if (arg) {
                    if (arg[o] == at) acc += dy[o];
                } else {
                    const int64_t div = avg_div(w, oh, ow, incl);
                    if (div) acc += dy[o] / (float)div;
                }
            }
        }
        dx[e] += acc;
    }
}

PP_CU_AUX(pp_cu_maxpool_aux) { return (size_t)pp_tensor_numel(&c->out[0]) * sizeof(int64_t); }

PP_CU_FWD(pp_cu_maxpool_forward)
{
    pp_window w;
    int64_t order;
    PP_CHECK(want_one_input(c, err));
    PP_CHECK(pool_plan(c, &c->in[0], &c->out[0], &w, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "storage_order", 0, &order, c->node, err));
    int64_t *ind = c->nout > 1 ? (int64_t *)c->out[1].data : NULL;
    if (ind && c->out[1].dtype != PP_DTYPE_I64)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "Indices output has dtype %s, expected int64",
                         pp_dtype_name(c->out[1].dtype));
    const int64_t n = pp_tensor_numel(&c->out[0]);
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_maxpool<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(w, (const float *)c->in[0].data, (float *)c->out[0].data,
                                                             (int64_t *)c->aux, ind, (int)order);
    CU_LAUNCHED(c);
    return PP_OK;
}

/* max: arg = the aux argmax; average: arg NULL */
static pp_status pool_bwd(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, const int64_t *arg, int incl,
                          pp_error *err)
{
    pp_window w;
    PP_CHECK(pool_plan(c, &gin[0], &gout[0], &w, err));
    const int64_t n = pp_tensor_numel(&gin[0]);
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_pool_grad<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(w, (const float *)gout[0].data, (float *)gin[0].data,
                                                               arg, incl);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_BWD(pp_cu_maxpool_backward)
{
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    if (!c->aux) return pp_args_fail(c, PP_ERR_INTERNAL, err, "backward needs the argmax kept in aux");
    return pool_bwd(c, grad_out, grad_in, (const int64_t *)c->aux, 0, err);
}

PP_CU_FWD(pp_cu_avgpool_forward)
{
    pp_window w;
    int64_t incl;
    PP_CHECK(want_one_input(c, err));
    PP_CHECK(pool_plan(c, &c->in[0], &c->out[0], &w, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "count_include_pad", 0, &incl, c->node, err));
    const int64_t n = pp_tensor_numel(&c->out[0]);
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_avgpool<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(w, (const float *)c->in[0].data, (float *)c->out[0].data,
                                                             (int)incl);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_BWD(pp_cu_avgpool_backward)
{
    int64_t incl;
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "count_include_pad", 0, &incl, c->node, err));
    return pool_bwd(c, grad_out, grad_in, NULL, (int)incl, err);
}

/* GlobalAveragePool: x (N, C, spatial...) -> y (N, C, 1, ...), the mean over spatial dims */
static pp_status gap_plan(const pp_kernel_ctx *c, const pp_tensor *x, pp_cu_reduce *r, float *inv_hw, pp_error *err)
{
    if (x->rank < 3) return pp_args_fail(c, PP_ERR_SHAPE, err, "input rank %d, expected >= 3", x->rank);
    if (x->dtype != PP_DTYPE_F32)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input has dtype %s, expected float32", pp_dtype_name(x->dtype));
    int red[PP_MAX_RANK] = {0};
    int64_t hw = 1;
    for (int d = 2; d < x->rank; d++) {
        red[d] = 1;
        hw *= x->dims[d];
    }
    pp_cu_reduce_init(r, x->rank, x->dims, red);
    *inv_hw = hw ? 1.f / (float)hw : 0.f;
    return PP_OK;
}

PP_CU_FWD(pp_cu_gap_forward)
{
    pp_cu_reduce r;
    float inv = 0.f;
    PP_CHECK(want_one_input(c, err));
    PP_CHECK(gap_plan(c, &c->in[0], &r, &inv, err));
    if (!r.nout) return PP_OK;
    CU_TRY(c, cudaMemsetAsync(c->out[0].data, 0, pp_tensor_nbytes(&c->out[0]), cu_of(c->dev)->stream));
    return pp_cu_reduce_launch(c, &r, c->in[0].data, c->in[0].dtype, c->out[0].data, c->out[0].dtype, inv, err);
}

PP_CU_BWD(pp_cu_gap_backward)
{
    pp_cu_reduce r;
    float inv = 0.f;
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    PP_CHECK(gap_plan(c, &grad_in[0], &r, &inv, err));
    if (!r.nout) return PP_OK;
    return pp_cu_broadcast_add(c, &grad_in[0], &grad_out[0], inv, err);
}
