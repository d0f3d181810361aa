/* cuda Softmax and LogSoftmax: one block per row through reduce.cuh's block reduction;
 * the axis rules are kernels/op_args.c's and the per-element math element_nn.h's, as in
 * kernels/cpu/softmax.c, causal rows included (row r of each T x T block over its columns
 * 0..r: the probabilities past them 0, their gradient += 0), on float32, bfloat16 and
 * float16 rows (io.cuh: fp32 in registers, one rounding per store). */
#include "cuda_internal.h"
#include <onnxpipe/element_nn.h>
#include "io.cuh"
#include "nn_cuda.h"
#include "op_args.h"
#include "reduce.cuh"

/* ---------------- Softmax / LogSoftmax over rows of n at stride inner ---------------- */

__device__ inline int64_t row_base(pp_cu_rows r, int64_t row) { return (row / r.inner) * r.n * r.inner + row % r.inner; }
/* the columns a row counts: 1 + its row in its block when causal (then inner is 1), else all */
__device__ inline int64_t row_width(pp_cu_rows r, int64_t row, int causal) { return causal ? row % r.n + 1 : r.n; }

__global__ void k_softmax(pp_cu_rows r, cu_io x, cu_io y, int log_form, int causal)
{
    const int64_t base = row_base(r, blockIdx.x), st = r.inner, w = row_width(r, blockIdx.x, causal);
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x) mx = cu_max()(mx, cu_ld(x, base + j * st));
    mx = cu_block_reduce(mx, cu_max(), -INFINITY);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x) s += pp_softmax_exp(cu_ld(x, base + j * st), mx);
    s = cu_block_reduce(s, cu_sum(), 0.f);
    const float ls = logf(s), inv = 1.f / s;
    for (int64_t j = threadIdx.x; j < r.n; j += blockDim.x) {
        const float xv = j < w ? cu_ld(x, base + j * st) : 0.f;
        cu_st(y, base + j * st, j >= w ? 0.f : log_form ? pp_logsoftmax_out(xv, mx, ls) : pp_softmax_exp(xv, mx) * inv);
    }
}

__global__ void k_softmax_grad(pp_cu_rows r, cu_io y, cu_io dy, cu_io dx, int log_form, int causal)
{
    const int64_t base = row_base(r, blockIdx.x), st = r.inner, w = row_width(r, blockIdx.x, causal);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x)
        s += log_form ? cu_ld(dy, base + j * st) : cu_ld(y, base + j * st) * cu_ld(dy, base + j * st);
    s = cu_block_reduce(s, cu_sum(), 0.f);
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x) {
        const int64_t i = base + j * st;
        const float yv = cu_ld(y, i), dv = cu_ld(dy, i);
        cu_put(dx, i, log_form ? pp_logsoftmax_grad(yv, dv, s) : pp_softmax_grad(yv, dv, s), 1);
    }
}

/* the tensors of a call are float32, bfloat16 or float16 (each its own) */
static pp_status softmax_dtypes(const pp_kernel_ctx *c, const pp_tensor *t, int n, pp_error *err)
{
    for (int k = 0; k < n; k++)
        if (t[k].data && !cu_io_float(t[k].dtype))
            return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "a tensor of dtype %s (float32, bfloat16 or float16)",
                                pp_dtype_name(t[k].dtype));
    return PP_OK;
}

PP_CU_FWD(pp_cu_softmax_forward)
{
    pp_cu_rows r;
    int causal;
    PP_CHECK(pp_args_softmax(c, &c->in[0], &r, &causal, err));
    const pp_tensor io[2] = {c->in[0], c->out[0]};
    PP_CHECK(softmax_dtypes(c, io, 2, err));
    if (!r.outer || !r.inner || !r.n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_rows(r.outer * r.inner, r.n);
    k_softmax<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(r, cu_io_of(c->in[0]), cu_io_of(c->out[0]),
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
    const pp_tensor io[3] = {c->out[0], grad_out[0], grad_in[0]};
    PP_CHECK(softmax_dtypes(c, io, 3, err));
    if (!r.outer || !r.inner || !r.n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_rows(r.outer * r.inner, r.n);
    k_softmax_grad<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(r, cu_io_of(c->out[0]), cu_io_of(grad_out[0]),
                                                                   cu_io_of(grad_in[0]), c->op == PP_OP_LOG_SOFTMAX,
                                                                   causal);
    CU_LAUNCHED(c);
    return PP_OK;
}
