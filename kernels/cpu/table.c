/* The cpu backend: its kernel table in fp32, indexed by the registry's ops (op.h), and
 * its entry for the backend list (kernels/backends.c). What backward reads of the
 * forward is the op's (graph/ops.c); a kernel adds only what it can do beyond that. */
#include "cpu_math.h"
#include "nn_kernels.h"

#include <assert.h>

static_assert(PP_OP_COUNT == 46, "a new op needs its cpu kernel here (and its registry entry, cuda kernel, tests)");

#define FRESH PP_KCAP_ASSIGNS_FRESH
#define MATMUL_CAPS                                                                                       \
    (PP_KCAP_ASSIGNS_FRESH | PP_KCAP_MATMUL_ALPHA | PP_KCAP_MATMUL_BIAS | PP_KCAP_MATMUL_STRIDED | PP_KCAP_MATMUL_CAUSAL)

/* [op] = {aux_bytes, forward, backward, caps, work_bytes} */
static const pp_kernel kernels_f32[PP_OP_COUNT] = {
    [PP_OP_ADD] = {NULL, pp_cpu_add_forward, pp_cpu_add_backward, FRESH},
    [PP_OP_SUB] = {NULL, pp_cpu_sub_forward, pp_cpu_sub_backward, FRESH},
    [PP_OP_MUL] = {NULL, pp_cpu_mul_forward, pp_cpu_mul_backward, FRESH},
    [PP_OP_DIV] = {NULL, pp_cpu_div_forward, pp_cpu_div_backward, FRESH},
    [PP_OP_POW] = {NULL, pp_cpu_pow_forward, pp_cpu_pow_backward, FRESH},
    [PP_OP_SQRT] = {NULL, pp_cpu_sqrt_forward, pp_cpu_sqrt_backward, FRESH},
    [PP_OP_NEG] = {NULL, pp_cpu_neg_forward, pp_cpu_neg_backward, FRESH},
    [PP_OP_RECIPROCAL] = {NULL, pp_cpu_reciprocal_forward, pp_cpu_reciprocal_backward, FRESH},
    [PP_OP_RELU] = {NULL, pp_cpu_relu_forward, pp_cpu_relu_backward, FRESH},
    [PP_OP_LEAKY_RELU] = {NULL, pp_cpu_leaky_relu_forward, pp_cpu_leaky_relu_backward, FRESH},
    [PP_OP_SIGMOID] = {NULL, pp_cpu_sigmoid_forward, pp_cpu_sigmoid_backward, FRESH},
    [PP_OP_TANH] = {NULL, pp_cpu_tanh_forward, pp_cpu_tanh_backward, FRESH},
    [PP_OP_ERF] = {NULL, pp_cpu_erf_forward, pp_cpu_erf_backward, FRESH},
    [PP_OP_GELU] = {NULL, pp_cpu_gelu_forward, pp_cpu_gelu_backward, FRESH},
    [PP_OP_EQUAL] = {NULL, pp_cpu_equal_forward, NULL, 0},
    [PP_OP_WHERE] = {NULL, pp_cpu_where_forward, pp_cpu_where_backward, 0},
    [PP_OP_CAST] = {NULL, pp_cpu_cast_forward, pp_cpu_cast_backward, 0},
    [PP_OP_DROPOUT] = {NULL, pp_cpu_dropout_forward, pp_cpu_dropout_backward, 0},
    [PP_OP_IDENTITY] = {NULL, pp_cpu_identity_forward, pp_cpu_identity_backward, FRESH},
    [PP_OP_MATMUL] = {NULL, pp_cpu_matmul_forward, pp_cpu_matmul_backward, MATMUL_CAPS},
    [PP_OP_GEMM] = {NULL, pp_cpu_gemm_forward, pp_cpu_gemm_backward, 0},
    [PP_OP_CONV] = {NULL, pp_cpu_conv_forward, pp_cpu_conv_backward, 0, pp_cpu_conv_work_bytes},
    [PP_OP_MAX_POOL] = {pp_cpu_maxpool_aux, pp_cpu_maxpool_forward, pp_cpu_maxpool_backward, 0},
    [PP_OP_AVERAGE_POOL] = {NULL, pp_cpu_avgpool_forward, pp_cpu_avgpool_backward, 0},
    [PP_OP_GLOBAL_AVERAGE_POOL] = {NULL, pp_cpu_gap_forward, pp_cpu_gap_backward, 0},
    [PP_OP_BATCH_NORMALIZATION] = {pp_cpu_batchnorm_aux, pp_cpu_batchnorm_forward, pp_cpu_batchnorm_backward, 0},
    [PP_OP_LAYER_NORMALIZATION] = {pp_cpu_layernorm_aux_bytes, pp_cpu_layernorm_forward, pp_cpu_layernorm_backward,
                                   0},
    [PP_OP_SOFTMAX] = {NULL, pp_cpu_softmax_forward, pp_cpu_softmax_backward, FRESH},
    [PP_OP_LOG_SOFTMAX] = {NULL, pp_cpu_softmax_forward, pp_cpu_softmax_backward, FRESH},
    [PP_OP_REDUCE_MEAN] = {NULL, pp_cpu_reduce_forward, pp_cpu_reduce_backward, 0},
    [PP_OP_REDUCE_SUM] = {NULL, pp_cpu_reduce_forward, pp_cpu_reduce_backward, 0},
    [PP_OP_SOFTMAX_CROSS_ENTROPY_LOSS] = {NULL, pp_cpu_xent_forward, pp_cpu_xent_backward, 0},
    [PP_OP_RESHAPE] = {NULL, pp_cpu_copy_forward, pp_cpu_copy_backward, 0},
    [PP_OP_FLATTEN] = {NULL, pp_cpu_copy_forward, pp_cpu_copy_backward, 0},
    [PP_OP_SQUEEZE] = {NULL, pp_cpu_copy_forward, pp_cpu_copy_backward, 0},
    [PP_OP_UNSQUEEZE] = {NULL, pp_cpu_copy_forward, pp_cpu_copy_backward, 0},
    [PP_OP_TRANSPOSE] = {NULL, pp_cpu_transpose_forward, pp_cpu_transpose_backward, FRESH},
    [PP_OP_SLICE] = {NULL, pp_cpu_slice_forward, pp_cpu_slice_backward, 0},
    [PP_OP_SPLIT] = {NULL, pp_cpu_split_forward, pp_cpu_split_backward, FRESH},
    [PP_OP_CONCAT] = {NULL, pp_cpu_concat_forward, pp_cpu_concat_backward, 0},
    [PP_OP_GATHER] = {NULL, pp_cpu_gather_forward, pp_cpu_gather_backward, 0},
    [PP_OP_EXPAND] = {NULL, pp_cpu_expand_forward, pp_cpu_expand_backward, 0},
    [PP_OP_CONSTANT_OF_SHAPE] = {NULL, pp_cpu_constant_of_shape_forward, NULL, 0},
    [PP_OP_SHAPE] = {NULL, pp_cpu_shape_forward, NULL, 0},
    [PP_OP_RANGE] = {NULL, pp_cpu_range_forward, NULL, 0},
};

static const pp_kernel_table tables[] = {{PP_DTYPE_F32, kernels_f32}};

const pp_backend pp_backend_cpu = {
    /* .name    = */ "cpu",
    /* .kind    = */ PP_DEVICE_CPU,
    /* .caps    = */ PP_DEVICE_CAP_HOST_MEMORY,
    /* .create  = */ pp_device_cpu_create,
    /* .tables  = */ tables,
    /* .ntables = */ (int)(sizeof tables / sizeof tables[0]),
    /* .flat    = */ NULL,
};
