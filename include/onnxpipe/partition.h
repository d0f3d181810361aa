/* The partitioner as a trainer sees it (public tier): the split of a finalized graph into
 * pipeline stages (contiguous ranges of a topological order, searched over the orders) with
 * the smallest possible largest stage and, within a tolerance of it, the fewest bytes
 * crossing. The partition is an opaque handle: a trainer reads its stages through the
 * accessors below. The cost model, the exact linear solver, the memory model and the
 * partition's full record are internal (internal/onnxpipe/partition_lib.h). Runs without
 * MPI or a GPU. */
#ifndef ONNXPIPE_PARTITION_H
#define ONNXPIPE_PARTITION_H

#include <onnxpipe/core.h>
#include <onnxpipe/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_partition pp_partition;
typedef struct pp_memory_profile pp_memory_profile;   /* internal: the planner's memory model */

typedef enum {
    PP_BALANCE_PARAMS = 0,  /* trainable elements (default) */
    PP_BALANCE_FLOPS,       /* forward FLOPs per microbatch */
    PP_BALANCE_MEMORY,      /* bytes a stage allocates to train with 1F1B: the stage planner's model
                               (pp_memory_profile), the stash times the slots the driver gives stage
                               s under 1F1B, min(P - s, M) at s = 0 and min(P - s + 1, M) after (the
                               microbatches between forward and backward, and the one received
                               next); see pp_partition_stage_memory */
    PP_BALANCE_UNIFORM,     /* node count */
    PP_BALANCE_TIME,        /* predicted time per microbatch: forward and backward compute (3 x
                               forward FLOPs / gflops + op_overhead per node) plus the sends (its
                               activations on, its input gradients back) / link_gbps, in units of
                               1/(gflops x 1e9) s ("FLOP-times") */
} pp_balance;

/* Which topological orders the split may use. SEARCH: every split in which tensors only
 * flow to later stages and each node that reads no activation (only initializers, constants,
 * graph inputs) sits with its first reader (partitioner/order.c), when the model's downsets
 * number at most PP_ORDER_MAX_STATES and their bitsets 2^25 words (a graph of up to about
 * 46,000 nodes); else only the graph's order (the partition records which). The
 * graph's own order is always a candidate. GRAPH: the graph's order only (contiguous node
 * ranges, as before the search). */
typedef enum { PP_ORDER_SEARCH = 0, PP_ORDER_GRAPH } pp_order_mode;
#define PP_ORDER_MAX_STATES (1 << 17)
/* Activation recomputation: what a stage's stash slot keeps of a microbatch's forward
 * (pp_stage_options.recompute, stage/recompute.c; here for the memory estimate).
 * NONE: everything backward reads. FULL: the stage's inputs (and what must outlive forward
 * anyway: outputs sent on, graph outputs, the loss); backward first re-runs the ops that
 * make what it reads, into one arena shared by all slots. SELECTIVE: FULL plus the outputs
 * of the expensive ops (MatMul, Gemm, Conv: PP_OPF_KEEP_ON_RECOMPUTE), so only cheap ops run
 * again (Megatron's selective recompute). Losses and weights are bitwise those of NONE. */
typedef enum { PP_RECOMPUTE_NONE = 0, PP_RECOMPUTE_SELECTIVE, PP_RECOMPUTE_FULL } pp_recompute;

typedef struct pp_partition_options {
    pp_balance balance;
    int64_t microbatches;      /* M for the memory balance and estimate; 0: nstages */
    pp_recompute recompute;    /* what the memory estimate's stash keeps (the profile's, when given) */
    const char *const *cuts;   /* non-NULL: manual stage boundaries, overriding the balance: a node name
                                  (cut right after that node) or a tensor name (cut right after
                                  the node producing it); in topological order, nstages-1 of them */
    int ncuts;
    /* fields below were added with the time balance and the order search; zero keeps the
       behaviour before them except that the order is searched */
    double tolerance;          /* >= 0: among splits whose largest stage is at most the optimum x
                                  (1 + tolerance), the fewest bytes crossing (onnxpipe's commands:
                                  0.02); 0: only among optimal splits */
    pp_order_mode order;       /* PP_ORDER_SEARCH (0) or PP_ORDER_GRAPH */
    double gflops;             /* time balance: compute throughput of a stage, GFLOP/s; 0: 100 */
    double link_gbps;          /* time balance: bandwidth between neighbouring stages, GB/s (1e9
                                  bytes/s); 0: sends are free */
    double op_overhead;        /* time balance: seconds per node and microbatch on top of its
                                  FLOPs, forward and backward together; 0: none */
    const pp_memory_profile *memory;   /* memory balance and estimate: the planner's profile
                                  (borrowed, for this graph; internal/onnxpipe/partition_lib.h);
                                  NULL: the partitioner's own estimate */
    const struct pp_partition *same_split; /* non-NULL: the split of this partition of another graph
                                  with the same nodes (the model bound at another sequence
                                  length: trainer.h's buckets), its order and stage ranges taken
                                  as they are, balance and cuts unused; a graph whose node
                                  names differ is an error naming the first one */
} pp_partition_options;

/* Partitions a finalized graph into nstages stages. opt may be NULL (params balance, the
 * orders searched, no tolerance). Errors: nstages < 1 or > nnodes, an option out of range
 * (named with its bound), no trainable parameters under the params balance, unknown shapes
 * under the flops, time or memory balance, a time model whose sends leave 64 bits (a link
 * far slower than the throughput), a memory profile of another graph, unknown / unordered /
 * wrongly counted manual cuts. Local; the partition keeps g (opt and its profile are not
 * kept); the caller frees it with pp_partition_destroy, which accepts NULL. Thread-safe. */
PP_API pp_status pp_partition_create(const pp_graph *g, int nstages, const pp_partition_options *opt,
                                     pp_partition **out, pp_error *err);
PP_API void pp_partition_destroy(pp_partition *p);

/* ---- what a trainer reads of a partition ------------------------------------ */

/* The number of stages. Local. Thread-safe. */
PP_API int pp_partition_num_stages(const pp_partition *p);
/* Stage s's nodes, in the order they run (a contiguous range of the partition's topological
 * order): *nodes receives their node ids (owned by p, valid while p lives); returns their
 * number, 0 for a stage out of range. Local. Thread-safe. */
PP_API int pp_partition_stage_nodes(const pp_partition *p, int stage, const int **nodes);
/* Trainable elements first read in stage s (a tied initializer counts in the first stage
 * reading it, so the stages' counts add up to pp_graph_num_params: what the params balance
 * equalizes); -1 for a stage out of range. Local. Thread-safe. */
PP_API int64_t pp_partition_stage_params(const pp_partition *p, int stage);
/* What stage s reads from and gives to other stages, as value ids of the graph (owned by
 * p, valid while p lives). Inputs: the values read in s that an earlier stage produced
 * (value id order), then the graph inputs read in s; outputs: the values produced in s that
 * a later stage reads, then the graph outputs produced in s. A skip from stage a to stage
 * c > a + 1 also passes through the stages between (their pp_stage ports list it). Return
 * their number; 0 for a stage out of range. Local. Thread-safe. */
PP_API int pp_partition_stage_inputs(const pp_partition *p, int stage, const int **values);
PP_API int pp_partition_stage_outputs(const pp_partition *p, int stage, const int **values);

/* Stage s as a graph of its own: inputs = stage inputs, outputs = stage outputs
 * (initializer data borrowed from the partition's graph, which must outlive it). Local; the
 * caller frees it with pp_graph_destroy. Thread-safe. */
PP_API pp_status pp_partition_stage_graph(const pp_partition *p, int stage, pp_graph **out, pp_error *err);
/* The human-readable preview (model summary, stage table, balance, skips, tied, inputs). Local. */
PP_API void pp_partition_print(const pp_partition *p, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
