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

/* Fills node_stage, stages, boundaries, cuts, tied and inputs of p from the stage
 * ends (ends[s] = last node of stage s) and p->costs (analyze.c). */
pp_status partition_analyze(pp_partition *p, const int *ends, pp_error *err);

#endif
