/* Private to partitioner/: helpers shared by the cost model, the partition and
 * its views. */
#ifndef PP_PARTITION_INTERNAL_H
#define PP_PARTITION_INTERNAL_H

#include <onnxpipe/core_util.h>
#include <onnxpipe/partition_lib.h>

#include <stdlib.h>

/* Bytes of a value (numel x dtype size), -1 when its shape or dtype is unknown. */
int64_t value_bytes(const pp_graph *g, int v);
/* Bytes with unknown dims (batch, sequence) taken as 1 and an unknown dtype as 4 bytes:
 * the size the cut tie-break compares when shapes are not bound. */
int64_t value_bytes_per_sample(const pp_graph *g, int v);

/* acc + x, -1 when either is unknown. Stage sums stay within the model's totals, which
 * pp_partition_costs bounds; the bytes summed over boundaries count a skip once per
 * boundary it crosses, so that sum is held at INT64_MAX rather than overflowing. */
static inline int64_t add_known(int64_t acc, int64_t x)
{
    int64_t r;
    return acc < 0 || x < 0 ? -1 : __builtin_add_overflow(acc, x, &r) ? INT64_MAX : r;
}

/* An activation read after the node producing it: the only values a cut can cross.
 * Collected once in one pass over the values, which are large structs. */
typedef struct act_edge {
    int value;
    int producer, last;     /* node ids: producer < last = its last consumer */
    int64_t bytes;          /* per microbatch, -1 unknown */
} act_edge;

/* solve.c: the largest stage cost the tie-break may accept: optimum + floor(optimum x
 * tolerance), or bound when larger. */
int64_t linear_tie_limit(int64_t optimum, double tolerance, int64_t bound);
/* solve_dp.c: pp_linear_solve for any coefficients and with tail / head terms (x checked). */
pp_status linear_solve_dp(const pp_linear_problem *x, int *ends, pp_linear_result *res, pp_error *err);

/* ---- order.c: the exact split over every topological order ------------------------
 * A split of some topological order of a DAG into contiguous stages is a chain of
 * downsets (sets closed under predecessors) {} = D0 < D1 < ... < DP = all, stage s being
 * D(s+1) - Ds; every split where tensors only flow to later stages is one. The search
 * enumerates the downsets (breadth first, one item added per edge) and solves the linear
 * problem's costs over them: a stage's costs are sums over its items plus its cut terms, so
 * "stage s can end at E within B" is "some proper sub-downset that stage s-1 can end at has
 * start term >= E's end term - B", a maximum propagated along the edges. */
typedef struct order_value {
    int producer;               /* item */
    const int *consumers;       /* distinct items, not the producer */
    int nconsumers;
    int64_t tail, head, cut;    /* >= 0: charged when a cut separates the producer from a consumer */
} order_value;

typedef struct order_problem {
    int n, nstages;
    const int *pred_start, *preds;  /* item i's predecessors: preds[pred_start[i] .. pred_start[i+1]) */
    const order_value *values;
    int nvalues;
    const int64_t *a, *b;           /* [n] >= 0; b may be NULL */
    const int64_t *coef_a, *coef_b, *coef_tail, *coef_head;    /* [nstages] >= 0 (NULL: 0, a's: 1) */
    double tolerance;
    int64_t bound;                  /* as pp_linear_problem's */
    int64_t upper;                  /* > 0: a bottleneck some split may reach, to start the bisection at */
    int64_t max_states;             /* give up (found = 0) past this many downsets */
    int64_t tiebreak_work;          /* sub-downset visits the tie-break may make (0: 2^27); past it, an
                                       optimal chain without the tie-break */
    int64_t fixed;                  /* a cost every stage has on top (the tolerance is of optimum + it) */
    int64_t other_optimum;          /* > 0: another search's optimum; the tolerance counts from the
                                       smaller of the two (never below this one's optimum) */
} order_problem;

typedef struct order_result {
    int found;                  /* 0: more downsets than max_states; only states is set */
    int64_t optimum;            /* the smallest largest stage over every chain */
    int64_t bottleneck, cut_sum;/* of the chain chosen within the tolerance */
    int tiebreak;               /* 0: the tie-break's work passed its budget; the chain is an optimal one */
    int64_t states, edges;
} order_result;

/* stage[n]: the stage of every item (when found). Local; pure. */
pp_status order_search(const order_problem *x, int *stage, order_result *res, pp_error *err);

/* Fills node_stage, stages, boundaries, cuts, tied and inputs of p from p->order and the
 * stage ends (ends[s] = last position of stage s), p->costs and the activation edges. */
pp_status partition_analyze(pp_partition *p, const int *ends, const act_edge *edges, int nedges,
                            pp_error *err);

/* ---- balance.c: the balance as the solvers see it ------------------------------ */
typedef struct balance_model {
    int64_t *a, *b;             /* [nnodes]; b NULL unless memory */
    int64_t *ca, *cb, *ct, *ch; /* [nstages]: coefficients of a, b, tail, head */
    int64_t *vtail, *vhead;     /* [nvalues]: charged to the stage a value leaves / enters; NULL: none */
    int64_t fixed;              /* added to every stage (memory: the model's largest scratch) */
} balance_model;
/* From p's balance, costs, time options and memory model (p->memory set). */
pp_status balance_make(const pp_partition *p, balance_model *m, pp_error *err);
void balance_free(balance_model *m);
/* The bytes of value v the cut tie-break counts (unknown dims as 1). */
int64_t balance_cut_bytes(const pp_graph *g, int v);
/* Stage costs in balance units of the split (p->order, ends) and its largest. */
int64_t balance_stage_costs(const pp_partition *p, const balance_model *m, const int *ends, int64_t *costs);

/* ---- place.c: where the cuts go ------------------------------------------------ */
/* Sets p->order (the graph's, or the search's), ends[nstages] (positions), p->optimum,
 * p->bottleneck, p->tiebreak, p->order_searched, p->order_states, p->reordered. */
pp_status place_cuts(pp_partition *p, const balance_model *m, pp_order_mode mode, int *ends, pp_error *err);

/* ---- memory.c: the memory model ------------------------------------------------ */
/* Stash slots of stage s under 1F1B with M microbatches, as the driver gives them:
 * min(P - s, M) at s = 0, min(P - s + 1, M) after it. */
int partition_inflight(int nstages, int stage, int64_t microbatches);
/* The partitioner's own profile from the op registry (no fusion, no kernel data), for
 * recompute r. */
pp_status memory_profile_estimate(const pp_graph *g, const pp_node_cost *costs, pp_recompute r,
                                  pp_memory_profile **out, pp_error *err);
/* A copy of m (checked against g). */
pp_status memory_profile_copy(const pp_graph *g, const pp_memory_profile *m, pp_memory_profile **out,
                              pp_error *err);
pp_memory_profile *memory_profile_alloc(int nnodes, int nvalues);

/* partitioner/report_params.c: the preview's "what is trained" (graph/params.c's decisions) */
void partition_print_params(const pp_graph *g, FILE *out);
void partition_json_params(const pp_graph *g, pp_json *j);

#endif
