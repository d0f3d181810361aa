/* The op registry (internal tier): one pp_op_info per supported ONNX op, holding
 * every fact about the op that is not compute (graph/ops.c): its name and opsets, which
 * inputs carry gradients, its shape rule and constant folder, its cost rule (the one
 * FLOP model), what its backward reads, and what fusion and planning may do with it.
 * Kernels are found by (op, device, dtype) over this enum (pp_kernel_find,
 * backend/kernels_backend.h). The ops and their facts are one list, op_list.h. */
#ifndef ONNXPIPE_OP_INFO_H
#define ONNXPIPE_OP_INFO_H

#include <onnxpipe/backend/op.h>
#include <onnxpipe/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How an op's forward FLOPs are counted from its shapes (pp_op_flops). */
typedef enum pp_flop_rule {
    PP_FLOPS_ELEMENTWISE,   /* flops_per x output elements */
    PP_FLOPS_NONE,          /* data movement, indexing, selection: no arithmetic */
    PP_FLOPS_MATMUL,        /* 2 x output elements x the contraction dim */
    PP_FLOPS_GEMM,          /* the same with transA, + output elements for a bias */
    PP_FLOPS_CONV,          /* 2 x output elements x Cin/group x kernel, + bias */
    PP_FLOPS_POOL,          /* output elements x kernel */
    PP_FLOPS_REDUCE,        /* flops_per x input elements */
    PP_FLOPS_ATTENTION,     /* Q K^T and P V: 2 x (Q + Y elements) x keys, + flops_per x scores */
    PP_FLOPS_EINSUM,        /* flops_per x the product of every label's size (a term each) */
} pp_flop_rule;

/* What planning and fusion may do with an op (pp_op_info.flags). */
enum {
    PP_OPF_VIEW = 1u << 0,      /* only renames the shape of input 0 (same bytes, same order):
                                   a stage may make its output a view of its input */
    PP_OPF_PASS_GRAD = 1u << 1, /* the gradient of input 0 is the output's gradient as is */
    PP_OPF_GRAPH_ONLY = 1u << 2,/* never runs: the graph turns it into an initializer */
    PP_OPF_FOLD_LARGE = 1u << 3,/* a constant result may be folded up to 64 MiB (masks) */
    PP_OPF_KEEP_ON_RECOMPUTE = 1u << 4, /* expensive to run again: selective recompute keeps its
                                           outputs in the stash (stage/recompute.c) */
    PP_OPF_FOLD_ONLY = 1u << 5, /* no kernel: supported only where load folds it (its inputs are
                                   constants, or only their shapes are read); elsewhere an error */
};

/* How an op computes under mixed precision (pp_op_info.prec; stage/precision.c), like
 * torch.autocast's op lists. Every op other than the LOWP ones computes in fp32: a 16-bit
 * input is widened exactly and the result rounded to the output's storage type. */
typedef enum pp_prec {
    PP_PREC_FOLLOW = 0, /* output stored in its activation inputs' type: 16-bit when they are
                           (fp32 when one is fp32); Softmax, LayerNorm and other bounded results */
    PP_PREC_LOWP,       /* matrix products: 16-bit operands (inputs 0, 1), fp32 accumulation,
                           16-bit output */
    PP_PREC_FP32,       /* range or precision needs fp32 storage: sums, powers, square roots,
                           the loss */
} pp_prec;

/* graph/'s shape-inference state, private to it (graph/infer.h). */
typedef struct pp_infer_ctx pp_infer_ctx;
struct pp_node;

typedef struct pp_op_info {
    const char *name;           /* ONNX op type */
    const char *domain;         /* "" is ai.onnx */
    int64_t since;              /* the first opset of its domain with this op in the form onnxpipe reads */
    unsigned nondiff;           /* bit i: input i carries no gradient (shape, axes, indices, mask) */
    unsigned saves_in;          /* bit i: backward reads forward input i */
    unsigned saves_out;         /* bit k: backward reads forward output k */
    unsigned saves_for_other;   /* of saves_in: bit i: input i is read only for the gradients of
                                   the other inputs (a factor of a product), so it is kept only
                                   when one of them needs a gradient; else the kernel's backward
                                   gets it as NULL */
    unsigned flags;             /* PP_OPF_* */
    pp_flop_rule flop_rule;
    int flops_per;              /* FLOPs per element for ELEMENTWISE and REDUCE */
    pp_prec prec;               /* its class under --precision bf16 / fp16 */
    /* Shape rule: the dtypes and shapes of the node's outputs (graph/infer*.c). */
    pp_status (*shape)(pp_infer_ctx *c, const struct pp_node *n, pp_error *err);
    /* Constant folder: the outputs' data from constant inputs; NULL: never folded. */
    pp_status (*fold)(pp_infer_ctx *c, const struct pp_node *n, pp_const_tensor *out, int *done,
                      pp_error *err);
} pp_op_info;

/* The registry entry of op (op in [0, PP_OP_COUNT)), or NULL: static, never freed. Local; thread-safe. */
const pp_op_info *pp_op_get(pp_op op);
/* The op of an ONNX (domain, op type); domain NULL or "" is ai.onnx. PP_OP_UNKNOWN when
 * onnxpipe does not support it. Local; thread-safe. */
pp_op pp_op_lookup(const char *domain, const char *op_type);
/* 1 if input `index` of op carries a gradient (not a shape, index, mask or axes input). Local; thread-safe. */
int pp_op_input_differentiable(pp_op op, int index);

/* The inputs pp_op_flops reads at most (the rest never change the count). */
#define PP_OP_MAX_INPUTS 3

/* Forward FLOPs of one call: the registry's cost rule over the shapes of the inputs
 * (in[k] NULL for an omitted input; at most PP_OP_MAX_INPUTS are read) and of output 0. -1 when a shape it needs is
 * unknown; *over is set when the count leaves int64. The partitioner, the stage
 * profiler and the benchmarks all count with this. Local; thread-safe. */
int64_t pp_op_flops(pp_op op, const pp_attr *attrs, int nattrs, const pp_shape *const *in, int nin,
                           const pp_shape *out, int *over);

#ifdef __cplusplus
}
#endif
#endif
