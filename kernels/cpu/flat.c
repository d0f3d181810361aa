/* cpu flat-buffer kernels the stage uses between steps: sum of squares (gradient
 * clipping), scaling, accumulation and the NaN/Inf scan (loss scaling, divergence checks). */
#include <math.h>
#include <onnxpipe/kernels.h>

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

/* Checks n, then runs the device's own implementation when dev is not the cpu. */
#define DISPATCH(what, fn, ...)                                          \
    do {                                                                 \
        PP_CHECK(want_n(what, n, err));                                  \
        if (dev->kind != PP_DEVICE_CPU) {                                \
            const pp_flat_ops *ops;                                      \
            PP_CHECK(pp_kernel_flat_ops(dev->kind, what, &ops, err));    \
            return ops->fn(dev, __VA_ARGS__, err);                       \
        }                                                                \
    } while (0)

pp_status pp_kernel_sumsq(pp_device *dev, const float *x, int64_t n, double *out, pp_error *err)
{
    DISPATCH("sumsq", sumsq, x, n, out);
    /* four partial sums keep the loop vectorisable without giving up double accumulation */
    double s[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) s[k] += (double)x[i + k] * x[i + k];
    for (; i < n; i++) s[0] += (double)x[i] * x[i];
    *out = (s[0] + s[1]) + (s[2] + s[3]);
    return PP_OK;
}

pp_status pp_kernel_scale(pp_device *dev, float *x, int64_t n, float s, pp_error *err)
{
    DISPATCH("scale", scale, x, n, s);
    for (int64_t i = 0; i < n; i++) x[i] *= s;
    return PP_OK;
}

pp_status pp_kernel_accumulate(pp_device *dev, float *y, const float *x, int64_t n, pp_error *err)
{
    DISPATCH("accumulate", accumulate, y, x, n);
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
    return PP_OK;
}

pp_status pp_kernel_find_nonfinite(pp_device *dev, const float *x, int64_t n, int64_t *index, pp_error *err)
{
    DISPATCH("find_nonfinite", find_nonfinite, x, n, index);
    *index = -1;
    const int64_t block = 4096;
    for (int64_t b = 0; b < n; b += block) {
        int64_t e = b + block < n ? b + block : n;
        float acc = 0.f; /* x * 0 is NaN exactly when x is NaN or Inf */
        for (int64_t i = b; i < e; i++) acc += x[i] * 0.f;
        if (acc == 0.f) continue;
        for (int64_t i = b; i < e; i++)
            if (!isfinite(x[i])) {
                *index = i;
                return PP_OK;
            }
    }
    return PP_OK;
}
