/* The cpu's flat-buffer kernels (its pp_flat_ops; kernels/dispatch.c checks the arguments
 * and calls them): sum of squares (gradient clipping), scaling, accumulation, the NaN/Inf
 * scan (divergence checks), a microbatch's loss into the step's sums, the optimizer's
 * decision from them, and float32 <-> bfloat16 / float16 conversion; the optimizer update is
 * optim.c's. The cpu's "device memory" is host memory: results are written in place. */
#include "cpu_math.h"
#include <onnxpipe/element.h>

#include <math.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#include <onnxpipe/backend/device_backend.h>
#endif

static pp_status cpu_sumsq_add(pp_device *dev, const float *x, int64_t n, double *acc, pp_error *err)
{
    (void)dev, (void)err;
    /* four partial sums keep the loop vectorisable without giving up double accumulation */
    double s[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) s[k] += (double)x[i + k] * x[i + k];
    for (; i < n; i++) s[0] += (double)x[i] * x[i];
    *acc += (s[0] + s[1]) + (s[2] + s[3]);
    return PP_OK;
}

static pp_status cpu_scale(pp_device *dev, float *x, int64_t n, float s, pp_error *err)
{
    (void)dev, (void)err;
    for (int64_t i = 0; i < n; i++) x[i] *= s;
    return PP_OK;
}

static pp_status cpu_accumulate(pp_device *dev, float *y, const float *x, int64_t n, pp_error *err)
{
    (void)dev, (void)err;
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
    return PP_OK;
}

static pp_status cpu_find_nonfinite(pp_device *dev, const float *x, int64_t n, int64_t *index, pp_error *err)
{
    (void)dev, (void)err;
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

static pp_status cpu_loss_add(pp_device *dev, double *acc, const float *loss, const float *weight,
                              int64_t microbatch, pp_error *err)
{
    (void)dev, (void)err;
    acc[0] += (double)*weight * (double)*loss;
    if (isfinite(*loss)) return PP_OK;
    if (acc[1] == 0) acc[2] = (double)microbatch;
    acc[1] += 1;
    return PP_OK;
}

static pp_status cpu_optim_decide(pp_device *dev, const double *terms, int64_t n, const double *bad_losses,
                                  float clip_norm, pp_optim_step *step, pp_error *err)
{
    (void)dev, (void)err;
    double sumsq = 0;
    for (int64_t i = 0; i < n; i++) sumsq += terms[i];
    pp_optim_step_decide(sumsq, *bad_losses, clip_norm, step);
    return PP_OK;
}

/* ---- float16 through F16C where the cpu has it, else the element functions ---- */

#if defined(__x86_64__) || defined(__i386__)
/* cpuid leaf 1's F16C bit: clang 14 (the fuzz build's, docs/fuzzing.md) has no
 * __builtin_cpu_supports("f16c"); "avx" says the OS saves the ymm registers */
int pp_cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

/* 8 at a time; the tail goes through a padded block, so that every element takes the hardware path */
__attribute__((target("avx,f16c"))) static void f16c_from_f32(uint16_t *dst, const float *src, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    if (i == n) return;
    float t[8] = {0};
    uint16_t h[8];
    memcpy(t, src + i, (size_t)(n - i) * sizeof *t);
    _mm_storeu_si128((__m128i *)h, _mm256_cvtps_ph(_mm256_loadu_ps(t), _MM_FROUND_TO_NEAREST_INT));
    memcpy(dst + i, h, (size_t)(n - i) * sizeof *h);
}

__attribute__((target("avx,f16c"))) static void f16c_to_f32(float *dst, const uint16_t *src, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    if (i == n) return;
    uint16_t h[8] = {0};
    float t[8];
    memcpy(h, src + i, (size_t)(n - i) * sizeof *h);
    _mm256_storeu_ps(t, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
    memcpy(dst + i, t, (size_t)(n - i) * sizeof *t);
}
#else
int pp_cpu_has_f16c(void) { return 0; }
static void f16c_from_f32(uint16_t *dst, const float *src, int64_t n) { (void)dst, (void)src, (void)n; }
static void f16c_to_f32(float *dst, const uint16_t *src, int64_t n) { (void)dst, (void)src, (void)n; }
#endif

void pp_cpu_f16_from_f32(uint16_t *dst, const float *src, int64_t n, int f16c)
{
    if (f16c) f16c_from_f32(dst, src, n);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = pp_el_f16_from_f32(src[i]);
}

void pp_cpu_f32_from_f16(float *dst, const uint16_t *src, int64_t n, int f16c)
{
    if (f16c) f16c_to_f32(dst, src, n);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = pp_el_f32_from_f16(src[i]);
}

/* dtypes checked, and equal ones copied, by pp_kernel_convert (kernels/dispatch.c) */
static pp_status cpu_convert(pp_device *dev, void *dst, pp_dtype dst_dtype, const void *src, pp_dtype src_dtype,
                             int64_t n, pp_error *err)
{
    (void)dev, (void)err;
    const int f16c = pp_cpu_has_f16c();
    const uint16_t *h = src;
    uint16_t *o = dst;
    if (src_dtype == PP_DTYPE_F32 && dst_dtype == PP_DTYPE_F16) pp_cpu_f16_from_f32(o, src, n, f16c);
    else if (src_dtype == PP_DTYPE_F16 && dst_dtype == PP_DTYPE_F32) pp_cpu_f32_from_f16(dst, h, n, f16c);
    else if (src_dtype == PP_DTYPE_F32)
        for (int64_t i = 0; i < n; i++) o[i] = pp_el_bf16_from_f32(((const float *)src)[i]);
    else if (dst_dtype == PP_DTYPE_F32)
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = pp_el_f32_from_bf16(h[i]);
    else if (dst_dtype == PP_DTYPE_F16)   /* bfloat16 -> float32 is exact: one rounding */
        for (int64_t i = 0; i < n; i++) o[i] = pp_el_f16_from_f32(pp_el_f32_from_bf16(h[i]));
    else
        for (int64_t i = 0; i < n; i++) o[i] = pp_el_bf16_from_f32(pp_el_f32_from_f16(h[i]));
    return PP_OK;
}

const pp_flat_ops pp_cpu_flat_ops = {
    /* .optim_update   = */ pp_cpu_optim_update,
    /* .sumsq_add      = */ cpu_sumsq_add,
    /* .scale          = */ cpu_scale,
    /* .accumulate     = */ cpu_accumulate,
    /* .find_nonfinite = */ cpu_find_nonfinite,
    /* .convert        = */ cpu_convert,
    /* .loss_add       = */ cpu_loss_add,
    /* .optim_decide   = */ cpu_optim_decide,
};
