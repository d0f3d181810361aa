/* Reshape, Flatten, Squeeze and Unsqueeze on the cpu: the caller gives the
 * output shape, so each is a copy of the bytes (any dtype); backward adds the output
 * gradient back into the input gradient. */
#include "cpu_math.h"
#include "nn_util.h"

#include <string.h>

pp_status pp_cpu_copy_forward(const pp_kernel_ctx *c, pp_error *err)
{
    PP_CHECK(nn_same_numel(c, &c->in[0], &c->out[0], err));
    if (c->out[0].data != c->in[0].data) memcpy(c->out[0].data, c->in[0].data, pp_tensor_nbytes(&c->in[0]));
    return PP_OK;
}

pp_status pp_cpu_copy_backward(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, pp_error *err)
{
    if (!gin[0].data || !gout[0].data) return PP_OK;
    PP_CHECK(nn_same_numel(c, &gin[0], &gout[0], err));
    nn_add(gin[0].data, gout[0].data, pp_tensor_numel(&gin[0]));
    return PP_OK;
}
