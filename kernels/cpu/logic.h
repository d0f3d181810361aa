/* Private to kernels/cpu: the integer paths of the `unary` and `binary` kernels and its Max / Min of 1 or more
 * than 2 inputs (kernels/cpu/logic.c), which elementwise.c's binary kernel hands them to. */
#ifndef PP_KERNELS_CPU_LOGIC_H
#define PP_KERNELS_CPU_LOGIC_H

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/kernels.h>

/* y = f(x) of element_ops.h's integer unary list; x and y of one integer dtype. */
pp_status pp_cpu_unary_int_forward(const pp_kernel_ctx *c, pp_error *err);
/* y = f(a, b) of element_ops.h's integer list with broadcasting; a, b and y of one integer dtype. */
pp_status pp_cpu_binary_int_forward(const pp_kernel_ctx *c, pp_error *err);

/* Max / Min of nin != 2 float32 inputs (ONNX's variadic form), forward and backward. */
pp_status pp_cpu_minmax_forward(const pp_kernel_ctx *c, pp_error *err);
pp_status pp_cpu_minmax_backward(const pp_kernel_ctx *c, const pp_tensor *grad_out, pp_tensor *grad_in,
                                 pp_error *err);

#endif
