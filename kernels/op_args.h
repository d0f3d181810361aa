/* Private to kernels/: the ONNX attributes and argument checks of ops whose layout both
 * backends compute the same way, parsed once here (kernels/op_args.c, plain C that the
 * cuda files call too), so that cpu/ and cuda/ keep only compute and cannot diverge. */
#ifndef PP_KERNELS_OP_ARGS_H
#define PP_KERNELS_OP_ARGS_H

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/kernels.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A tensor seen as [outer, n, inner]: outer * inner rows of n elements at stride inner. */
typedef struct pp_rows {
    int64_t outer, n, inner;
} pp_rows;

/* "node 'x' (Op): <message>" with status st. */
pp_status pp_args_fail(const pp_kernel_ctx *c, pp_status st, pp_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* axis in [-rank, rank) made non-negative, else an error naming the node and the range. */
pp_status pp_args_axis(const pp_kernel_ctx *c, int64_t axis, int rank, int *out, pp_error *err);

/* The attribute `axis` (default dflt; INT64_MIN: the attribute is required, as Concat's)
 * made non-negative for an input of rank. */
pp_status pp_args_axis_attr(const pp_kernel_ctx *c, int64_t dflt, int rank, int *axis, pp_error *err);
/* Transpose's perm for an input of rank (default: the dims reversed), checked to be a
 * permutation of 0..rank-1. */
pp_status pp_args_perm(const pp_kernel_ctx *c, int rank, int64_t *perm, pp_error *err);
/* Gather: the axis (default 0) of data, and indices of int64 or int32. */
pp_status pp_args_gather(const pp_kernel_ctx *c, const pp_tensor *data, const pp_tensor *indices, int *axis,
                         pp_error *err);

/* Integer input k (int64 or int32, at most max values) into vals: from the tensor itself
 * on a device whose memory the host reads, else from its host copy (c->host_in[k], which
 * the stage fills for constant inputs). *n = -1 when the input is omitted. */
/* *h = where the host reads constant input k (present): the tensor itself on a host-memory
 * device, else its host copy (pp_kernel_ctx.host_in); an error naming the input (`what`)
 * when there is none. */
pp_status pp_args_host_input(const pp_kernel_ctx *c, int k, const char *what, const void **h, pp_error *err);
pp_status pp_args_ints(const pp_kernel_ctx *c, int k, const char *what, int64_t *vals, int *n, int max,
                       pp_error *err);

/* Slice of x into y: per dim of x the first index, the step and the count picked (from
 * starts/ends/axes/steps, the attributes below opset 10, clamped as ONNX says), with
 * y's dims checked against the counts. */
pp_status pp_args_slice(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, int64_t *start,
                        int64_t *step, int64_t *count, pp_error *err);

/* A reduction over x (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd): reduced[d]
 * for each dim (axes from the attribute for ReduceSum below opset 13 and the others below
 * 18, else from input 1; none: every dim);
 * *copy when no axes are given and noop_with_empty_axes makes the op a copy. */
pp_status pp_args_reduce(const pp_kernel_ctx *c, const pp_tensor *x, int *reduced, int *copy, pp_error *err);

/* Softmax / LogSoftmax over x: opset >= 13 one axis (default -1); below, the input
 * coerced to 2-D at `axis` (default 1), so inner = 1. *causal: Softmax's attribute causal
 * (PP_KCAP_SOFTMAX_CAUSAL, set by stage/fuse_causal.c), checked: over the last axis of x, whose
 * last two dims are equal (T x T blocks), so that row o is row o % n of its block. */
pp_status pp_args_softmax(const pp_kernel_ctx *c, const pp_tensor *x, pp_rows *r, int *causal, pp_error *err);

/* LayerNormalization: X (c->in[0]) as [m, d] with d = prod(dims[axis:]); epsilon;
 * stash_type 1 only. Checks that Scale / B hold d values and the Mean / InvStdDev
 * outputs m (each where given). */
typedef struct pp_ln_args {
    int64_t m, d;           /* rows, row length */
    float eps;
} pp_ln_args;
pp_status pp_args_layernorm(const pp_kernel_ctx *c, pp_ln_args *a, pp_error *err);
/* aux of LayerNormalization: mean and rstd per row, 2 m floats (0 when the layout is
 * bad: forward reports why). */
size_t pp_args_layernorm_aux(const pp_kernel_ctx *c);

#ifdef __cplusplus
}
#endif
#endif
