/* Per-element math of the "nn" kernels (softmax, log-softmax, the row normalisations,
 * cross-entropy, rotary embedding), shared by the cpu and cuda backends (DESIGN.md: one element
 * function, two devices). Row reductions (max, sums) are the backend's business. */
#ifndef PP_KERNELS_ELEMENT_NN_H
#define PP_KERNELS_ELEMENT_NN_H

#include <onnxpipe/core.h>

#include <math.h>
#include <stdint.h>

/* exp(x) to about 1 ulp (Cephes polynomial), with no branches and no calls so that a
 * loop of it vectorises (libm's expf does not, and dominates softmax otherwise).
 * x < -87 (and -inf) gives 0, x > 88 (and +inf) gives inf, NaN stays NaN. */
static inline PP_HD float pp_nn_expf(float x)
{
    union { float f; uint32_t u; } v = {x};
    const uint32_t u = v.u;
    /* all-ones masks, from integer compares of the bits (sign-magnitude) */
    const uint32_t under = (uint32_t)0 - (uint32_t)((u > 0xC2AE0000u) & (u <= 0xFF800000u));
    const uint32_t over = (uint32_t)0 - (uint32_t)((u > 0x42B00000u) & (u <= 0x7F800000u));
    v.u = u & ~(under | over);
    const float y = v.f;
    const float n = (y * 1.44269504088896341f + 12582912.0f) - 12582912.0f;   /* round(y / ln 2) */
    const float r = (y - n * 0.693145751953125f) - n * 1.428606765330187045e-06f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union { uint32_t u; float f; } scale = {(uint32_t)((int32_t)n + 127) << 23};
    union { float f; uint32_t u; } e = {p * scale.f};
    e.u = (e.u & ~(under | over)) | (over & 0x7F800000u);
    return e.f;
}

/* ---- softmax over a row: y = exp(x - max) / sum_j exp(x_j - max) ---- */
static inline PP_HD float pp_softmax_exp(float x, float max) { return pp_nn_expf(x - max); }
/* dx = y * (dy - dot), dot = sum_j y_j dy_j */
static inline PP_HD float pp_softmax_grad(float y, float dy, float dot) { return y * (dy - dot); }

/* ---- log-softmax: y = x - max - log(sum_j exp(x_j - max)) ---- */
static inline PP_HD float pp_logsoftmax_out(float x, float max, float logsum) { return x - max - logsum; }
/* dx = dy - exp(y) * sum_j dy_j */
static inline PP_HD float pp_logsoftmax_grad(float y, float dy, float sum_dy) { return dy - pp_nn_expf(y) * sum_dy; }

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
    return g * (pp_nn_expf(logp_j) - (is_label ? 1.0f : 0.0f));
}

/* ---- the other row normalisations (RMSNormalization, InstanceNormalization,
 * GroupNormalization) are layer norm's math: RMS norm with mean 0 and mean_dxhat 0 ---- */

/* ---- rotary embedding: the pair (x1, x2) turned by the angle whose cosine and sine are
 * (c, s); backward turns the gradient pair back (the same with -s) ---- */
static inline PP_HD float pp_rope_re(float x1, float x2, float c, float s) { return c * x1 - s * x2; }
static inline PP_HD float pp_rope_im(float x1, float x2, float c, float s) { return s * x1 + c * x2; }

#endif
