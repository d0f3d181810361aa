/* Private to the cuda backend: the kernel entry points table.cu lists. */
#ifndef PP_KERNELS_CUDA_NN_CUDA_H
#define PP_KERNELS_CUDA_NN_CUDA_H

#include "cuda_internal.h"
#include "kernel_list.h"
#include <onnxpipe/backend/kernels_backend.h>

/* every kernel the op list names (kernel_list.h): pp_cu_<kernel>_forward / _backward */
#define PP_CU_DECL_(ID, name, kernel, kinds, ...) PP_KERNEL_DECL_##kinds(pp_cu, kernel)
PP_OP_LIST(PP_CU_DECL_)
#undef PP_CU_DECL_

/* the 16-bit kernels of matmul.cu and conv.cu (the bfloat16 / float16 tables) */
PP_CU_FWD(pp_cu_matmul_lp_forward); PP_CU_BWD(pp_cu_matmul_lp_backward);
PP_CU_FWD(pp_cu_gemm_lp_forward); PP_CU_BWD(pp_cu_gemm_lp_backward);
PP_CU_FWD(pp_cu_conv_lp_forward); PP_CU_BWD(pp_cu_conv_lp_backward);
/* aux memory of layernorm.cu, pool.cu, batchnorm.cu */
PP_CU_AUX(pp_cu_layernorm_aux);
PP_CU_AUX(pp_cu_xent_aux);   /* loss.cu: max and log-sum-exp per position (kernels/xent.h) */
PP_CU_AUX(pp_cu_maxpool_aux);
PP_CU_AUX(pp_cu_batchnorm_aux);
/* indexing, scatter, padding, tiling, cumulative sums, more reductions */
PP_CU_AUX(pp_cu_scatter_aux);   /* index.cu: ScatterND / ScatterElements with reduction none */

/* normalisation, attention, rotary embedding, resampling, einsum */
PP_CU_AUX(pp_cu_norm_rows_aux);
PP_CU_AUX(pp_cu_attention_aux);
/* cuDNN's fused attention (sdpa.cu), the 16-bit tables' Attention */
PP_CU_AUX(pp_cu_attention_lp_aux);
PP_CU_FWD(pp_cu_attention_lp_forward); PP_CU_BWD(pp_cu_attention_lp_backward);
PP_CU_FWD(pp_cu_attention_lp_prepare);
size_t pp_cu_attention_lp_work(const pp_kernel_ctx *c, const pp_tensor *grad_out, const pp_tensor *grad_in);
PP_CU_AUX(pp_cu_skip_norm_aux);
/* RMSNormalization's rows (a parameter per element), run by layernorm.cu's row kernels */
struct pp_norm_args;
pp_status pp_cu_rms_forward(const pp_kernel_ctx *c, const struct pp_norm_args *n, pp_error *err);
pp_status pp_cu_rms_backward(const pp_kernel_ctx *c, const struct pp_norm_args *n, const pp_tensor *grad_out,
                             pp_tensor *grad_in, pp_error *err);

#endif
