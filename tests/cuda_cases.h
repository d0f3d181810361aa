/* The one case table of the cuda kernel tests, and case_run: a case runs on the cpu kernel
 * and, given a GPU, on the cuda kernel, forward then backward (backward sees only the
 * tensors the op's table entry saves, as in the stage), and the outputs and accumulated
 * input gradients are compared. test_cuda_gpu runs the table on a GPU; test_cuda_cover
 * checks on any machine that every op of the cuda kernel table has a case here and that
 * every case runs on the cpu; test_op_cases checks every case's backward against finite
 * differences and (with test_op_cases_ort.sh) its forward against onnxruntime through a
 * one-node ONNX model. Header-only: each test program includes it once. */
#ifndef PP_TESTS_CUDA_CASES_H
#define PP_TESTS_CUDA_CASES_H

#include <onnxpipe/backend/device_backend.h>
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/op_info.h>

#include <onnxpipe/element.h>   /* the 16-bit conversions */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    FILL_RAND,      /* float uniform in [-1, 1) */
    FILL_POS,       /* float uniform in [0.5, 1.5) (Sqrt, Pow bases, variances, weights) */
    FILL_INT,       /* integers uniform in [lo, hi] (indices, labels) */
    FILL_BOOL,      /* 0 or 1 */
    FILL_CONST,     /* the given values: a constant input, also handed to the kernel as host_in */
} fill_rule;

typedef struct in_spec {
    pp_dtype dtype;
    int rank;
    int64_t dims[4];
    fill_rule fill;
    int64_t lo, hi;         /* FILL_INT */
    const double *values;   /* FILL_CONST, converted to dtype */
    pp_dtype grad_dtype;    /* its gradient's dtype; 0: the input's (F32: a master weight's) */
} in_spec;

typedef struct out_spec {
    pp_dtype dtype;
    int rank;
    int64_t dims[4];
} out_spec;

#define CASE_MAX_IN 5
#define CASE_MAX_OUT 4
typedef struct op_case {
    const char *op;
    int opset;                  /* 0: 17 */
    int nin, nout;
    in_spec in[CASE_MAX_IN];
    out_spec out[CASE_MAX_OUT];
    pp_attr attr[8];            /* the list ends at a NULL name */
    float tol;                  /* float outputs and gradients: max |cuda - cpu| / (1 + |cpu|); others exact */
    const char *no_fd;          /* NULL: test_op_cases checks backward against finite differences; else
                                   why not (an op not smooth at random points, e.g. Floor) */
    const char *no_ort;         /* NULL: test_op_cases_ort compares the forward with onnxruntime; else
                                   why not (a random result) */
} op_case;

/* The op a case names: an ai.onnx op, else one of onnxruntime's (com.microsoft) */
static pp_op case_op(const op_case *k)
{
    const pp_op op = pp_op_lookup("", k->op);
    return op != PP_OP_UNKNOWN ? op : pp_op_lookup("com.microsoft", k->op);
}

/* The kernels a case runs: a case with a bfloat16 / float16 input runs that dtype's kernels
 * (and its 16-bit tensors are compared within tol), the others the F32 ones. */
static pp_dtype case_compute(const op_case *k)
{
    for (int i = 0; i < k->nin; i++)
        if (k->in[i].dtype == PP_DTYPE_BF16 || k->in[i].dtype == PP_DTYPE_F16) return k->in[i].dtype;
    return PP_DTYPE_F32;
}

#define NARGS(...) NARGS_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define NARGS_(a, b, c, d, e, f, g, h, n, ...) n
#define F(...) {PP_DTYPE_F32, NARGS(__VA_ARGS__), {__VA_ARGS__}, FILL_RAND, 0, 0, NULL, 0}
#define POS(...) {PP_DTYPE_F32, NARGS(__VA_ARGS__), {__VA_ARGS__}, FILL_POS, 0, 0, NULL, 0}
#define INTS(dt, lo, hi, ...) {dt, NARGS(__VA_ARGS__), {__VA_ARGS__}, FILL_INT, lo, hi, NULL, 0}
#define BOOLS(...) {PP_DTYPE_BOOL, NARGS(__VA_ARGS__), {__VA_ARGS__}, FILL_BOOL, 0, 0, NULL, 0}
#define I64S(...) {PP_DTYPE_I64, 1, {NARGS(__VA_ARGS__)}, FILL_CONST, 0, 0, (const double[]){__VA_ARGS__}, 0}
#define SCALAR(dt, v) {dt, 0, {0}, FILL_CONST, 0, 0, (const double[]){v}, 0}
#define OUT(...) {PP_DTYPE_F32, NARGS(__VA_ARGS__), {__VA_ARGS__}}
#define OUT_T(dt, ...) {dt, NARGS(__VA_ARGS__), {__VA_ARGS__}}
#define OUT_SCALAR {PP_DTYPE_F32, 0, {0}}
#define OUT_NONE {PP_DTYPE_F32, -1, {0}}   /* an omitted optional output */
#define A_INT(nm, v) {.name = nm, .type = PP_ATTR_INT, .i = v}
#define A_FLOAT(nm, v) {.name = nm, .type = PP_ATTR_FLOAT, .f = v}
#define A_STR(nm, v) {.name = nm, .type = PP_ATTR_STRING, .s = v}
#define A_INTS(nm, ...) {.name = nm, .type = PP_ATTR_INTS, .n = NARGS(__VA_ARGS__), .ints = (const int64_t[]){__VA_ARGS__}}
/* Attention over Q, K, V, Y stored [B, S, H, D] (stage/fuse_attention.c's perms), causal */
#define ATTN_BSHD(sc)                                                                                                 \
    A_INT("is_causal", 1), A_FLOAT("scale", sc), A_INTS("perm_Q", 0, 2, 1, 3), A_INTS("perm_K", 0, 2, 1, 3),         \
        A_INTS("perm_V", 0, 2, 1, 3), A_INTS("perm_Y", 0, 2, 1, 3)

#define TF32 2e-2f     /* cuBLAS / cuDNN with TF32 tensor cores: 10-bit mantissa products */
/* 16-bit results: both devices form the same fp32 value up to summation order (16-bit
 * products are exact in fp32) and round it once, so they differ by at most one unit in the
 * last place where a rounding boundary falls between them: |d| / (1 + |x|) <= 2^-7 for
 * bfloat16 (8-bit significand), 2^-10 for float16 (11-bit) */
#define BF16_TOL 7.8125e-3f
#define F16_TOL 9.765625e-4f
#define B16(...) {PP_DTYPE_BF16, NARGS(__VA_ARGS__), {__VA_ARGS__}, FILL_RAND, 0, 0, NULL, 0}
#define H16(...) {PP_DTYPE_F16, NARGS(__VA_ARGS__), {__VA_ARGS__}, FILL_RAND, 0, 0, NULL, 0}
#define B16W(...) {PP_DTYPE_BF16, NARGS(__VA_ARGS__), {__VA_ARGS__}, FILL_RAND, 0, 0, NULL, PP_DTYPE_F32}
#define H16W(...) {PP_DTYPE_F16, NARGS(__VA_ARGS__), {__VA_ARGS__}, FILL_RAND, 0, 0, NULL, PP_DTYPE_F32}
#define B16P(...) {PP_DTYPE_BF16, NARGS(__VA_ARGS__), {__VA_ARGS__}, FILL_POS, 0, 0, NULL, 0}
#define H16P(...) {PP_DTYPE_F16, NARGS(__VA_ARGS__), {__VA_ARGS__}, FILL_POS, 0, 0, NULL, 0}

/* A case may leave off its trailing fields (no_fd, no_ort): they default to NULL, "check". */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const op_case cases[] = {
    /* elementwise, numpy broadcasting */
    {"Add", 0, 2, 1, {F(8, 16, 32), F(32)}, {OUT(8, 16, 32)}, {{0}}, 1e-6f},
    {"Sub", 0, 2, 1, {F(16, 32), F(16, 1)}, {OUT(16, 32)}, {{0}}, 1e-6f},
    {"Mul", 0, 2, 1, {F(4, 1, 32), F(1, 8, 32)}, {OUT(4, 8, 32)}, {{0}}, 1e-6f},
    {"Div", 0, 2, 1, {F(16, 32), POS(1, 32)}, {OUT(16, 32)}, {{0}}, 1e-5f},
    {"Pow", 0, 2, 1, {POS(16, 32), F(1)}, {OUT(16, 32)}, {{0}}, 1e-5f},
    {"Pow", 0, 2, 1, {INTS(PP_DTYPE_I64, -5, 5, 4, 6), INTS(PP_DTYPE_I64, 0, 7, 6)}, {OUT_T(PP_DTYPE_I64, 4, 6)}, {{0}},
     0.f},
    {"Sqrt", 0, 1, 1, {POS(16, 33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    {"Neg", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 0.f},
    {"Reciprocal", 0, 1, 1, {POS(16, 33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    {"Relu", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 0.f},
    /* the GPU gradient differs by rounding (H200 run: 2.1e-8), as the other elementwise ops' */
    {"LeakyRelu", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {A_FLOAT("alpha", 0.2f)}, 1e-6f},
    {"Sigmoid", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    {"Tanh", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    {"Erf", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    {"Gelu", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    {"Gelu", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {A_STR("approximate", "tanh")}, 1e-6f},
    {"Identity", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 0.f},
    /* GEMMs */
    {"MatMul", 0, 2, 1, {F(8, 128, 64), F(64, 96)}, {OUT(8, 128, 96)}, {{0}}, TF32},
    {"MatMul", 0, 2, 1, {F(2, 4, 128, 64), F(2, 4, 64, 128)}, {OUT(2, 4, 128, 128)}, {{0}}, TF32},
    {"Gemm", 0, 3, 1, {F(32, 64), F(64, 48), F(48)}, {OUT(32, 48)}, {{0}}, TF32},
    {"Gemm", 0, 3, 1, {F(64, 32), F(48, 64), F(32, 1)}, {OUT(32, 48)},
     {A_INT("transA", 1), A_INT("transB", 1), A_FLOAT("alpha", 0.5f), A_FLOAT("beta", 2.f)}, TF32},
    {"Gemm", 0, 2, 1, {F(16, 24), F(8, 24)}, {OUT(16, 8)}, {A_INT("transB", 1)}, TF32},
    /* rows: softmax, layer norm, reductions, loss */
    {"Softmax", 0, 1, 1, {F(4, 16, 128)}, {OUT(4, 16, 128)}, {{0}}, 1e-5f},
    {"Softmax", 11, 1, 1, {F(4, 6, 5)}, {OUT(4, 6, 5)}, {A_INT("axis", 1)}, 1e-5f},
    /* stage/fuse_causal.c's mark: row r of each 37 x 37 block over its columns 0..r */
    {"Softmax", 0, 1, 1, {F(2, 3, 37, 37)}, {OUT(2, 3, 37, 37)}, {A_INT("causal", 1)}, 1e-5f,
     .no_ort = "causal is onnxpipe's own attribute (test_attention_causal checks it against the masked Softmax)"},
    {"LogSoftmax", 0, 1, 1, {F(16, 1000)}, {OUT(16, 1000)}, {{0}}, 1e-5f},
    {"LogSoftmax", 0, 1, 1, {F(4, 7, 5)}, {OUT(4, 7, 5)}, {A_INT("axis", 1)}, 1e-5f},
    {"LayerNormalization", 0, 3, 1, {F(4, 32, 256), F(256), F(256)}, {OUT(4, 32, 256)}, {{0}}, 1e-4f},
    {"LayerNormalization", 0, 3, 3, {F(4, 6, 8), F(6, 8), F(6, 8)}, {OUT(4, 6, 8), OUT(4, 1, 1), OUT(4, 1, 1)},
     {A_INT("axis", -2)}, 1e-4f},
    {"ReduceSum", 0, 2, 1, {F(4, 8, 16), I64S(1)}, {OUT(4, 1, 16)}, {{0}}, 1e-5f},
    {"ReduceSum", 0, 2, 1, {F(4, 8, 16), I64S(-1, 0)}, {OUT(8)}, {A_INT("keepdims", 0)}, 1e-5f},
    {"ReduceSum", 0, 2, 1, {F(3, 300, 2), I64S(1)}, {OUT(3, 2)}, {A_INT("keepdims", 0)}, 1e-5f},
    {"ReduceSum", 0, 1, 1, {F(16, 40)}, {OUT_SCALAR}, {A_INT("keepdims", 0)}, 1e-5f},
    {"ReduceMean", 0, 1, 1, {F(4, 8, 16)}, {OUT(4, 1, 16)}, {A_INTS("axes", 1)}, 1e-5f},
    {"ReduceMean", 18, 2, 1, {F(4, 8, 16), I64S(2)}, {OUT(4, 8)}, {A_INT("keepdims", 0)}, 1e-5f},
    {"SoftmaxCrossEntropyLoss", 0, 2, 1, {F(8, 10), INTS(PP_DTYPE_I64, 0, 9, 8)}, {OUT_SCALAR}, {{0}}, 1e-5f},
    {"SoftmaxCrossEntropyLoss", 0, 2, 1, {F(4, 5, 3), INTS(PP_DTYPE_I32, 0, 4, 4, 3)}, {OUT_SCALAR},
     {A_STR("reduction", "sum")}, 1e-5f},
    {"SoftmaxCrossEntropyLoss", 0, 3, 1, {F(6, 5), INTS(PP_DTYPE_I64, 0, 4, 6), POS(5)}, {OUT(6)},
     {A_STR("reduction", "none"), A_INT("ignore_index", 2)}, 1e-5f},
    {"SoftmaxCrossEntropyLoss", 0, 3, 2, {F(4, 7, 5), INTS(PP_DTYPE_I64, -1, 6, 4, 5), POS(7)},
     {OUT_SCALAR, OUT(4, 7, 5)}, {A_INT("ignore_index", -1)}, 1e-5f},
    /* data movement */
    {"Reshape", 0, 2, 1, {F(4, 6, 8), I64S(4, -1, 2)}, {OUT(4, 24, 2)}, {{0}}, 0.f},
    {"Flatten", 0, 1, 1, {F(2, 3, 4, 5)}, {OUT(6, 20)}, {A_INT("axis", 2)}, 0.f},
    {"Squeeze", 0, 2, 1, {F(4, 1, 8), I64S(1)}, {OUT(4, 8)}, {{0}}, 0.f},
    {"Unsqueeze", 0, 2, 1, {F(4, 8), I64S(0)}, {OUT(1, 4, 8)}, {{0}}, 0.f},
    {"Transpose", 0, 1, 1, {F(2, 16, 4, 8)}, {OUT(8, 4, 16, 2)}, {{0}}, 0.f},
    {"Transpose", 0, 1, 1, {F(2, 16, 4, 8)}, {OUT(2, 4, 16, 8)}, {A_INTS("perm", 0, 2, 1, 3)}, 0.f},
    {"Slice", 0, 5, 1, {F(6, 10, 8), I64S(1, -8), I64S(5, 100), I64S(0, -1), I64S(1, 2)}, {OUT(4, 10, 4)}, {{0}}, 0.f},
    {"Slice", 0, 5, 1, {F(6, 10, 8), I64S(-1), I64S(-1000), I64S(1), I64S(-3)}, {OUT(6, 4, 8)}, {{0}}, 0.f},
    {"Slice", 0, 3, 1, {F(5, 6), I64S(1, 0), I64S(4, -1)}, {OUT(3, 5)}, {{0}}, 0.f},
    {"Concat", 0, 3, 1, {F(2, 3, 4), F(2, 5, 4), F(2, 1, 4)}, {OUT(2, 9, 4)}, {A_INT("axis", 1)}, 0.f},
    {"Split", 0, 2, 2, {F(4, 8), I64S(3, 5)}, {OUT(4, 3), OUT(4, 5)}, {A_INT("axis", -1)}, 0.f},
    {"Gather", 0, 2, 1, {F(10, 6), INTS(PP_DTYPE_I64, -10, 9, 3, 4)}, {OUT(3, 4, 6)}, {{0}}, 1e-6f},
    {"Gather", 0, 2, 1, {F(4, 7, 5), INTS(PP_DTYPE_I32, -7, 6, 9)}, {OUT(4, 9, 5)}, {A_INT("axis", 1)}, 1e-6f},
    /* integer data (a shape or mask chain not folded at load): copied by element size */
    {"Gather", 0, 2, 1, {INTS(PP_DTYPE_I64, -99, 99, 10, 6), INTS(PP_DTYPE_I64, -10, 9, 3, 4)},
     {OUT_T(PP_DTYPE_I64, 3, 4, 6)}, {{0}}, 0.f},
    {"Gather", 0, 2, 1, {INTS(PP_DTYPE_I32, -99, 99, 4, 7, 5), INTS(PP_DTYPE_I32, -7, 6, 9)},
     {OUT_T(PP_DTYPE_I32, 4, 9, 5)}, {A_INT("axis", 1)}, 0.f},
    {"Expand", 0, 2, 1, {F(1, 32), I64S(16, 32)}, {OUT(16, 32)}, {{0}}, 1e-6f},
    {"Where", 0, 3, 1, {BOOLS(4, 1, 8), F(4, 6, 8), F(8)}, {OUT(4, 6, 8)}, {{0}}, 1e-6f},
    /* integer and bool data (a mask chain not folded at load): copied by element size */
    {"Where", 0, 3, 1, {BOOLS(4, 1, 8), INTS(PP_DTYPE_I64, -99, 99, 4, 6, 8), INTS(PP_DTYPE_I64, -99, 99, 8)},
     {OUT_T(PP_DTYPE_I64, 4, 6, 8)}, {{0}}, 0.f},
    {"Where", 0, 3, 1, {BOOLS(5, 1), BOOLS(5, 3), BOOLS(1, 3)}, {OUT_T(PP_DTYPE_BOOL, 5, 3)}, {{0}}, 0.f},
    /* the counter-based RNG is element.h's on both devices: same seed, same mask */
    {"Dropout", 0, 3, 2, {F(64, 64), SCALAR(PP_DTYPE_F32, 0.3), SCALAR(PP_DTYPE_BOOL, 1)},
     {OUT(64, 64), OUT_T(PP_DTYPE_BOOL, 64, 64)}, {{0}}, 1e-6f,
     .no_ort = "training-mode Dropout draws a random mask (case_dropout_stats checks it)"},
    /* cuDNN Conv (TF32): 2-D grouped, padded, strided with bias; 1-D dilated */
    {"Conv", 0, 3, 1, {F(2, 4, 9, 9), F(6, 2, 3, 3), F(6)}, {OUT(2, 6, 5, 5)},
     {A_INT("group", 2), A_INTS("pads", 1, 1, 1, 1), A_INTS("strides", 2, 2)}, TF32},
    {"Conv", 0, 2, 1, {F(2, 3, 16), F(5, 3, 3)}, {OUT(2, 5, 12)}, {A_INTS("dilations", 2)}, TF32},
    /* pooling: ceil_mode with asymmetric pads; average counting the pads */
    {"MaxPool", 0, 1, 1, {F(2, 3, 9, 9)}, {OUT(2, 3, 5, 5)},
     {A_INTS("kernel_shape", 3, 3), A_INTS("strides", 2, 2), A_INTS("pads", 0, 0, 1, 1), A_INT("ceil_mode", 1)}, 1e-6f},
    {"AveragePool", 0, 1, 1, {F(2, 3, 8, 8)}, {OUT(2, 3, 4, 4)},
     {A_INTS("kernel_shape", 3, 3), A_INTS("strides", 2, 2), A_INTS("pads", 1, 1, 1, 1), A_INT("count_include_pad", 1)},
     1e-6f},
    {"GlobalAveragePool", 0, 1, 1, {F(2, 8, 7, 7)}, {OUT(2, 8, 1, 1)}, {{0}}, 1e-5f},
    /* cuDNN BatchNormalization, training statistics */
    {"BatchNormalization", 0, 5, 1, {F(4, 8, 5, 5), F(8), F(8), F(8), POS(8)}, {OUT(4, 8, 5, 5)}, {{0}}, 1e-4f},
    /* non-float dtypes */
    {"Equal", 0, 2, 1, {INTS(PP_DTYPE_I64, -1, 2, 3, 4), INTS(PP_DTYPE_I64, -1, 2, 4)}, {OUT_T(PP_DTYPE_BOOL, 3, 4)},
     {{0}}, 0.f},
    {"Cast", 0, 1, 1, {F(4, 12)}, {OUT_T(PP_DTYPE_I32, 4, 12)}, {A_INT("to", PP_DTYPE_I32)}, 0.f},
    {"Cast", 0, 1, 1, {F(3, 5)}, {OUT_T(PP_DTYPE_BF16, 3, 5)}, {A_INT("to", PP_DTYPE_BF16)}, 0.f},
    {"Cast", 0, 1, 1, {INTS(PP_DTYPE_I64, -50, 50, 10)}, {OUT(10)}, {A_INT("to", PP_DTYPE_F32)}, 0.f},
    {"Cast", 0, 1, 1, {F(7)}, {OUT(7)}, {A_INT("to", PP_DTYPE_F32)}, 0.f},
    /* shape-valued ops, computed on the host and uploaded */
    {"Shape", 0, 1, 1, {F(2, 3, 4)}, {OUT_T(PP_DTYPE_I64, 2)}, {A_INT("start", 1)}, 0.f},
    {"ConstantOfShape", 0, 1, 1, {I64S(2, 3, 4)}, {OUT(2, 3, 4)},
     {{.name = "value", .type = PP_ATTR_TENSOR, .t = {PP_DTYPE_F32, {.rank = 1, .dims = {1}}, (const float[]){1.5f}, 4}}},
     0.f},
    {"Range", 0, 3, 1, {SCALAR(PP_DTYPE_I64, 2), SCALAR(PP_DTYPE_I64, 20), SCALAR(PP_DTYPE_I64, 3)},
     {OUT_T(PP_DTYPE_I64, 6)}, {{0}}, 0.f},
    {"Range", 0, 3, 1, {SCALAR(PP_DTYPE_F32, 0.5), SCALAR(PP_DTYPE_F32, 3), SCALAR(PP_DTYPE_F32, 0.25)}, {OUT(10)},
     {{0}}, 0.f},
    /* 16-bit compute: cuBLAS GemmEx and cuDNN (native) and the adapter around the fp32 kernels */
    {"MatMul", 0, 2, 1, {B16(4, 16, 64), B16W(64, 48)}, {OUT_T(PP_DTYPE_BF16, 4, 16, 48)}, {{0}}, BF16_TOL},
    {"MatMul", 0, 2, 1, {H16(2, 4, 16, 32), H16(2, 4, 32, 16)}, {OUT_T(PP_DTYPE_F16, 2, 4, 16, 16)}, {{0}}, F16_TOL},
    /* B's gradient sums the broadcast batch's 3 bf16 products, rounded after cuBLAS's order or
     * the cpu's: 2 ulps apart (H200: 1.27e-2) */
    {"MatMul", 0, 2, 1, {B16(3, 1, 8, 16), B16(4, 16, 8)}, {OUT_T(PP_DTYPE_BF16, 3, 4, 8, 8)}, {{0}}, 2 * BF16_TOL},
    /* a float32 weight: cuBLAS takes no bfloat16 x float32, the adapter runs it */
    {"MatMul", 0, 2, 1, {B16(4, 16, 64), F(64, 48)}, {OUT_T(PP_DTYPE_BF16, 4, 16, 48)}, {{0}}, BF16_TOL},
    {"Gemm", 0, 2, 1, {H16(32, 64), H16W(48, 64)}, {OUT_T(PP_DTYPE_F16, 32, 48)}, {A_INT("transB", 1)}, F16_TOL},
    {"Gemm", 0, 3, 1, {B16(64, 32), B16W(64, 48), F(48)}, {OUT_T(PP_DTYPE_BF16, 32, 48)}, {A_INT("transA", 1)},
     BF16_TOL},
    /* a float16 C [M, N] (an activation: its gradient is float16), scaled by beta */
    {"Gemm", 0, 3, 1, {H16(32, 64), H16W(48, 64), H16(32, 48)}, {OUT_T(PP_DTYPE_F16, 32, 48)},
     {A_INT("transB", 1), A_FLOAT("alpha", 0.5f), A_FLOAT("beta", 2.f)}, F16_TOL},
    /* cuDNN in bfloat16 / float16 with fp32 compute: grouped, padded, strided, with a float32
     * bias, dW into the fp32 master gradient; 1-D dilated with a float16 dW */
    {"Conv", 0, 3, 1, {B16(2, 4, 9, 9), B16W(6, 2, 3, 3), F(6)}, {OUT_T(PP_DTYPE_BF16, 2, 6, 5, 5)},
     {A_INT("group", 2), A_INTS("pads", 1, 1, 1, 1), A_INTS("strides", 2, 2)}, BF16_TOL},
    {"Conv", 0, 2, 1, {H16(2, 3, 16), H16(5, 3, 3)}, {OUT_T(PP_DTYPE_F16, 2, 5, 12)}, {A_INTS("dilations", 2)},
     F16_TOL},
    {"LayerNormalization", 0, 3, 1, {B16(4, 8, 64), F(64), F(64)}, {OUT_T(PP_DTYPE_BF16, 4, 8, 64)}, {{0}}, BF16_TOL},
    {"Softmax", 0, 1, 1, {H16(4, 8, 33)}, {OUT_T(PP_DTYPE_F16, 4, 8, 33)}, {{0}}, F16_TOL},
    /* comparisons, logic, more elementwise functions; F32S: a constant float list */
#define F32S(...) {PP_DTYPE_F32, 1, {NARGS(__VA_ARGS__)}, FILL_CONST, 0, 0, (const double[]){__VA_ARGS__}, 0}
    {"Less", 0, 2, 1, {F(4, 1, 8), F(6, 8)}, {OUT_T(PP_DTYPE_BOOL, 4, 6, 8)}, {{0}}, 0.f},
    {"LessOrEqual", 0, 2, 1, {INTS(PP_DTYPE_I64, -2, 2, 3, 4), INTS(PP_DTYPE_I64, -2, 2, 4)},
     {OUT_T(PP_DTYPE_BOOL, 3, 4)}, {{0}}, 0.f},
    {"Greater", 0, 2, 1, {INTS(PP_DTYPE_I32, -2, 2, 3, 4), INTS(PP_DTYPE_I32, -2, 2, 3, 1)},
     {OUT_T(PP_DTYPE_BOOL, 3, 4)}, {{0}}, 0.f},
    {"GreaterOrEqual", 0, 2, 1, {F(16, 33), F(1)}, {OUT_T(PP_DTYPE_BOOL, 16, 33)}, {{0}}, 0.f},
    {"And", 0, 2, 1, {BOOLS(4, 1, 8), BOOLS(6, 8)}, {OUT_T(PP_DTYPE_BOOL, 4, 6, 8)}, {{0}}, 0.f},
    {"Or", 0, 2, 1, {BOOLS(4, 6, 8), BOOLS(8)}, {OUT_T(PP_DTYPE_BOOL, 4, 6, 8)}, {{0}}, 0.f},
    {"Xor", 0, 2, 1, {BOOLS(5, 7), BOOLS(5, 7)}, {OUT_T(PP_DTYPE_BOOL, 5, 7)}, {{0}}, 0.f},
    {"Not", 0, 1, 1, {BOOLS(5, 7)}, {OUT_T(PP_DTYPE_BOOL, 5, 7)}, {{0}}, 0.f},
    {"IsNaN", 0, 1, 1, {F32S(NAN, 1, INFINITY, -INFINITY, 0, -2.5)}, {OUT_T(PP_DTYPE_BOOL, 6)}, {{0}}, 0.f},
    {"IsInf", 0, 1, 1, {F32S(NAN, 1, INFINITY, -INFINITY, 0, -2.5)}, {OUT_T(PP_DTYPE_BOOL, 6)}, {{0}}, 0.f},
    {"IsInf", 0, 1, 1, {F32S(NAN, 1, INFINITY, -INFINITY, 0, -2.5)}, {OUT_T(PP_DTYPE_BOOL, 6)},
     {A_INT("detect_positive", 0)}, 0.f},
    {"Abs", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 0.f},
    {"Sign", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 0.f},
    {"Exp", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    {"Log", 0, 1, 1, {POS(16, 33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    {"Sin", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    {"Cos", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    {"Floor", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 0.f},
    {"Ceil", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 0.f},
    /* halves round to even */
    {"Round", 0, 1, 1, {F32S(0.5, 1.5, 2.5, -0.5, -1.5, 0.49, 2.51, -7.2)}, {OUT(8)}, {{0}}, 0.f},
    {"Round", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 0.f},
    {"Softplus", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    {"Elu", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {A_FLOAT("alpha", 0.7f)}, 1e-6f},
    {"HardSwish", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    {"HardSigmoid", 0, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {A_FLOAT("alpha", 0.7f), A_FLOAT("beta", 0.4f)}, 1e-6f},
    {"Mish", 18, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    {"Swish", 24, 1, 1, {F(16, 33)}, {OUT(16, 33)}, {A_FLOAT("alpha", 1.7f)}, 1e-6f},
    {"SwiGLU", 28, 2, 1, {F(16, 33), F(16, 33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    /* the broadcast input's gradient sums 16 rows, in another order on the GPU (H200: 1.4e-7) */
    {"Max", 0, 2, 1, {F(16, 33), F(33)}, {OUT(16, 33)}, {{0}}, 1e-6f},
    {"Min", 0, 2, 1, {F(4, 1, 8), F(6, 1)}, {OUT(4, 6, 8)}, {{0}}, 1e-6f},
    {"Max", 0, 3, 1, {F(4, 6), F(6), F(4, 1)}, {OUT(4, 6)}, {{0}}, 1e-6f},
    {"Min", 0, 4, 1, {F(3, 1, 5), F(3, 4, 5), F(5), F(4, 1)}, {OUT(3, 4, 5)}, {{0}}, 1e-6f},
    {"Min", 0, 1, 1, {F(7, 3)}, {OUT(7, 3)}, {{0}}, 0.f},
    {"Mod", 0, 2, 1, {F(16, 33), POS(33)}, {OUT(16, 33)}, {A_INT("fmod", 1)}, 1e-6f},
    {"PRelu", 0, 2, 1, {F(2, 8, 5, 5), F(8, 1, 1)}, {OUT(2, 8, 5, 5)}, {{0}}, 1e-6f},
    {"Clip", 0, 3, 1, {F(16, 33), SCALAR(PP_DTYPE_F32, -0.5), SCALAR(PP_DTYPE_F32, 0.5)}, {OUT(16, 33)}, {{0}}, 0.f},
    {"Clip", 0, 2, 1, {F(16, 33), SCALAR(PP_DTYPE_F32, -0.25)}, {OUT(16, 33)}, {{0}}, 0.f},
    /* the binary kernels' integer path (shape chains that do not fold) */
    {"Max", 0, 2, 1, {INTS(PP_DTYPE_I64, -9, 9, 4, 6), INTS(PP_DTYPE_I64, -9, 9, 6)}, {OUT_T(PP_DTYPE_I64, 4, 6)},
     {{0}}, 0.f},
    {"Min", 0, 2, 1, {INTS(PP_DTYPE_I32, -9, 9, 4, 6), INTS(PP_DTYPE_I32, -9, 9, 4, 1)}, {OUT_T(PP_DTYPE_I32, 4, 6)},
     {{0}}, 0.f},
    {"Mod", 0, 2, 1, {INTS(PP_DTYPE_I64, -20, 20, 4, 6), INTS(PP_DTYPE_I64, -7, -1, 6)}, {OUT_T(PP_DTYPE_I64, 4, 6)},
     {{0}}, 0.f},
    {"Mod", 0, 2, 1, {INTS(PP_DTYPE_I64, -20, 20, 4, 6), INTS(PP_DTYPE_I64, 1, 7, 6)}, {OUT_T(PP_DTYPE_I64, 4, 6)},
     {A_INT("fmod", 1)}, 0.f},
    {"Div", 0, 2, 1, {INTS(PP_DTYPE_I64, -20, 20, 4, 6), INTS(PP_DTYPE_I64, 1, 7, 6)}, {OUT_T(PP_DTYPE_I64, 4, 6)},
     {{0}}, 0.f},
    {"Abs", 0, 1, 1, {INTS(PP_DTYPE_I64, -9, 9, 4, 6)}, {OUT_T(PP_DTYPE_I64, 4, 6)}, {{0}}, 0.f},
    {"Sign", 0, 1, 1, {INTS(PP_DTYPE_I32, -9, 9, 4, 6)}, {OUT_T(PP_DTYPE_I32, 4, 6)}, {{0}}, 0.f},
    {"Clip", 0, 3, 1, {INTS(PP_DTYPE_I64, -9, 9, 4, 6), SCALAR(PP_DTYPE_I64, -2), SCALAR(PP_DTYPE_I64, 5)},
     {OUT_T(PP_DTYPE_I64, 4, 6)}, {{0}}, 0.f},

    /* indexing, scatter, padding, tiling, cumulative sums, more reductions */
    {"CumSum", 0, 2, 1, {F(4, 7, 5), SCALAR(PP_DTYPE_I64, 1)}, {OUT(4, 7, 5)}, {{0}}, 1e-5f},
    {"CumSum", 0, 2, 1, {F(3, 9), SCALAR(PP_DTYPE_I64, -1)}, {OUT(3, 9)}, {A_INT("exclusive", 1), A_INT("reverse", 1)},
     1e-5f},
    {"CumSum", 0, 2, 1, {INTS(PP_DTYPE_I64, 0, 1, 2, 8), SCALAR(PP_DTYPE_I64, 1)}, {OUT_T(PP_DTYPE_I64, 2, 8)}, {{0}},
     0.f},
    {"Trilu", 0, 2, 1, {F(2, 5, 6), SCALAR(PP_DTYPE_I64, 1)}, {OUT(2, 5, 6)}, {{0}}, 0.f},
    {"Trilu", 0, 1, 1, {F(7, 7)}, {OUT(7, 7)}, {A_INT("upper", 0)}, 0.f},
    {"Tile", 0, 2, 1, {F(2, 3, 4), I64S(2, 1, 3)}, {OUT(4, 3, 12)}, {{0}}, 1e-6f},
    {"Pad", 0, 3, 1, {F(2, 3, 4), I64S(0, 1, 2, 1, 0, 3), SCALAR(PP_DTYPE_F32, 0.5)}, {OUT(3, 4, 9)}, {{0}}, 0.f},
    {"Pad", 0, 2, 1, {F(2, 5, 6), I64S(0, 2, 3, 0, 1, 4)}, {OUT(2, 8, 13)}, {A_STR("mode", "reflect")}, 1e-6f},
    {"Pad", 0, 2, 1, {F(3, 4), I64S(2, 1, 3, 0)}, {OUT(8, 5)}, {A_STR("mode", "edge")}, 1e-6f},
    {"Pad", 18, 4, 1, {F(2, 3, 4), I64S(1, -1, 2, 1), SCALAR(PP_DTYPE_F32, 0), I64S(-1, 1)}, {OUT(2, 3, 7)}, {{0}}, 0.f},
    {"Pad", 19, 2, 1, {F(2, 3, 4), I64S(0, 1, 2, 0, 2, 1)}, {OUT(2, 6, 7)}, {A_STR("mode", "wrap")}, 1e-6f},
    {"GatherElements", 0, 2, 1, {F(4, 5, 3), INTS(PP_DTYPE_I64, -5, 4, 4, 7, 3)}, {OUT(4, 7, 3)}, {A_INT("axis", 1)},
     1e-6f},
    {"GatherElements", 0, 2, 1, {F(6, 4), INTS(PP_DTYPE_I32, 0, 5, 3, 4)}, {OUT(3, 4)}, {{0}}, 1e-6f},
    {"GatherND", 0, 2, 1, {F(5, 4, 3), INTS(PP_DTYPE_I64, -4, 3, 6, 2)}, {OUT(6, 3)}, {{0}}, 1e-6f},
    {"GatherND", 0, 2, 1, {F(3, 4, 5), INTS(PP_DTYPE_I64, 0, 3, 3, 2, 1)}, {OUT(3, 2, 5)}, {A_INT("batch_dims", 1)},
     1e-6f},
    {"ScatterND", 0, 3, 1, {F(4, 5, 3), I64S(2), F(5, 3)}, {OUT(4, 5, 3)}, {{0}}, 0.f},
    {"ScatterND", 0, 3, 1, {F(4, 5, 3), INTS(PP_DTYPE_I64, 0, 3, 6, 1), F(6, 5, 3)}, {OUT(4, 5, 3)},
     {A_STR("reduction", "add")}, 1e-6f},
    {"ScatterElements", 0, 3, 1, {F(9), I64S(3, -1, 0, 5), F(4)}, {OUT(9)}, {{0}}, 0.f},
    {"ScatterElements", 0, 3, 1, {F(3, 6), INTS(PP_DTYPE_I64, -6, 5, 3, 9), F(3, 9)}, {OUT(3, 6)},
     {A_INT("axis", 1), A_STR("reduction", "add")}, 1e-6f},
    {"ReduceMax", 18, 2, 1, {F(4, 8, 16), I64S(1)}, {OUT(4, 1, 16)}, {{0}}, 1e-6f},
    {"ReduceMax", 0, 1, 1, {F(5, 300)}, {OUT(5)}, {A_INTS("axes", 1), A_INT("keepdims", 0)}, 1e-6f},
    {"ReduceMin", 18, 2, 1, {F(3, 4, 5), I64S(0, 2)}, {OUT(4)}, {A_INT("keepdims", 0)}, 1e-6f},
    {"ReduceMin", 0, 1, 1, {F(6, 7)}, {OUT(1, 1)}, {{0}}, 1e-6f},
    {"ReduceProd", 18, 2, 1, {POS(4, 6, 5), I64S(1)}, {OUT(4, 5)}, {A_INT("keepdims", 0)}, 1e-5f},
    {"ReduceProd", 0, 1, 1, {POS(3, 4)}, {OUT(3, 1)}, {A_INTS("axes", -1)}, 1e-5f},
    {"ArgMax", 0, 1, 1, {F(4, 9, 5)}, {OUT_T(PP_DTYPE_I64, 4, 1, 5)}, {A_INT("axis", 1)}, 0.f},
    {"ArgMax", 0, 1, 1, {F(6, 7)}, {OUT_T(PP_DTYPE_I64, 6)},
     {A_INT("axis", -1), A_INT("keepdims", 0), A_INT("select_last_index", 1)}, 0.f},
    {"TopK", 0, 2, 2, {F(4, 10), I64S(3)}, {OUT(4, 3), OUT_T(PP_DTYPE_I64, 4, 3)}, {{0}}, 0.f},
    {"TopK", 0, 2, 2, {F(3, 7, 4), I64S(2)}, {OUT(3, 2, 4), OUT_T(PP_DTYPE_I64, 3, 2, 4)},
     {A_INT("axis", 1), A_INT("largest", 0)}, 0.f},
    /* NaN ranks above every number (PyTorch's topk): first when largest, last when smallest */
    {"TopK", 0, 2, 2, {F32S(1, NAN, 3, -2, NAN, 0.5), I64S(4)}, {OUT(4), OUT_T(PP_DTYPE_I64, 4)}, {{0}}, 0.f},
    {"TopK", 0, 2, 2, {F32S(1, NAN, 3, -2, NAN, 0.5), I64S(5)}, {OUT(5), OUT_T(PP_DTYPE_I64, 5)},
     {A_INT("largest", 0)}, 0.f},

    /* normalisation, attention, rotary embedding, resampling, einsum */
/* an empty optional input (Resize's roi, scales) */
#define NO_ROI {PP_DTYPE_F32, 1, {0}, FILL_CONST, 0, 0, (const double[]){0}, 0}
#define NO_SCALES NO_ROI
    {"RMSNormalization", 23, 2, 1, {F(4, 8, 64), F(64)}, {OUT(4, 8, 64)}, {{0}}, 1e-4f},
    {"RMSNormalization", 23, 2, 1, {F(3, 6, 8), F(6, 8)}, {OUT(3, 6, 8)}, {A_INT("axis", -2), A_FLOAT("epsilon", 1e-3f)},
     1e-4f},
    {"InstanceNormalization", 0, 3, 1, {F(2, 4, 5, 5), F(4), F(4)}, {OUT(2, 4, 5, 5)}, {{0}}, 1e-4f},
    {"GroupNormalization", 21, 3, 1, {F(2, 6, 3, 3), F(6), F(6)}, {OUT(2, 6, 3, 3)}, {A_INT("num_groups", 3)}, 1e-4f},
    /* opset 18: scale and bias per group */
    {"GroupNormalization", 18, 3, 1, {F(2, 6, 3, 3), F(3), F(3)}, {OUT(2, 6, 3, 3)}, {A_INT("num_groups", 3)}, 1e-4f},
    {"RotaryEmbedding", 23, 3, 1, {F(2, 4, 6, 8), F(2, 6, 4), F(2, 6, 4)}, {OUT(2, 4, 6, 8)}, {{0}}, 1e-6f},
    /* 3-D, interleaved, half the head turned, caches indexed by position_ids */
    {"RotaryEmbedding", 23, 4, 1, {F(2, 6, 32), F(10, 2), F(10, 2), INTS(PP_DTYPE_I64, 0, 9, 2, 6)}, {OUT(2, 6, 32)},
     {A_INT("num_heads", 4), A_INT("rotary_embedding_dim", 4), A_INT("interleaved", 1)}, 1e-6f},
    /* HF's caches [1, 1, S, D] shared by the batch, the first half of each row read (stage/fuse_rope.c) */
    {"RotaryEmbedding", 23, 3, 1, {F(2, 4, 6, 8), F(1, 1, 6, 8), F(1, 1, 6, 8)}, {OUT(2, 4, 6, 8)},
     {A_INT("hf_caches", 1)}, 1e-6f, .no_ort = "hf_caches is onnxpipe's own form (stage/fuse_rope.c)"},
    /* grouped-query, causal */
    {"Attention", 23, 3, 1, {F(2, 4, 8, 16), F(2, 2, 8, 16), F(2, 2, 8, 12)}, {OUT(2, 4, 8, 12)},
     {A_INT("is_causal", 1)}, 1e-4f},
    /* 3-D with a float mask and a scale */
    {"Attention", 23, 4, 1, {F(2, 6, 32), F(2, 5, 16), F(2, 5, 16), F(6, 5)}, {OUT(2, 6, 32)},
     {A_INT("q_num_heads", 4), A_INT("kv_num_heads", 2), A_FLOAT("scale", 0.5f)}, 1e-4f},
    /* a bool mask broadcast over the heads, which may mask a whole row (Y = 0 there) */
    {"Attention", 23, 4, 1, {F(2, 2, 5, 8), F(2, 2, 7, 8), F(2, 2, 7, 8), BOOLS(2, 1, 5, 7)}, {OUT(2, 2, 5, 8)}, {{0}},
     1e-4f},
    /* the layout stage/fuse_attention.c gives the exporters' attention: Q, K, V and Y stored
     * [B, S, H, D] (the heads' Transposes folded), causal, the exporter's scale */
    {"Attention", 23, 3, 1, {F(2, 8, 2, 8), F(2, 8, 2, 8), F(2, 8, 2, 8)}, {OUT(2, 8, 2, 8)}, {ATTN_BSHD(0.3f)}, 1e-4f,
     .no_ort = "perm_Q .. perm_Y are onnxpipe's layout attributes (stage/fuse_attention.c)"},
    /* the native 16-bit kernel, cuDNN's fused attention: that layout in bfloat16 (cuDNN rounds P
     * and dS to bfloat16 for its products, where the cpu keeps them in fp32: a few units) */
    {"Attention", 23, 3, 1, {B16(2, 16, 2, 16), B16(2, 16, 2, 16), B16(2, 16, 2, 16)},
     {OUT_T(PP_DTYPE_BF16, 2, 16, 2, 16)}, {ATTN_BSHD(0.25f)}, 4 * BF16_TOL,
     .no_ort = "perm_Q .. perm_Y are onnxpipe's layout attributes (stage/fuse_attention.c)"},
    /* float16, grouped-query heads, an additive mask (cuDNN's bias) */
    {"Attention", 23, 4, 1, {H16(2, 4, 16, 16), H16(2, 2, 16, 16), H16(2, 2, 16, 16), F(1, 1, 16, 16)},
     {OUT_T(PP_DTYPE_F16, 2, 4, 16, 16)}, {{0}}, 8 * F16_TOL},
    /* Resize: roi empty; scales or sizes constant (an empty scales beside sizes) */
    {"Resize", 13, 3, 1, {F(2, 3, 4, 5), NO_ROI, F32S(1, 1, 2, 2)}, {OUT(2, 3, 8, 10)}, {A_STR("mode", "linear")},
     1e-6f},
    {"Resize", 13, 4, 1, {F(2, 3, 4, 6), NO_ROI, NO_SCALES, I64S(2, 3, 7, 4)}, {OUT(2, 3, 7, 4)},
     {A_STR("coordinate_transformation_mode", "asymmetric"), A_STR("nearest_mode", "floor")}, 1e-6f},
    {"Resize", 13, 3, 1, {F(1, 2, 5, 8), NO_ROI, F32S(1, 1, 1.5, 0.5)}, {OUT(1, 2, 7, 4)},
     {A_STR("mode", "linear"), A_STR("coordinate_transformation_mode", "align_corners")}, 1e-6f},
    {"Resize", 13, 4, 1, {F(2, 2, 4, 4), NO_ROI, NO_SCALES, I64S(2, 2, 3, 9)}, {OUT(2, 2, 3, 9)},
     {A_STR("mode", "linear"), A_STR("coordinate_transformation_mode", "pytorch_half_pixel")}, 1e-6f},
    {"Resize", 13, 3, 1, {F(2, 3, 3, 4), NO_ROI, F32S(1, 1, 2, 3)}, {OUT(2, 3, 6, 12)},
     {A_STR("nearest_mode", "round_prefer_ceil")}, 1e-6f},
    /* Einsum: the forms exporters write (batched products, attention's, an ellipsis, an outer
     * product, a transpose, a trace per batch) */
    {"Einsum", 0, 2, 1, {F(3, 4, 5), F(3, 5, 6)}, {OUT(3, 4, 6)}, {A_STR("equation", "bij,bjk->bik")}, 1e-5f},
    {"Einsum", 0, 2, 1, {F(2, 3, 4, 8), F(2, 3, 5, 8)}, {OUT(2, 3, 4, 5)}, {A_STR("equation", "bhid,bhjd->bhij")},
     1e-5f},
    {"Einsum", 0, 2, 1, {F(2, 3, 4, 6), F(2, 3, 5, 6)}, {OUT(2, 3, 4, 5)}, {A_STR("equation", "...id,...jd->...ij")},
     1e-5f},
    {"Einsum", 0, 2, 1, {F(7), F(5)}, {OUT(7, 5)}, {A_STR("equation", "i,j->ij")}, 1e-6f},
    {"Einsum", 0, 1, 1, {F(2, 3, 4)}, {OUT(4, 2, 3)}, {A_STR("equation", "abc->cab")}, 0.f},
    {"Einsum", 0, 2, 1, {F(3, 4, 5), F(3, 5, 4)}, {OUT(3)}, {A_STR("equation", "bij, bji->b")}, 1e-5f},
    /* implicit output: the labels seen once, alphabetically */
    {"Einsum", 0, 2, 1, {F(4, 5), F(5, 6)}, {OUT(4, 6)}, {A_STR("equation", "ij,jk")}, 1e-5f},
#undef F32S
#undef NO_ROI
#undef NO_SCALES

    /* the residual norms (com.microsoft, stage/fuse_residual_norm.c): y and the sum (output 3,
     * whose own gradient backward adds); rows of 64 take the 128-bit path on a GPU, of 12 not */
    {"SkipLayerNormalization", 0, 4, 4, {F(4, 8, 64), F(4, 8, 64), F(64), F(64)},
     {OUT(4, 8, 64), OUT_NONE, OUT_NONE, OUT(4, 8, 64)}, {A_FLOAT("epsilon", 1e-5f)}, 1e-4f},
    {"SkipLayerNormalization", 0, 3, 4, {F(3, 5, 12), F(3, 5, 12), F(12)}, {OUT(3, 5, 12), OUT_NONE, OUT_NONE, OUT(3, 5, 12)},
     {A_FLOAT("epsilon", 1e-5f)}, 1e-4f},
    {"SkipSimplifiedLayerNormalization", 0, 3, 4, {F(4, 8, 64), F(4, 8, 64), F(64)},
     {OUT(4, 8, 64), OUT_NONE, OUT_NONE, OUT(4, 8, 64)}, {A_FLOAT("epsilon", 1e-6f)}, 1e-4f},
    /* 16 bits: the cuda kernel normalises the sum as rounded to 16 bits (as the unfused Add
     * stores it), the cpu's adapter the fp32 sum; both backwards read the rounded one: 2 ulps */
    {"SkipLayerNormalization", 0, 4, 4, {B16(4, 8, 64), B16(4, 8, 64), F(64), F(64)},
     {OUT_T(PP_DTYPE_BF16, 4, 8, 64), OUT_NONE, OUT_NONE, OUT_T(PP_DTYPE_BF16, 4, 8, 64)}, {A_FLOAT("epsilon", 1e-5f)},
     2 * BF16_TOL},
    {"SkipLayerNormalization", 0, 4, 4, {H16(3, 5, 12), H16(3, 5, 12), F(12), F(12)},
     {OUT_T(PP_DTYPE_F16, 3, 5, 12), OUT_NONE, OUT_NONE, OUT_T(PP_DTYPE_F16, 3, 5, 12)}, {A_FLOAT("epsilon", 1e-5f)},
     2 * F16_TOL},
    {"SkipSimplifiedLayerNormalization", 0, 3, 4, {B16(3, 5, 12), B16(3, 5, 12), F(12)},
     {OUT_T(PP_DTYPE_BF16, 3, 5, 12), OUT_NONE, OUT_NONE, OUT_T(PP_DTYPE_BF16, 3, 5, 12)}, {A_FLOAT("epsilon", 1e-6f)},
     2 * BF16_TOL},
    {"SkipSimplifiedLayerNormalization", 0, 3, 4, {H16(4, 8, 64), H16(4, 8, 64), F(64)},
     {OUT_T(PP_DTYPE_F16, 4, 8, 64), OUT_NONE, OUT_NONE, OUT_T(PP_DTYPE_F16, 4, 8, 64)}, {A_FLOAT("epsilon", 1e-6f)},
     2 * F16_TOL},
    /* native 16-bit row kernels (layernorm.cu, loss.cu): a float32 scale (the master weight) */
    {"LayerNormalization", 0, 3, 1, {H16(6, 40), F(40), F(40)}, {OUT_T(PP_DTYPE_F16, 6, 40)}, {{0}}, F16_TOL},
    {"RMSNormalization", 23, 2, 1, {B16(4, 8, 64), F(64)}, {OUT_T(PP_DTYPE_BF16, 4, 8, 64)}, {{0}}, BF16_TOL},
    {"RMSNormalization", 23, 2, 1, {H16(3, 6, 10), F(10)}, {OUT_T(PP_DTYPE_F16, 3, 6, 10)}, {{0}}, F16_TOL},
    /* the logits' gradient in their own 16 bits */
    {"SoftmaxCrossEntropyLoss", 0, 2, 1, {B16(8, 50), INTS(PP_DTYPE_I64, 0, 49, 8)}, {OUT_SCALAR}, {{0}}, BF16_TOL},
    {"SoftmaxCrossEntropyLoss", 0, 2, 1, {H16(4, 7, 3), INTS(PP_DTYPE_I64, -1, 6, 4, 3)}, {OUT_SCALAR},
     {A_STR("reduction", "sum"), A_INT("ignore_index", -1)}, F16_TOL},
    /* the native 16-bit elementwise, softmax and data-movement kernels (io.cuh): each op of
     * the cuda bfloat16 and float16 tables in both dtypes, 128-bit paths (rows of multiples of
     * 8) and scalar ones; weights float32 */
    {"Sqrt", 0, 1, 1, {B16P(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Sqrt", 0, 1, 1, {H16P(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Neg", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Neg", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Reciprocal", 0, 1, 1, {B16P(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Reciprocal", 0, 1, 1, {H16P(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Relu", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Relu", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"LeakyRelu", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {A_FLOAT("alpha", 0.2f)}, BF16_TOL},
    {"LeakyRelu", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {A_FLOAT("alpha", 0.2f)}, F16_TOL},
    {"Sigmoid", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Sigmoid", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Tanh", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Tanh", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Erf", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Erf", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Gelu", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Gelu", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Gelu", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {A_STR("approximate", "tanh")}, BF16_TOL},
    {"Identity", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Identity", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Abs", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Abs", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Sign", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Sign", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Exp", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Exp", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Log", 0, 1, 1, {B16P(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Log", 0, 1, 1, {H16P(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Sin", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Sin", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Cos", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Cos", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Floor", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Floor", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Ceil", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Ceil", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Round", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Round", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Softplus", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Softplus", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Elu", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {A_FLOAT("alpha", 0.7f)}, BF16_TOL},
    {"Elu", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {A_FLOAT("alpha", 0.7f)}, F16_TOL},
    {"HardSwish", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"HardSwish", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"HardSigmoid", 0, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {A_FLOAT("alpha", 0.7f), A_FLOAT("beta", 0.4f)}, BF16_TOL},
    {"HardSigmoid", 0, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {A_FLOAT("alpha", 0.7f), A_FLOAT("beta", 0.4f)}, F16_TOL},
    {"Mish", 18, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Mish", 18, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {{0}}, F16_TOL},
    {"Swish", 24, 1, 1, {B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {A_FLOAT("alpha", 1.7f)}, BF16_TOL},
    {"Swish", 24, 1, 1, {H16(5, 7)}, {OUT_T(PP_DTYPE_F16, 5, 7)}, {A_FLOAT("alpha", 1.7f)}, F16_TOL},
    {"Add", 0, 2, 1, {B16(4, 8, 32), B16(32)}, {OUT_T(PP_DTYPE_BF16, 4, 8, 32)}, {{0}}, BF16_TOL},
    {"Add", 0, 2, 1, {H16(4, 8, 32), H16(32)}, {OUT_T(PP_DTYPE_F16, 4, 8, 32)}, {{0}}, F16_TOL},
    {"Sub", 0, 2, 1, {B16(16, 32), B16(16, 1)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Sub", 0, 2, 1, {H16(16, 32), H16(16, 1)}, {OUT_T(PP_DTYPE_F16, 16, 32)}, {{0}}, F16_TOL},
    {"Mul", 0, 2, 1, {B16(4, 1, 32), B16(1, 8, 32)}, {OUT_T(PP_DTYPE_BF16, 4, 8, 32)}, {{0}}, BF16_TOL},
    {"Mul", 0, 2, 1, {H16(4, 1, 32), H16(1, 8, 32)}, {OUT_T(PP_DTYPE_F16, 4, 8, 32)}, {{0}}, F16_TOL},
    {"Div", 0, 2, 1, {B16(16, 32), B16P(1, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Div", 0, 2, 1, {H16(16, 32), H16P(1, 32)}, {OUT_T(PP_DTYPE_F16, 16, 32)}, {{0}}, F16_TOL},
    {"Pow", 0, 2, 1, {B16P(16, 32), F(1)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Pow", 0, 2, 1, {H16P(16, 32), F(1)}, {OUT_T(PP_DTYPE_F16, 16, 32)}, {{0}}, F16_TOL},
    {"Max", 0, 2, 1, {B16(16, 33), B16(33)}, {OUT_T(PP_DTYPE_BF16, 16, 33)}, {{0}}, BF16_TOL},
    {"Max", 0, 2, 1, {H16(16, 33), H16(33)}, {OUT_T(PP_DTYPE_F16, 16, 33)}, {{0}}, F16_TOL},
    {"Min", 0, 2, 1, {B16(4, 1, 8), B16(6, 1)}, {OUT_T(PP_DTYPE_BF16, 4, 6, 8)}, {{0}}, BF16_TOL},
    {"Min", 0, 2, 1, {H16(4, 1, 8), H16(6, 1)}, {OUT_T(PP_DTYPE_F16, 4, 6, 8)}, {{0}}, F16_TOL},
    {"Mod", 0, 2, 1, {B16(16, 33), B16P(33)}, {OUT_T(PP_DTYPE_BF16, 16, 33)}, {A_INT("fmod", 1)}, BF16_TOL},
    {"Mod", 0, 2, 1, {H16(16, 33), H16P(33)}, {OUT_T(PP_DTYPE_F16, 16, 33)}, {A_INT("fmod", 1)}, F16_TOL},
    {"SwiGLU", 28, 2, 1, {B16(16, 32), B16(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"SwiGLU", 28, 2, 1, {H16(16, 32), H16(16, 32)}, {OUT_T(PP_DTYPE_F16, 16, 32)}, {{0}}, F16_TOL},
    {"PRelu", 0, 2, 1, {B16(2, 8, 5, 5), F(8, 1, 1)}, {OUT_T(PP_DTYPE_BF16, 2, 8, 5, 5)}, {{0}}, BF16_TOL},
    {"PRelu", 0, 2, 1, {H16(2, 8, 5, 5), F(8, 1, 1)}, {OUT_T(PP_DTYPE_F16, 2, 8, 5, 5)}, {{0}}, F16_TOL},
    {"Softmax", 0, 1, 1, {B16(4, 16, 128)}, {OUT_T(PP_DTYPE_BF16, 4, 16, 128)}, {{0}}, BF16_TOL},
    {"Softmax", 0, 1, 1, {B16(2, 3, 37, 37)}, {OUT_T(PP_DTYPE_BF16, 2, 3, 37, 37)}, {A_INT("causal", 1)}, BF16_TOL,
     .no_ort = "causal is onnxpipe's own attribute (test_attention_causal checks it against the masked Softmax)"},
    {"LogSoftmax", 0, 1, 1, {B16(16, 1000)}, {OUT_T(PP_DTYPE_BF16, 16, 1000)}, {{0}}, BF16_TOL},
    {"LogSoftmax", 0, 1, 1, {H16(4, 7, 5)}, {OUT_T(PP_DTYPE_F16, 4, 7, 5)}, {A_INT("axis", 1)}, F16_TOL},
    /* data movement: copies by element size (exact), gradients added in fp32 and rounded once */
    {"Reshape", 0, 2, 1, {B16(4, 6, 8), I64S(4, -1, 2)}, {OUT_T(PP_DTYPE_BF16, 4, 24, 2)}, {{0}}, BF16_TOL},
    {"Reshape", 0, 2, 1, {H16(4, 6, 8), I64S(-1)}, {OUT_T(PP_DTYPE_F16, 192)}, {{0}}, F16_TOL},
    {"Flatten", 0, 1, 1, {B16(2, 3, 4, 5)}, {OUT_T(PP_DTYPE_BF16, 6, 20)}, {A_INT("axis", 2)}, BF16_TOL},
    {"Flatten", 0, 1, 1, {H16(2, 3, 4)}, {OUT_T(PP_DTYPE_F16, 2, 12)}, {{0}}, F16_TOL},
    {"Squeeze", 0, 2, 1, {B16(4, 1, 8), I64S(1)}, {OUT_T(PP_DTYPE_BF16, 4, 8)}, {{0}}, BF16_TOL},
    {"Squeeze", 0, 2, 1, {H16(1, 8), I64S(0)}, {OUT_T(PP_DTYPE_F16, 8)}, {{0}}, F16_TOL},
    {"Unsqueeze", 0, 2, 1, {B16(4, 8), I64S(0)}, {OUT_T(PP_DTYPE_BF16, 1, 4, 8)}, {{0}}, BF16_TOL},
    {"Unsqueeze", 0, 2, 1, {H16(4, 8), I64S(2)}, {OUT_T(PP_DTYPE_F16, 4, 8, 1)}, {{0}}, F16_TOL},
    {"Transpose", 0, 1, 1, {B16(2, 16, 4, 8)}, {OUT_T(PP_DTYPE_BF16, 2, 4, 16, 8)}, {A_INTS("perm", 0, 2, 1, 3)}, BF16_TOL},
    {"Transpose", 0, 1, 1, {H16(2, 16, 4, 8)}, {OUT_T(PP_DTYPE_F16, 8, 4, 16, 2)}, {{0}}, F16_TOL},
    {"Slice", 0, 5, 1, {B16(6, 10, 8), I64S(1, -8), I64S(5, 100), I64S(0, -1), I64S(1, 2)}, {OUT_T(PP_DTYPE_BF16, 4, 10, 4)},
     {{0}}, BF16_TOL},
    {"Slice", 0, 3, 1, {H16(5, 6), I64S(1, 0), I64S(4, -1)}, {OUT_T(PP_DTYPE_F16, 3, 5)}, {{0}}, F16_TOL},
    {"Concat", 0, 3, 1, {B16(2, 3, 4), B16(2, 5, 4), B16(2, 1, 4)}, {OUT_T(PP_DTYPE_BF16, 2, 9, 4)}, {A_INT("axis", 1)}, BF16_TOL},
    {"Concat", 0, 2, 1, {H16(3, 4), H16(3, 2)}, {OUT_T(PP_DTYPE_F16, 3, 6)}, {A_INT("axis", -1)}, F16_TOL},
    {"Split", 0, 2, 2, {B16(4, 8), I64S(3, 5)}, {OUT_T(PP_DTYPE_BF16, 4, 3), OUT_T(PP_DTYPE_BF16, 4, 5)}, {A_INT("axis", -1)},
     BF16_TOL},
    {"Split", 0, 2, 2, {H16(6, 4), I64S(2, 4)}, {OUT_T(PP_DTYPE_F16, 2, 4), OUT_T(PP_DTYPE_F16, 4, 4)}, {{0}}, F16_TOL},
    /* an embedding table's lookup; its gradient is the fp32 master's (atomics in fp32) */
    {"Gather", 0, 2, 1, {B16W(10, 6), INTS(PP_DTYPE_I64, -10, 9, 3, 4)}, {OUT_T(PP_DTYPE_BF16, 3, 4, 6)}, {{0}}, BF16_TOL},
    {"Gather", 0, 2, 1, {H16W(4, 7, 5), INTS(PP_DTYPE_I32, -7, 6, 9)}, {OUT_T(PP_DTYPE_F16, 4, 9, 5)}, {A_INT("axis", 1)},
     F16_TOL},
    {"Expand", 0, 2, 1, {B16(1, 32), I64S(16, 32)}, {OUT_T(PP_DTYPE_BF16, 16, 32)}, {{0}}, BF16_TOL},
    {"Expand", 0, 2, 1, {H16(3, 1), I64S(2, 3, 4)}, {OUT_T(PP_DTYPE_F16, 2, 3, 4)}, {{0}}, F16_TOL},
    {"Where", 0, 3, 1, {BOOLS(4, 1, 8), B16(4, 6, 8), B16(8)}, {OUT_T(PP_DTYPE_BF16, 4, 6, 8)}, {{0}}, BF16_TOL},
    {"Where", 0, 3, 1, {BOOLS(5, 1), H16(5, 3), H16(1, 3)}, {OUT_T(PP_DTYPE_F16, 5, 3)}, {{0}}, F16_TOL},
    {"Cast", 0, 1, 1, {B16(3, 5)}, {OUT(3, 5)}, {A_INT("to", PP_DTYPE_F32)}, BF16_TOL},
    {"Cast", 0, 1, 1, {H16(7)}, {OUT(7)}, {A_INT("to", PP_DTYPE_F32)}, F16_TOL},
    {"Dropout", 0, 3, 2, {B16(64, 64), SCALAR(PP_DTYPE_F32, 0.3), SCALAR(PP_DTYPE_BOOL, 1)},
     {OUT_T(PP_DTYPE_BF16, 64, 64), OUT_T(PP_DTYPE_BOOL, 64, 64)}, {{0}}, BF16_TOL,
     .no_ort = "training-mode Dropout draws a random mask (case_dropout_stats checks it)"},
    {"Dropout", 0, 3, 2, {H16(32, 16), SCALAR(PP_DTYPE_F32, 0.5), SCALAR(PP_DTYPE_BOOL, 1)},
     {OUT_T(PP_DTYPE_F16, 32, 16), OUT_T(PP_DTYPE_BOOL, 32, 16)}, {{0}}, F16_TOL,
     .no_ort = "training-mode Dropout draws a random mask (case_dropout_stats checks it)"},
    {"RotaryEmbedding", 23, 3, 1, {B16(2, 4, 6, 8), F(2, 6, 4), F(2, 6, 4)}, {OUT_T(PP_DTYPE_BF16, 2, 4, 6, 8)}, {{0}},
     BF16_TOL},
    /* caches computed in the graph are 16-bit under --precision bf16 (stage/precision.c) */
    {"RotaryEmbedding", 23, 3, 1, {B16(2, 4, 6, 8), B16(2, 6, 4), B16(2, 6, 4)}, {OUT_T(PP_DTYPE_BF16, 2, 4, 6, 8)},
     {{0}}, BF16_TOL},
    {"RotaryEmbedding", 23, 4, 1, {H16(2, 6, 32), F(10, 2), F(10, 2), INTS(PP_DTYPE_I64, 0, 9, 2, 6)},
     {OUT_T(PP_DTYPE_F16, 2, 6, 32)}, {A_INT("num_heads", 4), A_INT("rotary_embedding_dim", 4), A_INT("interleaved", 1)},
     F16_TOL},
    /* reductions store float32 (their precision class) from 16-bit inputs */
    {"ReduceSum", 0, 2, 1, {B16(4, 8, 16), I64S(1)}, {OUT(4, 1, 16)}, {{0}}, BF16_TOL},
    {"ReduceSum", 0, 2, 1, {H16(3, 300, 2), I64S(1)}, {OUT(3, 2)}, {A_INT("keepdims", 0)}, F16_TOL},
    {"ReduceMean", 18, 2, 1, {B16(4, 8, 16), I64S(2)}, {OUT(4, 8)}, {A_INT("keepdims", 0)}, BF16_TOL},
    {"ReduceMean", 0, 1, 1, {H16(4, 8, 16)}, {OUT(4, 1, 16)}, {A_INTS("axes", 1)}, F16_TOL},
};
#pragma GCC diagnostic pop
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ---------------- running a case ---------------- */

static float case_frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 16777216.f * 2.f - 1.f;
}

static void case_store(pp_dtype t, void *p, int64_t i, double v)
{
    switch (t) {
    case PP_DTYPE_F32: ((float *)p)[i] = (float)v; break;
    case PP_DTYPE_F64: ((double *)p)[i] = v; break;
    case PP_DTYPE_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case PP_DTYPE_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case PP_DTYPE_BF16: ((uint16_t *)p)[i] = pp_el_bf16_from_f32((float)v); break;
    case PP_DTYPE_F16: ((uint16_t *)p)[i] = pp_el_f16_from_f32((float)v); break;
    default: ((uint8_t *)p)[i] = (uint8_t)v; break;
    }
}

/* element i as a double */
static double case_load(pp_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case PP_DTYPE_F32: return ((const float *)p)[i];
    case PP_DTYPE_F64: return ((const double *)p)[i];
    case PP_DTYPE_I64: return (double)((const int64_t *)p)[i];
    case PP_DTYPE_I32: return ((const int32_t *)p)[i];
    case PP_DTYPE_BF16: return pp_el_f32_from_bf16(((const uint16_t *)p)[i]);
    case PP_DTYPE_F16: return pp_el_f32_from_f16(((const uint16_t *)p)[i]);
    default: return ((const uint8_t *)p)[i];
    }
}

static pp_tensor case_tensor(pp_dtype dt, int rank, const int64_t *dims)
{
    pp_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    t.data = calloc(1, pp_tensor_nbytes(&t) + 8);
    return t;
}

static pp_tensor case_input(const in_spec *s, uint64_t *seed)
{
    pp_tensor t = case_tensor(s->dtype, s->rank, s->dims);
    for (int64_t i = 0; i < pp_tensor_numel(&t); i++) {
        const float u = case_frand(seed);
        double v = u;
        switch (s->fill) {
        case FILL_RAND: break;
        case FILL_POS: v = fabsf(u) + 0.5f; break;
        case FILL_INT: v = (double)(s->lo + (int64_t)((u + 1.f) * 0.5f * (float)(s->hi - s->lo + 1))); break;
        case FILL_BOOL: v = u > 0.f; break;
        case FILL_CONST: v = s->values[i]; break;
        }
        case_store(t.dtype, t.data, i, v);
    }
    return t;
}

static int case_is_float(pp_dtype t) { return t == PP_DTYPE_F32 || t == PP_DTYPE_BF16 || t == PP_DTYPE_F16; }
static int case_has_grad(const in_spec *s) { return case_is_float(s->dtype) && s->fill != FILL_CONST; }

/* max over elements of |a - b| / (1 + |b|); a NaN where the other has none gives NaN, NaN
 * against NaN counts as equal */
static double case_diff(const pp_tensor *a, const void *b_data)
{
    double m = 0;
    for (int64_t i = 0; i < pp_tensor_numel(a); i++) {
        const double x = case_load(a->dtype, b_data, i), y = case_load(a->dtype, a->data, i);
        if (x != x && y != y) continue;
        const double d = fabs(x - y) / (1.0 + fabs(y));
        if (!(d <= m)) m = d;
    }
    return m;
}

/* Dropout on the cpu: the kept share is 1 - ratio (within 5 sigma) and kept values are x / (1 - ratio)
 * (within tol, at least 1e-6: y's rounding). */
static int case_dropout_stats(const pp_tensor *x, const pp_tensor *y, const pp_tensor *mask, double ratio, float tol)
{
    const int64_t n = pp_tensor_numel(x);
    int64_t kept = 0, bad = 0;
    tol = tol > 1e-6f ? tol : 1e-6f;
    for (int64_t i = 0; i < n; i++) {
        const float xv = (float)case_load(x->dtype, x->data, i), yv = (float)case_load(y->dtype, y->data, i);
        const int k = ((const uint8_t *)mask->data)[i] != 0;
        kept += k;
        bad += k ? fabsf(yv - xv / (float)(1.0 - ratio)) > tol * (1.f + fabsf(yv)) : yv != 0.f;
    }
    const double share = (double)kept / (double)n, sigma = sqrt(ratio * (1 - ratio) / (double)n);
    printf("    Dropout ratio %.2f: kept %.4f of %lld (expected %.4f +- %.4f), %lld values not x/(1-ratio) or 0\n",
           ratio, share, (long long)n, 1 - ratio, sigma, (long long)bad);
    return fabs(share - (1 - ratio)) <= 5 * sigma && !bad;
}

/* One device's copy of a case's tensors and the kernel calls on it. */
typedef struct case_side {
    pp_device *dev;
    const pp_kernel *k;
    pp_tensor in[CASE_MAX_IN], out[CASE_MAX_OUT], gin[CASE_MAX_IN], gout[CASE_MAX_OUT];
    void *aux;
} case_side;

static pp_tensor case_on(pp_device *d, const pp_tensor *h)
{
    pp_tensor t = *h;
    pp_error err = {0};
    if (!h->data) return t;
    t.data = NULL;
    if (pp_device_alloc(d, pp_tensor_nbytes(h) + 8, &t.data, &err) != PP_OK ||
        pp_device_copy_from_host(d, t.data, h->data, pp_tensor_nbytes(h), &err) != PP_OK) {
        printf("device upload failed: %s\n", err.msg);
        t.data = NULL;
    }
    return t;
}

/* The kernel call of case k on side s (aux not yet set). */
static pp_kernel_ctx case_ctx(const op_case *k, case_side *s, const void *const *host_in)
{
    const pp_op op = case_op(k);
    pp_kernel_ctx c = {.node = "n", .op = op, .op_type = k->op, .opset = k->opset ? k->opset : 17, .attrs = k->attr,
                       .in = s->in, .nin = k->nin, .host_in = host_in, .out = s->out, .nout = k->nout,
                       .dev = s->dev, .training = 1, .rng = {1234, 3, 1, 7}};
    while (c.nattrs < 8 && k->attr[c.nattrs].name) c.nattrs++;
    return c;
}

/* Forward, then backward with only the saved tensors; 0 on success, else prints why. */
static int case_calls(const op_case *k, case_side *s, const void *const *host_in)
{
    pp_error err = {0};
    const pp_op_info *info = pp_op_get(case_op(k));
    pp_kernel_ctx c = case_ctx(k, s, host_in);
    const size_t aux = s->k->aux_bytes ? s->k->aux_bytes(&c) : 0;
    if (aux && pp_device_alloc(s->dev, aux, &s->aux, &err) != PP_OK) goto fail;
    c.aux = s->aux;
    if (s->k->forward(&c, &err) != PP_OK) goto fail;
    if (!s->k->backward) return 0;
    pp_tensor in[CASE_MAX_IN], out[CASE_MAX_OUT];
    for (int i = 0; i < k->nin; i++) {
        in[i] = s->in[i];
        if (!(info->saves_in >> i & 1)) in[i].data = NULL;
    }
    for (int o = 0; o < k->nout; o++) {
        out[o] = s->out[o];
        if (!(info->saves_out >> o & 1)) out[o].data = NULL;
    }
    c.in = in;
    c.out = out;
    if (s->k->backward(&c, s->gout, s->gin, &err) != PP_OK) goto fail;
    return 0;
fail:
    printf("%s on %s: %s\n", k->op, pp_device_kind_name(s->dev->kind), err.msg);
    return -1;
}

static void case_side_free(case_side *s, const op_case *k)
{
    for (int i = 0; i < k->nin; i++) {
        if (s->in[i].data) pp_device_free(s->dev, s->in[i].data);
        if (s->gin[i].data) pp_device_free(s->dev, s->gin[i].data);
    }
    for (int o = 0; o < k->nout; o++) {
        if (s->out[o].data) pp_device_free(s->dev, s->out[o].data);
        if (s->gout[o].data) pp_device_free(s->dev, s->gout[o].data);
    }
    if (s->aux) pp_device_free(s->dev, s->aux);
}

/* The host tensors of case k on the cpu side h: inputs (seeded), input gradients starting
 * non-zero (backward must add; NULL where the input has none), outputs, output gradients
 * (random; NULL for non-float outputs), and host_in for the constant inputs. */
static void case_host(const op_case *k, case_side *h, const void *host_in[CASE_MAX_IN])
{
    uint64_t seed = 42;
    for (int i = 0; i < k->nin; i++) {
        h->in[i] = case_input(&k->in[i], &seed);
        host_in[i] = k->in[i].fill == FILL_CONST ? h->in[i].data : NULL;
        in_spec gs = k->in[i];
        gs.fill = FILL_RAND;
        if (gs.grad_dtype) gs.dtype = gs.grad_dtype;
        h->gin[i] = case_input(&gs, &seed);
        if (!case_has_grad(&k->in[i])) {
            free(h->gin[i].data);
            h->gin[i].data = NULL;
        }
    }
    for (int o = 0; o < k->nout; o++) {
        const out_spec *s = &k->out[o];
        if (s->rank < 0) {   /* omitted: no data, no gradient */
            memset(&h->out[o], 0, sizeof h->out[o]);
            memset(&h->gout[o], 0, sizeof h->gout[o]);
            continue;
        }
        h->out[o] = case_tensor(s->dtype, s->rank, s->dims);
        h->gout[o] = case_tensor(s->dtype, s->rank, s->dims);
        if (!case_is_float(s->dtype)) {
            free(h->gout[o].data);
            h->gout[o].data = NULL;
        }
        for (int64_t e = 0; h->gout[o].data && e < pp_tensor_numel(&h->gout[o]); e++)
            case_store(s->dtype, h->gout[o].data, e, case_frand(&seed));
    }
}

/* Frees what case_host and case_calls made on the cpu side h. */
static void case_host_free(const op_case *k, case_side *h)
{
    for (int i = 0; i < k->nin; i++) {
        free(h->in[i].data);
        free(h->gin[i].data);
    }
    for (int o = 0; o < k->nout; o++) {
        free(h->out[o].data);
        free(h->gout[o].data);
    }
    if (h->aux) pp_device_free(h->dev, h->aux);   /* the host tensors are malloc'd, aux is the cpu device's */
}

/* Runs case k on the cpu and, when gpu is not NULL, on the cuda kernel, and compares.
 * Returns 0 when everything ran and matched. */
static inline int case_run(const op_case *k, pp_device *cpu, pp_device *gpu)
{
    const pp_op op = case_op(k);
    const pp_dtype cd = case_compute(k);
    case_side h = {.dev = cpu, .k = pp_kernel_find(op, PP_DEVICE_CPU, cd)};
    case_side g = {.dev = gpu, .k = gpu ? pp_kernel_find(op, PP_DEVICE_CUDA, cd) : NULL};
    if (!h.k || (gpu && !g.k)) {
        printf("%s: no %s kernel\n", k->op, h.k ? "cuda" : "cpu");
        return -1;
    }
    const void *host_in[CASE_MAX_IN] = {0};
    case_host(k, &h, host_in);
    if (gpu) {
        for (int i = 0; i < k->nin; i++) {
            g.in[i] = case_on(gpu, &h.in[i]);
            g.gin[i] = case_on(gpu, &h.gin[i]);
        }
        for (int o = 0; o < k->nout; o++) {
            g.out[o] = case_on(gpu, &h.out[o]);
            g.gout[o] = case_on(gpu, &h.gout[o]);
        }
    }
    int bad = case_calls(k, &h, host_in);
    if (!bad && !strcmp(k->op, "Dropout"))
        bad = !case_dropout_stats(&h.in[0], &h.out[0], &h.out[1], case_load(h.in[1].dtype, h.in[1].data, 0), k->tol);
    double fwd = 0, bwd = 0, exact = 0;
    if (!bad && gpu) {
        bad = case_calls(k, &g, host_in);
        pp_error err = {0};
        for (int t = 0; !bad && t < k->nout + k->nin; t++) {
            const pp_tensor *ht = t < k->nout ? &h.out[t] : &h.gin[t - k->nout];
            const pp_tensor *gt = t < k->nout ? &g.out[t] : &g.gin[t - k->nout];
            if (!ht->data) continue;
            const size_t nb = pp_tensor_nbytes(ht);
            void *back = malloc(nb + 8);
            if (pp_device_copy_to_host(gpu, back, gt->data, nb, &err) != PP_OK) {
                printf("%s: download failed: %s\n", k->op, err.msg);
                bad = 1;
            }
            const double d = case_diff(ht, back);
            if (ht->dtype != PP_DTYPE_F32 && (cd == PP_DTYPE_F32 || !case_is_float(ht->dtype)))
                exact = d > exact || d != d ? d : exact;
            else if (t < k->nout) fwd = d > fwd || d != d ? d : fwd;
            else bwd = d > bwd || d != d ? d : bwd;
            free(back);
        }
        printf("%-9s %-24s opset %2d: forward max rel diff %.2e, backward %.2e, non-float outputs %.0f (tol %.0e)\n",
               pp_dtype_name(cd), k->op, k->opset ? k->opset : 17, fwd, bwd, exact, (double)k->tol);
        bad = bad || !(fwd <= k->tol) || !(bwd <= k->tol) || exact != 0;
    }
    case_host_free(k, &h);
    if (gpu) case_side_free(&g, k);
    return bad ? -1 : 0;
}

#endif
