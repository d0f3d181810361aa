/* SkipLayerNormalization and SkipSimplifiedLayerNormalization on the cpu (onnxruntime's
 * com.microsoft residual norms, made by stage/fuse_residual_norm.c of Add + LayerNorm /
 * RMSNorm): s = input + skip (output 3, what backward reads), y = norm(s). They run the
 * unfused ops' own loops (the Add's sum, layernorm.c's and norm_rows.c's rows), so a fused
 * model computes the same bits; backward folds the Add's into the norm's: per row
 * g = ds + dnorm/ds, and input's and skip's gradients add g (or take it when fresh). */
#include "cpu_math.h"
#include "op_args_nn.h"

#include <stdlib.h>
#include <string.h>

PP_AUX(pp_cpu_skip_norm_aux)
{
    return pp_args_norm_aux(c);
}

/* the norm's rows of a (m rows from x): LayerNorm's when centred, else RMSNorm's */
static void norm_rows(const pp_norm_args *a, const float *x, const float *gamma, const float *beta, float *y,
                      float *mean, float *rstd, float *buf)
{
    if (a->center) pp_cpu_ln_rows(x, gamma, beta, y, mean, rstd, a->m, a->d, a->eps);
    else pp_cpu_norm_rows_run(a, x, gamma, NULL, y, mean, rstd, buf);
}

static void norm_rows_grad(const pp_norm_args *a, const float *x, const float *gamma, const float *dy,
                           const float *mean, const float *rstd, float *dx, float *dgamma, float *dbeta, float *buf)
{
    if (a->center) pp_cpu_ln_rows_grad(x, gamma, dy, mean, rstd, dx, dgamma, dbeta, a->m, a->d);
    else pp_cpu_norm_rows_grad(a, x, gamma, dy, mean, rstd, dx, dgamma, NULL, buf);
}

PP_FWD(pp_cpu_skip_norm_forward)
{
    pp_norm_args a;
    PP_CHECK(pp_args_norm(c, &a, err));
    const int64_t n = a.m * a.d;
    const float *x = c->in[0].data, *skip = c->in[1].data;
    float *sum = c->nout > 3 ? c->out[3].data : NULL, *mean = c->aux;
    float *buf = malloc((2 * (size_t)a.d + (sum ? 0 : (size_t)n)) * sizeof(float) + 1);
    if (!buf) return pp_args_fail(c, PP_ERR_NOMEM, err, "no memory for %lld floats", (long long)(n + 2 * a.d));
    if (!sum) sum = buf + 2 * a.d;   /* no output 3: the sum only for this call */
    for (int64_t i = 0; i < n; i++) sum[i] = x[i] + skip[i];
    norm_rows(&a, sum, c->in[2].data, a.center && c->nin > 3 ? c->in[3].data : NULL, c->out[0].data, mean,
              mean + a.m, buf);
    free(buf);
    return PP_OK;
}

PP_BWD(pp_cpu_skip_norm_backward)
{
    pp_norm_args a;
    PP_CHECK(pp_args_norm(c, &a, err));
    const float *s = c->nout > 3 ? c->out[3].data : NULL, *dy = grad_out[0].data;
    const float *ds = c->nout > 3 ? grad_out[3].data : NULL, *mean = c->aux, *rstd = mean + a.m;
    float *dx = grad_in[0].data, *dskip = grad_in[1].data, *dgamma = grad_in[2].data;
    float *dbeta = a.center && c->nin > 3 ? grad_in[3].data : NULL;
    if (!dy && !ds) {   /* nothing flows: a fresh gradient is 0 */
        if (dx && (c->grad_fresh & 1)) memset(dx, 0, (size_t)(a.m * a.d) * sizeof(float));
        if (dskip && (c->grad_fresh & 2)) memset(dskip, 0, (size_t)(a.m * a.d) * sizeof(float));
        return PP_OK;
    }
    if (!s) return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "backward reads output 3 (input_skip_bias_sum), which "
                                "the node does not have");
    float *buf = malloc(4 * (size_t)a.d * sizeof(float) + 1);   /* [3][d] the rows' scratch, [d] g */
    if (!buf) return pp_args_fail(c, PP_ERR_NOMEM, err, "no memory for a row of %lld floats", (long long)a.d);
    float *g = buf + 3 * a.d;
    pp_norm_args row = a;
    row.m = 1;
    const int want = dx || dskip, fresh_x = c->grad_fresh & 1, fresh_s = c->grad_fresh >> 1 & 1;
    for (int64_t r = 0; r < a.m; r++) {
        const int64_t o = r * a.d;
        if (want) {
            if (ds) memcpy(g, ds + o, (size_t)a.d * sizeof(float));
            else memset(g, 0, (size_t)a.d * sizeof(float));
        }
        if (dy) norm_rows_grad(&row, s + o, c->in[2].data, dy + o, mean + r, rstd + r, want ? g : NULL, dgamma, dbeta,
                               buf);
        for (int64_t j = 0; dx && j < a.d; j++) dx[o + j] = fresh_x ? g[j] : dx[o + j] + g[j];
        for (int64_t j = 0; dskip && j < a.d; j++) dskip[o + j] = fresh_s ? g[j] : dskip[o + j] + g[j];
    }
    free(buf);
    return PP_OK;
}
