/* cuda InstanceNormalization, GroupNormalization: one block per row through reduce.cuh's
 * block reduction, the parameters' gradients one thread per parameter (deterministic);
 * layout kernels/op_args_nn.c, math element_nn.h, as in kernels/cpu/norm_rows.c.
 * RMSNormalization (a parameter per element) runs on layernorm.cu's row kernels, 16-bit
 * rows natively. */
#include "cuda_internal.h"
#include <onnxpipe/element_nn.h>
#include "nn_cuda.h"
#include "op_args_nn.h"
#include "reduce.cuh"

__global__ void k_norm_rows(const float *x, const float *scale, const float *bias, float *y, float *mean, float *rstd,
                            pp_norm_args a)
{
    const int64_t r = blockIdx.x, o = r * a.d;
    float s = 0.f;
    for (int64_t j = threadIdx.x; a.center && j < a.d; j += blockDim.x) s += x[o + j];
    const float mu = a.center ? cu_block_reduce(s, cu_sum(), 0.f) / (float)a.d : 0.f;
    float v = 0.f;
    for (int64_t j = threadIdx.x; j < a.d; j += blockDim.x) v += (x[o + j] - mu) * (x[o + j] - mu);
    const float rs = pp_layernorm_rstd(cu_block_reduce(v, cu_sum(), 0.f) / (float)a.d, a.eps);
    for (int64_t j = threadIdx.x; j < a.d; j += blockDim.x) {
        const int64_t p = pp_norm_pidx(&a, r, j);
        y[o + j] = pp_layernorm_out(pp_layernorm_xhat(x[o + j], mu, rs), scale[p], bias ? bias[p] : 0.f);
    }
    if (threadIdx.x == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
}

__global__ void k_norm_rows_dx(const float *x, const float *scale, const float *dy, const float *mean,
                               const float *rstd, float *dx, pp_norm_args a)
{
    const int64_t r = blockIdx.x, o = r * a.d;
    const float mu = mean[r], rs = rstd[r], inv_d = 1.f / (float)a.d;
    float sg = 0.f, sgx = 0.f;
    for (int64_t j = threadIdx.x; j < a.d; j += blockDim.x) {
        const float g = dy[o + j] * scale[pp_norm_pidx(&a, r, j)];
        sg += g;
        sgx += g * pp_layernorm_xhat(x[o + j], mu, rs);
    }
    const float mg = a.center ? cu_block_reduce(sg, cu_sum(), 0.f) * inv_d : 0.f;
    const float mgx = cu_block_reduce(sgx, cu_sum(), 0.f) * inv_d;
    for (int64_t j = threadIdx.x; j < a.d; j += blockDim.x)
        dx[o + j] += pp_layernorm_dx(dy[o + j] * scale[pp_norm_pidx(&a, r, j)], pp_layernorm_xhat(x[o + j], mu, rs),
                                     rs, mg, mgx);
}

/* parameter p covers elements [j0, j0 + pdiv) of rows g, g + prow, ... (q = p pdiv = g d + j0) */
__global__ void k_norm_rows_dparams(const float *x, const float *dy, const float *mean, const float *rstd,
                                    float *dscale, float *dbias, pp_norm_args a, int64_t nparams)
{
    CU_FOR(p, nparams) {
        const int64_t q = p * a.pdiv, g = q / a.d, j0 = q - g * a.d;
        float ss = 0.f, sb = 0.f;
        for (int64_t r = g; r < a.m; r += a.prow)
            for (int64_t j = j0; j < j0 + a.pdiv; j++) {
                ss += dy[r * a.d + j] * pp_layernorm_xhat(x[r * a.d + j], mean[r], rstd[r]);
                sb += dy[r * a.d + j];
            }
        if (dscale) dscale[p] += ss;
        if (dbias) dbias[p] += sb;
    }
}

PP_CU_AUX(pp_cu_norm_rows_aux)
{
    return pp_args_norm_aux(c);
}

PP_CU_FWD(pp_cu_norm_rows_forward)
{
    pp_norm_args a;
    PP_CHECK(pp_args_norm(c, &a, err));
    if (c->op == PP_OP_RMS_NORMALIZATION) return pp_cu_rms_forward(c, &a, err);
    if (!a.m || !a.d) return PP_OK;
    float *mean = (float *)c->aux;
    pp_cu_launch L = pp_cu_launch_rows(a.m, a.d);
    k_norm_rows<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(
        (const float *)c->in[0].data, (const float *)c->in[1].data, c->nin > 2 ? (const float *)c->in[2].data : NULL,
        (float *)c->out[0].data, mean, mean + a.m, a);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_BWD(pp_cu_norm_rows_backward)
{
    pp_norm_args a;
    PP_CHECK(pp_args_norm(c, &a, err));
    if (c->op == PP_OP_RMS_NORMALIZATION) return pp_cu_rms_backward(c, &a, grad_out, grad_in, err);
    const float *dy = (const float *)grad_out[0].data;
    if (!a.m || !a.d || !dy) return PP_OK;
    const float *mean = (const float *)c->aux, *x = (const float *)c->in[0].data;
    cudaStream_t s = cu_of(c->dev)->stream;
    if (grad_in[0].data) {
        pp_cu_launch L = pp_cu_launch_rows(a.m, a.d);
        k_norm_rows_dx<<<L.grid, L.block, 0, s>>>(x, (const float *)c->in[1].data, dy, mean, mean + a.m,
                                                  (float *)grad_in[0].data, a);
        CU_LAUNCHED(c);
    }
    float *ds = c->nin > 1 ? (float *)grad_in[1].data : NULL, *db = c->nin > 2 ? (float *)grad_in[2].data : NULL;
    if (ds || db) {
        const int64_t nparams = a.prow * a.d / a.pdiv;
        pp_cu_launch L = pp_cu_launch_1d(nparams);
        k_norm_rows_dparams<<<L.grid, L.block, 0, s>>>(x, dy, mean, mean + a.m, ds, db, a, nparams);
        CU_LAUNCHED(c);
    }
    return PP_OK;
}
