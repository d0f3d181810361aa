/* Private to the cpu "nn" family: the forward / backward entry points that
 * table.c lists (one pair per kernel file). */
#ifndef PP_KERNELS_CPU_NN_KERNELS_H
#define PP_KERNELS_CPU_NN_KERNELS_H

#include <onnxpipe/kernels.h>

#define PP_NN_BACKWARD(name) \
    pp_status name(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, pp_error *err)

pp_status pp_cpu_softmax_forward(const pp_kernel_ctx *c, pp_error *err);        /* Softmax, LogSoftmax */
PP_NN_BACKWARD(pp_cpu_softmax_backward);
size_t pp_cpu_layernorm_aux_bytes(const pp_kernel_ctx *c);
pp_status pp_cpu_layernorm_forward(const pp_kernel_ctx *c, pp_error *err);
PP_NN_BACKWARD(pp_cpu_layernorm_backward);
pp_status pp_cpu_reduce_forward(const pp_kernel_ctx *c, pp_error *err);         /* ReduceSum, ReduceMean */
PP_NN_BACKWARD(pp_cpu_reduce_backward);
pp_status pp_cpu_xent_forward(const pp_kernel_ctx *c, pp_error *err);           /* SoftmaxCrossEntropyLoss */
PP_NN_BACKWARD(pp_cpu_xent_backward);
pp_status pp_cpu_copy_forward(const pp_kernel_ctx *c, pp_error *err);           /* Reshape, Flatten, Squeeze, Unsqueeze */
PP_NN_BACKWARD(pp_cpu_copy_backward);
pp_status pp_cpu_transpose_forward(const pp_kernel_ctx *c, pp_error *err);
PP_NN_BACKWARD(pp_cpu_transpose_backward);
pp_status pp_cpu_slice_forward(const pp_kernel_ctx *c, pp_error *err);
PP_NN_BACKWARD(pp_cpu_slice_backward);
pp_status pp_cpu_split_forward(const pp_kernel_ctx *c, pp_error *err);
PP_NN_BACKWARD(pp_cpu_split_backward);
pp_status pp_cpu_concat_forward(const pp_kernel_ctx *c, pp_error *err);
PP_NN_BACKWARD(pp_cpu_concat_backward);
pp_status pp_cpu_gather_forward(const pp_kernel_ctx *c, pp_error *err);
PP_NN_BACKWARD(pp_cpu_gather_backward);
pp_status pp_cpu_expand_forward(const pp_kernel_ctx *c, pp_error *err);
PP_NN_BACKWARD(pp_cpu_expand_backward);
pp_status pp_cpu_shape_forward(const pp_kernel_ctx *c, pp_error *err);
pp_status pp_cpu_constant_of_shape_forward(const pp_kernel_ctx *c, pp_error *err);
pp_status pp_cpu_range_forward(const pp_kernel_ctx *c, pp_error *err);

#endif
