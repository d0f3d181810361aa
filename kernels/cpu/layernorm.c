/* LayerNormalization on the cpu: X seen as [M, D] with D = prod(dims[axis:]) (attributes
 * and checks: kernels/op_args.c); Scale and B hold D values. Forward keeps mean and rstd per row in aux ([2][M] floats); backward
 * reads X, Scale and aux, and also takes gradients on the Mean / InvStdDev outputs. The
 * row loops are pp_cpu_ln_rows / pp_cpu_ln_rows_grad, which SkipLayerNormalization
 * (skip_norm.c) runs on input + skip, so the fused op has the unfused op's bits. */
#include <onnxpipe/element_nn.h>
#include "cpu_math.h"
#include "nn_util.h"
#include "op_args.h"

#include <string.h>

size_t pp_cpu_layernorm_aux_bytes(const pp_kernel_ctx *c)
{
    return pp_args_layernorm_aux(c);
}

PP_CPU_CLONES void pp_cpu_ln_rows(const float *x, const float *scale, const float *bias, float *y, float *mean,
                                  float *rstd, int64_t m, int64_t d, float eps)
{
    const float inv_d = 1.0f / (float)d;
    for (int64_t r = 0; r < m; r++) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        const float mu = nn_row_sum(xr, d, 1) * inv_d;
        for (int64_t j = 0; j < d; j++) yr[j] = xr[j] - mu;     /* y as scratch: x - mean */
        const float rs = pp_layernorm_rstd(nn_row_dot(yr, yr, d, 1) * inv_d, eps);
        if (bias)
            for (int64_t j = 0; j < d; j++) yr[j] = pp_layernorm_out(pp_layernorm_xhat(xr[j], mu, rs), scale[j], bias[j]);
        else
            for (int64_t j = 0; j < d; j++) yr[j] = pp_layernorm_out(pp_layernorm_xhat(xr[j], mu, rs), scale[j], 0.0f);
        mean[r] = mu;
        rstd[r] = rs;
    }
}

PP_CPU_CLONES void pp_cpu_ln_rows_grad(const float *x, const float *scale, const float *dy, const float *mean,
                                       const float *rstd, float *dx, float *dscale, float *dbias, int64_t m, int64_t d)
{
    const float inv_d = 1.0f / (float)d;
    for (int64_t r = 0; r < m; r++) {
        const float *xr = x + r * d, *dyr = dy + r * d;
        const float mu = mean[r], rs = rstd[r];
        if (dscale)
            for (int64_t j = 0; j < d; j++) dscale[j] += dyr[j] * pp_layernorm_xhat(xr[j], mu, rs);
        if (dbias)
            for (int64_t j = 0; j < d; j++) dbias[j] += dyr[j];
        if (!dx) continue;
        /* sums of dxhat = dy * scale and of dxhat * (x - mean), pipelined */
        float sg[NN_LANES] = {0}, sgx[NN_LANES] = {0};
        int64_t j = 0;
        for (; j + NN_LANES <= d; j += NN_LANES)
            for (int k = 0; k < NN_LANES; k++) {
                const float g = dyr[j + k] * scale[j + k];
                sg[k] += g;
                sgx[k] += g * (xr[j + k] - mu);
            }
        for (; j < d; j++) {
            sg[0] += dyr[j] * scale[j];
            sgx[0] += dyr[j] * scale[j] * (xr[j] - mu);
        }
        for (int k = 1; k < NN_LANES; k++) {
            sg[0] += sg[k];
            sgx[0] += sgx[k];
        }
        const float mg = sg[0] * inv_d, mgx = sgx[0] * rs * inv_d;
        float *dxr = dx + r * d;
        for (j = 0; j < d; j++)
            dxr[j] += pp_layernorm_dx(dyr[j] * scale[j], pp_layernorm_xhat(xr[j], mu, rs), rs, mg, mgx);
    }
}

PP_FWD(pp_cpu_layernorm_forward)
{
    pp_ln_args l;
    PP_CHECK(pp_args_layernorm(c, &l, err));
    float *mean = c->aux, *rstd = mean + l.m;
    pp_cpu_ln_rows(c->in[0].data, c->in[1].data, c->nin > 2 ? c->in[2].data : NULL, c->out[0].data, mean, rstd, l.m,
                   l.d, l.eps);
    if (c->nout > 1 && c->out[1].data) memcpy(c->out[1].data, mean, (size_t)l.m * sizeof(float));
    if (c->nout > 2 && c->out[2].data) memcpy(c->out[2].data, rstd, (size_t)l.m * sizeof(float));
    return PP_OK;
}

PP_CPU_CLONES PP_BWD(pp_cpu_layernorm_backward)
{
    pp_ln_args l;
    PP_CHECK(pp_args_layernorm(c, &l, err));
    const float *x = c->in[0].data, *mean = c->aux, *rstd = mean + l.m;
    const float *dy = grad_out[0].data;
    const float *gmean = c->nout > 1 ? grad_out[1].data : NULL, *grstd = c->nout > 2 ? grad_out[2].data : NULL;
    float *dx = grad_in[0].data;
    if (dy)
        pp_cpu_ln_rows_grad(x, c->in[1].data, dy, mean, rstd, dx, c->nin > 1 ? grad_in[1].data : NULL,
                            c->nin > 2 ? grad_in[2].data : NULL, l.m, l.d);
    if (!dx || (!gmean && !grstd)) return PP_OK;
    const float inv_d = 1.0f / (float)l.d;
    for (int64_t r = 0; r < l.m; r++) {
        const float *xr = x + r * l.d, mu = mean[r], rs = rstd[r];
        const float gm = gmean ? gmean[r] : 0.0f, gr = grstd ? grstd[r] : 0.0f;
        float *dxr = dx + r * l.d;
        for (int64_t j = 0; j < l.d; j++)
            dxr[j] += pp_layernorm_dx_stats(gm, gr, pp_layernorm_xhat(xr[j], mu, rs), rs, inv_d);
    }
    return PP_OK;
}
