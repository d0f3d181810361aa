/* The optimizers and the flat-buffer kernels the stage runs on a device (public tier).
 * The op library itself (kernel tables per backend and dtype, the kernel context and
 * capabilities, the backends list) is the backend tier's: onnxpipe/backend/kernels_backend.h. */
#ifndef ONNXPIPE_KERNELS_H
#define ONNXPIPE_KERNELS_H

#include <onnxpipe/core.h>
#include <onnxpipe/device.h>
#include <onnxpipe/op.h>
#include <onnxpipe/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- flat-buffer kernels used by the stage: optimizers, norms, accumulation ---- */

typedef enum { PP_OPTIM_SGD = 0, PP_OPTIM_ADAM, PP_OPTIM_ADAMW, PP_OPTIM_LAMB } pp_optim_kind;
/* Local; the names are static strings. Thread-safe. */
PP_API const char *pp_optim_kind_name(pp_optim_kind k);            /* "sgd", "adam", "adamw", "lamb" */
PP_API int pp_optim_kind_parse(const char *name, pp_optim_kind *out);  /* 1 if name is one of those */

typedef struct pp_optim_hparams {
    pp_optim_kind kind;
    float lr;
    float momentum;         /* SGD */
    int nesterov;           /* SGD */
    float beta1, beta2, eps;/* Adam, AdamW, LAMB */
    float weight_decay;     /* SGD, Adam: L2 added to the gradient; AdamW, LAMB: decoupled */
    int64_t step;           /* 1-based step count, for bias correction */
} pp_optim_hparams;

/* Number of fp32 state slots per parameter element: SGD 1 (momentum; 0 without),
 * Adam/AdamW/LAMB 2 (m, v). Local. Thread-safe. */
PP_API int pp_optim_state_slots(const pp_optim_hparams *h);

/* Updates one parameter tensor of n elements in place. state holds
 * pp_optim_state_slots() arrays of n floats each, back to back. LAMB's trust ratio
 * is computed over this tensor (call once per parameter tensor). Local (as are the flat kernels
 * below: they run on dev and return when done). */
PP_API pp_status pp_kernel_optim_update(pp_device *dev, const pp_optim_hparams *h, float *param,
                                        const float *grad, float *state, int64_t n, pp_error *err);
/* sum of x[i]^2 over n elements, in double, returned on the host. Local. */
PP_API pp_status pp_kernel_sumsq(pp_device *dev, const float *x, int64_t n, double *out, pp_error *err);
/* x[i] *= s. Local. */
PP_API pp_status pp_kernel_scale(pp_device *dev, float *x, int64_t n, float s, pp_error *err);
/* dst[i] = src[i] converted, n elements, between PP_DTYPE_F32, PP_DTYPE_BF16 and PP_DTYPE_F16
 * (to 16 bits: round to nearest even, overflow to Inf, NaN stays NaN; from 16 bits: exact);
 * the same dtype copies; any other dtype is an error naming it. Local. */
PP_API pp_status pp_kernel_convert(pp_device *dev, void *dst, pp_dtype dst_dtype, const void *src, pp_dtype src_dtype,
                                   int64_t n, pp_error *err);
/* x[i] *= inv_scale in one pass; *found_inf (host) = 1 when some x[i] is NaN or Inf before or
 * after scaling, else 0: fp16 dynamic loss scaling's unscale of the flat gradient. Local. */
PP_API pp_status pp_kernel_unscale(pp_device *dev, float *x, int64_t n, float inv_scale, int *found_inf,
                                   pp_error *err);
/* y[i] += x[i]. Local. */
PP_API pp_status pp_kernel_accumulate(pp_device *dev, float *y, const float *x, int64_t n, pp_error *err);
/* Index of the first NaN or Inf in x, or -1. Local. */
PP_API pp_status pp_kernel_find_nonfinite(pp_device *dev, const float *x, int64_t n, int64_t *index,
                                          pp_error *err);

/* Scalars of one optimizer step, computed once on the host in double and rounded to
 * float as torch does; every backend's update loop uses these. */
typedef struct pp_optim_scalars {
    float c1, c2;           /* 1 - beta1, 1 - beta2 */
    float step_size;        /* Adam: lr / (1 - beta1^t) */
    float bc2_sqrt;         /* Adam: sqrt(1 - beta2^t) */
    float bc1, bc2;         /* LAMB: 1 - beta1^t, 1 - beta2^t */
    float shrink;           /* AdamW: 1 - lr wd */
    float l2;               /* Adam: wd added to the gradient (0 for AdamW) */
} pp_optim_scalars;
/* Local; pure. Thread-safe. */
PP_API pp_optim_scalars pp_optim_scalars_of(const pp_optim_hparams *h);
/* Checks h and the state pointer for an update of n elements (names the optimizer). Local. Thread-safe. */
PP_API pp_status pp_optim_check(const pp_optim_hparams *h, const float *state, int64_t n, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
