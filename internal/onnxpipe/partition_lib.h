/* The partitioner's record and machinery (internal tier: the library, the CLI, tests and
 * bench): the per-node cost model, the exact linear partition the partitioner and the planner
 * solve, the memory model, the partition's full layout (stages, boundaries, cut tensors,
 * tied parameters, inputs, the order searched) and its views. A trainer sees the partition
 * through the opaque handle and accessors of partition.h. */
#ifndef ONNXPIPE_PARTITION_LIB_H
#define ONNXPIPE_PARTITION_LIB_H

#include <onnxpipe/core.h>
#include <onnxpipe/graph.h>
#include <onnxpipe/partition.h>

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- cost model ------------------------------------------------------------ */

/* What one node costs. Shapes come from the finalized graph, so "per microbatch"
 * means with the batch dim bound to the microbatch size (pp_graph_options.batch). */
typedef struct pp_node_cost {
    int64_t params;         /* trainable elements of the initializers this node is the FIRST
                               (in topological order) to read; a tied initializer counts once */
    int64_t param_bytes;    /* their bytes */
    int64_t flops;          /* forward FLOPs per microbatch; -1 when a shape is unknown */
    int64_t act_bytes;      /* bytes of the node's outputs per microbatch; -1 when unknown */
} pp_node_cost;

/* Costs of every node of a finalized graph: costs[nnodes], caller-allocated.
 * MatMul/Gemm 2*M*N*K, Conv 2*out_elems*(Cin/group)*kernel, pooling out*kernel,
 * elementwise out_elems, softmax / layernorm / loss a few per element, data movement
 * (Reshape, Transpose, Gather, Concat, ...) zero. Local. Thread-safe. */
pp_status pp_partition_costs(const pp_graph *g, pp_node_cost *costs, pp_error *err);

/* ---- the exact linear partition (graph-free) -------------------------------- */

/* What pp_linear_partition / pp_linear_solve found. */
typedef struct pp_linear_result {
    int64_t bottleneck;     /* the chosen split's largest stage cost: the optimum, or within the
                               tolerance of it (pp_linear_problem.tolerance, .bound) */
    int64_t cut_sum;        /* sum of cut_cost over the chosen cuts */
    int tiebreak;           /* 1: cut_sum is the smallest among all splits within the tolerance; 0: the
                               DP would need more than PP_TIEBREAK_CELLS cells, so the split is one with
                               the optimal bottleneck and no tie-break */
    int64_t optimum;        /* the smallest possible largest stage cost */
} pp_linear_result;
#define PP_TIEBREAK_CELLS (1 << 25)

/* Items 0..n-1 split into nstages non-empty contiguous stages. Stage s = items i..j costs
 *     coef_a[s]*(a[i]+..+a[j]) + coef_b[s]*(b[i]+..+b[j])
 *   + coef_tail[s]*tail[j]      unless j = n-1 (what the stage sends on: the cut after j)
 *   + coef_head[s]*head[i-1]    unless i = 0   (what it sends back: the cut before i)
 * tail[c] and head[c] belong to the cut after item c. Among the splits whose largest
 * stage is at most optimum + floor(optimum * tolerance) (or max(bound, optimum) when bound
 * > 0), the one with the smallest sum of cut_cost[c] over its cuts. */
typedef struct pp_linear_problem {
    int n, nstages;
    const int64_t *a, *b;                   /* [n], >= 0; b may be NULL */
    const int64_t *coef_a, *coef_b;         /* [nstages], >= 0; coef_b unused when b is NULL */
    const int64_t *tail, *head;             /* [n], >= 0, or NULL */
    const int64_t *coef_tail, *coef_head;   /* [nstages], >= 0; NULL: all 1 */
    const int64_t *cut_cost;                /* [n] or NULL (no tie-break: any split within the bound) */
    double tolerance;                       /* >= 0 (0: only optimal splits) */
    int64_t bound;                          /* > 0: tie-break among splits up to max(bound, optimum) */
} pp_linear_problem;

/* Solves x exactly. Without tail and head, with non-increasing coefficients: bisection on
 * the bottleneck with a greedy check over prefix sums (O(n + P log n log W)), then a DP over
 * each stage's window of end positions with a sliding-window minimum (O(sum of windows) <=
 * O(n*P)). Otherwise: bisection with a DP check (a stage ending at j is reachable iff some
 * reachable end k < j of the stage before has k's start term >= j's end term - B: a
 * running maximum, O(n*P) per step), and the tie-break DP with a Fenwick tree over the
 * start terms (O(n*P log n)). ends[nstages]: the last item of each stage. Local; pure.
 * Thread-safe. */
pp_status pp_linear_solve(const pp_linear_problem *x, int *ends, pp_linear_result *res, pp_error *err);

/* pp_linear_solve without tail, head and tolerance; coefficients must be non-increasing in
 * s. Without cut_cost every optimal split ties and the backward-greedy one is taken at once
 * (no DP: O(n + P log n log W), what the planner uses to scan thousands of splits). Local;
 * pure. Thread-safe. */
pp_status pp_linear_partition(const int64_t *a, const int64_t *b, int n, int nstages,
                              const int64_t *coef_a, const int64_t *coef_b,
                              const int64_t *cut_cost, int *ends, pp_linear_result *res,
                              pp_error *err);

/* ---- names ------------------------------------------------------------------ */

/* Local; a static string. Thread-safe. */
const char *pp_balance_name(pp_balance b);          /* "params", ... */
/* Parses "params|flops|memory|uniform|time"; returns 0 on an unknown name. Local. Thread-safe. */
int pp_balance_parse(const char *s, pp_balance *out);

/* Local; a static string / parses "search|graph" (0 on an unknown name). Thread-safe. */
const char *pp_order_mode_name(pp_order_mode m);
int pp_order_mode_parse(const char *s, pp_order_mode *out);

/* ---- the memory model ------------------------------------------------------- */

/* What the stage planner allocates, attributed to nodes, with the whole graph planned as
 * one stage (the library makes it with the options a job trains with: device, optimizer,
 * precision, recompute): the memory balance's model. A stage's bytes are
 * (2 + optimizer_states) x its param_bytes + param_copy x its parameter elements + its
 * const_bytes + slots x (its slot_bytes + port_in of what it receives + port_out of what it
 * sends) + its arena_bytes + the largest fwd_live and bwd_live among its nodes (pp_partition_
 * stage_memory). The arrays are malloc'ed; pp_memory_profile_destroy frees them (NULL too). */
struct pp_memory_profile {
    int nnodes, nvalues;
    int64_t *param_bytes;       /* [nnodes] trainable initializers it reads, as padded in the flat
                                   buffer (fp32), at every reader (a tied weight is held per stage) */
    int64_t *param_elems;       /* [nnodes] their elements (the 16-bit copy's) */
    int64_t *const_bytes;       /* [nnodes] non-trainable initializers, at their first reader */
    int64_t *slot_bytes;        /* [nnodes] stash bytes per microbatch: its outputs the slot keeps, the
                                   gradients kept for the weight pass, its kernel's saved data */
    int64_t *arena_bytes;       /* [nnodes] what the recompute arena holds of it (recompute only) */
    int64_t *fwd_live, *bwd_live;   /* [nnodes] scratch live while it runs forward / backward */
    int64_t *work_bytes;        /* [nnodes] the most one of its kernel calls allocates for itself
                                   (pp_kernel.work_bytes: a stage adds its nodes' largest) */
    int64_t *port_in;           /* [nvalues] slot bytes of a value a stage receives (it and its gradient) */
    int64_t *port_out;          /* [nvalues] extra slot bytes of a value a stage sends (what the slot
                                   does not keep already) */
    int optimizer_states;       /* state buffers per parameter (Adam: 2) */
    int param_copy;             /* bytes per parameter element of the 16-bit copy, else 0 */
    int planned;                /* 1: from the stage planner; 0: the partitioner's estimate from the op
                                   registry (no fusion, no kernel data) */
};
/* A profile of zeros for a graph of nnodes nodes and nvalues values (for its maker to fill).
 * Local; the caller frees it with pp_memory_profile_destroy, which accepts NULL. */
pp_status pp_memory_profile_create(int nnodes, int nvalues, pp_memory_profile **out, pp_error *err);
void pp_memory_profile_destroy(pp_memory_profile *m);

/* ---- the partition's record --------------------------------------------------- */

/* A tensor produced in one stage and read in a later one. With relay semantics it
 * crosses every boundary from from_stage to to_stage-1; when to_stage > from_stage+1
 * it is a skip that passes through stages from_stage+1 .. to_stage-1. */
typedef struct pp_cut_tensor {
    int value;              /* value id in the graph */
    int from_stage;         /* stage of its producer */
    int to_stage;           /* last stage that reads it */
    int64_t bytes;          /* per microbatch; -1 when its shape is unknown */
} pp_cut_tensor;

/* A value read by several stages or entering at a stage: a tied parameter (its
 * gradient must be all-reduced between these stages) or a graph input (fed by the
 * data loader to each of these stages: labels for a loss on the last stage, masks). */
typedef struct pp_value_stages {
    int value;              /* value id in the graph */
    int *stages;            /* ascending, distinct */
    int nstages;
    int64_t bytes;          /* initializer bytes, or input bytes per microbatch (-1 unknown) */
} pp_value_stages;

typedef struct pp_stage_info {
    int first_node, last_node;  /* inclusive range of positions in pp_partition.order (the node ids
                                   themselves unless the order search moved nodes) */
    int64_t params;             /* trainable elements held: a tied initializer counts in every
                                   stage that reads it */
    int64_t param_bytes;
    int64_t own_params;         /* first-use params: what the params balance optimizes */
    int64_t flops;              /* forward FLOPs per microbatch; -1 unknown */
    int64_t act_bytes;          /* outputs of its nodes per microbatch (the stash for backward);
                                   -1 unknown */
    int64_t send_bytes;         /* bytes crossing the boundary after it per microbatch,
                                   relayed skips included (0 for the last stage); -1 unknown */
    int *inputs;                /* value ids: tensors received from earlier stages (value id
                                   order), then graph inputs read here */
    int ninputs;
    int *outputs;               /* value ids produced here and read by a later stage, then
                                   graph outputs produced here */
    int noutputs;
    int *params_held;           /* value ids of the trainable initializers read here */
    int nparams_held;
    int64_t weight;             /* its cost in balance units (what the balance equalizes) */
    double seconds;             /* time balance: its predicted time per microbatch, s; else 0 */
} pp_stage_info;

typedef struct pp_boundary {
    int *tensors;           /* indices into pp_partition.cuts of the tensors crossing it */
    int ntensors;
    int64_t bytes;          /* per microbatch; -1 unknown */
} pp_boundary;

/* Owns all arrays; borrows the graph, which must outlive it. */
struct pp_partition {
    const pp_graph *graph;
    int nstages;
    pp_balance balance;
    int manual;                 /* 1 when the cuts came from options.cuts */
    int tiebreak;               /* 1 when the cut bytes are the smallest among the splits within the
                                   tolerance (see pp_linear_result) */
    int64_t microbatches;
    pp_recompute recompute;     /* the options' (what the memory estimate models) */
    int *node_stage;            /* [nnodes] */
    pp_node_cost *costs;        /* [nnodes] */
    pp_stage_info *stages;      /* [nstages] */
    pp_boundary *boundaries;    /* [nstages-1]: boundary b lies between stage b and b+1 */
    pp_cut_tensor *cuts;        /* every tensor crossing at least one boundary, value id order */
    int ncuts;
    pp_value_stages *tied;      /* trainable initializers read by more than one stage */
    int ntied;
    pp_value_stages *inputs;    /* every graph input read by some node, with the stages reading it */
    int ninputs;
    int64_t total_weight;       /* the stages' weights summed (params: g->nparams) */
    int64_t bottleneck;         /* the largest stage weight in balance units */
    int64_t lower_bound;        /* max(largest single node, ceil(total / nstages)) */
    int64_t cut_bytes;          /* sum of boundary bytes; -1 unknown */
    int shapes_known;           /* every activation size is known */
    /* added with the order search and the tolerance */
    int *order;                 /* [nnodes] the topological order whose ranges the stages are:
                                   order[k] = node id (order[k] = k unless reordered) */
    int reordered;              /* nodes not at their place in the graph's order */
    int64_t optimum;            /* the smallest possible largest stage, over the orders searched
                                   (bottleneck <= optimum + floor(optimum x tolerance)); manual: 0 */
    int order_searched;         /* 1: the optimum is over every split of the order search's space
                                   (pp_order_mode); 0: over the graph's order (GRAPH, manual cuts, or
                                   more downsets than PP_ORDER_MAX_STATES) */
    int64_t order_states;       /* downsets the search enumerated (0: not run) */
    double tolerance;
    double gflops, link_gbps, op_overhead;  /* the time model's (defaults filled in) */
    pp_memory_profile *memory;  /* the memory model: the options' copy, or for the memory balance the
                                   partitioner's estimate; NULL: none (pp_partition_stage_memory
                                   is then the coarse figure) */
};

/* Memory a stage needs for training under 1F1B with M microbatches, by the memory model
 * (pp_memory_profile: the planner's, or the partitioner's estimate): params + grads +
 * optimizer state + the 16-bit copy + constants + the driver's 1F1B stash slots (min(P -
 * stage, M), one more after stage 0) + the recompute arena + scratch. With the planner's profile it follows the dry run
 * (pp_stage_estimate) to a few percent (tests/test_partition_memory.c says how close). */
typedef struct pp_stage_memory {
    int64_t param_bytes, grad_bytes, optimizer_bytes;
    int inflight;               /* stash slots: microbatches whose activations are held at once */
    int64_t stash_bytes;        /* inflight x slot_bytes; -1 when activations are unknown */
    int64_t recompute_bytes;    /* the recompute arena (0 without recompute; -1 unknown) */
    int64_t total_bytes;        /* the sum (without the stash when it is unknown) */
    int64_t slot_bytes;         /* one microbatch's slot: its nodes' and its ports' */
    int64_t param_copy_bytes;   /* the 16-bit parameter copy (mixed precision) */
    int64_t constant_bytes;
    int64_t scratch_bytes;      /* the largest forward plus the largest backward scratch of its nodes */
} pp_stage_memory;
/* What recompute r makes of stage s, per microbatch: the bytes its stash slot keeps (its
 * inputs and what it sends on, with selective also the outputs of MatMul/Gemm/Conv; NONE:
 * all its activations), the arena's (an upper bound: its activations; 0 for NONE), and the
 * forward FLOPs it runs again before each backward. -1 where shapes are unknown. */
typedef struct pp_recompute_estimate {
    int64_t stash_bytes, arena_bytes, flops;
} pp_recompute_estimate;
/* Local. Thread-safe. */
pp_recompute_estimate pp_partition_recompute_estimate(const pp_partition *p, int stage, pp_recompute r);
/* Local. Thread-safe. */
pp_stage_memory pp_partition_stage_memory(const pp_partition *p, int stage, int64_t microbatches);

/* ---- views ----------------------------------------------------------------- */

/* Writes DIR/stage-0.onnx .. DIR/stage-(P-1).onnx (DIR is created if missing). Local. */
pp_status pp_partition_save_stages(const pp_partition *p, const char *dir, pp_error *err);

/* A Graphviz view: nodes as boxes "name\nop" coloured by stage, cut edges bold. Local. */
pp_status pp_partition_write_dot(const pp_partition *p, const char *path, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
