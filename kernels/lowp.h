/* Private to kernels/: the generic 16-bit kernel (lowp.c), an adapter that runs a backend's
 * F32 kernel for an op on fp32 shadows of its bfloat16 / float16 tensors. pp_kernel_find
 * returns it where a backend's 16-bit table has no native kernel; a native kernel calls
 * pp_lowp_forward / pp_lowp_backward for dtype mixes it does not handle itself. */
#ifndef PP_KERNELS_LOWP_H
#define PP_KERNELS_LOWP_H

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/kernels.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The adapter of op on this device kind (the same for BF16 and F16: it reads each tensor's
 * dtype), or NULL when the backend has no F32 kernel for op. Built once. Thread-safe. */
const pp_kernel *pp_lowp_adapter(pp_op op, pp_device_kind kind);

/* The adapter's calls, for c->op on c->dev's F32 kernel. */
pp_status pp_lowp_forward(const pp_kernel_ctx *c, pp_error *err);
pp_status pp_lowp_backward(const pp_kernel_ctx *c, const pp_tensor *grad_out, pp_tensor *grad_in, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
