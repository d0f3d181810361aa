/* cuda SoftmaxCrossEntropyLoss (one block per position, labels read on the device). A
 * label out of [0, C) that is not ignore_index gives a NaN loss (the GPU cannot name it
 * without a synchronisation). */
#include "cuda_internal.h"
#include <onnxpipe/element_nn.h>
#include "xent.h"
#include "nn_cuda.h"
#include "reduce.cuh"

#include <string.h>

typedef pp_xent xent;   /* kernels/xent.c parses and checks the call */

/* label and weight (0 when ignored, NaN when out of range) at position p */
__device__ inline int64_t xent_label(const xent &e, const void *lab, const float *w, int64_t p, float *wt)
{
    const int64_t l = e.lab64 ? ((const int64_t *)lab)[p] : ((const int32_t *)lab)[p];
    if (e.has_ignore && l == e.ignore) *wt = 0.f;
    else if (l < 0 || l >= e.c) *wt = NAN;
    else *wt = w ? w[l] : 1.f;
    return l;
}

/* per position: loss[p] and weight[p] into part (2 floats), log_prob if asked */
__global__ void k_xent(xent e, const float *x, const void *lab, const float *w, float *part, float *logp)
{
    const int64_t p = blockIdx.x, base = (p / e.d) * e.c * e.d + p % e.d;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < e.c; j += blockDim.x) mx = cu_max()(mx, x[base + j * e.d]);
    mx = cu_block_reduce(mx, cu_max(), -INFINITY);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < e.c; j += blockDim.x) s += pp_softmax_exp(x[base + j * e.d], mx);
    const float ls = logf(cu_block_reduce(s, cu_sum(), 0.f));
    if (logp)
        for (int64_t j = threadIdx.x; j < e.c; j += blockDim.x)
            logp[base + j * e.d] = pp_logsoftmax_out(x[base + j * e.d], mx, ls);
    if (threadIdx.x == 0) {
        float wt;
        const int64_t l = xent_label(e, lab, w, p, &wt);
        part[2 * p] = wt == 0.f ? 0.f : wt != wt ? NAN : pp_xent_loss(pp_logsoftmax_out(x[base + l * e.d], mx, ls), wt);
        part[2 * p + 1] = wt;
    }
}

/* out = what of the per-position (loss, weight) pairs, summed in double in one block */
enum { XENT_TOTAL_LOSS, XENT_TOTAL_MEAN, XENT_TOTAL_WEIGHT };
__global__ void k_xent_total(const float *part, int64_t np, int what, float *out)
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

PP_CU_FWD(pp_cu_xent_forward)
{
    xent e;
    PP_CHECK(pp_xent_setup(c, &e, err));
    const int64_t np = e.n * e.d;
    if (!np) return PP_OK;
    float *part;
    PP_CHECK(pp_cuda_workspace(c, 2 * (size_t)np * sizeof(float), (void **)&part, err));
    cudaStream_t s = cu_of(c->dev)->stream;
    pp_cu_launch L = pp_cu_launch_rows(np, e.c);
    k_xent<<<L.grid, L.block, 0, s>>>(e, (const float *)c->in[0].data, c->in[1].data,
                                      c->nin > 2 ? (const float *)c->in[2].data : NULL, part,
                                      c->nout > 1 ? (float *)c->out[1].data : NULL);
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

/* dx += g_p (softmax - onehot) with g_p = w (g[p] or g[0] / total weight), plus the
 * log_prob output's gradient */
__global__ void k_xent_grad(xent e, const float *x, const void *lab, const float *w, const float *g, const float *glp,
                            const float *tw, float *dx)
{
    const int64_t p = blockIdx.x, base = (p / e.d) * e.c * e.d + p % e.d;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < e.c; j += blockDim.x) mx = cu_max()(mx, x[base + j * e.d]);
    mx = cu_block_reduce(mx, cu_max(), -INFINITY);
    float s = 0.f, sg = 0.f;
    for (int64_t j = threadIdx.x; j < e.c; j += blockDim.x) {
        s += pp_softmax_exp(x[base + j * e.d], mx);
        if (glp) sg += glp[base + j * e.d];
    }
    const float ls = logf(cu_block_reduce(s, cu_sum(), 0.f));
    if (glp) sg = cu_block_reduce(sg, cu_sum(), 0.f);
    float wt;
    const int64_t l = xent_label(e, lab, w, p, &wt);
    float gp = 0.f;
    if (g && wt != 0.f) gp = e.reduction == PP_XENT_NONE ? wt * g[p] : e.reduction == PP_XENT_SUM ? wt * g[0]
                                                     : (*tw > 0.f ? wt * (g[0] / *tw) : 0.f);
    for (int64_t j = threadIdx.x; j < e.c; j += blockDim.x) {
        const int64_t i = base + j * e.d;
        const float lp = pp_logsoftmax_out(x[i], mx, ls);
        float v = gp != 0.f ? pp_xent_grad(lp, j == l, gp) : 0.f;
        if (glp) v += pp_logsoftmax_grad(lp, glp[i], sg);
        dx[i] += v;
    }
}

PP_CU_BWD(pp_cu_xent_backward)
{
    float *dx = (float *)grad_in[0].data;
    const float *g = (const float *)grad_out[0].data, *glp = c->nout > 1 ? (const float *)grad_out[1].data : NULL;
    if (!dx || (!g && !glp)) return PP_OK;
    xent e;
    PP_CHECK(pp_xent_setup(c, &e, err));
    const int64_t np = e.n * e.d;
    if (!np) return PP_OK;
    float *part;
    PP_CHECK(pp_cuda_workspace(c, (2 * (size_t)np + 1) * sizeof(float), (void **)&part, err));
    cudaStream_t s = cu_of(c->dev)->stream;
    const float *w = c->nin > 2 ? (const float *)c->in[2].data : NULL;
    pp_cu_launch L = pp_cu_launch_rows(np, e.c);
    if (g && e.reduction == PP_XENT_MEAN) {
        /* the total weight: the forward's per-position pass, summed with mean off */
        k_xent<<<L.grid, L.block, 0, s>>>(e, (const float *)c->in[0].data, c->in[1].data, w, part, NULL);
        CU_LAUNCHED(c);
        k_xent_total<<<1, 1024, 0, s>>>(part, np, XENT_TOTAL_WEIGHT, part + 2 * np);
        CU_LAUNCHED(c);
    }
    k_xent_grad<<<L.grid, L.block, 0, s>>>(e, (const float *)c->in[0].data, c->in[1].data, w, g, glp, part + 2 * np, dx);
    CU_LAUNCHED(c);
    return PP_OK;
}
