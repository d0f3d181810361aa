/* cuda Attention (opset 23): one block per query row computes its scores, the mask, the
 * softmax (element_nn.h) and its row of Y = P V; backward one block per row for dS and dQ,
 * then one thread per element of dK and dV summing over the rows (and the query heads
 * that share a kv head), deterministic. Layout kernels/op_args_nn.c, as in
 * kernels/cpu/attention.c; direct loops, not cuBLAS: correct first, a flash kernel later. */
#include "cuda_internal.h"
#include <onnxpipe/element_nn.h>
#include "nn_cuda.h"
#include "op_args_nn.h"
#include "reduce.cuh"

/* offset of element (b, h, s, 0) of tensor t (0 Q, 1 K, 2 V, 3 Y) */
static __device__ int64_t at(const pp_attn_args &a, int t, int64_t b, int64_t h, int64_t s)
{
    return b * a.st[t][0] + h * a.st[t][1] + s * a.st[t][2];
}

/* block (b, h, i): P[b, h, i, :] and Y[b, h, i, :] */
__global__ void k_attn_fwd(const float *q, const float *k, const float *v, const void *mask, float *P, float *y,
                           pp_attn_args a)
{
    const int64_t row = blockIdx.x, i = row % a.sq, h = row / a.sq % a.hq, b = row / a.sq / a.hq;
    const int64_t hk = h / (a.hq / a.hkv), mo = b * a.mst[0] + h * a.mst[1] + i * a.mst[2];
    const float *qr = q + at(a, 0, b, h, i);
    float *p = P + row * a.skv;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < a.skv; j += blockDim.x) {
        const float *kr = k + at(a, 1, b, hk, j);
        float s = 0.f;
        for (int64_t d = 0; d < a.dk; d++) s += qr[d] * kr[d];
        s *= a.scale;
        const int64_t m = mo + j * a.mst[3];
        if ((a.causal && j > i) || (a.mask == 1 && !((const uint8_t *)mask)[m])) s = -INFINITY;
        else if (a.mask == 2) s += ((const float *)mask)[m];
        p[j] = s;
        mx = fmaxf(mx, s);
    }
    mx = cu_block_reduce(mx, cu_max(), -INFINITY);
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < a.skv; j += blockDim.x) {
        const float e = mx == -INFINITY ? 0.f : pp_softmax_exp(p[j], mx);
        p[j] = e;
        sum += e;
    }
    sum = cu_block_reduce(sum, cu_sum(), 0.f);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    for (int64_t j = threadIdx.x; j < a.skv; j += blockDim.x) p[j] *= inv;
    __syncthreads();
    float *yr = y + at(a, 3, b, h, i);
    for (int64_t d = threadIdx.x; d < a.dv; d += blockDim.x) {
        float s = 0.f;
        for (int64_t j = 0; j < a.skv; j++) s += p[j] * v[at(a, 2, b, hk, j) + d];
        yr[d] = s;
    }
}

/* block (b, h, i): dS[b, h, i, :] = P (dP - rowdot(P, dP)) with dP = dY V^T, and dQ row += scale dS K */
__global__ void k_attn_ds(const float *k, const float *v, const float *dy, const float *P, float *dS, float *dq,
                          pp_attn_args a)
{
    const int64_t row = blockIdx.x, i = row % a.sq, h = row / a.sq % a.hq, b = row / a.sq / a.hq;
    const int64_t hk = h / (a.hq / a.hkv);
    const float *dyr = dy + at(a, 3, b, h, i), *p = P + row * a.skv;
    float *ds = dS + row * a.skv;
    float dot = 0.f;
    for (int64_t j = threadIdx.x; j < a.skv; j += blockDim.x) {
        const float *vr = v + at(a, 2, b, hk, j);
        float s = 0.f;
        for (int64_t d = 0; d < a.dv; d++) s += dyr[d] * vr[d];
        ds[j] = s;
        dot += p[j] * s;
    }
    dot = cu_block_reduce(dot, cu_sum(), 0.f);
    for (int64_t j = threadIdx.x; j < a.skv; j += blockDim.x) ds[j] = pp_softmax_grad(p[j], ds[j], dot);
    __syncthreads();
    if (!dq) return;
    float *dqr = dq + at(a, 0, b, h, i);
    for (int64_t d = threadIdx.x; d < a.dk; d += blockDim.x) {
        float s = 0.f;
        for (int64_t j = 0; j < a.skv; j++) s += ds[j] * k[at(a, 1, b, hk, j) + d];
        dqr[d] += a.scale * s;
    }
}

/* one thread per (b, kv head, j, d): dK += scale sum dS q over the rows of the heads sharing
 * it (dk_side), else dV += sum P dY */
__global__ void k_attn_dkv(const float *q, const float *dy, const float *P, const float *dS, float *g,
                           pp_attn_args a, int dk_side)
{
    const int64_t D = dk_side ? a.dk : a.dv, rep = a.hq / a.hkv;
    CU_FOR(e, a.b * a.hkv * a.skv * D) {
        const int64_t d = e % D, j = e / D % a.skv, hk = e / D / a.skv % a.hkv, b = e / D / a.skv / a.hkv;
        const float *w = dk_side ? dS : P, *src = dk_side ? q : dy;
        const int t = dk_side ? 0 : 3;
        float s = 0.f;
        for (int64_t h = hk * rep; h < (hk + 1) * rep; h++)
            for (int64_t i = 0; i < a.sq; i++)
                s += w[((b * a.hq + h) * a.sq + i) * a.skv + j] * src[at(a, t, b, h, i) + d];
        g[at(a, dk_side ? 1 : 2, b, hk, j) + d] += dk_side ? a.scale * s : s;
    }
}

PP_CU_AUX(pp_cu_attention_aux)
{
    return pp_args_attention_aux(c);
}

PP_CU_FWD(pp_cu_attention_forward)
{
    pp_attn_args a;
    PP_CHECK(pp_args_attention(c, &a, err));
    const int64_t rows = a.b * a.hq * a.sq;
    if (!rows) return PP_OK;
    if (!a.skv) {   /* no keys: Y is 0, as the cpu writes it */
        CU_TRY(c, cudaMemsetAsync(c->out[0].data, 0, pp_tensor_nbytes(&c->out[0]), cu_of(c->dev)->stream));
        return PP_OK;
    }
    pp_cu_launch L = pp_cu_launch_rows(rows, a.skv);
    k_attn_fwd<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(
        (const float *)c->in[0].data, (const float *)c->in[1].data, (const float *)c->in[2].data,
        a.mask ? c->in[3].data : NULL, (float *)c->aux, (float *)c->out[0].data, a);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_BWD(pp_cu_attention_backward)
{
    pp_attn_args a;
    PP_CHECK(pp_args_attention(c, &a, err));
    const float *dy = (const float *)grad_out[0].data, *P = (const float *)c->aux;
    float *dq = (float *)grad_in[0].data, *dk = (float *)grad_in[1].data, *dv = (float *)grad_in[2].data;
    const int64_t rows = a.b * a.hq * a.sq;
    if (!rows || !a.skv || !dy) return PP_OK;
    cudaStream_t s = cu_of(c->dev)->stream;
    if (dv) {
        pp_cu_launch L = pp_cu_launch_1d(a.b * a.hkv * a.skv * a.dv);
        k_attn_dkv<<<L.grid, L.block, 0, s>>>(NULL, dy, P, NULL, dv, a, 0);
        CU_LAUNCHED(c);
    }
    if (!dq && !dk) return PP_OK;
    float *dS;
    PP_CHECK(pp_cuda_workspace(c, (size_t)(rows * a.skv) * sizeof(float), (void **)&dS, err));
    pp_cu_launch L = pp_cu_launch_rows(rows, a.skv);
    k_attn_ds<<<L.grid, L.block, 0, s>>>((const float *)c->in[1].data, (const float *)c->in[2].data, dy, P, dS, dq,
                                         a);
    CU_LAUNCHED(c);
    if (dk) {
        L = pp_cu_launch_1d(a.b * a.hkv * a.skv * a.dk);
        k_attn_dkv<<<L.grid, L.block, 0, s>>>((const float *)c->in[0].data, NULL, NULL, dS, dk, a, 1);
        CU_LAUNCHED(c);
    }
    return PP_OK;
}
