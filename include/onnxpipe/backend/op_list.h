/* The one list of onnxpipe's ops (DESIGN.md "an op is one definition"). A row
 *
 *   X(ID, "OnnxName", kernel, KINDS, since, nondiff, saves_in, saves_out, flags, FLOPS, per, shape, fold, ...)
 *
 * makes: the enum value PP_OP_<ID> (op.h); the registry entry with those facts as named
 * fields (graph/ops.c; the trailing optional fields are designated initializers such as
 * .prec = PP_PREC_FP32); the kernel prototypes pp_cpu_<kernel>_forward / _backward and
 * pp_cu_<kernel>_... (kernels/kernel_list.h) and every backend table's slot, so a table has
 * no count of its own to keep. Columns:
 *   kernel     the kernel's name in both backends (ops that share one, e.g. Reshape and
 *              Flatten's `copy`, name the same)
 *   KINDS      FB: forward and backward kernels; F: forward only (no input carries a
 *              gradient); G: never runs (graph/ turns it into an initializer); FOLD: no kernel,
 *              only its folder: supported where load folds it (constant inputs, or a shape
 *              query of a known shape), an error naming the input that is not constant elsewhere
 *   since      the first ai.onnx opset of the form onnxpipe reads
 *   nondiff    bit i: input i carries no gradient (shapes, axes, indices, masks)
 *   saves_in, saves_out   bit i: backward reads forward input / output i. EL_IN(ID) /
 *              EL_OUT(ID): what element.h's gradient of the op reads (elementwise ops:
 *              kernels/element_ops.h says it once for the cpu, cuda and the folder)
 *   flags      PP_OPF_*; FLOPS, per: the cost rule (PP_FLOPS_<FLOPS>) and FLOPs per element
 *   shape, fold  the shape rule and constant folder (graph/infer*.c, graph/fold*.c; fold NULL:
 *              never folded)
 * Adding an op is a row here, its kernels under kernels/cpu and kernels/cuda (the names
 * this row gives them), its shape rule and folder, and a case in tests/cuda_cases.h;
 * docs/architecture.md "Adding an op" has the recipe, tests/test_op_registry.c and
 * tests/test_cuda_cover.c fail while a part is missing. Only macros: include freely. */
#ifndef ONNXPIPE_OP_LIST_H
#define ONNXPIPE_OP_LIST_H

#define PP_BIT(i) (1u << (i))
#define PP_ALL_INPUTS (~0u)

#define PP_OP_LIST(X)                                                                                                 \
    /* ---- elementwise arithmetic (kernels/cpu/elementwise.c, kernels/cuda/elementwise.cu) ---- */                   \
    X(ADD, "Add", binary, FB, 13, 0, 0, 0, 0, ELEMENTWISE, 1, shape_binary, fold_binary)                              \
    X(SUB, "Sub", binary, FB, 13, 0, 0, 0, 0, ELEMENTWISE, 1, shape_binary, fold_binary)                              \
    /* d/dA reads B, d/dB reads A */                                                                                  \
    X(MUL, "Mul", binary, FB, 13, 0, PP_BIT(0) | PP_BIT(1), 0, 0, ELEMENTWISE, 1, shape_binary, fold_binary,          \
      .saves_for_other = PP_BIT(0) | PP_BIT(1))                                                                       \
    /* d/dA = 1/B; d/dB = -A/B^2 */                                                                                   \
    X(DIV, "Div", binary, FB, 13, 0, PP_BIT(0) | PP_BIT(1), 0, 0, ELEMENTWISE, 1, shape_binary, fold_binary,          \
      .saves_for_other = PP_BIT(0))                                                                                   \
    X(POW, "Pow", binary, FB, 13, 0, PP_BIT(0) | PP_BIT(1), 0, 0, ELEMENTWISE, 1, shape_binary, fold_binary,          \
      .prec = PP_PREC_FP32)                                                                                           \
    /* ---- elementwise functions: math in kernels/element_ops.h ---- */                                              \
    X(SQRT, "Sqrt", unary, FB, 13, 0, EL_IN(SQRT), EL_OUT(SQRT), 0, ELEMENTWISE, 1, shape_unary, fold_unary,          \
      .prec = PP_PREC_FP32)                                                                                           \
    X(NEG, "Neg", unary, FB, 13, 0, EL_IN(NEG), EL_OUT(NEG), 0, ELEMENTWISE, 1, shape_unary, fold_unary)              \
    X(RECIPROCAL, "Reciprocal", unary, FB, 13, 0, EL_IN(RECIPROCAL), EL_OUT(RECIPROCAL), 0, ELEMENTWISE, 1,           \
      shape_unary, fold_unary, .prec = PP_PREC_FP32)                                                                  \
    X(RELU, "Relu", unary, FB, 13, 0, EL_IN(RELU), EL_OUT(RELU), 0, ELEMENTWISE, 1, shape_unary, fold_unary)          \
    X(LEAKY_RELU, "LeakyRelu", unary, FB, 13, 0, EL_IN(LEAKY_RELU), EL_OUT(LEAKY_RELU), 0, ELEMENTWISE, 1,            \
      shape_unary, fold_unary)                                                                                        \
    X(SIGMOID, "Sigmoid", unary, FB, 13, 0, EL_IN(SIGMOID), EL_OUT(SIGMOID), 0, ELEMENTWISE, 4, shape_unary,          \
      fold_unary)                                                                                                     \
    X(TANH, "Tanh", unary, FB, 13, 0, EL_IN(TANH), EL_OUT(TANH), 0, ELEMENTWISE, 4, shape_unary, fold_unary)          \
    X(ERF, "Erf", unary, FB, 13, 0, EL_IN(ERF), EL_OUT(ERF), 0, ELEMENTWISE, 4, shape_unary, fold_unary)              \
    X(GELU, "Gelu", unary, FB, 20, 0, EL_IN(GELU), EL_OUT(GELU), 0, ELEMENTWISE, 4, shape_unary, fold_unary)          \
    /* ---- comparisons, selection, casts (kernels/cpu/select.c, kernels/cuda/select.cu) ---- */                      \
    X(EQUAL, "Equal", compare, F, 13, PP_ALL_INPUTS, 0, 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_compare, fold_binary)    \
    X(WHERE, "Where", where, FB, 13, PP_BIT(0), PP_BIT(0), 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_where, fold_where)    \
    X(CAST, "Cast", cast, FB, 13, 0, 0, 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_cast, fold_cast)                         \
    /* inputs 1, 2: ratio and training_mode */                                                                        \
    X(DROPOUT, "Dropout", dropout, FB, 13, ~PP_BIT(0), PP_BIT(1) | PP_BIT(2), 0, 0, NONE, 0, shape_dropout, NULL)     \
    X(IDENTITY, "Identity", identity, FB, 13, 0, EL_IN(IDENTITY), EL_OUT(IDENTITY),                                   \
      PP_OPF_PASS_GRAD | PP_OPF_FOLD_LARGE, NONE, 0, shape_unary, fold_copy)                                          \
    /* ---- matrix products, convolution, pooling, normalisation ---- */                                              \
    X(MATMUL, "MatMul", matmul, FB, 13, 0, PP_BIT(0) | PP_BIT(1), 0, PP_OPF_KEEP_ON_RECOMPUTE, MATMUL, 0, shape_matmul, \
      NULL, .prec = PP_PREC_LOWP)                                                                                     \
    X(GEMM, "Gemm", gemm, FB, 13, 0, PP_BIT(0) | PP_BIT(1), 0, PP_OPF_KEEP_ON_RECOMPUTE, GEMM, 0, shape_gemm, NULL,   \
      .prec = PP_PREC_LOWP)                                                                                           \
    X(CONV, "Conv", conv, FB, 13, 0, PP_BIT(0) | PP_BIT(1), 0, PP_OPF_KEEP_ON_RECOMPUTE, CONV, 0, shape_conv, NULL,   \
      .prec = PP_PREC_LOWP)                                                                                           \
    X(MAX_POOL, "MaxPool", maxpool, FB, 13, 0, 0, 0, 0, POOL, 0, shape_pool, NULL)                                    \
    X(AVERAGE_POOL, "AveragePool", avgpool, FB, 13, 0, 0, 0, 0, POOL, 0, shape_pool, NULL)                            \
    X(GLOBAL_AVERAGE_POOL, "GlobalAveragePool", gap, FB, 13, 0, 0, 0, 0, REDUCE, 1, shape_global_pool, NULL)          \
    /* inputs 3, 4: running mean and variance, read in eval and updated in training */                                \
    X(BATCH_NORMALIZATION, "BatchNormalization", batchnorm, FB, 13, PP_BIT(3) | PP_BIT(4),                            \
      PP_BIT(0) | PP_BIT(1) | PP_BIT(3) | PP_BIT(4), 0, 0, ELEMENTWISE, 4, shape_batchnorm, NULL)                     \
    /* mean, var, normalise, scale, shift */                                                                          \
    X(LAYER_NORMALIZATION, "LayerNormalization", layernorm, FB, 17, 0, PP_BIT(0) | PP_BIT(1), 0, 0, ELEMENTWISE, 8,   \
      shape_layernorm, NULL)                                                                                          \
    /* max, sub, exp, sum, div */                                                                                     \
    X(SOFTMAX, "Softmax", softmax, FB, 13, 0, 0, PP_BIT(0), 0, ELEMENTWISE, 5, shape_softmax, NULL)                   \
    X(LOG_SOFTMAX, "LogSoftmax", softmax, FB, 13, 0, 0, PP_BIT(0), 0, ELEMENTWISE, 5, shape_softmax, NULL)            \
    /* input 1: axes (an input from opset 18 for ReduceMean, 13 for ReduceSum) */                                     \
    X(REDUCE_MEAN, "ReduceMean", reduce, FB, 13, PP_BIT(1), PP_BIT(1), 0, 0, REDUCE, 1, shape_reduce, NULL,           \
      .prec = PP_PREC_FP32)                                                                                           \
    X(REDUCE_SUM, "ReduceSum", reduce, FB, 13, PP_BIT(1), PP_BIT(1), 0, 0, REDUCE, 1, shape_reduce, NULL,             \
      .prec = PP_PREC_FP32)                                                                                           \
    /* inputs 1, 2: labels and class weights; softmax + log + pick per input element */                               \
    X(SOFTMAX_CROSS_ENTROPY_LOSS, "SoftmaxCrossEntropyLoss", xent, FB, 13, ~PP_BIT(0), PP_BIT(0) | PP_BIT(1) | PP_BIT(2), \
      0, 0, REDUCE, 6, shape_sce_loss, NULL, .prec = PP_PREC_FP32)                                                    \
    /* ---- shapes and data movement (kernels/cpu/shape_ops.c and friends, kernels/cuda/shape.cu) ---- */             \
    X(RESHAPE, "Reshape", copy, FB, 13, PP_BIT(1), 0, 0, PP_OPF_VIEW | PP_OPF_PASS_GRAD | PP_OPF_FOLD_LARGE, NONE, 0, \
      shape_reshape, fold_copy)                                                                                       \
    X(FLATTEN, "Flatten", copy, FB, 13, 0, 0, 0, PP_OPF_VIEW | PP_OPF_PASS_GRAD, NONE, 0, shape_flatten, fold_copy)   \
    X(SQUEEZE, "Squeeze", copy, FB, 13, PP_BIT(1), 0, 0, PP_OPF_VIEW | PP_OPF_PASS_GRAD | PP_OPF_FOLD_LARGE, NONE, 0, \
      shape_squeeze, fold_copy)                                                                                       \
    X(UNSQUEEZE, "Unsqueeze", copy, FB, 13, PP_BIT(1), 0, 0, PP_OPF_VIEW | PP_OPF_PASS_GRAD | PP_OPF_FOLD_LARGE,      \
      NONE, 0, shape_unsqueeze, fold_copy)                                                                            \
    X(TRANSPOSE, "Transpose", transpose, FB, 13, 0, 0, 0, 0, NONE, 0, shape_transpose, fold_transpose)                \
    /* inputs 1-4: starts, ends, axes, steps */                                                                       \
    X(SLICE, "Slice", slice, FB, 13, ~PP_BIT(0), PP_BIT(1) | PP_BIT(2) | PP_BIT(3) | PP_BIT(4), 0, PP_OPF_FOLD_LARGE, NONE, \
      0, shape_slice, fold_slice)                                                                                     \
    X(SPLIT, "Split", split, FB, 13, PP_BIT(1), 0, 0, 0, NONE, 0, shape_split, fold_split)                            \
    X(CONCAT, "Concat", concat, FB, 13, 0, 0, 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_concat, fold_concat)               \
    X(GATHER, "Gather", gather, FB, 13, PP_BIT(1), PP_BIT(1), 0, 0, NONE, 0, shape_gather, fold_gather)               \
    X(EXPAND, "Expand", expand, FB, 13, PP_BIT(1), 0, 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_expand, fold_expand)       \
    /* ---- constants and shape queries (kernels/cpu/const_ops.c, kernels/cuda/const_ops.cu) ---- */                  \
    /* turned into an initializer by graph/infer.c before any shape rule runs */                                      \
    X(CONSTANT, "Constant", none, G, 13, PP_ALL_INPUTS, 0, 0, 0, NONE, 0, NULL, NULL)                                 \
    X(CONSTANT_OF_SHAPE, "ConstantOfShape", constant_of_shape, F, 13, PP_ALL_INPUTS, 0, 0, PP_OPF_FOLD_LARGE, NONE, 0, \
      shape_const_of_shape, fold_const_of_shape)                                                                      \
    X(SHAPE, "Shape", shape, F, 13, PP_ALL_INPUTS, 0, 0, 0, NONE, 0, shape_shape, fold_shape)                         \
    X(RANGE, "Range", range, F, 13, PP_ALL_INPUTS, 0, 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_range, fold_range)         \
    /* fold-only: exporters write them in shape and mask chains (torch.numel, torch.nonzero) */                   \
    X(SIZE, "Size", none, FOLD, 13, PP_ALL_INPUTS, 0, 0, 0, NONE, 0, shape_size, fold_size)                           \
    X(NON_ZERO, "NonZero", none, FOLD, 13, PP_ALL_INPUTS, 0, 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_nonzero,            \
      fold_nonzero)                                                                                                   \
    /* ---- comparisons, logic, more elementwise functions: element_ops.h ---- */                                     \
    /* comparisons and logic to bool (the `compare` kernel) */                                                        \
    X(LESS, "Less", compare, F, 13, PP_ALL_INPUTS, 0, 0, PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_compare,            \
      fold_binary)                                                                                                    \
    X(LESS_OR_EQUAL, "LessOrEqual", compare, F, 13, PP_ALL_INPUTS, 0, 0, PP_OPF_FOLD_LARGE, ELEMENTWISE, 1,           \
      shape_compare, fold_binary)                                                                                     \
    X(GREATER, "Greater", compare, F, 13, PP_ALL_INPUTS, 0, 0, PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_compare,      \
      fold_binary)                                                                                                    \
    X(GREATER_OR_EQUAL, "GreaterOrEqual", compare, F, 13, PP_ALL_INPUTS, 0, 0, PP_OPF_FOLD_LARGE, ELEMENTWISE, 1,     \
      shape_compare, fold_binary)                                                                                     \
    X(AND, "And", compare, F, 13, PP_ALL_INPUTS, 0, 0, PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_logic, fold_binary)   \
    X(OR, "Or", compare, F, 13, PP_ALL_INPUTS, 0, 0, PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_logic, fold_binary)     \
    X(XOR, "Xor", compare, F, 13, PP_ALL_INPUTS, 0, 0, PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_logic, fold_binary)   \
    /* one input to bool (the `predicate` kernel: kernels/cpu/logic.c, kernels/cuda/logic.cu) */                      \
    X(NOT, "Not", predicate, F, 13, PP_ALL_INPUTS, 0, 0, PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_predicate,          \
      fold_predicate)                                                                                                 \
    X(IS_NAN, "IsNaN", predicate, F, 13, PP_ALL_INPUTS, 0, 0, PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_predicate,     \
      fold_predicate)                                                                                                 \
    X(IS_INF, "IsInf", predicate, F, 13, PP_ALL_INPUTS, 0, 0, PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_predicate,     \
      fold_predicate)                                                                                                 \
    /* float functions (the `unary` kernel) */                                                                        \
    X(ABS, "Abs", unary, FB, 13, 0, EL_IN(ABS), EL_OUT(ABS), PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_unary,          \
      fold_unary)                                                                                                     \
    X(SIGN, "Sign", unary, FB, 13, 0, EL_IN(SIGN), EL_OUT(SIGN), PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_unary,      \
      fold_unary)                                                                                                     \
    X(EXP, "Exp", unary, FB, 13, 0, EL_IN(EXP), EL_OUT(EXP), 0, ELEMENTWISE, 4, shape_unary, fold_unary,              \
      .prec = PP_PREC_FP32)                                                                                           \
    X(LOG, "Log", unary, FB, 13, 0, EL_IN(LOG), EL_OUT(LOG), 0, ELEMENTWISE, 4, shape_unary, fold_unary,              \
      .prec = PP_PREC_FP32)                                                                                           \
    X(SIN, "Sin", unary, FB, 13, 0, EL_IN(SIN), EL_OUT(SIN), 0, ELEMENTWISE, 4, shape_unary, fold_unary)              \
    X(COS, "Cos", unary, FB, 13, 0, EL_IN(COS), EL_OUT(COS), 0, ELEMENTWISE, 4, shape_unary, fold_unary)              \
    X(FLOOR, "Floor", unary, FB, 13, 0, EL_IN(FLOOR), EL_OUT(FLOOR), PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_unary,  \
      fold_unary)                                                                                                     \
    X(CEIL, "Ceil", unary, FB, 13, 0, EL_IN(CEIL), EL_OUT(CEIL), PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_unary,      \
      fold_unary)                                                                                                     \
    X(ROUND, "Round", unary, FB, 13, 0, EL_IN(ROUND), EL_OUT(ROUND), PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_unary,  \
      fold_unary)                                                                                                     \
    X(SOFTPLUS, "Softplus", unary, FB, 13, 0, EL_IN(SOFTPLUS), EL_OUT(SOFTPLUS), 0, ELEMENTWISE, 6, shape_unary,      \
      fold_unary, .prec = PP_PREC_FP32)                                                                               \
    X(ELU, "Elu", unary, FB, 13, 0, EL_IN(ELU), EL_OUT(ELU), 0, ELEMENTWISE, 4, shape_unary, fold_unary)              \
    X(HARD_SWISH, "HardSwish", unary, FB, 14, 0, EL_IN(HARD_SWISH), EL_OUT(HARD_SWISH), 0, ELEMENTWISE, 4,            \
      shape_unary, fold_unary)                                                                                        \
    /* SiLU for alpha 1: HF's x * Sigmoid(x) becomes one (stage/fuse.c) */                                            \
    X(SWISH, "Swish", unary, FB, 24, 0, EL_IN(SWISH), EL_OUT(SWISH), 0, ELEMENTWISE, 5, shape_unary, fold_unary)      \
    X(HARD_SIGMOID, "HardSigmoid", unary, FB, 13, 0, EL_IN(HARD_SIGMOID), EL_OUT(HARD_SIGMOID), 0, ELEMENTWISE, 3,    \
      shape_unary, fold_unary)                                                                                        \
    X(MISH, "Mish", unary, FB, 18, 0, EL_IN(MISH), EL_OUT(MISH), 0, ELEMENTWISE, 10, shape_unary, fold_unary)         \
    /* the `binary` kernel (float; Add ... Mod also int64 / int32); Max / Min take 1..N inputs (N != 2:        */ \
    /* kernels/cpu/logic.c, kernels/cuda/logic.cu; a tie splits the gradient equally among the equal inputs)      */ \
    X(MAX, "Max", binary, FB, 13, 0, PP_ALL_INPUTS, 0, PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_variadic, fold_minmax) \
    X(MIN, "Min", binary, FB, 13, 0, PP_ALL_INPUTS, 0, PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_variadic, fold_minmax) \
    /* d/da = 1; d/db = -trunc(a / b) */                                                                              \
    X(MOD, "Mod", binary, FB, 13, 0, PP_BIT(0) | PP_BIT(1), 0, PP_OPF_FOLD_LARGE, ELEMENTWISE, 1, shape_mod,          \
      fold_binary, .saves_for_other = PP_BIT(0))                                                                      \
    /* SwiGLU(A, B) = Swish(A) B, alpha 1 only (shape_swiglu): HF's Llama MLP becomes one (stage/fuse.c); */          \
    /* d/dA reads A and B, d/dB reads A: B is kept for A's gradient only */                                           \
    X(SWIGLU, "SwiGLU", binary, FB, 28, 0, PP_BIT(0) | PP_BIT(1), 0, 0, ELEMENTWISE, 7, shape_swiglu, fold_binary,    \
      .saves_for_other = PP_BIT(1))                                                                                   \
    /* d/dx reads x and the slope, d/dslope x */                                                                      \
    X(PRELU, "PRelu", binary, FB, 13, 0, PP_BIT(0) | PP_BIT(1), 0, 0, ELEMENTWISE, 2, shape_prelu, NULL,              \
      .saves_for_other = PP_BIT(1))                                                                                   \
    /* inputs 1, 2: min and max, optional, constant on the cuda side (host_in) */                                     \
    X(CLIP, "Clip", clip, FB, 13, ~PP_BIT(0), PP_BIT(0) | PP_BIT(1) | PP_BIT(2), 0, PP_OPF_FOLD_LARGE, ELEMENTWISE,   \
      2, shape_unary, fold_clip)                                                                                      \
                                                                                                                      \
    /* ---- indexing, scatter, padding, tiling, cumulative sums, more reductions ---- */                              \
    /* input 1: axis; a running sum, one add per element (kernels/cpu/pad_tile.c, kernels/cuda/pad_tile.cu) */        \
    X(CUM_SUM, "CumSum", cumsum, FB, 13, PP_BIT(1), PP_BIT(1), 0, PP_OPF_FOLD_LARGE, REDUCE, 1, shape_unary,         \
      fold_index)                                                                                                     \
    /* input 1: k; causal masks are built from it, so it folds */                                                     \
    X(TRILU, "Trilu", trilu, FB, 14, PP_BIT(1), PP_BIT(1), 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_unary, fold_index)    \
    X(TILE, "Tile", tile, FB, 13, PP_BIT(1), PP_BIT(1), 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_tile, fold_index)        \
    /* inputs 1-3: pads, constant_value, axes (from opset 18) */                                                      \
    X(PAD, "Pad", pad, FB, 13, ~PP_BIT(0), PP_BIT(1) | PP_BIT(2) | PP_BIT(3), 0, PP_OPF_FOLD_LARGE, NONE, 0, shape_pad, \
      fold_index)                                                                                                     \
    /* input 1: indices; backward scatter-adds (kernels/cpu/index.c, kernels/cuda/index.cu) */                        \
    X(GATHER_ELEMENTS, "GatherElements", gather_elements, FB, 13, PP_BIT(1), PP_BIT(1), 0, 0, NONE, 0,                \
      shape_gather_elements, fold_index)                                                                              \
    X(GATHER_ND, "GatherND", gather_nd, FB, 13, PP_BIT(1), PP_BIT(1), 0, 0, NONE, 0, shape_gather_nd, fold_index)     \
    /* inputs: data, indices, updates */                                                                              \
    X(SCATTER_ND, "ScatterND", scatter_nd, FB, 13, PP_BIT(1), PP_BIT(1), 0, 0, NONE, 0, shape_unary, fold_index)      \
    X(SCATTER_ELEMENTS, "ScatterElements", scatter_elements, FB, 13, PP_BIT(1), PP_BIT(1), 0, 0, NONE, 0, shape_unary,\
      fold_index)                                                                                                     \
    /* input 1: axes (an input from opset 18); backward reads x and the result (kernels/cpu/reduce_more.c) */         \
    X(REDUCE_MAX, "ReduceMax", reduce_more, FB, 13, PP_BIT(1), PP_BIT(0) | PP_BIT(1), PP_BIT(0), 0, REDUCE, 1,        \
      shape_reduce, fold_reduce_more)                                                                                 \
    X(REDUCE_MIN, "ReduceMin", reduce_more, FB, 13, PP_BIT(1), PP_BIT(0) | PP_BIT(1), PP_BIT(0), 0, REDUCE, 1,        \
      shape_reduce, fold_reduce_more)                                                                                 \
    X(REDUCE_PROD, "ReduceProd", reduce_more, FB, 13, PP_BIT(1), PP_BIT(0) | PP_BIT(1), PP_BIT(0), 0, REDUCE, 1,      \
      shape_reduce, fold_reduce_more, .prec = PP_PREC_FP32)                                                           \
    X(ARG_MAX, "ArgMax", argmax, F, 13, PP_ALL_INPUTS, 0, 0, 0, REDUCE, 1, shape_argmax, fold_argmax)                 \
    /* input 1: k; backward scatters through the indices (output 1) */                                                \
    X(TOP_K, "TopK", topk, FB, 13, PP_BIT(1), PP_BIT(1), PP_BIT(1), 0, REDUCE, 1, shape_topk, NULL)                   \
                                                                                                                      \
    /* ---- normalisation, attention, rotary embedding, resampling, einsum ---- */                                    \
    /* rows normalised on their own (kernels/cpu/norm_rows.c): layer norm's math, RMS without the mean */             \
    X(RMS_NORMALIZATION, "RMSNormalization", norm_rows, FB, 23, 0, PP_BIT(0) | PP_BIT(1), 0, 0, ELEMENTWISE, 5,       \
      shape_norm_rows, NULL)                                                                                          \
    X(INSTANCE_NORMALIZATION, "InstanceNormalization", norm_rows, FB, 13, 0, PP_BIT(0) | PP_BIT(1), 0, 0,             \
      ELEMENTWISE, 8, shape_norm_rows, NULL)                                                                          \
    X(GROUP_NORMALIZATION, "GroupNormalization", norm_rows, FB, 18, 0, PP_BIT(0) | PP_BIT(1), 0, 0, ELEMENTWISE, 8,   \
      shape_norm_rows, NULL)                                                                                          \
    /* inputs 1-3: cos and sin caches and position ids, constants of the model */                                     \
    X(ROTARY_EMBEDDING, "RotaryEmbedding", rope, FB, 23, ~PP_BIT(0), PP_BIT(1) | PP_BIT(2) | PP_BIT(3), 0, 0,         \
      ELEMENTWISE, 3, shape_rope, NULL)                                                                               \
    /* inputs 3-5: the mask and a past (refused); backward reads Q, K, V, the mask, Y (cuDNN's fused */              \
    /* backward) and aux: the probabilities [B, H, Sq, Skv] (cpu, direct cuda) or the softmax stats */                \
    /* [B, H, Sq] (cuDNN); selective recompute runs it again rather than keep aux; per score: scale, */                \
    /* mask, max, exp, sum, divide */                                                                                 \
    X(ATTENTION, "Attention", attention, FB, 23, ~(PP_BIT(0) | PP_BIT(1) | PP_BIT(2)),                                \
      PP_BIT(0) | PP_BIT(1) | PP_BIT(2) | PP_BIT(3), PP_BIT(0), 0, ATTENTION, 6, shape_attention, NULL)               \
    /* inputs 1-3: roi, scales (read again by backward), sizes; per output: up to 4 taps (2-D linear) */              \
    X(RESIZE, "Resize", resize, FB, 13, ~PP_BIT(0), PP_BIT(2), 0, 0, ELEMENTWISE, 8, shape_resize, NULL)              \
    /* one or two operands (kernels/einsum_plan.h); backward reads both */                                            \
    X(EINSUM, "Einsum", einsum, FB, 13, 0, PP_BIT(0) | PP_BIT(1), 0, PP_OPF_KEEP_ON_RECOMPUTE, EINSUM, 2, shape_einsum, NULL)\
                                                                                                                      \
    /* ---- residual norms: onnxruntime's com.microsoft ops (opset 1 of that domain), made by ---- */                 \
    /* stage/fuse_residual_norm.c of Add + LayerNormalization / RMSNormalization; kernels/cpu/skip_norm.c, */        \
    /* kernels/cuda/layernorm.cu. Inputs: input, skip, gamma (saved), beta; outputs: output, mean and */              \
    /* inv_std_var (refused), input_skip_bias_sum (saved: what the norm read) */                                     \
    X(SKIP_LAYER_NORMALIZATION, "SkipLayerNormalization", skip_norm, FB, 1, 0, PP_BIT(2), PP_BIT(3), 0, ELEMENTWISE, \
      9, shape_skip_norm, NULL, .domain = "com.microsoft")                                                            \
    X(SKIP_SIMPLIFIED_LAYER_NORMALIZATION, "SkipSimplifiedLayerNormalization", skip_norm, FB, 1, 0, PP_BIT(2),       \
      PP_BIT(3), 0, ELEMENTWISE, 6, shape_skip_norm, NULL, .domain = "com.microsoft")                                 \
                                                                                                                      \
    /* (the end of the list) */

#endif
