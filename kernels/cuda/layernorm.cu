/* cuda LayerNormalization: one block per row through reduce.cuh's block reduction; the
 * layout and checks are kernels/op_args.c's and the per-element math element_nn.h's, as
 * in kernels/cpu/layernorm.c. */
#include "cuda_internal.h"
#include <onnxpipe/element_nn.h>
#include "nn_cuda.h"
#include "op_args.h"
#include "reduce.cuh"

/* ---------------- LayerNormalization: X as [M, D]; aux = mean[M], rstd[M] ---------------- */

__global__ void k_layernorm(const float *x, const float *scale, const float *bias, float *y, float *mean, float *rstd,
                            float *out_mean, float *out_rstd, int64_t D, float eps)
{
    const float *xr = x + blockIdx.x * D;
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) s += xr[j];
    const float mu = cu_block_reduce(s, cu_sum(), 0.f) / (float)D;
    float v = 0.f;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) v += (xr[j] - mu) * (xr[j] - mu);
    const float rs = pp_layernorm_rstd(cu_block_reduce(v, cu_sum(), 0.f) / (float)D, eps);
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x)
        y[blockIdx.x * D + j] = pp_layernorm_out(pp_layernorm_xhat(xr[j], mu, rs), scale[j], bias ? bias[j] : 0.f);
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = mu;
        rstd[blockIdx.x] = rs;
        if (out_mean) out_mean[blockIdx.x] = mu;
        if (out_rstd) out_rstd[blockIdx.x] = rs;
    }
}

__global__ void k_layernorm_dx(const float *x, const float *scale, const float *dy, const float *g_mean,
                               const float *g_rstd, const float *mean, const float *rstd, float *dx, int64_t D)
{
    const int64_t r = blockIdx.x, o = r * D;
    const float mu = mean[r], rs = rstd[r], inv_d = 1.f / (float)D;
    float a = 0.f, b = 0.f;
    for (int64_t j = threadIdx.x; dy && j < D; j += blockDim.x) {
        const float dxh = dy[o + j] * scale[j];
        a += dxh;
        b += dxh * pp_layernorm_xhat(x[o + j], mu, rs);
    }
    a = cu_block_reduce(a, cu_sum(), 0.f) * inv_d;
    b = cu_block_reduce(b, cu_sum(), 0.f) * inv_d;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
        const float xh = pp_layernorm_xhat(x[o + j], mu, rs);
        float g = dy ? pp_layernorm_dx(dy[o + j] * scale[j], xh, rs, a, b) : 0.f;
        if (g_mean || g_rstd) g += pp_layernorm_dx_stats(g_mean ? g_mean[r] : 0.f, g_rstd ? g_rstd[r] : 0.f, xh, rs, inv_d);
        dx[o + j] += g;
    }
}

/* dScale and dB in two deterministic passes, so that a few hundred columns over thousands
 * of rows fill the GPU: pass 1, one thread per (chunk of LN_CHUNK rows, column), writes the
 * chunk's sums of dy xhat and dy to part[2][chunks][D]; pass 2, one thread per column,
 * adds the chunks in order into dscale / dbias. */
#define LN_CHUNK 64
__global__ void k_layernorm_dparams_part(const float *x, const float *dy, const float *mean, const float *rstd,
                                         float *part, int64_t M, int64_t D, int64_t chunks)
{
    CU_FOR(i, chunks * D) {
        const int64_t ch = i / D, j = i - ch * D, r1 = (ch + 1) * LN_CHUNK < M ? (ch + 1) * LN_CHUNK : M;
        float ss = 0.f, sb = 0.f;
        for (int64_t r = ch * LN_CHUNK; r < r1; r++) {
            const float g = dy[r * D + j];
            ss += g * pp_layernorm_xhat(x[r * D + j], mean[r], rstd[r]);
            sb += g;
        }
        part[i] = ss;
        part[chunks * D + i] = sb;
    }
}

__global__ void k_layernorm_dparams_sum(const float *part, float *dscale, float *dbias, int64_t D, int64_t chunks)
{
    CU_FOR(j, D) {
        float ss = 0.f, sb = 0.f;
        for (int64_t ch = 0; ch < chunks; ch++) {
            ss += part[ch * D + j];
            sb += part[(chunks + ch) * D + j];
        }
        if (dscale) dscale[j] += ss;
        if (dbias) dbias[j] += sb;
    }
}

PP_CU_AUX(pp_cu_layernorm_aux)
{
    return pp_args_layernorm_aux(c);
}

PP_CU_FWD(pp_cu_layernorm_forward)
{
    pp_ln_args a;
    PP_CHECK(pp_args_layernorm(c, &a, err));
    const int64_t M = a.m, D = a.d;
    const float eps = a.eps;
    if (!M || !D) return PP_OK;
    float *mean = (float *)c->aux, *rstd = mean + M;
    pp_cu_launch L = pp_cu_launch_rows(M, D);
    k_layernorm<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(
        (const float *)c->in[0].data, (const float *)c->in[1].data,
        c->nin > 2 ? (const float *)c->in[2].data : NULL, (float *)c->out[0].data, mean, rstd,
        c->nout > 1 ? (float *)c->out[1].data : NULL, c->nout > 2 ? (float *)c->out[2].data : NULL, D, eps);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_BWD(pp_cu_layernorm_backward)
{
    pp_ln_args a;
    PP_CHECK(pp_args_layernorm(c, &a, err));
    const int64_t M = a.m, D = a.d;
    const float *dy = (const float *)grad_out[0].data;
    const float *gm = c->nout > 1 ? (const float *)grad_out[1].data : NULL;
    const float *gr = c->nout > 2 ? (const float *)grad_out[2].data : NULL;
    if (!M || !D || (!dy && !gm && !gr)) return PP_OK;
    const float *mean = (const float *)c->aux, *rstd = mean + M, *x = (const float *)c->in[0].data;
    cudaStream_t s = cu_of(c->dev)->stream;
    if (grad_in[0].data) {
        pp_cu_launch L = pp_cu_launch_rows(M, D);
        k_layernorm_dx<<<L.grid, L.block, 0, s>>>(x, (const float *)c->in[1].data, dy, gm, gr, mean, rstd,
                                                  (float *)grad_in[0].data, D);
        CU_LAUNCHED(c);
    }
    float *ds = (float *)grad_in[1].data, *db = c->nin > 2 ? (float *)grad_in[2].data : NULL;
    if (dy && (ds || db)) {
        const int64_t chunks = (M + LN_CHUNK - 1) / LN_CHUNK;
        float *part;
        PP_CHECK(pp_cuda_workspace(c, 2 * (size_t)(chunks * D) * sizeof(float), (void **)&part, err));
        pp_cu_launch L = pp_cu_launch_1d(chunks * D);
        k_layernorm_dparams_part<<<L.grid, L.block, 0, s>>>(x, dy, mean, rstd, part, M, D, chunks);
        CU_LAUNCHED(c);
        L = pp_cu_launch_1d(D);
        k_layernorm_dparams_sum<<<L.grid, L.block, 0, s>>>(part, ds, db, D, chunks);
        CU_LAUNCHED(c);
    }
    return PP_OK;
}
