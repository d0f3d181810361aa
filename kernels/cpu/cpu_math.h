/* Private to kernels/cpu: the "math" kernel entry points that table.c lists, the cpu
 * device's constructor, and small helpers shared by the files. */
#ifndef PP_KERNELS_CPU_MATH_H
#define PP_KERNELS_CPU_MATH_H

#include <onnxpipe/kernels.h>

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

/* device_cpu.c */
pp_status pp_device_cpu_create(int index, pp_device **out, pp_error *err);

/* elementwise.c */
PP_FWD(pp_cpu_add_forward);        PP_BWD(pp_cpu_add_backward);
PP_FWD(pp_cpu_sub_forward);        PP_BWD(pp_cpu_sub_backward);
PP_FWD(pp_cpu_mul_forward);        PP_BWD(pp_cpu_mul_backward);
PP_FWD(pp_cpu_div_forward);        PP_BWD(pp_cpu_div_backward);
PP_FWD(pp_cpu_pow_forward);        PP_BWD(pp_cpu_pow_backward);
PP_FWD(pp_cpu_sqrt_forward);       PP_BWD(pp_cpu_sqrt_backward);
PP_FWD(pp_cpu_neg_forward);        PP_BWD(pp_cpu_neg_backward);
PP_FWD(pp_cpu_reciprocal_forward); PP_BWD(pp_cpu_reciprocal_backward);
PP_FWD(pp_cpu_relu_forward);       PP_BWD(pp_cpu_relu_backward);
PP_FWD(pp_cpu_leaky_relu_forward); PP_BWD(pp_cpu_leaky_relu_backward);
PP_FWD(pp_cpu_sigmoid_forward);    PP_BWD(pp_cpu_sigmoid_backward);
PP_FWD(pp_cpu_tanh_forward);       PP_BWD(pp_cpu_tanh_backward);
PP_FWD(pp_cpu_erf_forward);        PP_BWD(pp_cpu_erf_backward);
PP_FWD(pp_cpu_gelu_forward);       PP_BWD(pp_cpu_gelu_backward);
PP_FWD(pp_cpu_identity_forward);   PP_BWD(pp_cpu_identity_backward);

/* select.c */
PP_FWD(pp_cpu_equal_forward);
PP_FWD(pp_cpu_where_forward);      PP_BWD(pp_cpu_where_backward);
PP_FWD(pp_cpu_cast_forward);       PP_BWD(pp_cpu_cast_backward);
PP_FWD(pp_cpu_dropout_forward);    PP_BWD(pp_cpu_dropout_backward);

/* matmul.c */
PP_FWD(pp_cpu_matmul_forward);     PP_BWD(pp_cpu_matmul_backward);
PP_FWD(pp_cpu_gemm_forward);       PP_BWD(pp_cpu_gemm_backward);

/* conv.c */
PP_FWD(pp_cpu_conv_forward);       PP_BWD(pp_cpu_conv_backward);
size_t pp_cpu_conv_work_bytes(const pp_kernel_ctx *c, const pp_tensor *grad_out, const pp_tensor *grad_in);

/* pool.c */
PP_AUX(pp_cpu_maxpool_aux);
PP_FWD(pp_cpu_maxpool_forward);    PP_BWD(pp_cpu_maxpool_backward);
PP_FWD(pp_cpu_avgpool_forward);    PP_BWD(pp_cpu_avgpool_backward);
PP_FWD(pp_cpu_gap_forward);        PP_BWD(pp_cpu_gap_backward);

/* batchnorm.c */
PP_AUX(pp_cpu_batchnorm_aux);
PP_FWD(pp_cpu_batchnorm_forward);  PP_BWD(pp_cpu_batchnorm_backward);

#endif
