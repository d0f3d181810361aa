/* cuda ReduceSum / ReduceMean (launch.c's pp_cu_reduce plan), as kernels/cpu/reduce.c, on
 * float32, bfloat16 or float16 inputs and outputs (summed in fp32). */
#include "cuda_internal.h"
#include "nn_cuda.h"
#include "op_args.h"
#include "reduce.cuh"

#include <string.h>

/* ---------------- ReduceSum / ReduceMean ---------------- */

PP_CU_FWD(pp_cu_reduce_forward)
{
    const pp_tensor *x = &c->in[0];
    int red[PP_MAX_RANK], copy = 0;
    PP_CHECK(pp_args_reduce(c, x, red, &copy, err));
    if (copy)   /* a 16-bit input into a float32 output (reductions store fp32) is converted */
        return pp_kernel_convert(c->dev, c->out[0].data, c->out[0].dtype, x->data, x->dtype, pp_tensor_numel(x), err);
    pp_cu_reduce r;
    pp_cu_reduce_init(&r, x->rank, x->dims, red);
    PP_CHECK(pp_device_memset(c->dev, c->out[0].data, 0, pp_tensor_nbytes(&c->out[0]), err));
    const float scale = c->op == PP_OP_REDUCE_MEAN && r.nred ? 1.f / (float)r.nred : 1.f;
    return pp_cu_reduce_launch(c, &r, x->data, x->dtype, c->out[0].data, c->out[0].dtype, scale, err);
}

/* dx += scale * dy broadcast back over the reduced dims */
PP_CU_BWD(pp_cu_reduce_backward)
{
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    const pp_tensor *x = &grad_in[0];
    int red[PP_MAX_RANK], copy = 0;
    PP_CHECK(pp_args_reduce(c, x, red, &copy, err));
    pp_tensor dy = grad_out[0];
    int64_t nred = 1;
    dy.rank = x->rank;
    for (int d = 0; d < x->rank; d++) {
        dy.dims[d] = red[d] && !copy ? 1 : x->dims[d];
        nred *= red[d] && !copy ? x->dims[d] : 1;
    }
    const float scale = c->op == PP_OP_REDUCE_MEAN && nred ? 1.f / (float)nred : 1.f;
    return pp_cu_broadcast_add(c, x, &dy, scale, err);
}
