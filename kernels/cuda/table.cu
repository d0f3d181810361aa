/* The cuda backend: its kernel tables in fp32, bfloat16 and float16, indexed by the
 * registry's ops (op.h), and its entry for the backend list (kernels/backends.c). What
 * backward reads of the forward is the op's (graph/ops.c), the same on every device. The
 * tables are built by constexpr functions: C++ has no designated array initializers. The
 * 16-bit tables hold the native kernels (cuBLAS MatMul and Gemm, cuDNN Conv); an empty slot
 * makes pp_kernel_find fall back to the adapter around the fp32 kernel (kernels/lowp.c). */
#include "cuda_internal.h"
#include "nn_cuda.h"

#include <array>

static_assert(PP_OP_COUNT == 46, "a new op needs its cuda kernel here (and its registry entry, cpu kernel, tests)");

static constexpr std::array<pp_kernel, PP_OP_COUNT> make_f32()
{
    std::array<pp_kernel, PP_OP_COUNT> t{};
#define K(op, aux, fwd, bwd) t[op] = pp_kernel{aux, fwd, bwd, 0, nullptr}
    K(PP_OP_ADD, nullptr, pp_cu_add_forward, pp_cu_add_backward);
    K(PP_OP_SUB, nullptr, pp_cu_sub_forward, pp_cu_sub_backward);
    K(PP_OP_MUL, nullptr, pp_cu_mul_forward, pp_cu_mul_backward);
    K(PP_OP_DIV, nullptr, pp_cu_div_forward, pp_cu_div_backward);
    K(PP_OP_POW, nullptr, pp_cu_pow_forward, pp_cu_pow_backward);
    K(PP_OP_SQRT, nullptr, pp_cu_sqrt_forward, pp_cu_sqrt_backward);
    K(PP_OP_NEG, nullptr, pp_cu_neg_forward, pp_cu_neg_backward);
    K(PP_OP_RECIPROCAL, nullptr, pp_cu_reciprocal_forward, pp_cu_reciprocal_backward);
    K(PP_OP_RELU, nullptr, pp_cu_relu_forward, pp_cu_relu_backward);
    K(PP_OP_LEAKY_RELU, nullptr, pp_cu_leaky_relu_forward, pp_cu_leaky_relu_backward);
    K(PP_OP_SIGMOID, nullptr, pp_cu_sigmoid_forward, pp_cu_sigmoid_backward);
    K(PP_OP_TANH, nullptr, pp_cu_tanh_forward, pp_cu_tanh_backward);
    K(PP_OP_ERF, nullptr, pp_cu_erf_forward, pp_cu_erf_backward);
    K(PP_OP_GELU, nullptr, pp_cu_gelu_forward, pp_cu_gelu_backward);
    K(PP_OP_IDENTITY, nullptr, pp_cu_identity_forward, pp_cu_identity_backward);
    K(PP_OP_MATMUL, nullptr, pp_cu_matmul_forward, pp_cu_matmul_backward);
    K(PP_OP_GEMM, nullptr, pp_cu_gemm_forward, pp_cu_gemm_backward);
    K(PP_OP_SOFTMAX, nullptr, pp_cu_softmax_forward, pp_cu_softmax_backward);
    K(PP_OP_LOG_SOFTMAX, nullptr, pp_cu_softmax_forward, pp_cu_softmax_backward);
    K(PP_OP_LAYER_NORMALIZATION, pp_cu_layernorm_aux, pp_cu_layernorm_forward, pp_cu_layernorm_backward);
    K(PP_OP_REDUCE_SUM, nullptr, pp_cu_reduce_forward, pp_cu_reduce_backward);
    K(PP_OP_REDUCE_MEAN, nullptr, pp_cu_reduce_forward, pp_cu_reduce_backward);
    K(PP_OP_SOFTMAX_CROSS_ENTROPY_LOSS, nullptr, pp_cu_xent_forward, pp_cu_xent_backward);
    K(PP_OP_RESHAPE, nullptr, pp_cu_copy_forward, pp_cu_copy_backward);
    K(PP_OP_FLATTEN, nullptr, pp_cu_copy_forward, pp_cu_copy_backward);
    K(PP_OP_SQUEEZE, nullptr, pp_cu_copy_forward, pp_cu_copy_backward);
    K(PP_OP_UNSQUEEZE, nullptr, pp_cu_copy_forward, pp_cu_copy_backward);
    K(PP_OP_TRANSPOSE, nullptr, pp_cu_transpose_forward, pp_cu_transpose_backward);
    K(PP_OP_SLICE, nullptr, pp_cu_slice_forward, pp_cu_slice_backward);
    K(PP_OP_CONCAT, nullptr, pp_cu_concat_forward, pp_cu_concat_backward);
    K(PP_OP_SPLIT, nullptr, pp_cu_split_forward, pp_cu_split_backward);
    K(PP_OP_GATHER, nullptr, pp_cu_gather_forward, pp_cu_gather_backward);
    K(PP_OP_EXPAND, nullptr, pp_cu_expand_forward, pp_cu_expand_backward);
    K(PP_OP_WHERE, nullptr, pp_cu_where_forward, pp_cu_where_backward);
    K(PP_OP_DROPOUT, nullptr, pp_cu_dropout_forward, pp_cu_dropout_backward);
    K(PP_OP_CONV, nullptr, pp_cu_conv_forward, pp_cu_conv_backward);
    K(PP_OP_MAX_POOL, pp_cu_maxpool_aux, pp_cu_maxpool_forward, pp_cu_maxpool_backward);
    K(PP_OP_AVERAGE_POOL, nullptr, pp_cu_avgpool_forward, pp_cu_avgpool_backward);
    K(PP_OP_GLOBAL_AVERAGE_POOL, nullptr, pp_cu_gap_forward, pp_cu_gap_backward);
    K(PP_OP_BATCH_NORMALIZATION, pp_cu_batchnorm_aux, pp_cu_batchnorm_forward, pp_cu_batchnorm_backward);
    K(PP_OP_EQUAL, nullptr, pp_cu_equal_forward, nullptr);
    K(PP_OP_CAST, nullptr, pp_cu_cast_forward, pp_cu_cast_backward);
    K(PP_OP_SHAPE, nullptr, pp_cu_shape_forward, nullptr);
    K(PP_OP_CONSTANT_OF_SHAPE, nullptr, pp_cu_fold_forward, nullptr);
    K(PP_OP_RANGE, nullptr, pp_cu_fold_forward, nullptr);
#undef K
    return t;
}

/* the same native kernels serve bfloat16 and float16: they read the tensors' dtypes */
static constexpr std::array<pp_kernel, PP_OP_COUNT> make_lp()
{
    std::array<pp_kernel, PP_OP_COUNT> t{};
    t[PP_OP_MATMUL] = pp_kernel{nullptr, pp_cu_matmul_lp_forward, pp_cu_matmul_lp_backward, 0, nullptr};
    t[PP_OP_GEMM] = pp_kernel{nullptr, pp_cu_gemm_lp_forward, pp_cu_gemm_lp_backward, 0, nullptr};
    t[PP_OP_CONV] = pp_kernel{nullptr, pp_cu_conv_lp_forward, pp_cu_conv_lp_backward, 0, nullptr};
    return t;
}

static constexpr std::array<pp_kernel, PP_OP_COUNT> kernels_f32 = make_f32();
static constexpr std::array<pp_kernel, PP_OP_COUNT> kernels_lp = make_lp();
static const pp_kernel_table tables[] = {
    {PP_DTYPE_F32, kernels_f32.data()}, {PP_DTYPE_BF16, kernels_lp.data()}, {PP_DTYPE_F16, kernels_lp.data()}};

extern const pp_flat_ops pp_cuda_flat_ops;

extern "C" const pp_backend pp_backend_cuda = {
    /* .name    = */ "cuda",
    /* .kind    = */ PP_DEVICE_CUDA,
    /* .caps    = */ 0,
    /* .create  = */ pp_device_cuda_create,
    /* .tables  = */ tables,
    /* .ntables = */ (int)(sizeof tables / sizeof tables[0]),
    /* .flat    = */ &pp_cuda_flat_ops,
};
