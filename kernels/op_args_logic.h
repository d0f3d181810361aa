/* Private to kernels/: arguments of the comparisons, logic and more elementwise ops that both
 * backends read the same way (kernels/op_args_logic.c, plain C that the cuda files call too). */
#ifndef PP_KERNELS_OP_ARGS_LOGIC_H
#define PP_KERNELS_OP_ARGS_LOGIC_H

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/kernels.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Clip's bounds: inputs 1 (min) and 2 (max), float32 scalars, each optional (omitted: -Inf /
 * +Inf); below opset 11 the attributes min / max. Read from the tensor on a device whose memory
 * the host reads, else from c->host_in (constant inputs), else an error naming the node. */
pp_status pp_args_clip(const pp_kernel_ctx *c, float *lo, float *hi, pp_error *err);
/* The same for an int64 / int32 x: bounds of x's dtype, omitted: INT64_MIN / INT64_MAX. */
pp_status pp_args_clip_int(const pp_kernel_ctx *c, int64_t *lo, int64_t *hi, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
