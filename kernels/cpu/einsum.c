/* Einsum on the cpu (one or two operands): kernels/einsum_plan.h's strided contraction
 * per output element, forward and (the same contraction onto each input) backward. A
 * direct loop, not yet lowered to transposes and batched sgemm. */
#include "cpu_math.h"
#include <onnxpipe/einsum_plan.h>

PP_FWD(pp_cpu_einsum_forward)
{
    pp_einsum_map fwd, grad[2];
    PP_CHECK(pp_args_einsum(c, &fwd, grad, err));
    const float *x = c->in[0].data, *y = c->nin > 1 ? c->in[1].data : NULL;
    float *z = c->out[0].data;
    for (int64_t e = 0; e < pp_tensor_numel(&c->out[0]); e++) z[e] = pp_einsum_at(&fwd, x, y, e);
    return PP_OK;
}

PP_BWD(pp_cpu_einsum_backward)
{
    pp_einsum_map fwd, grad[2];
    PP_CHECK(pp_args_einsum(c, &fwd, grad, err));
    const float *dz = grad_out[0].data;
    for (int i = 0; dz && i < c->nin && i < 2; i++) {
        float *g = grad_in[i].data;
        const float *other = c->nin > 1 ? c->in[1 - i].data : NULL;
        for (int64_t e = 0; g && e < pp_tensor_numel(&grad_in[i]); e++) g[e] += pp_einsum_at(&grad[i], dz, other, e);
    }
    return PP_OK;
}
