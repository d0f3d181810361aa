/* Private to the cuda backend: the integer paths of the `unary` and `binary` kernels and its Max / Min of 1 or
 * more than 2 inputs (kernels/cuda/logic.cu), which elementwise.cu's binary kernel hands them to. */
#ifndef PP_KERNELS_CUDA_LOGIC_CUH
#define PP_KERNELS_CUDA_LOGIC_CUH

#include "cuda_internal.h"
#include <onnxpipe/backend/kernels_backend.h>

/* y = f(x) of element_ops.h's integer unary list; x and y of one integer dtype. */
PP_CU_FWD(pp_cu_unary_int_forward);
/* y = f(a, b) of element_ops.h's integer list with broadcasting; a, b and y of one integer dtype. */
PP_CU_FWD(pp_cu_binary_int_forward);

/* Max / Min of nin != 2 float32 inputs (ONNX's variadic form), as kernels/cpu/logic.c. */
PP_CU_FWD(pp_cu_minmax_forward);
PP_CU_BWD(pp_cu_minmax_backward);

#endif
