/* The one seam between callers and the backends for flat-buffer kernels: every pp_kernel_*
 * flat wrapper checks its arguments here, then calls the pp_flat_ops of the device's
 * backend (kernels/backends.c). No device kind is named: the cpu fills its table
 * (kernels/cpu/flat.c) as cuda does (kernels/cuda/optim.cu). */
#include <onnxpipe/kernels.h>
#include <onnxpipe/backend/kernels_backend.h>

pp_status pp_kernel_flat_ops(pp_device_kind kind, const char *what, const pp_flat_ops **out, pp_error *err)
{
    const pp_backend *b = pp_backend_get(kind);
    *out = b ? b->flat : NULL;
    if (!*out)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "%s on a %s device: that backend has no flat kernels",
                            what, pp_device_kind_name(kind));
    return PP_OK;
}

static pp_status want_n(const char *what, int64_t n, pp_error *err)
{
    if (n < 0) return pp_error_set(err, PP_ERR_INVALID_ARG, "%s: element count %lld < 0", what, (long long)n);
    return PP_OK;
}

/* Checks n, then returns what the device's backend computes. */
#define DISPATCH(what, fn, ...)                                      \
    do {                                                             \
        PP_CHECK(want_n(what, n, err));                              \
        const pp_flat_ops *ops;                                      \
        PP_CHECK(pp_kernel_flat_ops(dev->kind, what, &ops, err));    \
        return ops->fn(dev, __VA_ARGS__, err);                       \
    } while (0)

pp_status pp_kernel_optim_update(pp_device *dev, const pp_optim_hparams *h, const pp_optim_step *step, float *param,
                                 const float *grad, float *state, int64_t n, pp_error *err)
{
    PP_CHECK(pp_optim_check(h, state, n, err));
    DISPATCH("optimizer update", optim_update, h, step, param, grad, state, n);
}

pp_status pp_kernel_sumsq_add(pp_device *dev, const float *x, int64_t n, double *acc, pp_error *err)
{
    DISPATCH("sumsq", sumsq_add, x, n, acc);
}

/* The device sum read back: a double of device memory for the call (tests and off-step
 * callers; a step adds into its own sums and reads them once). */
pp_status pp_kernel_sumsq(pp_device *dev, const float *x, int64_t n, double *out, pp_error *err)
{
    double *acc = NULL;
    *out = 0;
    PP_CHECK(pp_device_alloc(dev, sizeof *acc, (void **)&acc, err));
    pp_status st = pp_device_memset(dev, acc, 0, sizeof *acc, err);
    if (st == PP_OK) st = pp_kernel_sumsq_add(dev, x, n, acc, err);
    if (st == PP_OK) st = pp_device_copy_to_host(dev, out, acc, sizeof *out, err);
    pp_device_free(dev, acc);
    return st;
}

pp_status pp_kernel_scale(pp_device *dev, float *x, int64_t n, float s, pp_error *err)
{
    DISPATCH("scale", scale, x, n, s);
}

pp_status pp_kernel_accumulate(pp_device *dev, float *y, const float *x, int64_t n, pp_error *err)
{
    DISPATCH("accumulate", accumulate, y, x, n);
}

pp_status pp_kernel_find_nonfinite(pp_device *dev, const float *x, int64_t n, int64_t *index, pp_error *err)
{
    DISPATCH("find_nonfinite", find_nonfinite, x, n, index);
}

pp_status pp_kernel_loss_add(pp_device *dev, double *acc, const float *loss, const float *weight, int64_t microbatch,
                             pp_error *err)
{
    const pp_flat_ops *ops;
    PP_CHECK(pp_kernel_flat_ops(dev->kind, "loss_add", &ops, err));
    return ops->loss_add(dev, acc, loss, weight, microbatch, err);
}

pp_status pp_kernel_optim_decide(pp_device *dev, const double *terms, int64_t n, const double *bad_losses,
                                 float clip_norm, pp_optim_step *step, pp_error *err)
{
    DISPATCH("optim_decide", optim_decide, terms, n, bad_losses, clip_norm, step);
}

static int is_lowp_or_f32(pp_dtype t) { return t == PP_DTYPE_F32 || t == PP_DTYPE_BF16 || t == PP_DTYPE_F16; }

pp_status pp_kernel_convert(pp_device *dev, void *dst, pp_dtype dst_dtype, const void *src, pp_dtype src_dtype,
                            int64_t n, pp_error *err)
{
    if (!is_lowp_or_f32(dst_dtype) || !is_lowp_or_f32(src_dtype))
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "convert %s -> %s: only float32, bfloat16 and float16 convert",
                            pp_dtype_name(src_dtype), pp_dtype_name(dst_dtype));
    PP_CHECK(want_n("convert", n, err));
    if (dst_dtype == src_dtype) return pp_device_copy(dev, dst, src, (size_t)n * pp_dtype_size(src_dtype), err);
    DISPATCH("convert", convert, dst, dst_dtype, src, src_dtype, n);
}
