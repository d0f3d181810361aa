/* The layout planner beyond the public tier (internal tier: the library, the CLI, tests
 * and bench): a calibration's table for a reader, the model it was measured on and the
 * precisions it holds (what the CLI checks before it reuses one). */
#ifndef ONNXPIPE_PLAN_LIB_H
#define ONNXPIPE_PLAN_LIB_H

#include <onnxpipe/plan.h>

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A table per precision: op types by time at the largest microbatch, GFLOP/s per microbatch. Local. */
void pp_calibration_print(const pp_calibration *c, FILE *out);
/* The hash (pp_graph_model_hash) of the model it was measured on, and whether it holds
 * points for precision p. Local. Thread-safe. */
uint64_t pp_calibration_model_hash(const pp_calibration *c);
int pp_calibration_has_precision(const pp_calibration *c, pp_dtype p);

#ifdef __cplusplus
}
#endif
#endif
