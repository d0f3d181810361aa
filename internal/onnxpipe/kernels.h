/* The flat-buffer kernels the stage and the driver run on a device (internal tier: a
 * trainer steps through pp_stage_step, a backend fills pp_flat_ops): each checks its
 * arguments and calls the device's backend (kernels/dispatch.c). The optimizers' kinds and
 * hyper-parameters are public (optim.h); the op library itself (kernel tables, the kernel
 * context and capabilities, the backends list) is the backend tier's (kernels_backend.h). */
#ifndef ONNXPIPE_KERNELS_H
#define ONNXPIPE_KERNELS_H

#include <onnxpipe/core.h>
#include <onnxpipe/device.h>
#include <onnxpipe/optim.h>
#include <onnxpipe/backend/op.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Updates one parameter tensor of n elements in place. state holds
 * pp_optim_state_slots() arrays of n floats each, back to back. LAMB's trust ratio
 * is computed over this tensor (call once per parameter tensor). Local (as are the flat kernels
 * below: they run on dev and return when done). */
pp_status pp_kernel_optim_update(pp_device *dev, const pp_optim_hparams *h, float *param,
                                 const float *grad, float *state, int64_t n, pp_error *err);
/* sum of x[i]^2 over n elements, in double, returned on the host. Local. */
pp_status pp_kernel_sumsq(pp_device *dev, const float *x, int64_t n, double *out, pp_error *err);
/* x[i] *= s. Local. */
pp_status pp_kernel_scale(pp_device *dev, float *x, int64_t n, float s, pp_error *err);
/* dst[i] = src[i] converted, n elements, between PP_DTYPE_F32, PP_DTYPE_BF16 and PP_DTYPE_F16
 * (to 16 bits: round to nearest even, overflow to Inf, NaN stays NaN; from 16 bits: exact);
 * the same dtype copies; any other dtype is an error naming it. Local. */
pp_status pp_kernel_convert(pp_device *dev, void *dst, pp_dtype dst_dtype, const void *src, pp_dtype src_dtype,
                            int64_t n, pp_error *err);
/* x[i] *= inv_scale in one pass; *found_inf (host) = 1 when some x[i] is NaN or Inf before or
 * after scaling, else 0: fp16 dynamic loss scaling's unscale of the flat gradient. Local. */
pp_status pp_kernel_unscale(pp_device *dev, float *x, int64_t n, float inv_scale, int *found_inf,
                            pp_error *err);
/* y[i] += x[i]. Local. */
pp_status pp_kernel_accumulate(pp_device *dev, float *y, const float *x, int64_t n, pp_error *err);
/* 1 when the backend of device has a kernel of its own for op computing in dtype (a slot of
 * its table for dtype), 0 when pp_kernel_find gives the 16-bit adapter (kernels/lowp.c) or
 * nothing. `onnxpipe ops` reports it; stage fusion asks it where the adapter would round
 * differently from the unfused ops. Local; thread-safe. */
int pp_kernel_native(pp_op op, pp_device_kind device, pp_dtype dtype);
/* Index of the first NaN or Inf in x, or -1. Local. */
pp_status pp_kernel_find_nonfinite(pp_device *dev, const float *x, int64_t n, int64_t *index,
                                   pp_error *err);

/* Checks h and the state pointer for an update of n elements (names the optimizer). Local. Thread-safe. */
pp_status pp_optim_check(const pp_optim_hparams *h, const float *state, int64_t n, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
