/* The supported op set and which inputs of each op carry gradients. */
#include "graph_internal.h"

#include <string.h>

typedef struct op_info {
    const char *op_type;
    unsigned nondiff;   /* bit i set: input i carries no gradient (shape, axes, indices, mask) */
} op_info;

static const op_info supported_ops[] = {
    {"MatMul", 0}, {"Gemm", 0}, {"Add", 0}, {"Sub", 0}, {"Mul", 0}, {"Div", 0},
    {"Pow", 0}, {"Sqrt", 0}, {"Neg", 0}, {"Reciprocal", 0}, {"Relu", 0}, {"LeakyRelu", 0},
    {"Sigmoid", 0}, {"Tanh", 0}, {"Erf", 0}, {"Gelu", 0}, {"Softmax", 0}, {"LogSoftmax", 0},
    {"LayerNormalization", 0},
    {"ReduceMean", 1u << 1}, {"ReduceSum", 1u << 1},           /* axes input (opset 18 / 13) */
    {"Reshape", 1u << 1}, {"Flatten", 0}, {"Transpose", 0},
    {"Squeeze", 1u << 1}, {"Unsqueeze", 1u << 1}, {"Split", 1u << 1},
    {"Slice", ~1u}, {"Concat", 0}, {"Gather", 1u << 1},
    {"Where", 1u << 0}, {"Equal", ~0u}, {"Expand", 1u << 1}, {"Cast", 0},
    {"Constant", ~0u}, {"ConstantOfShape", ~0u}, {"Shape", ~0u}, {"Range", ~0u},
    {"Identity", 0}, {"Dropout", ~1u},
    {"Conv", 0}, {"MaxPool", 0}, {"AveragePool", 0}, {"GlobalAveragePool", 0},
    {"BatchNormalization", (1u << 3) | (1u << 4)},             /* running mean / var */
    {"SoftmaxCrossEntropyLoss", ~1u},                          /* labels, weights */
};

static const op_info *find_op(const char *domain, const char *op_type)
{
    if (domain && *domain && strcmp(domain, "ai.onnx")) return NULL;
    for (size_t i = 0; i < sizeof supported_ops / sizeof supported_ops[0]; i++)
        if (!strcmp(supported_ops[i].op_type, op_type)) return &supported_ops[i];
    return NULL;
}

int pp_op_supported(const char *domain, const char *op_type)
{
    return find_op(domain, op_type) != NULL;
}

int pp_op_input_differentiable(const char *op_type, int index)
{
    const op_info *op = find_op("", op_type);
    if (!op || index < 0 || index >= 32) return 0;
    return !(op->nondiff & (1u << index));
}
