/* The cpu backend: its kernel table in fp32, indexed by the registry's ops (op.h), and
 * its entry for the backend list (kernels/backends.c). What backward reads of the
 * forward is the op's (graph/ops.c); a kernel adds only what it can do beyond that. */
#include "cpu_math.h"

#define FRESH PP_KCAP_ASSIGNS_FRESH
#define MATMUL_CAPS                                                                                       \
    (PP_KCAP_ASSIGNS_FRESH | PP_KCAP_MATMUL_ALPHA | PP_KCAP_MATMUL_BIAS | PP_KCAP_MATMUL_STRIDED |                  \
     PP_KCAP_MATMUL_CAUSAL | PP_KCAP_MATMUL_TRANS_B)
#define SOFTMAX_CAPS (FRESH | PP_KCAP_SOFTMAX_CAUSAL)   /* LogSoftmax shares the kernel (and refuses causal) */

#define SLOT(ID, name, kernel, kinds, ...) [PP_OP_##ID] = PP_KERNEL_SLOT_##kinds(pp_cpu, kernel),

/* The slots the op list makes, then what some kernels add. Ops sharing a kernel share
 * its caps (test_op_registry checks). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const pp_kernel kernels_f32[PP_OP_COUNT] = {
    PP_OP_LIST(SLOT)
    [PP_OP_ADD].caps = FRESH, [PP_OP_SUB].caps = FRESH, [PP_OP_MUL].caps = FRESH, [PP_OP_DIV].caps = FRESH,
    [PP_OP_POW].caps = FRESH, [PP_OP_SQRT].caps = FRESH, [PP_OP_NEG].caps = FRESH, [PP_OP_RECIPROCAL].caps = FRESH,
    [PP_OP_RELU].caps = FRESH, [PP_OP_LEAKY_RELU].caps = FRESH, [PP_OP_SIGMOID].caps = FRESH,
    [PP_OP_TANH].caps = FRESH, [PP_OP_ERF].caps = FRESH, [PP_OP_GELU].caps = FRESH, [PP_OP_IDENTITY].caps = FRESH,
    [PP_OP_SOFTMAX].caps = SOFTMAX_CAPS, [PP_OP_LOG_SOFTMAX].caps = SOFTMAX_CAPS, [PP_OP_TRANSPOSE].caps = FRESH,
    [PP_OP_SPLIT].caps = FRESH, [PP_OP_DROPOUT].caps = PP_KCAP_STEP_RANDOM,
    [PP_OP_MATMUL].caps = MATMUL_CAPS, [PP_OP_GEMM].caps = FRESH,
    [PP_OP_CONV].work_bytes = pp_cpu_conv_work_bytes,
    [PP_OP_MAX_POOL].aux_bytes = pp_cpu_maxpool_aux,
    [PP_OP_BATCH_NORMALIZATION].aux_bytes = pp_cpu_batchnorm_aux,
    [PP_OP_LAYER_NORMALIZATION].aux_bytes = pp_cpu_layernorm_aux_bytes,
    [PP_OP_SOFTMAX_CROSS_ENTROPY_LOSS].aux_bytes = pp_cpu_xent_aux, [PP_OP_SOFTMAX_CROSS_ENTROPY_LOSS].caps = FRESH,
    /* comparisons, logic, more elementwise functions */
    [PP_OP_ABS].caps = FRESH, [PP_OP_SIGN].caps = FRESH, [PP_OP_EXP].caps = FRESH, [PP_OP_LOG].caps = FRESH,
    [PP_OP_SIN].caps = FRESH, [PP_OP_COS].caps = FRESH, [PP_OP_FLOOR].caps = FRESH, [PP_OP_CEIL].caps = FRESH,
    [PP_OP_ROUND].caps = FRESH, [PP_OP_SOFTPLUS].caps = FRESH, [PP_OP_ELU].caps = FRESH,
    [PP_OP_HARD_SWISH].caps = FRESH, [PP_OP_HARD_SIGMOID].caps = FRESH, [PP_OP_MISH].caps = FRESH,
    [PP_OP_SWISH].caps = FRESH, [PP_OP_SWIGLU].caps = FRESH,
    [PP_OP_MAX].caps = FRESH, [PP_OP_MIN].caps = FRESH, [PP_OP_MOD].caps = FRESH, [PP_OP_PRELU].caps = FRESH,

    /* indexing, scatter, padding, tiling, cumulative sums, more reductions */
    [PP_OP_SCATTER_ND].aux_bytes = pp_cpu_scatter_aux, [PP_OP_SCATTER_ELEMENTS].aux_bytes = pp_cpu_scatter_aux,

    /* normalisation, attention, rotary embedding, resampling, einsum */
    [PP_OP_RMS_NORMALIZATION].aux_bytes = pp_cpu_norm_rows_aux,
    [PP_OP_INSTANCE_NORMALIZATION].aux_bytes = pp_cpu_norm_rows_aux,
    [PP_OP_GROUP_NORMALIZATION].aux_bytes = pp_cpu_norm_rows_aux,
    [PP_OP_ATTENTION].aux_bytes = pp_cpu_attention_aux,
    /* the residual norms (com.microsoft) */
    [PP_OP_SKIP_LAYER_NORMALIZATION] = {pp_cpu_skip_norm_aux, pp_cpu_skip_norm_forward, pp_cpu_skip_norm_backward,
                                        FRESH, NULL},
    [PP_OP_SKIP_SIMPLIFIED_LAYER_NORMALIZATION] = {pp_cpu_skip_norm_aux, pp_cpu_skip_norm_forward,
                                                   pp_cpu_skip_norm_backward, FRESH, NULL},
};
#pragma GCC diagnostic pop

static const pp_kernel_table tables[] = {{PP_DTYPE_F32, kernels_f32}};

extern const pp_flat_ops pp_cpu_flat_ops;   /* flat.c */

const pp_backend pp_backend_cpu = {
    /* .name    = */ "cpu",
    /* .kind    = */ PP_DEVICE_CPU,
    /* .caps    = */ PP_DEVICE_CAP_HOST_MEMORY,
    /* .create  = */ pp_device_cpu_create,
    /* .tables  = */ tables,
    /* .ntables = */ (int)(sizeof tables / sizeof tables[0]),
    /* .flat    = */ &pp_cpu_flat_ops,
};
