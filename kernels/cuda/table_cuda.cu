/* The cuda kernel table: every op of the supported set on the cuda device in fp32, with
 * the same saves_in / saves_out as the cpu table (the stage keeps the same tensors).
 * Registered, with the flat ops, when the first cuda device is created. */
#include "cuda_internal.h"
#include "nn_cuda.h"

#define K(op, aux, fwd, bwd, sin, sout) {op, PP_DEVICE_CUDA, PP_DTYPE_F32, aux, fwd, bwd, sin, sout, 0}
#define BIT(i) (1u << (i))

static const pp_kernel kernels_cuda[] = {
    K("Add", NULL, pp_cu_add_forward, pp_cu_add_backward, 0x0, 0x0),
    K("Sub", NULL, pp_cu_sub_forward, pp_cu_sub_backward, 0x0, 0x0),
    K("Mul", NULL, pp_cu_mul_forward, pp_cu_mul_backward, 0x3, 0x0),
    K("Div", NULL, pp_cu_div_forward, pp_cu_div_backward, 0x3, 0x0),
    K("Pow", NULL, pp_cu_pow_forward, pp_cu_pow_backward, 0x3, 0x0),
    K("Sqrt", NULL, pp_cu_sqrt_forward, pp_cu_sqrt_backward, 0x0, 0x1),
    K("Neg", NULL, pp_cu_neg_forward, pp_cu_neg_backward, 0x0, 0x0),
    K("Reciprocal", NULL, pp_cu_reciprocal_forward, pp_cu_reciprocal_backward, 0x0, 0x1),
    K("Relu", NULL, pp_cu_relu_forward, pp_cu_relu_backward, 0x0, 0x1),
    K("LeakyRelu", NULL, pp_cu_leaky_relu_forward, pp_cu_leaky_relu_backward, 0x1, 0x0),
    K("Sigmoid", NULL, pp_cu_sigmoid_forward, pp_cu_sigmoid_backward, 0x0, 0x1),
    K("Tanh", NULL, pp_cu_tanh_forward, pp_cu_tanh_backward, 0x0, 0x1),
    K("Erf", NULL, pp_cu_erf_forward, pp_cu_erf_backward, 0x1, 0x0),
    K("Gelu", NULL, pp_cu_gelu_forward, pp_cu_gelu_backward, 0x1, 0x1),
    K("Identity", NULL, pp_cu_identity_forward, pp_cu_identity_backward, 0x0, 0x0),
    K("MatMul", NULL, pp_cu_matmul_forward, pp_cu_matmul_backward, 0x3, 0x0),
    K("Gemm", NULL, pp_cu_gemm_forward, pp_cu_gemm_backward, 0x3, 0x0),
    K("Softmax", NULL, pp_cu_softmax_forward, pp_cu_softmax_backward, 0, BIT(0)),
    K("LogSoftmax", NULL, pp_cu_softmax_forward, pp_cu_softmax_backward, 0, BIT(0)),
    K("LayerNormalization", pp_cu_layernorm_aux, pp_cu_layernorm_forward, pp_cu_layernorm_backward, BIT(0) | BIT(1), 0),
    K("ReduceSum", NULL, pp_cu_reduce_forward, pp_cu_reduce_backward, BIT(1), 0),
    K("ReduceMean", NULL, pp_cu_reduce_forward, pp_cu_reduce_backward, BIT(1), 0),
    K("SoftmaxCrossEntropyLoss", NULL, pp_cu_xent_forward, pp_cu_xent_backward, BIT(0) | BIT(1) | BIT(2), 0),
    K("Reshape", NULL, pp_cu_copy_forward, pp_cu_copy_backward, 0, 0),
    K("Flatten", NULL, pp_cu_copy_forward, pp_cu_copy_backward, 0, 0),
    K("Squeeze", NULL, pp_cu_copy_forward, pp_cu_copy_backward, 0, 0),
    K("Unsqueeze", NULL, pp_cu_copy_forward, pp_cu_copy_backward, 0, 0),
    K("Transpose", NULL, pp_cu_transpose_forward, pp_cu_transpose_backward, 0, 0),
    K("Slice", NULL, pp_cu_slice_forward, pp_cu_slice_backward, BIT(1) | BIT(2) | BIT(3) | BIT(4), 0),
    K("Concat", NULL, pp_cu_concat_forward, pp_cu_concat_backward, 0, 0),
    K("Split", NULL, pp_cu_split_forward, pp_cu_split_backward, 0, 0),
    K("Gather", NULL, pp_cu_gather_forward, pp_cu_gather_backward, BIT(1), 0),
    K("Expand", NULL, pp_cu_expand_forward, pp_cu_expand_backward, 0, 0),
    K("Where", NULL, pp_cu_where_forward, pp_cu_where_backward, 0x1, 0x0),
    K("Dropout", NULL, pp_cu_dropout_forward, pp_cu_dropout_backward, 0x6, 0x0),
    K("Conv", NULL, pp_cu_conv_forward, pp_cu_conv_backward, 0x3, 0x0),
    K("MaxPool", pp_cu_maxpool_aux, pp_cu_maxpool_forward, pp_cu_maxpool_backward, 0x0, 0x0),
    K("AveragePool", NULL, pp_cu_avgpool_forward, pp_cu_avgpool_backward, 0x0, 0x0),
    K("GlobalAveragePool", NULL, pp_cu_gap_forward, pp_cu_gap_backward, 0x0, 0x0),
    K("BatchNormalization", pp_cu_batchnorm_aux, pp_cu_batchnorm_forward, pp_cu_batchnorm_backward, 0x1b, 0x0),
    K("Equal", NULL, pp_cu_equal_forward, NULL, 0x0, 0x0),
    K("Cast", NULL, pp_cu_cast_forward, pp_cu_cast_backward, 0x0, 0x0),
    K("Shape", NULL, pp_cu_shape_forward, NULL, 0, 0),
    K("ConstantOfShape", NULL, pp_cu_fold_forward, NULL, 0, 0),
    K("Range", NULL, pp_cu_fold_forward, NULL, 0, 0),
};

static const pp_kernel_table table_cuda = {kernels_cuda, (int)(sizeof kernels_cuda / sizeof kernels_cuda[0])};

extern const pp_flat_ops pp_cuda_flat_ops;

pp_status pp_cuda_register_kernels(pp_error *err)
{
    pp_kernel_register_flat(PP_DEVICE_CUDA, &pp_cuda_flat_ops);
    return pp_kernel_register_table(&table_cuda, err);
}
