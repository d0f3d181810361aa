/* Private to kernels/cpu: the "math" kernel entry points that table.c lists, the cpu
 * device's constructor, and small helpers shared by the files. */
#ifndef PP_KERNELS_CPU_MATH_H
#define PP_KERNELS_CPU_MATH_H

#include <onnxpipe/backend/kernels_backend.h>

#include "kernel_list.h"
#include "op_args.h"   /* pp_args_fail: node-named errors, shared with cuda */

#define PP_FWD(name) pp_status name(const pp_kernel_ctx *c, pp_error *err)
#define PP_BWD(name) pp_status name(const pp_kernel_ctx *c, const pp_tensor *grad_out, pp_tensor *grad_in, \
                                    pp_error *err)
#define PP_AUX(name) size_t name(const pp_kernel_ctx *c)

/* Loops bound by arithmetic (exp, erf, sqrt per element) are built for AVX-512, for AVX2 +
 * FMA and for the baseline, the one the machine runs picked at load time (GCC function
 * multiversioning; AVX-512 runs GELU's backward 1.6x as fast as AVX2 on the example GPT).
 * The source fixes the order of operations, and the two vector builds contract the same
 * products into FMAs, so they round alike; the baseline has no FMA. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define PP_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define PP_CPU_CLONES
#endif

/* "node 'x' (Op): input 1 has dtype int64, expected float32" unless input i is `want`;
 * an omitted input passes when optional. */
pp_status pp_cpu_want_dtype(const pp_kernel_ctx *c, int i, pp_dtype want, int optional, pp_error *err);
/* Input count check: nmin..nmax present positions. */
pp_status pp_cpu_want_inputs(const pp_kernel_ctx *c, int nmin, int nmax, pp_error *err);

/* flat.c: float16 <-> float32 over n elements, through F16C when f16c is 1 (only where
 * pp_cpu_has_f16c() says the cpu has it), else the element functions: the same bits. */
int pp_cpu_has_f16c(void);
void pp_cpu_f16_from_f32(uint16_t *dst, const float *src, int64_t n, int f16c);
void pp_cpu_f32_from_f16(float *dst, const uint16_t *src, int64_t n, int f16c);

/* optim.c: the cpu's optimizer update (pp_flat_ops.optim_update; h checked by the dispatcher) */
pp_status pp_cpu_optim_update(pp_device *dev, const pp_optim_hparams *h, const pp_optim_step *step, float *param,
                              const float *grad, float *state, int64_t n, pp_error *err);

/* device_cpu.c */
pp_status pp_device_cpu_create(int index, pp_device **out, pp_error *err);

/* every kernel the op list names (kernel_list.h): pp_cpu_<kernel>_forward / _backward */
#define PP_CPU_DECL_(ID, name, kernel, kinds, ...) PP_KERNEL_DECL_##kinds(pp_cpu, kernel)
PP_OP_LIST(PP_CPU_DECL_)
#undef PP_CPU_DECL_

/* what some kernels add: aux memory (pool.c, batchnorm.c), work bytes (conv.c) */
PP_AUX(pp_cpu_maxpool_aux);
PP_AUX(pp_cpu_batchnorm_aux);
PP_AUX(pp_cpu_layernorm_aux_bytes);
PP_AUX(pp_cpu_xent_aux);   /* loss.c: max and log-sum-exp per position (kernels/xent.h) */
size_t pp_cpu_conv_work_bytes(const pp_kernel_ctx *c, const pp_tensor *grad_out, const pp_tensor *grad_in);
/* indexing, scatter, padding, tiling, cumulative sums, more reductions */
PP_AUX(pp_cpu_scatter_aux);   /* index.c: ScatterND / ScatterElements with reduction none */

/* normalisation, attention, rotary embedding, resampling, einsum */
PP_AUX(pp_cpu_norm_rows_aux);
PP_AUX(pp_cpu_attention_aux);
PP_AUX(pp_cpu_skip_norm_aux);

/* The row loops of LayerNormalization (layernorm.c: m rows of d, x [m, d], scale and bias
 * [d], mean and rstd [m]) and of the other row normalisations (norm_rows.c, the layout of
 * a; buf: 2 d floats forward, 3 d backward), which skip_norm.c runs on input + skip:
 * forward writes y, mean, rstd; backward adds into dx, dscale, dbias (each may be NULL). */
struct pp_norm_args;
void pp_cpu_ln_rows(const float *x, const float *scale, const float *bias, float *y, float *mean, float *rstd,
                    int64_t m, int64_t d, float eps);
void pp_cpu_ln_rows_grad(const float *x, const float *scale, const float *dy, const float *mean, const float *rstd,
                         float *dx, float *dscale, float *dbias, int64_t m, int64_t d);
void pp_cpu_norm_rows_run(const struct pp_norm_args *a, const float *x, const float *scale, const float *bias,
                          float *y, float *mean, float *rstd, float *buf);
void pp_cpu_norm_rows_grad(const struct pp_norm_args *a, const float *x, const float *scale, const float *dy,
                           const float *mean, const float *rstd, float *dx, float *dscale, float *dbias, float *buf);

#endif
