/* cuda SoftmaxCrossEntropyLoss (one block per position, labels read on the device), on
 * float32, bfloat16 or float16 scores (io.cuh: fp32 math, the gradient rounded once). A
 * label out of [0, C) that is not ignore_index gives a NaN loss (the GPU cannot name it
 * without a synchronisation). Forward keeps each position's max and log-sum-exp and the
 * labels' summed weight (aux, kernels/xent.h); backward writes softmax - onehot straight
 * into the scores' gradient in one pass, no probabilities kept, a fresh gradient assigned. */
#include "cuda_internal.h"
#include <onnxpipe/element_nn.h>
#include "io.cuh"
#include "lowp.h"
#include "xent.h"
#include "nn_cuda.h"
#include "reduce.cuh"

#include <string.h>

typedef pp_xent xent;   /* kernels/xent.c parses and checks the call */

/* label and weight (0 when ignored, NaN when out of range) at position p */
__device__ inline int64_t xent_label(const xent &e, const void *lab, cu_io w, int64_t p, float *wt)
{
    const int64_t l = e.lab64 ? ((const int64_t *)lab)[p] : ((const int32_t *)lab)[p];
    if (e.has_ignore && l == e.ignore) *wt = 0.f;
    else if (l < 0 || l >= e.c) *wt = NAN;
    else *wt = w.p ? cu_ld(w, l) : 1.f;
    return l;
}

/* per position: loss[p] and weight[p] into part (2 floats), max and log-sum-exp into aux,
 * log_prob if asked */
__global__ void __launch_bounds__(1024)
    k_xent(xent e, cu_io x, const void *lab, cu_io w, float *part, float *amx, float *als, cu_io logp)
{
    const int64_t p = blockIdx.x, base = (p / e.d) * e.c * e.d + p % e.d;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < e.c; j += blockDim.x) mx = cu_max()(mx, cu_ld(x, base + j * e.d));
    mx = cu_block_reduce(mx, cu_max(), -INFINITY);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < e.c; j += blockDim.x) s += pp_softmax_exp(cu_ld(x, base + j * e.d), mx);
    const float ls = logf(cu_block_reduce(s, cu_sum(), 0.f));
    if (logp.p)
        for (int64_t j = threadIdx.x; j < e.c; j += blockDim.x)
            cu_st(logp, base + j * e.d, pp_logsoftmax_out(cu_ld(x, base + j * e.d), mx, ls));
    if (threadIdx.x == 0) {
        float wt;
        const int64_t l = xent_label(e, lab, w, p, &wt);
        part[2 * p] = wt == 0.f ? 0.f : wt != wt ? NAN : pp_xent_loss(pp_logsoftmax_out(cu_ld(x, base + l * e.d), mx, ls), wt);
        part[2 * p + 1] = wt;
        amx[p] = mx;
        als[p] = ls;
    }
}

/* out = what of the per-position (loss, weight) pairs, summed in double in one block */
enum { XENT_TOTAL_LOSS, XENT_TOTAL_MEAN, XENT_TOTAL_WEIGHT };
__global__ void __launch_bounds__(1024) k_xent_total(const float *part, int64_t np, int what, float *out)
{
    double l = 0, w = 0;
    for (int64_t p = threadIdx.x; p < np; p += blockDim.x) {
        l += part[2 * p];
        w += part[2 * p + 1];
    }
    l = cu_block_reduce(l, cu_sum(), 0.0);
    w = cu_block_reduce(w, cu_sum(), 0.0);
    if (threadIdx.x == 0)
        out[0] = what == XENT_TOTAL_LOSS ? (float)l : what == XENT_TOTAL_WEIGHT ? (float)w : w > 0 ? (float)(l / w) : 0.f;
}

/* The scores' and log_prob's dtypes are float ones, the loss float32: else the adapter. */
static int xent_native(const pp_tensor *x, const pp_tensor *loss, const pp_tensor *logp, const pp_tensor *w)
{
    return cu_io_float(x->dtype) && loss->dtype == PP_DTYPE_F32 && (!logp || !logp->data || cu_io_float(logp->dtype)) &&
           (!w || !w->data || cu_io_float(w->dtype));
}

PP_CU_AUX(pp_cu_xent_aux)
{
    return pp_xent_aux_bytes(c);
}

PP_CU_FWD(pp_cu_xent_forward)
{
    xent e;
    PP_CHECK(pp_xent_setup(c, &e, err));
    if (!xent_native(&c->in[0], &c->out[0], c->nout > 1 ? &c->out[1] : NULL, c->nin > 2 ? &c->in[2] : NULL))
        return pp_lowp_forward(c, err);
    const int64_t np = e.n * e.d;
    if (!np) return PP_OK;
    float *part, *amx = (float *)c->aux, *als = amx + np;
    PP_CHECK(pp_cuda_workspace(c, 2 * (size_t)np * sizeof(float), (void **)&part, err));
    cudaStream_t s = cu_of(c->dev)->stream;
    pp_cu_launch L = pp_cu_launch_rows(np, e.c);
    k_xent<<<L.grid, L.block, 0, s>>>(e, cu_io_of(c->in[0]), c->in[1].data, cu_io_at(c->in, 2, c->nin), part, amx, als,
                                      cu_io_at(c->out, 1, c->nout));
    CU_LAUNCHED(c);
    /* the labels' weight for backward's mean, then the loss */
    k_xent_total<<<1, 1024, 0, s>>>(part, np, XENT_TOTAL_WEIGHT, als + np);
    CU_LAUNCHED(c);
    if (e.reduction == PP_XENT_NONE)
        CU_TRY(c, cudaMemcpy2DAsync(c->out[0].data, sizeof(float), part, 2 * sizeof(float), sizeof(float), (size_t)np,
                                    cudaMemcpyDeviceToDevice, s));
    else {
        k_xent_total<<<1, 1024, 0, s>>>(part, np, e.reduction == PP_XENT_MEAN ? XENT_TOTAL_MEAN : XENT_TOTAL_LOSS,
                                        (float *)c->out[0].data);
        CU_LAUNCHED(c);
    }
    return PP_OK;
}

/* dx (+)= g_p (softmax - onehot) with g_p = w (g[p] or g[0] / total weight), plus the
 * log_prob output's gradient; softmax from the forward's max and log-sum-exp */
__global__ void __launch_bounds__(1024)
    k_xent_grad(xent e, cu_io x, const void *lab, cu_io w, const float *g, cu_io glp, const float *amx,
                const float *als, cu_io dx, int assign)
{
    const int64_t p = blockIdx.x, base = (p / e.d) * e.c * e.d + p % e.d, np = e.n * e.d;
    const float mx = amx[p], ls = als[p], tw = als[np];
    float sg = 0.f;
    for (int64_t j = threadIdx.x; glp.p && j < e.c; j += blockDim.x) sg += cu_ld(glp, base + j * e.d);
    if (glp.p) sg = cu_block_reduce(sg, cu_sum(), 0.f);
    float wt;
    const int64_t l = xent_label(e, lab, w, p, &wt);
    float gp = 0.f;
    if (g && wt != 0.f) gp = e.reduction == PP_XENT_NONE ? wt * g[p] : e.reduction == PP_XENT_SUM ? wt * g[0]
                                                     : (tw > 0.f ? wt * (g[0] / tw) : 0.f);
    for (int64_t j = threadIdx.x; j < e.c; j += blockDim.x) {
        const int64_t i = base + j * e.d;
        const float lp = pp_logsoftmax_out(cu_ld(x, i), mx, ls);
        float v = gp != 0.f ? pp_xent_grad(lp, j == l, gp) : 0.f;
        if (glp.p) v += pp_logsoftmax_grad(lp, cu_ld(glp, i), sg);
        cu_put(dx, i, v, !assign);
    }
}

PP_CU_BWD(pp_cu_xent_backward)
{
    const float *g = (const float *)grad_out[0].data;
    const cu_io glp = cu_io_at(grad_out, 1, c->nout), dx = cu_io_of(grad_in[0]);
    const int assign = c->grad_fresh & 1;
    if (!dx.p || (!g && !glp.p && !assign)) return PP_OK;   /* a fresh gradient is written, 0 at least */
    xent e;
    PP_CHECK(pp_xent_setup(c, &e, err));
    if (!xent_native(&c->in[0], &grad_out[0], c->nout > 1 ? &grad_out[1] : NULL, c->nin > 2 ? &c->in[2] : NULL) ||
        !cu_io_float(dx.t))
        return pp_lowp_backward(c, grad_out, grad_in, err);
    const int64_t np = e.n * e.d;
    if (!np) return PP_OK;
    const float *amx = (const float *)c->aux;
    pp_cu_launch L = pp_cu_launch_rows(np, e.c);
    k_xent_grad<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(e, cu_io_of(c->in[0]), c->in[1].data,
                                                                cu_io_at(c->in, 2, c->nin), g, glp, amx, amx + np, dx,
                                                                assign);
    CU_LAUNCHED(c);
    return PP_OK;
}
