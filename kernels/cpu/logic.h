/* Private to kernels/cpu: the integer path of the `binary` kernel (kernels/cpu/logic.c), which
 * elementwise.c's pp_cpu_binary_forward hands int64 / int32 inputs to. */
#ifndef PP_KERNELS_CPU_LOGIC_H
#define PP_KERNELS_CPU_LOGIC_H

#include <onnxpipe/kernels.h>

/* y = f(a, b) of element_ops.h's integer list with broadcasting; a, b and y of one integer dtype. */
pp_status pp_cpu_binary_int_forward(const pp_kernel_ctx *c, pp_error *err);

#endif
