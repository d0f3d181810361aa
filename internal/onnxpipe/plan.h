/* onnxpipe planner: which layout to train a model with on N devices. It enumerates
 * (pp, dp, schedule, chunks, microbatches, recompute, precision), drops the layouts whose
 * memory per device does not fit, ranks the rest by a lower bound on the step time and
 * simulates them best-first (the scheduler's event simulator with per-stage compute, send
 * and all-reduce costs) until no unsimulated layout can beat the K-th best, and checks the
 * winners' memory with the stage planner's exact estimate (pp_driver_estimate). Stage costs
 * come from a cost model: a calibration measured on this machine (pp_calibrate: each op
 * type's forward and backward timed at several microbatch sizes and precisions) or flat
 * FLOP rates. Reads shapes only, never weight values. Runs without MPI or a device.
 * Internal tier (the library, the CLI, tests and bench): `onnxpipe plan` and the trainer's
 * stage costs use it; a custom trainer does not (DESIGN.md "The public tier is chosen"). */
#ifndef ONNXPIPE_PLAN_H
#define ONNXPIPE_PLAN_H

#include <onnxpipe/core.h>
#include <onnxpipe/device.h>
#include <onnxpipe/graph.h>
#include <onnxpipe/partition.h>
#include <onnxpipe/schedule.h>
#include <onnxpipe/stage.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- calibration ------------------------------------------------------------
 * What this machine's device does with the model's ops: one stage (the whole model, or
 * for a model too large for that, its first, middle and last stage) is built on the
 * device and trained forward + backward a few times per microbatch size and precision
 * with the stage profiler on; per op type it keeps the calls, the registry's FLOPs
 * (pp_op_flops), the output bytes of its nodes and the median forward and backward
 * seconds, plus the optimizer step's seconds per parameter and a one-thread memcpy rate.
 * A node's time is then its FLOPs (or, for an op type without FLOPs, its output bytes)
 * times its type's seconds per unit, interpolated in log(microbatch) between the sizes
 * timed. Fused ops are timed under their first node's type (a MatMul with its bias Add),
 * which the same model reproduces. */
typedef struct pp_calibration pp_calibration;

typedef struct pp_calibrate_options {
    const pp_dim_binding *dims;     /* symbolic dims other than the batch (e.g. T=128) */
    int ndims;
    int64_t max_microbatch;         /* time microbatches 1, 2, 4, ... up to this (0: 8) */
    const pp_dtype *precisions;     /* PP_DTYPE_F32, BF16, F16; NULL: fp32 only */
    int nprecisions;
    pp_device_kind device;          /* where the stage runs */
    pp_optim_hparams optim;         /* the optimizer whose step is timed */
    pp_loss_spec loss;              /* as for training, when the model ends without a loss */
    int reps;                       /* timed forward + backward runs per point, after one warm-up
                                       (0: 3); the median counts */
    double max_seconds;             /* stop growing the microbatch once one run takes longer (0: 2) */
    int64_t max_stage_bytes;        /* parameters x 4 (weights, gradients, two moments) one stage may
                                       hold; a larger model is cut into stages and its first, middle
                                       and last timed (0: 2 GiB) */
    FILE *progress;                 /* a line per point, or NULL */
} pp_calibrate_options;

/* Calibrates on model (a path; its weights are loaded, as training would). Local; the
 * caller frees *out with pp_calibration_destroy. */
pp_status pp_calibrate(const char *model, const pp_calibrate_options *opt, pp_calibration **out,
                       pp_error *err);
/* Writes it to path (through a temporary file and a rename). Local. */
pp_status pp_calibration_save(const pp_calibration *c, const char *path, pp_error *err);
/* Reads a file written by pp_calibration_save; errors name the file and the field. Local;
 * the caller frees *out with pp_calibration_destroy. */
pp_status pp_calibration_load(const char *path, pp_calibration **out, pp_error *err);
void pp_calibration_destroy(pp_calibration *c);   /* accepts NULL */
/* A table per precision: op types by time at the largest microbatch, GFLOP/s per microbatch. Local. */
void pp_calibration_print(const pp_calibration *c, FILE *out);
/* The hash (pp_graph_model_hash) of the model it was measured on, and whether it holds
 * points for precision p. Local. Thread-safe. */
uint64_t pp_calibration_model_hash(const pp_calibration *c);
int pp_calibration_has_precision(const pp_calibration *c, pp_dtype p);

/* ---- the cost model ------------------------------------------------------------ */

/* How long a stage's work takes on one device. */
typedef struct pp_cost_model {
    const pp_calibration *calibration;  /* measured rates (borrowed); NULL: the flat rates below */
    double gflops;                      /* flat: fp32 GFLOP/s per device (0: 100) */
    double gflops_lowp;                 /* flat: bf16 / fp16 GFLOP/s (0: gflops) */
    double optimizer_s_per_param;       /* flat: optimizer step seconds per parameter (0: 12 FLOPs
                                           per parameter at gflops) */
} pp_cost_model;

/* Per-stage costs for the simulator of partition part, whose graph is bound to microbatch
 * samples per microbatch, trained in precision with recompute: F from its nodes (FLOPs at
 * the model's rate; ops without FLOPs cost nothing under flat rates), the backward split
 * evenly into its input and weight halves (flat: 2F), the forward run again by recompute
 * added to the input half, the stash per microbatch in flight
 * (pp_partition_recompute_estimate) and the bytes sent on (both halved for 16-bit
 * precision: activations are 16-bit, pp_stage_options.precision). send_time and allreduce
 * are left 0 (links are the caller's). costs[part->nstages]. The one place `onnxpipe
 * schedule --model`, the trainer's plan line and the planner get stage costs from. Local.
 * Thread-safe. */
pp_status pp_plan_stage_costs(const pp_partition *part, const pp_cost_model *model, int64_t microbatch,
                              pp_dtype precision, pp_recompute recompute, pp_stage_cost *costs,
                              pp_error *err);

/* ---- the search ------------------------------------------------------------------ */

/* Links between devices. Devices fill hosts of devices_per_host in rank order; a message or
 * a ring all-reduce inside a host runs at host_gbps, one that crosses hosts at network_gbps. */
typedef struct pp_plan_links {
    double host_gbps;               /* GB/s inside a host (0: the calibration's memcpy rate, or 10) */
    double network_gbps;            /* GB/s between hosts (0: 12.5, 100 Gb/s) */
    double latency_s;               /* per message, and per ring step of an all-reduce (0: 5e-6) */
    int devices_per_host;           /* 0: all devices on one host */
} pp_plan_links;

typedef struct pp_plan_options {
    int devices;                    /* N >= 1: layouts with pp x dp <= N */
    int64_t batch;                  /* the global batch: samples per optimizer step */
    double device_memory;           /* bytes per device (0: 80 GiB) */
    pp_device_kind device;          /* the kind the stages are planned for (exact memory) */
    pp_cost_model cost;
    pp_plan_links links;
    /* what to search (0 / NULL: everything) */
    const int *pp_values;           /* allowed pp (NULL: 1 .. max_pp) */
    int npp;
    int max_pp;                     /* 0: min(devices, 4096, the model's nodes) */
    const int *dp_values;           /* allowed dp (NULL: any with pp x dp <= devices) */
    int ndp;
    const int64_t *microbatch_counts;  /* allowed microbatches per replica (NULL: any divisor) */
    int nmicrobatch_counts;
    unsigned kinds;                 /* bits 1 << pp_schedule_kind (0: gpipe, 1f1b, interleaved, zb-h1, zb-v) */
    const int *chunks;              /* interleaved's chunks per rank (NULL: 2) */
    int nchunks;
    unsigned recompute;             /* bits 1 << pp_recompute (0: all three) */
    const pp_dtype *precisions;     /* NULL: fp32, bf16 and fp16 */
    int nprecisions;
    int top;                        /* K, layouts to return (0: 5) */
    pp_stage_options stage;         /* optimizer, loss, seed as training builds stages; microbatch,
                                       global batch, precision, recompute and slots are the planner's */
    double max_seconds;             /* search budget: past it the layouts simulated so far are
                                       ranked and the result says it is not proven complete (0: 60) */
} pp_plan_options;

/* One layout, as `onnxpipe train` would run it. */
typedef struct pp_plan_entry {
    int pp, dp, chunks;             /* chunks: virtual stages per rank */
    pp_schedule_kind kind;
    int64_t microbatches;           /* per replica and step */
    int64_t microbatch;             /* samples per microbatch: batch / (dp x microbatches) */
    pp_recompute recompute;
    pp_dtype precision;
    int order;                      /* pp_grid_order the host model chose (fewer bytes between hosts) */
    double step_s;                  /* simulated step */
    double bound_s;                 /* the lower bound it was ranked by before simulation */
    double samples_per_s;
    double tokens_per_s;            /* samples x tokens per sample; 0 when the model reads no tokens */
    double bubble;                  /* simulated idle fraction of the pipeline ranks */
    double compute_s;               /* the busiest rank's compute (forward, backward, recompute) */
    double allreduce_s;             /* the longest stage all-reduce (0 for dp = 1) */
    double send_s;                  /* the longest message between stages */
    double optimizer_s;             /* the busiest rank's optimizer step */
    int64_t peak_bytes;             /* the largest rank's device bytes */
    int64_t *rank_bytes;            /* [pp] device bytes per pipeline rank */
    int exact;                      /* 1: bytes from pp_driver_estimate; 0: the planner's model (the
                                       exact estimate failed: exact_error says why) */
    char exact_error[160];
} pp_plan_entry;

typedef struct pp_plan_result {
    pp_plan_entry *entries;         /* [n] fastest first */
    int n;
    int64_t tokens_per_sample;      /* T of a [batch, T] integer input; 0: none */
    int64_t layouts;                /* evaluated (pp, dp, schedule, chunks, microbatches, recompute,
                                       precision): the enumerated ones less the dominated */
    int64_t memory_pruned;          /* dropped by the memory model */
    int64_t dominated;              /* not evaluated: a layout with recompute whose same layout with
                                       less recompute fits (with a 20% margin), and is faster */
    int64_t simulated;              /* on training's own split (pp_partition_create) */
    int64_t bound_misses;           /* simulated steps below their bound: the bound is taken on the
                                       scanned split, which can differ from training's where several
                                       splits share the bottleneck (then the order is a heuristic) */
    int64_t exact_checked;          /* memory checked by the stage planner */
    int64_t exact_rejected;         /* ... and found not to fit */
    int complete;                   /* 1: every layout not simulated had a bound above the K-th best
                                       (proof when bound_misses is 0) */
    double seconds;                 /* planning time: loads, partitions, bounds, simulations, checks */
    double smallest_bytes;          /* the smallest memory per device of any layout (when none fits) */
    pp_plan_links links;            /* the links as priced, defaults filled in */
    char note[256];                 /* "" or what the cost model assumed (a precision not calibrated:
                                       priced at fp32's rates, or another calibrated one's) */
} pp_plan_result;

/* Plans the training of the model at path (loaded at microbatch 1 and 2 to read how its
 * shapes grow with the batch, and at each winner's microbatch for the exact memory check;
 * opt->stage's loss names as for training). Errors name the bad option value and its bound;
 * PP_ERR_INVALID_ARG when no layout fits (the message gives the smallest memory any needs).
 * Local; the caller frees *out with pp_plan_result_destroy. */
pp_status pp_plan_search(const char *model, const pp_graph_options *gopt, const pp_plan_options *opt,
                         pp_plan_result **out, pp_error *err);
void pp_plan_result_destroy(pp_plan_result *r);   /* accepts NULL */

#ifdef __cplusplus
}
#endif
#endif
