/* cpu BatchNormalization over x (N, C, spatial...): inference with the running statistics,
 * training (ctx->training) with batch statistics, writing the updated running mean/var to
 * outputs 1 and 2 when present (ONNX: run = run * momentum + batch * (1 - momentum), with
 * the biased batch variance). aux keeps the batch mean and 1/sqrt(var + eps) per channel. */
#include "cpu_math.h"

#include <math.h>

typedef struct bn_plan {
    int64_t N, C, HW;
    float eps, momentum;
} bn_plan;

/* x: the input or (backward) its gradient, same shape */
static pp_status bn_plan_make(const pp_kernel_ctx *c, const pp_tensor *x, bn_plan *p, pp_error *err)
{
    PP_CHECK(pp_cpu_want_inputs(c, 5, 5, err));
    PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "epsilon", 1e-5f, &p->eps, c->node, err));
    PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "momentum", 0.9f, &p->momentum, c->node, err));
    if (x->rank < 2)
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (BatchNormalization): input rank %d, expected >= 2", c->node,
                            x->rank);
    p->N = x->dims[0];
    p->C = x->dims[1];
    p->HW = p->N > 0 && p->C > 0 ? pp_tensor_numel(x) / (p->N * p->C) : 0;
    for (int i = 1; i < 5; i++)
        if (c->in[i].rank != 1 || c->in[i].dims[0] != p->C)
            return pp_error_set(err, PP_ERR_SHAPE,
                                "node '%s' (BatchNormalization): input %d must have shape [%lld] (channels)", c->node,
                                i, (long long)p->C);
    return PP_OK;
}

PP_AUX(pp_cpu_batchnorm_aux) { return c->in[0].rank >= 2 ? (size_t)c->in[0].dims[1] * 2 * sizeof(float) : 0; }

PP_FWD(pp_cpu_batchnorm_forward)
{
    bn_plan p;
    PP_CHECK(bn_plan_make(c, &c->in[0], &p, err));
    for (int i = 0; i < 5; i++) PP_CHECK(pp_cpu_want_dtype(c, i, PP_DTYPE_F32, 0, err));
    const float *X = c->in[0].data, *S = c->in[1].data, *B = c->in[2].data, *RM = c->in[3].data,
                *RV = c->in[4].data;
    float *Y = c->out[0].data, *mean_out = c->nout > 1 ? c->out[1].data : NULL;
    float *var_out = c->nout > 2 ? c->out[2].data : NULL, *aux = c->aux;
    double cnt = (double)(p.N * p.HW);
    for (int64_t ch = 0; ch < p.C; ch++) {
        float mean = RM[ch], var = RV[ch];
        if (c->training) {
            double s = 0, s2 = 0;
            for (int64_t n = 0; n < p.N; n++)
                for (int64_t i = 0; i < p.HW; i++) s += X[(n * p.C + ch) * p.HW + i];
            double m = cnt > 0 ? s / cnt : 0;
            for (int64_t n = 0; n < p.N; n++)
                for (int64_t i = 0; i < p.HW; i++) {
                    double d = X[(n * p.C + ch) * p.HW + i] - m;
                    s2 += d * d;
                }
            mean = (float)m;
            var = cnt > 0 ? (float)(s2 / cnt) : 0.f;
            if (mean_out) mean_out[ch] = RM[ch] * p.momentum + mean * (1.f - p.momentum);
            if (var_out) var_out[ch] = RV[ch] * p.momentum + var * (1.f - p.momentum);
        }
        float rstd = 1.f / sqrtf(var + p.eps), a = S[ch] * rstd, b = B[ch] - mean * a;
        if (aux) {
            aux[ch] = mean;
            aux[p.C + ch] = rstd;
        }
        for (int64_t n = 0; n < p.N; n++) {
            const float *x = X + (n * p.C + ch) * p.HW;
            float *y = Y + (n * p.C + ch) * p.HW;
            for (int64_t i = 0; i < p.HW; i++) y[i] = x[i] * a + b;
        }
    }
    return PP_OK;
}

/* Training: dx = rstd (dxh - mean(dxh) - xh mean(dxh xh)) with xh = (x - mean) rstd and
 * dxh = dy scale. Inference: the statistics are inputs, so dx = dy scale rstd and the
 * running mean/var get their gradients too. */
PP_BWD(pp_cpu_batchnorm_backward)
{
    const float *GY = grad_out[0].data;
    if (!GY) return PP_OK;
    bn_plan p;
    PP_CHECK(bn_plan_make(c, &grad_out[0], &p, err));
    const float *X = c->in[0].data, *S = c->in[1].data, *RM = c->in[3].data, *RV = c->in[4].data;
    const float *aux = c->aux;
    if (c->training && !aux)
        return pp_error_set(err, PP_ERR_INTERNAL, "node '%s' (BatchNormalization): training backward needs aux",
                            c->node);
    float *GX = grad_in[0].data, *GS = grad_in[1].data, *GB = grad_in[2].data, *GM = grad_in[3].data,
          *GV = grad_in[4].data;
    double cnt = (double)(p.N * p.HW);
    for (int64_t ch = 0; ch < p.C; ch++) {
        float mean = c->training ? aux[ch] : RM[ch];
        float rstd = c->training ? aux[p.C + ch] : 1.f / sqrtf(RV[ch] + p.eps);
        double sdy = 0, sdyxh = 0;
        for (int64_t n = 0; n < p.N; n++) {
            const float *x = X + (n * p.C + ch) * p.HW, *gy = GY + (n * p.C + ch) * p.HW;
            for (int64_t i = 0; i < p.HW; i++) {
                sdy += gy[i];
                sdyxh += gy[i] * (x[i] - mean) * rstd;
            }
        }
        if (GS) GS[ch] += (float)sdyxh;
        if (GB) GB[ch] += (float)sdy;
        float a = S[ch] * rstd;
        if (!c->training) {
            if (GM) GM[ch] += (float)(-a * sdy);
            if (GV) GV[ch] += (float)(-0.5 * S[ch] * sdyxh * rstd * rstd);
        }
        if (!GX) continue;
        float m1 = c->training ? (float)(sdy / cnt) : 0.f, m2 = c->training ? (float)(sdyxh / cnt) : 0.f;
        for (int64_t n = 0; n < p.N; n++) {
            const float *x = X + (n * p.C + ch) * p.HW, *gy = GY + (n * p.C + ch) * p.HW;
            float *gx = GX + (n * p.C + ch) * p.HW;
            for (int64_t i = 0; i < p.HW; i++) gx[i] += a * (gy[i] - m1 - (x[i] - mean) * rstd * m2);
        }
    }
    return PP_OK;
}
