/* Private to the cuda backend: the integer path of the `binary` kernel (kernels/cuda/logic.cu),
 * which elementwise.cu's pp_cu_binary_forward hands int64 / int32 inputs to. */
#ifndef PP_KERNELS_CUDA_LOGIC_CUH
#define PP_KERNELS_CUDA_LOGIC_CUH

#include "cuda_internal.h"

/* y = f(a, b) of element_ops.h's integer list with broadcasting; a, b and y of one integer dtype. */
PP_CU_FWD(pp_cu_binary_int_forward);

#endif
