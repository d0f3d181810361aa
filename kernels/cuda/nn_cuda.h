/* Private to the cuda backend: the kernel entry points table.cu lists, one
 * group per .cu file. */
#ifndef PP_KERNELS_CUDA_NN_CUDA_H
#define PP_KERNELS_CUDA_NN_CUDA_H

#include "cuda_internal.h"

#define PAIR(name) PP_CU_FWD(pp_cu_##name##_forward); PP_CU_BWD(pp_cu_##name##_backward);
/* elementwise.cu */
PAIR(add) PAIR(sub) PAIR(mul) PAIR(div) PAIR(pow) PAIR(sqrt) PAIR(neg) PAIR(reciprocal) PAIR(relu)
PAIR(leaky_relu) PAIR(sigmoid) PAIR(tanh) PAIR(erf) PAIR(gelu) PAIR(identity)
/* matmul.cu, and its bfloat16 / float16 kernels */
PAIR(matmul) PAIR(gemm) PAIR(matmul_lp) PAIR(gemm_lp)
/* softmax.cu (Softmax, LogSoftmax), layernorm.cu, loss.cu (SoftmaxCrossEntropyLoss), reduce.cu */
PAIR(softmax) PAIR(layernorm) PAIR(xent) PAIR(reduce)
PP_CU_AUX(pp_cu_layernorm_aux);
/* shape.cu: Reshape/Flatten/Squeeze/Unsqueeze (copy), Transpose, Slice, Concat, Split,
 * Gather, Expand */
PAIR(copy) PAIR(transpose) PAIR(slice) PAIR(concat) PAIR(split) PAIR(gather) PAIR(expand)
/* conv.cu (and its bfloat16 / float16 kernels), pool.cu, batchnorm.cu */
PAIR(conv) PAIR(conv_lp) PAIR(maxpool) PAIR(avgpool) PAIR(gap) PAIR(batchnorm)
PP_CU_AUX(pp_cu_maxpool_aux);
PP_CU_AUX(pp_cu_batchnorm_aux);
/* select.cu: Equal, Cast, Where, Dropout */
PAIR(cast) PAIR(where) PAIR(dropout)
PP_CU_FWD(pp_cu_equal_forward);
/* const_ops.cu: Shape (shapes only) and ConstantOfShape / Range (constant values)
 * computed by the cpu kernel on the host and uploaded */
PP_CU_FWD(pp_cu_shape_forward);
PP_CU_FWD(pp_cu_fold_forward);
#undef PAIR

#endif
