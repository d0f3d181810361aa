/* Private to partitioner/: helpers shared by the cost model, the partition and
 * its views. */
#ifndef PP_PARTITION_INTERNAL_H
#define PP_PARTITION_INTERNAL_H

#include <onnxpipe/partition.h>

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

/* Fills node_stage, stages, boundaries, cuts, tied and inputs of p from the stage
 * ends (ends[s] = last node of stage s), p->costs and the activation edges. */
pp_status partition_analyze(pp_partition *p, const int *ends, const act_edge *edges, int nedges,
                            pp_error *err);

#endif
