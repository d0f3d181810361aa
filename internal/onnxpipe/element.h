/* Per-element math shared by the cpu and cuda kernels (DESIGN.md "one element function,
 * two devices"): activations and their derivatives, optimizer update steps, the
 * counter-based RNG of Dropout. Everything is static inline and PP_HD, float in, float out. */
#ifndef PP_KERNELS_ELEMENT_H
#define PP_KERNELS_ELEMENT_H

#include <onnxpipe/core.h>

#include <onnxpipe/element_nn.h>   /* pp_nn_expf: a vectorisable exp */

#include <math.h>
#include <stdint.h>

/* ---------------- activations (math family) ---------------- */

#define PP_EL_SQRT_2_OVER_PI 0.7978845608028654f
#define PP_EL_INV_SQRT_2 0.7071067811865476f
#define PP_EL_INV_SQRT_2PI 0.3989422804014327f
#define PP_EL_2_OVER_SQRT_PI 1.1283791670955126f
#define PP_EL_GELU_C 0.044715f

/* The bits of a float, for compares that vectorise: a float compare may trap on NaN, so
 * under the default -ftrapping-math GCC will not if-convert one inside a loop of float
 * math, and the loop stays scalar. */
static inline PP_HD uint32_t pp_el_bits(float x)
{
    union { float f; uint32_t u; } v = {x};
    return v.u;
}
static inline PP_HD float pp_el_from_bits(uint32_t u)
{
    union { uint32_t u; float f; } v = {u};
    return v.f;
}
/* x with |x| clamped to hi > 0, sign kept; NaN stays NaN. */
static inline PP_HD float pp_el_clamp_abs(float x, float hi)
{
    uint32_t u = pp_el_bits(x), a = u & 0x7FFFFFFFu, lim = pp_el_bits(hi);
    a = (a > lim) & (a <= 0x7F800000u) ? lim : a;
    return pp_el_from_bits((u & 0x80000000u) | a);
}

/* NaN passes through, as in PyTorch, so a bad input is not hidden from the NaN checks */
static inline PP_HD float pp_el_relu(float x) { return x > 0.f || x != x ? x : 0.f; }
static inline PP_HD float pp_el_relu_grad(float x) { return x > 0.f ? 1.f : 0.f; }
static inline PP_HD float pp_el_leaky_relu(float x, float alpha) { return x >= 0.f ? x : alpha * x; }
static inline PP_HD float pp_el_leaky_relu_grad(float x, float alpha) { return x >= 0.f ? 1.f : alpha; }

/* Overflow-free for large |x|: exp of -|x| only, 1 / (1 + e) or e / (1 + e) chosen by the
 * sign bit, so that the loop has no branch and vectorises (SiLU's Sigmoid in HF decoders;
 * libm's expf does not). */
static inline PP_HD float pp_el_sigmoid(float x)
{
    const float e = pp_nn_expf(-pp_el_from_bits(pp_el_bits(x) & 0x7FFFFFFFu)), p = 1.f / (1.f + e), q = e * p;
    const uint32_t neg = 0u - (pp_el_bits(x) >> 31);   /* both computed: a select, not a branch */
    return pp_el_from_bits((pp_el_bits(q) & neg) | (pp_el_bits(p) & ~neg));
}
/* derivatives in terms of the output y */
static inline PP_HD float pp_el_sigmoid_grad_y(float y) { return y * (1.f - y); }
/* ONNX Swish (opset 24): x sigmoid(alpha x), SiLU at alpha 1 (what stage/fuse.c makes of
 * HF's x * Sigmoid(x)), as x / (1 + e^(-alpha x)): one exp and one division, no select
 * (25% faster than x times pp_el_sigmoid on AVX2), and e^(-alpha x) = inf far below 0 gives
 * -0 as the product does. The derivative s (1 + alpha x (1 - s)) with s = sigmoid(alpha x),
 * as torch's silu_backward at alpha 1 (0 far below 0) */
static inline PP_HD float pp_el_swish(float x, float alpha) { return x / (1.f + pp_nn_expf(-alpha * x)); }
static inline PP_HD float pp_el_swish_grad(float x, float alpha)
{
    const float s = 1.f / (1.f + pp_nn_expf(-alpha * x));
    return s * (1.f + alpha * x * (1.f - s));
}
/* SwiGLU(a, b) = Swish(a) b (alpha 1): both input gradients at once, the binary list's
 * factors pp_el_swish_grad(a, 1) b and pp_el_swish(a, 1); inlined, their common
 * 1 + e^-a is computed once */
static inline PP_HD void pp_el_swiglu_grads(float a, float b, float gy, float *ga, float *gb)
{
    *ga = gy * (pp_el_swish_grad(a, 1.f) * b);
    *gb = gy * pp_el_swish(a, 1.f);
}
/* tanh as a clamped odd/even rational (Eigen's float tanh): a few ulp, no libm call, so
 * loops over it vectorise; tanhf/erff cost ~5x an expf on glibc. */
static inline PP_HD float pp_el_tanh(float x)
{
    float c = pp_el_clamp_abs(x, 7.99881172180175781f), c2 = c * c;
    float p = c2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
    p = c2 * p + -8.60467152213735e-11f;
    p = c2 * p + 5.12229709037114e-08f;
    p = c2 * p + 1.48572235717979e-05f;
    p = c2 * p + 6.37261928875436e-04f;
    p = c2 * p + 4.89352455891786e-03f;
    float q = c2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
    q = c2 * q + 2.26843463243900e-03f;
    q = c2 * q + 4.89352518554385e-03f;
    /* x itself below |x| = 0.0004, chosen by a bit mask so that the loop has no branch */
    uint32_t tiny = 0u - (uint32_t)((pp_el_bits(x) & 0x7FFFFFFFu) < pp_el_bits(0.0004f));
    return pp_el_from_bits((pp_el_bits(x) & tiny) | (pp_el_bits(c * p / q) & ~tiny));
}
static inline PP_HD float pp_el_tanh_grad_y(float y) { return 1.f - y * y; }

/* erf as a clamped odd/even rational on [-4, 4] (Eigen's float erf; +-1 beyond). */
static inline PP_HD float pp_el_erf(float x)
{
    float c = pp_el_clamp_abs(x, 4.f), c2 = c * c;
    float p = c2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
    p = c2 * p + -2.10102402082508e-06f;
    p = c2 * p + -5.69250639462346e-05f;
    p = c2 * p + -7.34990630326855e-04f;
    p = c2 * p + -2.95459980854025e-03f;
    p = c2 * p + -1.60960333262415e-02f;
    float q = c2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
    q = c2 * q + -1.68282697438203e-03f;
    q = c2 * q + -7.37332916720468e-03f;
    q = c2 * q + -1.42647390514189e-02f;
    return c * p / q;
}
static inline PP_HD float pp_el_erf_grad(float x) { return PP_EL_2_OVER_SQRT_PI * pp_nn_expf(-x * x); }

/* GELU, exact form: 0.5 x (1 + erf(x / sqrt 2)) */
static inline PP_HD float pp_el_gelu(float x) { return 0.5f * x * (1.f + pp_el_erf(x * PP_EL_INV_SQRT_2)); }
static inline PP_HD float pp_el_gelu_grad(float x)
{
    return 0.5f * (1.f + pp_el_erf(x * PP_EL_INV_SQRT_2)) + x * PP_EL_INV_SQRT_2PI * pp_nn_expf(-0.5f * x * x);
}
/* The same from the saved output y = GELU(x): 0.5 (1 + erf(x / sqrt 2)) is y / x (0.5
 * at x = +-0), so no erf is evaluated again; the operands are chosen by a bit mask
 * before the division so that the loop has no branch and no division by 0. */
static inline PP_HD float pp_el_gelu_grad_xy(float x, float y)
{
    uint32_t zero = 0u - (uint32_t)((pp_el_bits(x) & 0x7FFFFFFFu) == 0u);
    float num = pp_el_from_bits((pp_el_bits(y) & ~zero) | (pp_el_bits(0.5f) & zero));
    float den = pp_el_from_bits((pp_el_bits(x) & ~zero) | (pp_el_bits(1.f) & zero));
    return num / den + x * PP_EL_INV_SQRT_2PI * pp_nn_expf(-0.5f * x * x);
}
/* GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static inline PP_HD float pp_el_gelu_tanh(float x)
{
    return 0.5f * x * (1.f + pp_el_tanh(PP_EL_SQRT_2_OVER_PI * (x + PP_EL_GELU_C * x * x * x)));
}
static inline PP_HD float pp_el_gelu_tanh_grad(float x)
{
    float t = pp_el_tanh(PP_EL_SQRT_2_OVER_PI * (x + PP_EL_GELU_C * x * x * x));
    return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * PP_EL_SQRT_2_OVER_PI * (1.f + 3.f * PP_EL_GELU_C * x * x);
}

/* b = 2 and 3 (RMSNorm's squares, gelu_new's cube, as exporters write them) as products, as
 * PyTorch's pow kernel computes them (powf's correctly rounded a^2 is a * a): the loop over a
 * constant exponent stays vector code instead of a powf call per element */
static inline PP_HD float pp_el_pow(float a, float b)
{
    return b == 2.f ? a * a : b == 3.f ? a * a * a : powf(a, b);
}
static inline PP_HD float pp_el_pow_grad_base(float a, float b)
{
    return b == 2.f ? 2.f * a : b == 3.f ? 3.f * (a * a) : b * powf(a, b - 1.f);
}
/* d(a^b)/db = a^b ln a, defined for a > 0 (0 elsewhere, as PyTorch and ONNX Runtime do) */
static inline PP_HD float pp_el_pow_grad_exp(float a, float y) { return a > 0.f ? y * logf(a) : 0.f; }

/* ---------------- more elementwise functions (comparisons, logic, more elementwise functions) ----------------
 * Gradients follow PyTorch's autograd formulas, kinks included. */

/* -1, 0 or 1 (0 for NaN, as torch.sign). Abs's derivative (0 at 0, as torch's sgn). */
static inline PP_HD float pp_el_sign(float x) { return (float)(x > 0.f) - (float)(x < 0.f); }
/* round half to even (ONNX Round): rintf under the default rounding mode */
static inline PP_HD float pp_el_round(float x) { return rintf(x); }

/* log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|); its derivative is sigmoid(x) */
static inline PP_HD float pp_el_softplus(float x) { return fmaxf(x, 0.f) + log1pf(expf(-fabsf(x))); }

/* ONNX Elu: x for x >= 0, alpha (e^x - 1) below; the derivative at 0 is torch's alpha e^0 */
static inline PP_HD float pp_el_elu(float x, float alpha) { return x >= 0.f ? x : alpha * expm1f(x); }
static inline PP_HD float pp_el_elu_grad(float x, float alpha) { return x > 0.f ? 1.f : alpha * expf(x); }

/* ONNX HardSigmoid: max(0, min(1, alpha x + beta)); the derivative alpha on the open interval
 * where the line is strictly inside (0, 1), as torch's hardsigmoid_backward */
static inline PP_HD float pp_el_hard_sigmoid(float x, float alpha, float beta)
{
    return fmaxf(0.f, fminf(1.f, alpha * x + beta));
}
static inline PP_HD float pp_el_hard_sigmoid_grad(float x, float alpha, float beta)
{
    const float t = alpha * x + beta;
    return t > 0.f && t < 1.f ? alpha : 0.f;
}

/* ONNX HardSwish: x max(0, min(1, x / 6 + 1/2)); the derivative is torch's
 * hardswish_backward: 0 below -3, x / 3 + 1/2 on [-3, 3], 1 above */
static inline PP_HD float pp_el_hard_swish(float x) { return x * pp_el_hard_sigmoid(x, 1.f / 6.f, 0.5f); }
static inline PP_HD float pp_el_hard_swish_grad(float x)
{
    return x < -3.f ? 0.f : x <= 3.f ? x / 3.f + 0.5f : 1.f;
}

/* Mish: x tanh(softplus(x)); torch's mish_backward: t + x sigmoid(x) (1 - t^2), t = tanh(softplus(x)) */
static inline PP_HD float pp_el_mish(float x) { return x * pp_el_tanh(pp_el_softplus(x)); }
static inline PP_HD float pp_el_mish_grad(float x)
{
    const float t = pp_el_tanh(pp_el_softplus(x));
    return t + x * pp_el_sigmoid(x) * (1.f - t * t);
}

/* Max / Min of two: a NaN on either side wins (torch.maximum); the gradient of a tie is
 * split equally, as torch.maximum / torch.minimum's backward */
static inline PP_HD float pp_el_max(float a, float b) { return a > b || a != a ? a : b; }
static inline PP_HD float pp_el_min(float a, float b) { return a < b || a != a ? a : b; }
static inline PP_HD float pp_el_max_grad(float a, float b) { return a > b ? 1.f : a == b ? 0.5f : 0.f; }
static inline PP_HD float pp_el_min_grad(float a, float b) { return a < b ? 1.f : a == b ? 0.5f : 0.f; }

/* Mod with fmod=1 (the only form ONNX allows on floats): C fmod, sign of the dividend;
 * d/db = -trunc(a / b), as torch.fmod's backward */
static inline PP_HD float pp_el_fmod_grad_b(float a, float b) { return -truncf(a / b); }

/* PRelu: slope x below 0; torch's prelu backward: dx = x > 0 ? 1 : slope, dslope = x > 0 ? 0 : x */
static inline PP_HD float pp_el_prelu(float x, float slope) { return x > 0.f ? x : slope * x; }
static inline PP_HD float pp_el_prelu_grad_x(float x, float slope) { return x > 0.f ? 1.f : slope; }
static inline PP_HD float pp_el_prelu_grad_slope(float x) { return x > 0.f ? 0.f : x; }

/* Clip: min(max(x, lo), hi) in ONNX Runtime's order (hi wins when lo > hi), NaN passes;
 * the gradient passes where lo <= x <= hi, as torch.clamp's backward */
static inline PP_HD float pp_el_clip(float x, float lo, float hi)
{
    const float y = x < lo ? lo : x;
    return hi < y ? hi : y;
}
static inline PP_HD int64_t pp_el_iclip(int64_t x, int64_t lo, int64_t hi)
{
    const int64_t y = x < lo ? lo : x;
    return hi < y ? hi : y;
}
static inline PP_HD float pp_el_clip_grad(float x, float lo, float hi) { return x >= lo && x <= hi ? 1.f : 0.f; }

/* Integer arithmetic of shape chains (int64; int32 tensors widen): wrapping as numpy's int64,
 * and no trap: a division or modulo by 0 gives 0 (the folder reports a constant one), and
 * INT64_MIN / -1 wraps. */
static inline PP_HD int64_t pp_el_iadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline PP_HD int64_t pp_el_isub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline PP_HD int64_t pp_el_imul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline PP_HD int64_t pp_el_idiv(int64_t a, int64_t b)
{
    return b == 0 ? 0 : b == -1 ? (int64_t)(0u - (uint64_t)a) : a / b;   /* truncates, as C and onnxruntime */
}
/* Mod: fmod != 0 the sign of the dividend (C's %), else of the divisor (Python's %) */
static inline PP_HD int64_t pp_el_imod(int64_t a, int64_t b, int fmod)
{
    const int64_t r = b == 0 || b == -1 ? 0 : a % b;
    return !fmod && r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
/* integer Pow by squaring, exact where the result fits (the device's double pow may be 2 ulp
 * off, and 242.99.. would truncate to 242); a negative exponent: 1 / a^-b truncated */
static inline PP_HD int64_t pp_el_ipow(int64_t a, int64_t b)
{
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
    uint64_t r = 1, x = (uint64_t)a;   /* unsigned: an overflow wraps as int64 would, defined */
    for (; b; b >>= 1, x *= x)
        if (b & 1) r *= x;
    return (int64_t)r;
}

/* IsNaN, IsInf (detect_positive pos, detect_negative neg as 0 / 1) */
static inline PP_HD int pp_el_isnan(float x) { return x != x; }
static inline PP_HD int pp_el_isinf(float x, float pos, float neg)
{
    return (pos != 0.f && x == INFINITY) || (neg != 0.f && x == -INFINITY);
}

/* ---------------- 16-bit floats <-> float32 (mixed precision, Cast) ---------------- */

/* bfloat16 -> float32: exact (the top half of the float's bits) */
static inline PP_HD float pp_el_f32_from_bf16(uint16_t h) { return pp_el_from_bits((uint32_t)h << 16); }
/* float32 -> bfloat16, round to nearest even; a NaN stays a NaN, made quiet */
static inline PP_HD uint16_t pp_el_bf16_from_f32(float f)
{
    uint32_t u = pp_el_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* IEEE binary16 -> float32: exact. A NaN keeps its payload and is made quiet, as x86's
 * F16C (vcvtph2ps) does, so the cpu's two paths agree bit for bit. */
static inline PP_HD float pp_el_f32_from_f16(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 31) return pp_el_from_bits(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
    if (e == 0) return pp_el_from_bits(sign | pp_el_bits((float)m * 5.9604644775390625e-8f));  /* subnormal or 0 */
    return pp_el_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}
/* float32 -> IEEE binary16, round to nearest even, with subnormals; beyond the largest
 * finite value (65504, ties included) Inf; a NaN keeps the top of its payload and is made
 * quiet (vcvtps2ph's rule). */
static inline PP_HD uint16_t pp_el_f16_from_f32(float f)
{
    const uint32_t u = pp_el_bits(f), a = u & 0x7fffffffu;
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                /* >= 65520: Inf */
    if (a >= 0x38800000u) {                                                 /* >= 2^-14: normal */
        const uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u;   /* rebias 127 -> 15 */
        return (uint16_t)(sign | (r >> 13));
    }
    const uint32_t e = a >> 23;
    if (e < 102u) return sign;                                              /* < 2^-25: 0 */
    /* subnormal: the 24-bit significand in units of 2^-24, shifted right by 126 - e >= 14 */
    const uint32_t m = (a & 0x7fffffu) | 0x800000u, s = 126u - e, q = m >> s, rem = m & ((1u << s) - 1u),
                   half = 1u << (s - 1u);
    return (uint16_t)(sign | (q + (rem > half || (rem == half && (q & 1u)))));
}

/* ---------------- counter-based RNG (Dropout) ---------------- */

static inline PP_HD uint64_t pp_el_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* A 64-bit key from (seed, step, microbatch, node), hashed once per call. */
static inline PP_HD uint64_t pp_el_rng_key(uint64_t seed, uint64_t step, uint64_t node)
{
    uint64_t k = pp_el_mix64(seed + 0x9E3779B97F4A7C15ull);
    k = pp_el_mix64(k ^ (step + 0x632BE59BD9B4E019ull));
    return pp_el_mix64(k ^ (node + 0xD6E8FEB86659FD93ull));
}
/* The index of element 0 of an n-element microbatch tensor among its node's draws: the
 * tensor is sample-major, so the microbatch's first sample times the elements per sample
 * (sample * n when the tensor does not split into `samples` equal parts, or samples is 0). */
static inline PP_HD uint64_t pp_el_rng_base(uint64_t sample, uint64_t samples, int64_t n)
{
    return samples && n % (int64_t)samples == 0 ? sample * (uint64_t)(n / (int64_t)samples) : sample * (uint64_t)n;
}
/* uniform in [0, 1) with 24 bits, for element index i under key k */
static inline PP_HD float pp_el_rng_uniform(uint64_t key, uint64_t i)
{
    return (float)(pp_el_mix64(key ^ pp_el_mix64(i + 0x9E3779B97F4A7C15ull)) >> 40) * (1.f / 16777216.f);
}

/* ---------------- optimizer steps (torch.optim formulas) ---------------- */

/* SGD with L2 weight decay, momentum buffer *buf (first step: buf = g), optional Nesterov.
 * torch.optim.SGD with dampening 0. */
static inline PP_HD float pp_el_sgd(float p, float g, float *buf, float lr, float momentum,
                                    int nesterov, float wd, int first)
{
    g += wd * p;
    if (momentum != 0.f) {
        float b = first ? g : momentum * *buf + g;
        *buf = b;
        g = nesterov ? g + momentum * b : b;
    }
    return p - lr * g;
}

/* Adam moments, in torch's order: m = m * beta1 + c1 g; v = v * beta2 + c2 g g, with
 * c1 = 1 - beta1 and c2 = 1 - beta2 rounded from double as torch's Python scalars are. */
static inline PP_HD void pp_el_adam_moments(float g, float *m, float *v, float beta1, float c1, float beta2,
                                            float c2)
{
    *m = *m * beta1 + c1 * g;
    *v = *v * beta2 + c2 * g * g;
}
/* Adam step from the moments: p - step_size m / (sqrt(v) / bc2_sqrt + eps), where
 * step_size = lr / (1 - beta1^t) and bc2_sqrt = sqrt(1 - beta2^t) (torch's addcdiv order). */
static inline PP_HD float pp_el_adam_apply(float p, float m, float v, float step_size, float bc2_sqrt,
                                           float eps)
{
    return p - step_size * m / (sqrtf(v) / bc2_sqrt + eps);
}
/* LAMB's per-element update direction (You et al. 2019, Algorithm 2):
 * m_hat / (sqrt(v_hat) + eps) + wd * p with m_hat = m / bc1, v_hat = v / bc2. The step is
 * p -= lr * trust * u with trust = ||p|| / ||u|| over the tensor (1 when a norm is 0). */
static inline PP_HD float pp_el_lamb_dir(float p, float m, float v, float bc1, float bc2, float eps, float wd)
{
    return (m / bc1) / (sqrtf(v / bc2) + eps) + wd * p;
}

/* ---- Cast: one element from one dtype to another (both backends) ------------ */

static inline PP_HD int pp_el_cast_supported(pp_dtype t)
{
    return t == PP_DTYPE_F32 || t == PP_DTYPE_F64 || t == PP_DTYPE_I64 || t == PP_DTYPE_I32 || t == PP_DTYPE_BOOL ||
           t == PP_DTYPE_BF16 || t == PP_DTYPE_F16;
}

static inline PP_HD double pp_el_cast_read(pp_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case PP_DTYPE_F32: return ((const float *)p)[i];
    case PP_DTYPE_F64: return ((const double *)p)[i];
    case PP_DTYPE_I64: return (double)((const int64_t *)p)[i];
    case PP_DTYPE_I32: return ((const int32_t *)p)[i];
    case PP_DTYPE_BOOL: return ((const uint8_t *)p)[i] != 0;
    case PP_DTYPE_BF16: return pp_el_f32_from_bf16(((const uint16_t *)p)[i]);
    case PP_DTYPE_F16: return pp_el_f32_from_f16(((const uint16_t *)p)[i]);
    default: return 0;
    }
}

/* y[i] = x[i] converted; int64 <-> int32 / bool go straight through (no double round
 * trip), so large ids survive. */
static inline PP_HD void pp_el_cast(pp_dtype from, pp_dtype to, const void *x, void *y, int64_t i)
{
    switch (to) {
    case PP_DTYPE_F32: ((float *)y)[i] = (float)pp_el_cast_read(from, x, i); break;
    case PP_DTYPE_F64: ((double *)y)[i] = pp_el_cast_read(from, x, i); break;
    case PP_DTYPE_I64:
        ((int64_t *)y)[i] = from == PP_DTYPE_I32 ? ((const int32_t *)x)[i] : (int64_t)pp_el_cast_read(from, x, i);
        break;
    case PP_DTYPE_I32:
        ((int32_t *)y)[i] = from == PP_DTYPE_I64 ? (int32_t)((const int64_t *)x)[i] : (int32_t)pp_el_cast_read(from, x, i);
        break;
    case PP_DTYPE_BOOL:
        ((uint8_t *)y)[i] = from == PP_DTYPE_I64 ? ((const int64_t *)x)[i] != 0 : pp_el_cast_read(from, x, i) != 0;
        break;
    case PP_DTYPE_BF16: ((uint16_t *)y)[i] = pp_el_bf16_from_f32((float)pp_el_cast_read(from, x, i)); break;
    case PP_DTYPE_F16: ((uint16_t *)y)[i] = pp_el_f16_from_f32((float)pp_el_cast_read(from, x, i)); break;
    default: break;
    }
}

#endif
