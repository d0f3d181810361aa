/* The cpu kernel table of the "nn" family (see kernels/registry.c): normalisation,
 * softmax, reductions, loss, and the shape / data-movement ops. saves_in / saves_out
 * list what backward reads (constant int inputs such as axes and starts included). */
#include <onnxpipe/kernels.h>

#include "nn_kernels.h"

#define CPU PP_DEVICE_CPU, PP_DTYPE_F32
#define BIT(i) (1u << (i))

static const pp_kernel kernels_nn[] = {
    /* op_type, device, dtype, aux_bytes, forward, backward, saves_in, saves_out, assigns_fresh */
    {"Softmax", CPU, NULL, pp_cpu_softmax_forward, pp_cpu_softmax_backward, 0, BIT(0), 1},
    {"LogSoftmax", CPU, NULL, pp_cpu_softmax_forward, pp_cpu_softmax_backward, 0, BIT(0), 1},
    {"LayerNormalization", CPU, pp_cpu_layernorm_aux_bytes, pp_cpu_layernorm_forward, pp_cpu_layernorm_backward,
     BIT(0) | BIT(1), 0, 0},
    {"ReduceSum", CPU, NULL, pp_cpu_reduce_forward, pp_cpu_reduce_backward, BIT(1), 0, 0},
    {"ReduceMean", CPU, NULL, pp_cpu_reduce_forward, pp_cpu_reduce_backward, BIT(1), 0, 0},
    {"SoftmaxCrossEntropyLoss", CPU, NULL, pp_cpu_xent_forward, pp_cpu_xent_backward, BIT(0) | BIT(1) | BIT(2), 0, 0},
    {"Reshape", CPU, NULL, pp_cpu_copy_forward, pp_cpu_copy_backward, 0, 0, 0},
    {"Flatten", CPU, NULL, pp_cpu_copy_forward, pp_cpu_copy_backward, 0, 0, 0},
    {"Squeeze", CPU, NULL, pp_cpu_copy_forward, pp_cpu_copy_backward, 0, 0, 0},
    {"Unsqueeze", CPU, NULL, pp_cpu_copy_forward, pp_cpu_copy_backward, 0, 0, 0},
    {"Transpose", CPU, NULL, pp_cpu_transpose_forward, pp_cpu_transpose_backward, 0, 0, 1},
    {"Slice", CPU, NULL, pp_cpu_slice_forward, pp_cpu_slice_backward, BIT(1) | BIT(2) | BIT(3) | BIT(4), 0, 0},
    {"Split", CPU, NULL, pp_cpu_split_forward, pp_cpu_split_backward, 0, 0, 1},
    {"Concat", CPU, NULL, pp_cpu_concat_forward, pp_cpu_concat_backward, 0, 0, 0},
    {"Gather", CPU, NULL, pp_cpu_gather_forward, pp_cpu_gather_backward, BIT(1), 0, 0},
    {"Expand", CPU, NULL, pp_cpu_expand_forward, pp_cpu_expand_backward, 0, 0, 0},
    {"Shape", CPU, NULL, pp_cpu_shape_forward, NULL, 0, 0, 0},
    {"ConstantOfShape", CPU, NULL, pp_cpu_constant_of_shape_forward, NULL, 0, 0, 0},
    {"Range", CPU, NULL, pp_cpu_range_forward, NULL, 0, 0, 0},
};

const pp_kernel_table pp_cpu_kernels_nn = {kernels_nn, (int)(sizeof kernels_nn / sizeof kernels_nn[0])};
