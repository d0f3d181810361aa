/* Per-element math of the "nn" kernels (softmax, log-softmax, layer norm,
 * cross-entropy), shared by the cpu and cuda backends (DESIGN.md: one element
 * function, two devices). Row reductions (max, sums) are the backend's business. */
#ifndef PP_KERNELS_ELEMENT_NN_H
#define PP_KERNELS_ELEMENT_NN_H

#include <onnxpipe/core.h>

#include <math.h>

/* ---- softmax over a row: y = exp(x - max) / sum_j exp(x_j - max) ---- */
static inline PP_HD float pp_softmax_exp(float x, float max) { return expf(x - max); }
/* dx = y * (dy - dot), dot = sum_j y_j dy_j */
static inline PP_HD float pp_softmax_grad(float y, float dy, float dot) { return y * (dy - dot); }

/* ---- log-softmax: y = x - max - log(sum_j exp(x_j - max)) ---- */
static inline PP_HD float pp_logsoftmax_out(float x, float max, float logsum) { return x - max - logsum; }
/* dx = dy - exp(y) * sum_j dy_j */
static inline PP_HD float pp_logsoftmax_grad(float y, float dy, float sum_dy) { return dy - expf(y) * sum_dy; }

/* ---- layer norm over a row of D: xhat = (x - mean) * rstd, y = xhat * scale + bias ---- */
static inline PP_HD float pp_layernorm_rstd(float var, float eps) { return 1.0f / sqrtf(var + eps); }
static inline PP_HD float pp_layernorm_xhat(float x, float mean, float rstd) { return (x - mean) * rstd; }
static inline PP_HD float pp_layernorm_out(float xhat, float scale, float bias) { return xhat * scale + bias; }
/* dx from dxhat = dy * scale: rstd * (dxhat - mean_j dxhat_j - xhat * mean_j dxhat_j xhat_j) */
static inline PP_HD float pp_layernorm_dx(float dxhat, float xhat, float rstd, float mean_dxhat,
                                          float mean_dxhat_xhat)
{
    return rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
}
/* dx from gradients on the Mean (g_mean) and InvStdDev (g_rstd) outputs:
 * dmean/dx = 1/D, drstd/dx = -rstd^2 * xhat / D */
static inline PP_HD float pp_layernorm_dx_stats(float g_mean, float g_rstd, float xhat, float rstd, float inv_d)
{
    return (g_mean - g_rstd * rstd * rstd * xhat) * inv_d;
}

/* ---- softmax cross-entropy at one position: loss = -w * logp[label] ---- */
static inline PP_HD float pp_xent_loss(float logp_label, float w) { return -w * logp_label; }
/* d loss / d score_j, times the upstream gradient g (already scaled by w and the
 * reduction): g * (softmax_j - [j == label]) */
static inline PP_HD float pp_xent_grad(float logp_j, int is_label, float g)
{
    return g * (expf(logp_j) - (is_label ? 1.0f : 0.0f));
}

#endif
