/* Private to kernels/: the attributes and inputs of the indexing, padding, tiling, cumulative
 * and extra reduction ops, parsed once (kernels/op_args_index.c) for the cpu and cuda kernels,
 * so that both backends see the same layout and the same errors. */
#ifndef PP_KERNELS_OP_ARGS_INDEX_H
#define PP_KERNELS_OP_ARGS_INDEX_H

#include <onnxpipe/index_ops.h>
#include "op_args.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CumSum over x seen as rows [outer, n, inner] along the axis (input 1); exclusive, reverse. */
pp_status pp_args_cumsum(const pp_kernel_ctx *c, const pp_tensor *x, pp_rows *r, int *exclusive, int *reverse,
                         pp_error *err);
/* Trilu over x's last two dims [rows, cols] (rank >= 2); k from the optional input 1. */
pp_status pp_args_trilu(const pp_kernel_ctx *c, const pp_tensor *x, int64_t *rows, int64_t *cols, int64_t *k,
                        int *upper, pp_error *err);
/* Tile: repeats (input 1) checked against x and y. */
pp_status pp_args_tile(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, pp_error *err);
/* Pad of x into y: the pad before every dim (pads from input 1, or the attribute below
 * opset 11; axes from input 3 from opset 18), the mode and the constant (input 2). */
pp_status pp_args_pad(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, int64_t *begin, int *mode,
                      float *value, pp_error *err);
/* GatherElements / ScatterElements: the axis, indices of int64 or int32 with data's rank. */
pp_status pp_args_elements(const pp_kernel_ctx *c, const pp_tensor *data, const pp_tensor *idx, int *axis,
                           pp_error *err);
/* GatherND / ScatterND: the plan of data with indices [..., q] (batch_dims for GatherND). */
pp_status pp_args_nd(const pp_kernel_ctx *c, const pp_tensor *data, const pp_tensor *idx, pp_ix_nd *p,
                     pp_error *err);
/* ScatterND / ScatterElements: reduction "none" (0) or "add" (1); others are unsupported. */
pp_status pp_args_scatter_add(const pp_kernel_ctx *c, int *add, pp_error *err);
/* ReduceMax / ReduceMin / ReduceProd: the plan over x (axes as pp_args_reduce) and its kind. */
pp_status pp_args_red_more(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, pp_ix_red *p, int *kind,
                           pp_error *err);
/* ArgMax over rows [outer, n, inner] along axis; select_last_index. */
pp_status pp_args_argmax(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, pp_rows *r, int *last,
                         pp_error *err);
/* TopK over rows [outer, n, inner] along axis: k (input 1, checked against n and the outputs)
 * and largest. */
pp_status pp_args_topk(const pp_kernel_ctx *c, const pp_tensor *x, pp_rows *r, int64_t *k, int *largest,
                       pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
