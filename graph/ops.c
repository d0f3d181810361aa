/* The op registry (include/onnxpipe/op.h): one entry per supported op with everything
 * that is not compute, and the one FLOP model over it. Shape rules and folders live in
 * graph/infer*.c and graph/fold*.c; kernels in kernels/<device>/table.*. */
#include "infer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BIT(i) (1u << (i))
#define ALL (~0u)

/* {name, domain, since, nondiff, saves_in, saves_out, flags, flop rule, flops per element, shape, fold},
 * then optional fields by name (.prec: PP_PREC_FOLLOW when not given; .saves_for_other: 0) */
#define OP(nm, since_, nondiff_, sin, sout, flags_, rule, per, shape_, fold_, ...)                                 \
    {.name = nm, .domain = "", .since = since_, .nondiff = nondiff_, .saves_in = sin, .saves_out = sout,          \
     .flags = flags_, .flop_rule = PP_FLOPS_##rule, .flops_per = per, .shape = shape_, .fold = fold_, __VA_ARGS__}

static const pp_op_info ops[PP_OP_COUNT] = {
    [PP_OP_ADD] = OP("Add", 13, 0, 0, 0, 0, ELEMENTWISE, 1, shape_binary, fold_binary),
    [PP_OP_SUB] = OP("Sub", 13, 0, 0, 0, 0, ELEMENTWISE, 1, shape_binary, fold_binary),
    [PP_OP_MUL] = OP("Mul", 13, 0, BIT(0) | BIT(1), 0, 0, ELEMENTWISE, 1, shape_binary, fold_binary,
                     .saves_for_other = BIT(0) | BIT(1)),   /* d/dA reads B, d/dB reads A */
    [PP_OP_DIV] = OP("Div", 13, 0, BIT(0) | BIT(1), 0, 0, ELEMENTWISE, 1, shape_binary, fold_binary,
                     .saves_for_other = BIT(0)),   /* d/dA = 1/B; d/dB = -A/B^2 */
    [PP_OP_POW] = OP("Pow", 13, 0, BIT(0) | BIT(1), 0, 0, ELEMENTWISE, 1, shape_binary, fold_binary,
                     .prec = PP_PREC_FP32),
    [PP_OP_SQRT] = OP("Sqrt", 13, 0, 0, BIT(0), 0, ELEMENTWISE, 1, shape_unary, fold_unary, .prec = PP_PREC_FP32),
    [PP_OP_NEG] = OP("Neg", 13, 0, 0, 0, 0, ELEMENTWISE, 1, shape_unary, fold_unary),
    [PP_OP_RECIPROCAL] = OP("Reciprocal", 13, 0, 0, BIT(0), 0, ELEMENTWISE, 1, shape_unary, fold_unary,
                            .prec = PP_PREC_FP32),
    [PP_OP_RELU] = OP("Relu", 13, 0, 0, BIT(0), 0, ELEMENTWISE, 1, shape_unary, fold_unary),
    [PP_OP_LEAKY_RELU] = OP("LeakyRelu", 13, 0, BIT(0), 0, 0, ELEMENTWISE, 1, shape_unary, fold_unary),
    [PP_OP_SIGMOID] = OP("Sigmoid", 13, 0, 0, BIT(0), 0, ELEMENTWISE, 4, shape_unary, fold_unary),
    [PP_OP_TANH] = OP("Tanh", 13, 0, 0, BIT(0), 0, ELEMENTWISE, 4, shape_unary, fold_unary),
    [PP_OP_ERF] = OP("Erf", 13, 0, BIT(0), 0, 0, ELEMENTWISE, 4, shape_unary, fold_unary),
    [PP_OP_GELU] = OP("Gelu", 20, 0, BIT(0), BIT(0), 0, ELEMENTWISE, 4, shape_unary, NULL),
    [PP_OP_EQUAL] = OP("Equal", 13, ALL, 0, 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_compare, fold_binary),
    [PP_OP_WHERE] = OP("Where", 13, BIT(0), BIT(0), 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_where, fold_where),
    [PP_OP_CAST] = OP("Cast", 13, 0, 0, 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_cast, fold_cast),
    /* inputs 1, 2: ratio and training_mode */
    [PP_OP_DROPOUT] = OP("Dropout", 13, ~BIT(0), BIT(1) | BIT(2), 0, 0, NONE, 0, shape_dropout, NULL),
    [PP_OP_IDENTITY] = OP("Identity", 13, 0, 0, 0, PP_OPF_PASS_GRAD | PP_OPF_FOLD_LARGE, NONE, 0, shape_unary,
                          fold_copy),
    [PP_OP_MATMUL] = OP("MatMul", 13, 0, BIT(0) | BIT(1), 0, PP_OPF_KEEP_ON_RECOMPUTE, MATMUL, 0, shape_matmul, NULL, .prec = PP_PREC_LOWP),
    [PP_OP_GEMM] = OP("Gemm", 13, 0, BIT(0) | BIT(1), 0, PP_OPF_KEEP_ON_RECOMPUTE, GEMM, 0, shape_gemm, NULL, .prec = PP_PREC_LOWP),
    [PP_OP_CONV] = OP("Conv", 13, 0, BIT(0) | BIT(1), 0, PP_OPF_KEEP_ON_RECOMPUTE, CONV, 0, shape_conv, NULL, .prec = PP_PREC_LOWP),
    [PP_OP_MAX_POOL] = OP("MaxPool", 13, 0, 0, 0, 0, POOL, 0, shape_pool, NULL),
    [PP_OP_AVERAGE_POOL] = OP("AveragePool", 13, 0, 0, 0, 0, POOL, 0, shape_pool, NULL),
    [PP_OP_GLOBAL_AVERAGE_POOL] = OP("GlobalAveragePool", 13, 0, 0, 0, 0, REDUCE, 1, shape_global_pool, NULL),
    /* inputs 3, 4: running mean and variance, read in eval and updated in training */
    [PP_OP_BATCH_NORMALIZATION] = OP("BatchNormalization", 13, BIT(3) | BIT(4), BIT(0) | BIT(1) | BIT(3) | BIT(4),
                                     0, 0, ELEMENTWISE, 4, shape_batchnorm, NULL),
    /* mean, var, normalise, scale, shift */
    [PP_OP_LAYER_NORMALIZATION] = OP("LayerNormalization", 17, 0, BIT(0) | BIT(1), 0, 0, ELEMENTWISE, 8,
                                     shape_layernorm, NULL),
    /* max, sub, exp, sum, div */
    [PP_OP_SOFTMAX] = OP("Softmax", 13, 0, 0, BIT(0), 0, ELEMENTWISE, 5, shape_softmax, NULL),
    [PP_OP_LOG_SOFTMAX] = OP("LogSoftmax", 13, 0, 0, BIT(0), 0, ELEMENTWISE, 5, shape_softmax, NULL),
    /* input 1: axes (an input from opset 18 for ReduceMean, 13 for ReduceSum) */
    [PP_OP_REDUCE_MEAN] = OP("ReduceMean", 13, BIT(1), BIT(1), 0, 0, REDUCE, 1, shape_reduce, NULL,
                             .prec = PP_PREC_FP32),
    [PP_OP_REDUCE_SUM] = OP("ReduceSum", 13, BIT(1), BIT(1), 0, 0, REDUCE, 1, shape_reduce, NULL, .prec = PP_PREC_FP32),
    /* inputs 1, 2: labels and class weights; softmax + log + pick per input element */
    [PP_OP_SOFTMAX_CROSS_ENTROPY_LOSS] = OP("SoftmaxCrossEntropyLoss", 13, ~BIT(0), BIT(0) | BIT(1) | BIT(2), 0, 0,
                                            REDUCE, 6, shape_sce_loss, NULL, .prec = PP_PREC_FP32),
    [PP_OP_RESHAPE] = OP("Reshape", 13, BIT(1), 0, 0, PP_OPF_VIEW | PP_OPF_PASS_GRAD | PP_OPF_FOLD_LARGE, NONE, 0,
                         shape_reshape, fold_copy),
    [PP_OP_FLATTEN] = OP("Flatten", 13, 0, 0, 0, PP_OPF_VIEW | PP_OPF_PASS_GRAD, NONE, 0, shape_flatten, fold_copy),
    [PP_OP_SQUEEZE] = OP("Squeeze", 13, BIT(1), 0, 0, PP_OPF_VIEW | PP_OPF_PASS_GRAD | PP_OPF_FOLD_LARGE, NONE, 0,
                         shape_squeeze, fold_copy),
    [PP_OP_UNSQUEEZE] = OP("Unsqueeze", 13, BIT(1), 0, 0, PP_OPF_VIEW | PP_OPF_PASS_GRAD | PP_OPF_FOLD_LARGE, NONE,
                           0, shape_unsqueeze, fold_copy),
    [PP_OP_TRANSPOSE] = OP("Transpose", 13, 0, 0, 0, 0, NONE, 0, shape_transpose, fold_transpose),
    /* inputs 1-4: starts, ends, axes, steps */
    [PP_OP_SLICE] = OP("Slice", 13, ~BIT(0), BIT(1) | BIT(2) | BIT(3) | BIT(4), 0, PP_OPF_FOLD_LARGE, NONE, 0,
                       shape_slice, fold_slice),
    [PP_OP_SPLIT] = OP("Split", 13, BIT(1), 0, 0, 0, NONE, 0, shape_split, fold_split),
    [PP_OP_CONCAT] = OP("Concat", 13, 0, 0, 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_concat, fold_concat),
    [PP_OP_GATHER] = OP("Gather", 13, BIT(1), BIT(1), 0, 0, NONE, 0, shape_gather, fold_gather),
    [PP_OP_EXPAND] = OP("Expand", 13, BIT(1), 0, 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_expand, fold_expand),
    /* turned into an initializer by graph/infer.c before any shape rule runs */
    [PP_OP_CONSTANT] = OP("Constant", 13, ALL, 0, 0, PP_OPF_GRAPH_ONLY, NONE, 0, NULL, NULL),
    [PP_OP_CONSTANT_OF_SHAPE] = OP("ConstantOfShape", 13, ALL, 0, 0, PP_OPF_FOLD_LARGE, NONE, 0,
                                   shape_const_of_shape, fold_const_of_shape),
    [PP_OP_SHAPE] = OP("Shape", 13, ALL, 0, 0, 0, NONE, 0, shape_shape, fold_shape),
    [PP_OP_RANGE] = OP("Range", 13, ALL, 0, 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_range, fold_range),
};

const pp_op_info *pp_op_get(pp_op op)
{
    return (int)op >= 0 && op < PP_OP_COUNT ? &ops[op] : NULL;
}

/* Op ids sorted by name, built once, for bsearch. */
static int by_name[PP_OP_COUNT];
static pthread_once_t by_name_once = PTHREAD_ONCE_INIT;

static int cmp_id(const void *a, const void *b)
{
    return strcmp(ops[*(const int *)a].name, ops[*(const int *)b].name);
}

static void sort_names(void)
{
    for (int i = 0; i < PP_OP_COUNT; i++) by_name[i] = i;
    qsort(by_name, PP_OP_COUNT, sizeof by_name[0], cmp_id);
}

static int cmp_key(const void *key, const void *elem)
{
    return strcmp(key, ops[*(const int *)elem].name);
}

pp_op pp_op_lookup(const char *domain, const char *op_type)
{
    if (domain && *domain && strcmp(domain, "ai.onnx")) return PP_OP_UNKNOWN;
    if (!op_type) return PP_OP_UNKNOWN;
    pthread_once(&by_name_once, sort_names);
    const int *hit = bsearch(op_type, by_name, PP_OP_COUNT, sizeof by_name[0], cmp_key);
    return hit ? (pp_op)*hit : PP_OP_UNKNOWN;
}

int pp_op_input_differentiable(pp_op op, int index)
{
    const pp_op_info *oi = pp_op_get(op);
    if (!oi || index < 0 || index >= 32) return 0;
    return !(oi->nondiff & BIT(index));
}

/* ---- the FLOP model --------------------------------------------------------- */

/* a * b for counts >= 0; *over set when the product leaves int64 (a kernel size or a
 * contraction dim can be large where no single tensor is). */
static int64_t mul(int64_t a, int64_t b, int *over)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        *over = 1;
        return 0;
    }
    return r;
}

static int64_t add(int64_t a, int64_t b, int *over)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) {
        *over = 1;
        return 0;
    }
    return r;
}

static int64_t attr_int(const pp_attr *attrs, int nattrs, const char *name)
{
    const pp_attr *a = pp_attr_find(attrs, nattrs, name);
    return a && a->type == PP_ATTR_INT ? a->i : 0;
}

int64_t pp_op_flops(pp_op op, const pp_attr *attrs, int nattrs, const pp_shape *const *in, int nin,
                    const pp_shape *out, int *over)
{
    const pp_op_info *oi = pp_op_get(op);
    if (!oi || oi->flop_rule == PP_FLOPS_NONE) return 0;
    int64_t oe = out ? pp_shape_numel(out) : -1;
    if (oe < 0) return -1;
    const pp_shape *a = nin > 0 ? in[0] : NULL, *w = nin > 1 ? in[1] : NULL;
    int64_t bias = nin > 2 && in[2] ? oe : 0;
    switch (oi->flop_rule) {
    case PP_FLOPS_MATMUL:   /* [.., M, K] x [.., K, N]: 2*M*N*K per batch entry */
        if (!a || a->rank < 1 || a->dims[a->rank - 1] < 0) return -1;
        return mul(2 * oe, a->dims[a->rank - 1], over);
    case PP_FLOPS_GEMM:     /* A [M, K] (or [K, M] with transA) */
        if (!a || a->rank != 2 || a->dims[0] < 0 || a->dims[1] < 0) return -1;
        return add(mul(2 * oe, a->dims[attr_int(attrs, nattrs, "transA") ? 0 : 1], over), bias, over);
    case PP_FLOPS_CONV: {   /* W [Cout, Cin/group, k...]: 2 * out * (Cin/group) * kernel */
        if (!w || w->rank < 2) return -1;
        int64_t per = 1;
        for (int d = 1; d < w->rank; d++) per *= w->dims[d];   /* a tensor's dims: fits */
        return add(mul(2 * oe, per, over), bias, over);
    }
    case PP_FLOPS_POOL: {
        const pp_attr *k = pp_attr_find(attrs, nattrs, "kernel_shape");
        int64_t per = 1;
        for (int d = 0; k && k->type == PP_ATTR_INTS && d < k->n; d++) per = mul(per, k->ints[d], over);
        return mul(oe, per, over);
    }
    case PP_FLOPS_REDUCE: {
        int64_t ie = a ? pp_shape_numel(a) : -1;
        return ie < 0 ? -1 : mul(ie, oi->flops_per, over);
    }
    default:
        return mul(oe, oi->flops_per, over);
    }
}
