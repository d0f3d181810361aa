/* RMSNormalization, InstanceNormalization and GroupNormalization on the cpu: X as rows
 * normalised on their own (layout: kernels/op_args_nn.c; math: element_nn.h's layer norm,
 * RMS with mean 0). Forward keeps mean and rstd per row in aux ([2][M] floats); backward
 * reads X, scale and aux. SkipSimplifiedLayerNormalization (skip_norm.c) runs the same row
 * loops on input + skip. */
#include "cpu_math.h"
#include <onnxpipe/element_nn.h>
#include "nn_util.h"
#include "op_args_nn.h"

#include <stdlib.h>

static inline int direct(const pp_norm_args *a) { return a->prow == 1 && a->pdiv == 1; }

/* the row's parameter per element: p itself when indexed by j alone, else expanded into buf[d] */
static const float *row_params(const pp_norm_args *a, int64_t r, const float *p, float *buf)
{
    if (!p || direct(a)) return p;
    for (int64_t j = 0; j < a->d; j++) buf[j] = p[pp_norm_pidx(a, r, j)];
    return buf;
}

PP_AUX(pp_cpu_norm_rows_aux)
{
    return pp_args_norm_aux(c);
}

/* Rows [0, a->m) forward; buf: 2 d floats of scratch (the expanded parameters) */
PP_CPU_CLONES void pp_cpu_norm_rows_run(const pp_norm_args *a, const float *x, const float *scale, const float *bias,
                                        float *y, float *mean, float *rstd, float *buf)
{
    const float inv_d = 1.0f / (float)a->d;
    for (int64_t r = 0; r < a->m; r++) {
        const float *xr = x + r * a->d;
        float *yr = y + r * a->d;
        const float mu = a->center ? nn_row_sum(xr, a->d, 1) * inv_d : 0.0f;
        for (int64_t j = 0; j < a->d; j++) yr[j] = xr[j] - mu;     /* y as scratch: x - mean */
        const float rs = pp_layernorm_rstd(nn_row_dot(yr, yr, a->d, 1) * inv_d, a->eps);
        const float *s = row_params(a, r, scale, buf), *b = row_params(a, r, bias, buf + a->d);
        if (b)
            for (int64_t j = 0; j < a->d; j++) yr[j] = pp_layernorm_out(pp_layernorm_xhat(xr[j], mu, rs), s[j], b[j]);
        else
            for (int64_t j = 0; j < a->d; j++) yr[j] = pp_layernorm_out(pp_layernorm_xhat(xr[j], mu, rs), s[j], 0.0f);
        mean[r] = mu;
        rstd[r] = rs;
    }
}

/* Rows [0, a->m) backward, dx / dscale / dbias may be NULL; buf: 3 d floats of scratch */
PP_CPU_CLONES void pp_cpu_norm_rows_grad(const pp_norm_args *a, const float *x, const float *scale, const float *dy,
                                         const float *mean, const float *rstd, float *dx, float *dscale, float *dbias,
                                         float *buf)
{
    float *g = buf + a->d, *xh = g + a->d;   /* [3][d]: scale, dxhat, xhat */
    const float inv_d = 1.0f / (float)a->d;
    for (int64_t r = 0; r < a->m; r++) {
        const float *xr = x + r * a->d, *dyr = dy + r * a->d, *s = row_params(a, r, scale, buf);
        const float mu = mean[r], rs = rstd[r];
        for (int64_t j = 0; j < a->d; j++) {
            xh[j] = pp_layernorm_xhat(xr[j], mu, rs);
            g[j] = dyr[j] * s[j];
        }
        if (dx) {
            const float mg = a->center ? nn_row_sum(g, a->d, 1) * inv_d : 0.0f, mgx = nn_row_dot(g, xh, a->d, 1) * inv_d;
            float *dxr = dx + r * a->d;
            for (int64_t j = 0; j < a->d; j++) dxr[j] += pp_layernorm_dx(g[j], xh[j], rs, mg, mgx);
        }
        if (dscale && direct(a))
            for (int64_t j = 0; j < a->d; j++) dscale[j] += dyr[j] * xh[j];
        else if (dscale)
            for (int64_t j = 0; j < a->d; j++) dscale[pp_norm_pidx(a, r, j)] += dyr[j] * xh[j];
        for (int64_t j = 0; dbias && j < a->d; j++) dbias[pp_norm_pidx(a, r, j)] += dyr[j];
    }
}

PP_FWD(pp_cpu_norm_rows_forward)
{
    pp_norm_args a;
    PP_CHECK(pp_args_norm(c, &a, err));
    float *mean = c->aux, *buf = malloc(2 * (size_t)a.d * sizeof(float) + 1);
    if (!buf) return pp_args_fail(c, PP_ERR_NOMEM, err, "no memory for a row of %lld floats", (long long)a.d);
    pp_cpu_norm_rows_run(&a, c->in[0].data, c->in[1].data, c->nin > 2 ? c->in[2].data : NULL, c->out[0].data, mean,
                         mean + a.m, buf);
    free(buf);
    return PP_OK;
}

PP_BWD(pp_cpu_norm_rows_backward)
{
    pp_norm_args a;
    PP_CHECK(pp_args_norm(c, &a, err));
    const float *mean = c->aux;
    if (!grad_out[0].data) return PP_OK;
    float *buf = malloc(3 * (size_t)a.d * sizeof(float) + 1);
    if (!buf) return pp_args_fail(c, PP_ERR_NOMEM, err, "no memory for a row of %lld floats", (long long)a.d);
    pp_cpu_norm_rows_grad(&a, c->in[0].data, c->in[1].data, grad_out[0].data, mean, mean + a.m, grad_in[0].data,
                          c->nin > 1 ? grad_in[1].data : NULL, c->nin > 2 ? grad_in[2].data : NULL, buf);
    free(buf);
    return PP_OK;
}
