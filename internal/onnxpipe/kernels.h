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
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/backend/op.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Updates one parameter tensor of n elements in place, by the step's pp_optim_step in
 * device memory (its lr, scalars, clipping factor and skip flag; h's lr and step are only
 * checked). state holds pp_optim_state_slots() arrays of n floats each, back to back.
 * LAMB's trust ratio is computed over this tensor (call once per parameter tensor).
 * Local (as are the flat kernels below: they run on dev in its work order). */
pp_status pp_kernel_optim_update(pp_device *dev, const pp_optim_hparams *h, const pp_optim_step *step, float *param,
                                 const float *grad, float *state, int64_t n, pp_error *err);
/* The pp_optim_step of h's lr and step (on the host, for a copy into device memory),
 * gradients multiplied by grad_scale, not skipped. Local. Thread-safe. */
pp_optim_step pp_optim_step_at(const pp_optim_hparams *h, float grad_scale);
/* *acc (device memory) += sum of x[i]^2 over n elements, in double. Local. */
pp_status pp_kernel_sumsq_add(pp_device *dev, const float *x, int64_t n, double *acc, pp_error *err);
/* The same sum read into *out on the host (a read: the caller waits for the device). Local. */
pp_status pp_kernel_sumsq(pp_device *dev, const float *x, int64_t n, double *out, pp_error *err);
/* x[i] *= s. Local. */
pp_status pp_kernel_scale(pp_device *dev, float *x, int64_t n, float s, pp_error *err);
/* dst[i] = src[i] converted, n elements, between PP_DTYPE_F32, PP_DTYPE_BF16 and PP_DTYPE_F16
 * (to 16 bits: round to nearest even, overflow to Inf, NaN stays NaN; from 16 bits: exact);
 * the same dtype copies; any other dtype is an error naming it. Local. */
pp_status pp_kernel_convert(pp_device *dev, void *dst, pp_dtype dst_dtype, const void *src, pp_dtype src_dtype,
                            int64_t n, pp_error *err);
/* y[i] += x[i]. Local. */
pp_status pp_kernel_accumulate(pp_device *dev, float *y, const float *x, int64_t n, pp_error *err);
/* 1 when the backend of device has a kernel of its own for op computing in dtype (a slot of
 * its table for dtype), 0 when pp_kernel_find gives the 16-bit adapter (kernels/lowp.c) or
 * nothing. `onnxpipe ops` reports it; stage fusion asks it where the adapter would round
 * differently from the unfused ops. Local; thread-safe. */
int pp_kernel_native(pp_op op, pp_device_kind device, pp_dtype dtype);
/* Index of the first NaN or Inf in x, or -1 (a read). Local. */
pp_status pp_kernel_find_nonfinite(pp_device *dev, const float *x, int64_t n, int64_t *index,
                                   pp_error *err);
/* A microbatch's loss into a step's sums, all in device memory (pp_flat_ops.loss_add):
 * acc[0] += weight x loss; a NaN or Inf loss counts in acc[1], the first one's microbatch
 * in acc[2]. Local. */
pp_status pp_kernel_loss_add(pp_device *dev, double *acc, const float *loss, const float *weight, int64_t microbatch,
                             pp_error *err);
/* step->grad_scale and step->skip by pp_optim_step_decide from the sum of terms[0..n) and
 * *bad_losses, on the device (a graph's step decides without the host). Local. */
pp_status pp_kernel_optim_decide(pp_device *dev, const double *terms, int64_t n, const double *bad_losses,
                                 float clip_norm, pp_optim_step *step, pp_error *err);

/* ---- what the pp_device_* wrappers keep and check (kernels/device.c) ---- */

/* Calls through a device's wrappers since it was made: the step's sync points and
 * allocations, which a test can count per step on any device. */
typedef struct pp_device_counters {
    int64_t allocs, frees;          /* pp_device_alloc / _alloc_as, pp_device_free */
    int64_t host_reads;             /* pp_device_copy_to_host: each one waits for the device */
    int64_t host_writes;            /* pp_device_copy_from_host */
    int64_t syncs;                  /* pp_device_synchronize */
} pp_device_counters;
/* Local; thread-safe. */
void pp_device_get_counters(pp_device *d, pp_device_counters *out);

/* The device's work memory, one buffer for every stage on it: what kernel calls use for
 * themselves (pp_kernel_ctx.work, one call at a time), at least the largest size reserved.
 * reserve grows it (a stage at creation: never in a step), freeing the old one, so callers
 * ask pp_device_work for it at each use. Counted as scratch. Local. */
pp_status pp_device_work_reserve(pp_device *d, size_t n, pp_error *err);
void *pp_device_work(const pp_device *d, size_t *size);

/* Timers on the device's clock (the backend's timer hooks; both backends have them):
 * record marks where the device's queued work has reached, elapsed waits for `to` and
 * gives the seconds from `from` to it. The caller destroys what it creates. Local. */
pp_status pp_device_timer_create(pp_device *d, void **timer, pp_error *err);
void pp_device_timer_destroy(pp_device *d, void *timer);
pp_status pp_device_timer_record(pp_device *d, void *timer, pp_error *err);
pp_status pp_device_timer_elapsed(pp_device *d, void *from, void *to, double *seconds, pp_error *err);

/* Graphs (devices with PP_DEVICE_CAP_GRAPHS): the work queued between begin and end
 * becomes *graph (NULL when the capture failed: end returns the error), which launch runs
 * whole. While capturing, allocation, copies to and from the host and synchronisation fail
 * with a message saying so. The caller destroys the graph (NULL accepted). Local. */
pp_status pp_device_capture_begin(pp_device *d, pp_error *err);
pp_status pp_device_capture_end(pp_device *d, void **graph, pp_error *err);
int pp_device_capturing(const pp_device *d);
pp_status pp_device_graph_launch(pp_device *d, void *graph, pp_error *err);
void pp_device_graph_destroy(pp_device *d, void *graph);

/* Checks h and the state pointer for an update of n elements (names the optimizer). Local. Thread-safe. */
pp_status pp_optim_check(const pp_optim_hparams *h, const float *state, int64_t n, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
