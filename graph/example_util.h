/* Private to graph/example_*.c: a builder context (graph, error, weight RNG) and
 * helpers that add named nodes, seeded parameters and constants in one call each. */
#ifndef PP_EXAMPLE_UTIL_H
#define PP_EXAMPLE_UTIL_H

#include <onnxpipe/graph_ir.h>

typedef struct ex_builder {
    pp_graph *g;
    pp_error *err;
    uint64_t rng;       /* splitmix64 state */
    int node;           /* id of the node added last (for attributes) */
    int oom;            /* a name could not be allocated: every later add fails */
} ex_builder;

/* A graph-owned name made with printf; NULL when out of memory, which sets b->oom so
 * that the next ex_* call that would use the name fails with PP_ERR_NOMEM. */
const char *ex_name(ex_builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A NULL-terminated list of value names: EX_LIST("x", "w"). */
#define EX_LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Adds node `name` (op_type in ai.onnx); b->node is its id. Inputs and outputs are
 * value names, NULL-terminated lists. */
pp_status ex_node(ex_builder *b, const char *op, const char *name,
                  const char *const *ins, const char *const *outs);

/* Trainable float initializers of the given shape: N(0, std²), U(-bound, bound),
 * or every element `value`. */
pp_status ex_param_normal(ex_builder *b, const char *name, int rank, const int64_t *dims, double std);
pp_status ex_param_uniform(ex_builder *b, const char *name, int rank, const int64_t *dims, double bound);
pp_status ex_param_fill(ex_builder *b, const char *name, int rank, const int64_t *dims, float value);

/* An int64 initializer of n elements (shape [n]): reshape targets, split sizes, indices. */
pp_status ex_const_i64(ex_builder *b, const char *name, int n, const int64_t *values);
/* A Constant node named `name` whose float output `name` has the given shape and data
 * (rank 0 for a scalar). Kept a node so that it is never taken for a parameter. */
pp_status ex_const_f32(ex_builder *b, const char *name, int rank, const int64_t *dims, const float *data);

/* Graph inputs/outputs with a leading batch dim: batch > 0 fixes it, 0 names it "batch".
 * dims are the dims after the batch dim. */
pp_status ex_input(ex_builder *b, const char *name, pp_dtype dt, int64_t batch, int rank, const int64_t *dims);
pp_status ex_output(ex_builder *b, const char *name, pp_dtype dt, int64_t batch, int rank, const int64_t *dims);

/* Mean SoftmaxCrossEntropyLoss of logits [N, C] against labels [N] -> scalar `loss`. */
pp_status ex_loss(ex_builder *b, const char *logits, const char *labels);

/* Creates the graph behind b, then build(b, cfg), then finalizes (folding off);
 * on failure destroys the graph and prefixes err with the model name. */
pp_status ex_run(const char *model, int64_t opset, uint64_t seed,
                 pp_status (*build)(ex_builder *b, const void *cfg), const void *cfg,
                 pp_graph **out, pp_error *err);

#endif
