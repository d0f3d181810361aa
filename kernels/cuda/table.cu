/* The cuda backend: its kernel tables in fp32, bfloat16 and float16, indexed by the
 * registry's ops (op.h), and its entry for the backend list (kernels/backends.c). What
 * backward reads of the forward is the op's (graph/ops.c), the same on every device. The
 * tables are built by constexpr functions: C++ has no designated array initializers. The
 * 16-bit tables hold the native kernels (cuBLASLt MatMul and Gemm, cuDNN Conv and fused
 * attention, and the kernels of native16 below, which take every float dtype); an empty slot
 * makes pp_kernel_find fall back to the adapter around the fp32 kernel (kernels/lowp.c). */
#include "cuda_internal.h"
#include "nn_cuda.h"
#include <onnxpipe/element_ops.h>

#include <array>

/* The slots the op list makes (kernel_list.h), then what some kernels add. */
static constexpr std::array<pp_kernel, PP_OP_COUNT> make_f32()
{
    std::array<pp_kernel, PP_OP_COUNT> t{};
#define SLOT(ID, name, kernel, kinds, ...) t[PP_OP_##ID] = pp_kernel PP_KERNEL_SLOT_##kinds(pp_cu, kernel);
    PP_OP_LIST(SLOT)
#undef SLOT
    t[PP_OP_LAYER_NORMALIZATION].aux_bytes = pp_cu_layernorm_aux;
    t[PP_OP_MAX_POOL].aux_bytes = pp_cu_maxpool_aux;
    t[PP_OP_BATCH_NORMALIZATION].aux_bytes = pp_cu_batchnorm_aux;
    /* indexing, scatter, padding, tiling, cumulative sums, more reductions */
    t[PP_OP_SCATTER_ND].aux_bytes = pp_cu_scatter_aux;
    t[PP_OP_SCATTER_ELEMENTS].aux_bytes = pp_cu_scatter_aux;

    /* normalisation, attention, rotary embedding, resampling, einsum */
    t[PP_OP_RMS_NORMALIZATION].aux_bytes = pp_cu_norm_rows_aux;
    t[PP_OP_INSTANCE_NORMALIZATION].aux_bytes = pp_cu_norm_rows_aux;
    t[PP_OP_GROUP_NORMALIZATION].aux_bytes = pp_cu_norm_rows_aux;
    t[PP_OP_ATTENTION].aux_bytes = pp_cu_attention_aux;
    t[PP_OP_MATMUL].caps = PP_KCAP_MATMUL_TRANS_A | PP_KCAP_MATMUL_TRANS_B;
    t[PP_OP_SOFTMAX].caps = PP_KCAP_SOFTMAX_CAUSAL;   /* LogSoftmax shares the kernel (and refuses it) */
    t[PP_OP_LOG_SOFTMAX].caps = PP_KCAP_SOFTMAX_CAUSAL;
    t[PP_OP_DROPOUT].caps = PP_KCAP_STEP_RANDOM;   /* its draws are keyed by the step: no graph */
    t[PP_OP_LAYER_NORMALIZATION].caps = PP_KCAP_ASSIGNS_FRESH;
    t[PP_OP_SOFTMAX_CROSS_ENTROPY_LOSS].aux_bytes = pp_cu_xent_aux;
    t[PP_OP_SOFTMAX_CROSS_ENTROPY_LOSS].caps = PP_KCAP_ASSIGNS_FRESH;

    /* the residual norms (com.microsoft) */
    t[PP_OP_SKIP_LAYER_NORMALIZATION].aux_bytes = pp_cu_skip_norm_aux;
    t[PP_OP_SKIP_SIMPLIFIED_LAYER_NORMALIZATION].aux_bytes = pp_cu_skip_norm_aux;
    t[PP_OP_SKIP_LAYER_NORMALIZATION].caps = PP_KCAP_ASSIGNS_FRESH;
    t[PP_OP_SKIP_SIMPLIFIED_LAYER_NORMALIZATION].caps = PP_KCAP_ASSIGNS_FRESH;

    return t;
}

/* The ops whose float32 kernels read and write bfloat16 and float16 tensors as well (io.cuh:
 * fp32 in registers, one rounding per store; a dtype mix they do not take goes to the
 * adapter from inside the kernel): the 16-bit tables hold the same kernels. */
#define NATIVE_EL(ID, ...) PP_OP_##ID,
static constexpr pp_op native16[] = {
    PP_EL_UNARY_LIST(NATIVE_EL) PP_EL_BINARY_LIST(NATIVE_EL)   /* elementwise.cu (variadic Max / Min: the adapter) */
    PP_OP_SOFTMAX, PP_OP_LOG_SOFTMAX,                          /* softmax.cu */
    PP_OP_LAYER_NORMALIZATION, PP_OP_RMS_NORMALIZATION,        /* layernorm.cu (not norm_rows.cu's other forms) */
    PP_OP_SKIP_LAYER_NORMALIZATION, PP_OP_SKIP_SIMPLIFIED_LAYER_NORMALIZATION,
    PP_OP_SOFTMAX_CROSS_ENTROPY_LOSS,                          /* loss.cu */
    PP_OP_RESHAPE, PP_OP_FLATTEN, PP_OP_SQUEEZE, PP_OP_UNSQUEEZE, PP_OP_TRANSPOSE, PP_OP_SLICE, PP_OP_SPLIT,
    PP_OP_CONCAT, PP_OP_GATHER, PP_OP_EXPAND,                  /* shape.cu (a 16-bit Gather data gradient: the adapter) */
    PP_OP_WHERE, PP_OP_CAST, PP_OP_DROPOUT,                    /* select.cu */
    PP_OP_ROTARY_EMBEDDING,                                    /* rope.cu */
    PP_OP_REDUCE_MEAN, PP_OP_REDUCE_SUM,                       /* reduce.cu */
};
#undef NATIVE_EL

/* the same native kernels serve bfloat16 and float16: they read the tensors' dtypes */
static constexpr std::array<pp_kernel, PP_OP_COUNT> make_lp()
{
    std::array<pp_kernel, PP_OP_COUNT> t{};
    const std::array<pp_kernel, PP_OP_COUNT> f32 = make_f32();
    for (pp_op op : native16) t[op] = f32[op];
    t[PP_OP_MATMUL] = pp_kernel{nullptr, pp_cu_matmul_lp_forward, pp_cu_matmul_lp_backward,
                                PP_KCAP_MATMUL_TRANS_A | PP_KCAP_MATMUL_TRANS_B, nullptr, nullptr};
    t[PP_OP_GEMM] = pp_kernel{nullptr, pp_cu_gemm_lp_forward, pp_cu_gemm_lp_backward, 0, nullptr, nullptr};
    t[PP_OP_CONV] = pp_kernel{nullptr, pp_cu_conv_lp_forward, pp_cu_conv_lp_backward, 0, nullptr, nullptr};
    /* cuDNN's flash attention (sdpa.cu), the fusion's target (stage/fuse_attention.c) */
    t[PP_OP_ATTENTION] = pp_kernel{pp_cu_attention_lp_aux, pp_cu_attention_lp_forward, pp_cu_attention_lp_backward,
                                   PP_KCAP_ATTENTION_FUSED | PP_KCAP_ASSIGNS_FRESH, pp_cu_attention_lp_work,
                                   pp_cu_attention_lp_prepare};
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
    /* .caps    = */ PP_DEVICE_CAP_GRAPHS,
    /* .create  = */ pp_device_cuda_create,
    /* .tables  = */ tables,
    /* .ntables = */ (int)(sizeof tables / sizeof tables[0]),
    /* .flat    = */ &pp_cuda_flat_ops,
};
