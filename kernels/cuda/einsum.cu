/* cuda Einsum: one thread per output (forward) or input element (backward) runs
 * kernels/einsum_plan.h's strided contraction, as kernels/cpu/einsum.c does. */
#include "cuda_internal.h"
#include <onnxpipe/einsum_plan.h>
#include "nn_cuda.h"
#include "reduce.cuh"
#include <onnxpipe/backend/kernels_backend.h>

__global__ void k_einsum(pp_einsum_map m, const float *x, const float *y, float *z, int64_t n, int add)
{
    CU_FOR(e, n) {
        const float v = pp_einsum_at(&m, x, y, e);
        z[e] = add ? z[e] + v : v;
    }
}

static pp_status launch(const pp_kernel_ctx *c, const pp_einsum_map *m, const void *x, const void *y, void *z,
                        int64_t n, int add, pp_error *err)
{
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_einsum<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(*m, (const float *)x, (const float *)y, (float *)z, n, add);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_FWD(pp_cu_einsum_forward)
{
    pp_einsum_map fwd, grad[2];
    PP_CHECK(pp_args_einsum(c, &fwd, grad, err));
    return launch(c, &fwd, c->in[0].data, c->nin > 1 ? c->in[1].data : NULL, c->out[0].data,
                  pp_tensor_numel(&c->out[0]), 0, err);
}

PP_CU_BWD(pp_cu_einsum_backward)
{
    pp_einsum_map fwd, grad[2];
    PP_CHECK(pp_args_einsum(c, &fwd, grad, err));
    for (int i = 0; grad_out[0].data && i < c->nin && i < 2; i++)
        if (grad_in[i].data)
            PP_CHECK(launch(c, &grad[i], grad_out[0].data, c->nin > 1 ? c->in[1 - i].data : NULL, grad_in[i].data,
                            pp_tensor_numel(&grad_in[i]), 1, err));
    return PP_OK;
}
