/* The ops onnxpipe supports (backend tier: the kernel tables are indexed by it): one enum
 * value per op of op_list.h, the value a graph node carries (pp_node.op, graph_ir.h). What
 * the registry knows of each op (graph/ops.c: names, opsets, gradients, shape rules, costs)
 * is internal (internal/onnxpipe/op_info.h). */
#ifndef ONNXPIPE_OP_H
#define ONNXPIPE_OP_H

#include <onnxpipe/core.h>
#include <onnxpipe/tensor.h>
#include <onnxpipe/backend/op_list.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One value per op of the list (op_list.h, where adding an op starts). */
typedef enum pp_op {
    PP_OP_UNKNOWN = -1,
#define PP_OP_ENUM_(ID, ...) PP_OP_##ID,
    PP_OP_LIST(PP_OP_ENUM_)
#undef PP_OP_ENUM_
    PP_OP_COUNT
} pp_op;

#ifdef __cplusplus
}
#endif
#endif
