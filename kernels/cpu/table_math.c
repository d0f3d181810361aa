/* The cpu kernel table of the "math" family (see kernels/registry.c): elementwise ops,
 * MatMul/Gemm, Conv, pooling, BatchNormalization. All compute in fp32. */
#include "cpu_math.h"

/* {op, aux_bytes, forward, backward, saves_in, saves_out, assigns_fresh} on the cpu in fp32 */
#define K(op, aux, fwd, bwd, sin, sout, fresh) {op, PP_DEVICE_CPU, PP_DTYPE_F32, aux, fwd, bwd, sin, sout, fresh}

static const pp_kernel kernels_math[] = {
    K("Add", NULL, pp_cpu_add_forward, pp_cpu_add_backward, 0x0, 0x0, 1),
    K("Sub", NULL, pp_cpu_sub_forward, pp_cpu_sub_backward, 0x0, 0x0, 1),
    K("Mul", NULL, pp_cpu_mul_forward, pp_cpu_mul_backward, 0x3, 0x0, 1),
    K("Div", NULL, pp_cpu_div_forward, pp_cpu_div_backward, 0x3, 0x0, 1),
    K("Pow", NULL, pp_cpu_pow_forward, pp_cpu_pow_backward, 0x3, 0x0, 1),
    K("Sqrt", NULL, pp_cpu_sqrt_forward, pp_cpu_sqrt_backward, 0x0, 0x1, 1),
    K("Neg", NULL, pp_cpu_neg_forward, pp_cpu_neg_backward, 0x0, 0x0, 1),
    K("Reciprocal", NULL, pp_cpu_reciprocal_forward, pp_cpu_reciprocal_backward, 0x0, 0x1, 1),
    K("Relu", NULL, pp_cpu_relu_forward, pp_cpu_relu_backward, 0x0, 0x1, 1),
    K("LeakyRelu", NULL, pp_cpu_leaky_relu_forward, pp_cpu_leaky_relu_backward, 0x1, 0x0, 1),
    K("Sigmoid", NULL, pp_cpu_sigmoid_forward, pp_cpu_sigmoid_backward, 0x0, 0x1, 1),
    K("Tanh", NULL, pp_cpu_tanh_forward, pp_cpu_tanh_backward, 0x0, 0x1, 1),
    K("Erf", NULL, pp_cpu_erf_forward, pp_cpu_erf_backward, 0x1, 0x0, 1),
    K("Gelu", NULL, pp_cpu_gelu_forward, pp_cpu_gelu_backward, 0x1, 0x1, 1),
    K("MatMul", NULL, pp_cpu_matmul_forward, pp_cpu_matmul_backward, 0x3, 0x0, 1),
    K("Gemm", NULL, pp_cpu_gemm_forward, pp_cpu_gemm_backward, 0x3, 0x0, 0),
    K("Conv", NULL, pp_cpu_conv_forward, pp_cpu_conv_backward, 0x3, 0x0, 0),
    K("MaxPool", pp_cpu_maxpool_aux, pp_cpu_maxpool_forward, pp_cpu_maxpool_backward, 0x0, 0x0, 0),
    K("AveragePool", NULL, pp_cpu_avgpool_forward, pp_cpu_avgpool_backward, 0x0, 0x0, 0),
    K("GlobalAveragePool", NULL, pp_cpu_gap_forward, pp_cpu_gap_backward, 0x0, 0x0, 0),
    K("BatchNormalization", pp_cpu_batchnorm_aux, pp_cpu_batchnorm_forward, pp_cpu_batchnorm_backward, 0x1b, 0x0, 0),
    K("Equal", NULL, pp_cpu_equal_forward, NULL, 0x0, 0x0, 0),
    K("Where", NULL, pp_cpu_where_forward, pp_cpu_where_backward, 0x1, 0x0, 0),
    K("Cast", NULL, pp_cpu_cast_forward, pp_cpu_cast_backward, 0x0, 0x0, 0),
    K("Dropout", NULL, pp_cpu_dropout_forward, pp_cpu_dropout_backward, 0x6, 0x0, 0),
    K("Identity", NULL, pp_cpu_identity_forward, pp_cpu_identity_backward, 0x0, 0x0, 1),
};

const pp_kernel_table pp_cpu_kernels_math = {kernels_math, (int)(sizeof kernels_math / sizeof kernels_math[0])};
