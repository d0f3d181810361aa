/* cuda Softmax and LogSoftmax: one block per row through reduce.cuh's block reduction;
 * the axis rules are kernels/op_args.c's and the per-element math element_nn.h's, as in
 * kernels/cpu/softmax.c, causal rows included (row r of each T x T block over its columns
 * 0..r: the probabilities past them 0, their gradient += 0). */
#include "cuda_internal.h"
#include <onnxpipe/element_nn.h>
#include "nn_cuda.h"
#include "op_args.h"
#include "reduce.cuh"

/* ---------------- Softmax / LogSoftmax over rows of n at stride inner ---------------- */

__device__ inline int64_t row_base(pp_cu_rows r, int64_t row) { return (row / r.inner) * r.n * r.inner + row % r.inner; }
/* the columns a row counts: 1 + its row in its block when causal (then inner is 1), else all */
__device__ inline int64_t row_width(pp_cu_rows r, int64_t row, int causal) { return causal ? row % r.n + 1 : r.n; }

__global__ void k_softmax(pp_cu_rows r, const float *x, float *y, int log_form, int causal)
{
    const int64_t base = row_base(r, blockIdx.x), st = r.inner, w = row_width(r, blockIdx.x, causal);
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x) mx = cu_max()(mx, x[base + j * st]);
    mx = cu_block_reduce(mx, cu_max(), -INFINITY);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x) s += pp_softmax_exp(x[base + j * st], mx);
    s = cu_block_reduce(s, cu_sum(), 0.f);
    const float ls = logf(s), inv = 1.f / s;
    for (int64_t j = threadIdx.x; j < r.n; j += blockDim.x) {
        const float xv = x[base + j * st];
        y[base + j * st] = j >= w ? 0.f : log_form ? pp_logsoftmax_out(xv, mx, ls) : pp_softmax_exp(xv, mx) * inv;
    }
}

__global__ void k_softmax_grad(pp_cu_rows r, const float *y, const float *dy, float *dx, int log_form, int causal)
{
    const int64_t base = row_base(r, blockIdx.x), st = r.inner, w = row_width(r, blockIdx.x, causal);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x)
        s += log_form ? dy[base + j * st] : y[base + j * st] * dy[base + j * st];
    s = cu_block_reduce(s, cu_sum(), 0.f);
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x) {
        const int64_t i = base + j * st;
        dx[i] += log_form ? pp_logsoftmax_grad(y[i], dy[i], s) : pp_softmax_grad(y[i], dy[i], s);
    }
}

PP_CU_FWD(pp_cu_softmax_forward)
{
    pp_cu_rows r;
    int causal;
    PP_CHECK(pp_args_softmax(c, &c->in[0], &r, &causal, err));
    if (!r.outer || !r.inner || !r.n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_rows(r.outer * r.inner, r.n);
    k_softmax<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(r, (const float *)c->in[0].data, (float *)c->out[0].data,
                                                              c->op == PP_OP_LOG_SOFTMAX, causal);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_BWD(pp_cu_softmax_backward)
{
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    pp_cu_rows r;
    int causal;
    PP_CHECK(pp_args_softmax(c, &c->out[0], &r, &causal, err));
    if (!r.outer || !r.inner || !r.n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_rows(r.outer * r.inner, r.n);
    k_softmax_grad<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(r, (const float *)c->out[0].data,
                                                                   (const float *)grad_out[0].data,
                                                                   (float *)grad_in[0].data,
                                                                   c->op == PP_OP_LOG_SOFTMAX, causal);
    CU_LAUNCHED(c);
    return PP_OK;
}
