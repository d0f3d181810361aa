/* The schedule driver's API (internal tier: the library, the CLI, tests and bench; a
 * trainer gets the driver from pp_trainer_driver and reads its stages through driver.h):
 * runs one rank's actions of a training step on its stage(s) through a communicator:
 * receives into stash slots, computes, sends asynchronously, all-reduces gradients across
 * data-parallel replicas and tied-weight groups, clips by the global norm summed across
 * stages, and steps the optimizer; its memory estimate, the forward-only pass, the trace,
 * the loss scaler and sequence buckets. */
#ifndef ONNXPIPE_DRIVER_LIB_H
#define ONNXPIPE_DRIVER_LIB_H

#include <onnxpipe/comm_lib.h>
#include <onnxpipe/core.h>
#include <onnxpipe/driver.h>
#include <onnxpipe/partition_lib.h>
#include <onnxpipe/schedule_lib.h>
#include <onnxpipe/stage_lib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fills the data inputs (graph inputs: token ids, labels) of `stage` for microbatch
 * `microbatch` of `step` into the stage's slot buffers. */
typedef pp_status (*pp_feed_fn)(void *user, pp_stage *stage, int slot, int64_t step, int64_t microbatch,
                                pp_error *err);

typedef struct pp_driver_config {
    const pp_schedule *schedule;    /* lowered and validated; its pp = grid->pp */
    const pp_partition *partition;  /* schedule->num_stages stages */
    pp_grid *grid;                  /* its communicators carry device buffers (MPI on the cpu, NCCL on GPUs) */
    pp_comm *control;               /* host-memory collectives (loss, flags, norms): the MPI world;
                                       NULL: grid->world */
    pp_device *dev;
    pp_stage_options stage_options; /* slots is set per stage by the driver */
    pp_feed_fn feed;
    void *feed_user;
    float clip_norm;                /* 0: off */
    int64_t bucket_bytes;           /* data-parallel all-reduce bucket size; 0: 4 MiB */
    /* The data-parallel gradient all-reduce's dtype: F32 (or 0) sums the fp32 gradients;
     * BF16 sends half the bytes: each bucket is rounded to bfloat16 into a staging copy (one
     * per stage, its gradients' size in 16 bits), summed in bfloat16 (each partial sum
     * rounded) and widened back into the fp32 gradients. */
    pp_dtype reduce_dtype;
    int skip_nonfinite;
    /* fp16 loss scaling (torch's GradScaler, Megatron's dynamic loss scaler): the loss seed is
     * multiplied by the scale; after backward the gradients are unscaled and checked in one
     * pass; a NaN/Inf on any rank (stage or replica) makes every rank skip the step, and, when
     * dynamic, halve the scale; after loss_scale_window clean steps in a row it doubles.
     * loss_scale 0: off (fp32, bf16). */
    float loss_scale;               /* the initial (dynamic) or fixed scale, e.g. 65536 */
    int loss_scale_dynamic;
    int64_t loss_scale_window;      /* 0: 2000 */
    /* Called before the optimizer step changes the parameters (NULL: nothing): an async
     * checkpoint still copying them makes the step wait here (pp_ckpt_writer_wait_staged). */
    pp_status (*before_update)(void *user, pp_error *err);
    void *before_update_user;
    /* Several shapes (sequence buckets): the model's partition at each, all split as
     * partition (pp_partition_options.same_split), partition being one of them. Each stage
     * is built at every shape; those of partition own the parameters, gradients, optimizer
     * state and activation arenas, which the others share (pp_stage_options.share; so make
     * partition the largest shape). A step runs at the shape pp_driver_set_shape chose, and
     * every message between stages then carries its shape (a header on control, whose ranks
     * must be grid->world's). NULL / 0: partition only. Borrowed, like partition. */
    const pp_partition *const *shapes;
    int nshapes;
} pp_driver_config;

/* Builds this rank's stages (the virtual stages the schedule puts on grid->stage) and
 * the tied-weight groups. Collective over cfg->grid->world. The driver keeps cfg's schedule,
 * partition, grid, control and dev, which must outlive it; the caller frees it with pp_driver_destroy. */
pp_status pp_driver_create(const pp_driver_config *cfg, pp_driver **out, pp_error *err);
/* Frees the stages and tied groups (not cfg's grid, comm or partition, which the caller
 * keeps until then). Collective over the grid's world (it frees the tied groups'
 * communicators); accepts NULL. */
void pp_driver_destroy(pp_driver *d);

typedef struct pp_step_stats {
    double loss;            /* mean over the global batch (the same on every rank) */
    double grad_norm;       /* global, before clipping */
    int skipped;            /* 1 when NaN/Inf gradients made the step skip (skip_nonfinite, or an fp16
                               overflow under loss scaling) */
    double loss_scale;      /* the scale this step's seeds carried (0: loss scaling off) */
    double compute_s;       /* this rank's time in forward / backward */
    double wait_s;          /* this rank's time waiting for messages and reductions */
} pp_step_stats;

/* Device bytes of one rank of a layout: its stages' (pp_stage_bytes summed, slots too)
 * and the driver's own communication buffers (for a gradient a side does not compute or
 * an activation it does not need: two of the largest port over its stages). */
typedef struct pp_driver_bytes {
    pp_stage_bytes stages;
    int64_t comm;
    int64_t total;          /* stages.total + comm */
} pp_driver_bytes;
/* What pp_driver_create would allocate for schedule sch over partition part on a device
 * of this kind, without one: stage s is pp_stage_estimate(part, s, kind, opt) with the
 * stash slots the driver gives it (its peak of microbatches in flight under its rank's
 * action order); stages [sch->num_stages] and ranks [sch->pp] receive it (either may be
 * NULL). opt->slots is ignored. reduce_dtype: pp_driver_config's, for a job with dp > 1
 * (a 16-bit one adds the staging copies to comm); pass F32 or 0 otherwise. Local. */
pp_status pp_driver_estimate(const pp_schedule *sch, const pp_partition *part, pp_device_kind kind,
                             const pp_stage_options *opt, pp_dtype reduce_dtype, pp_stage_bytes *stages,
                             pp_driver_bytes *ranks, pp_error *err);

/* Runs one step (step counts from 1) with learning rate lr: this rank's actions of the
 * schedule. Collective over the grid's world and control (every rank, the same step). */
pp_status pp_driver_step(pp_driver *d, int64_t step, float lr, pp_step_stats *stats, pp_error *err);

/* Sees the last stage's slot after each forward of pp_driver_forward (loss, logits). */
typedef pp_status (*pp_observe_fn)(void *user, pp_stage *stage, int slot, int64_t microbatch, pp_error *err);

/* A forward-only pass (evaluation) through this replica's pipeline: every stage runs
 * microbatches 0 .. microbatches-1 in order with training off (Dropout passes values
 * through, BatchNorm uses its running statistics), keeps nothing for backward and makes
 * no gradient. feed fills data inputs (its step argument is `key`), observe runs on the
 * last stage. Collective over the ranks of this replica (grid->pipe_comm's); between steps only. */
pp_status pp_driver_forward(pp_driver *d, int64_t key, int64_t microbatches, pp_feed_fn feed, void *feed_user,
                            pp_observe_fn observe, void *observe_user, pp_error *err);

/* Records when each action of the following steps runs (on: 1), keeping the last step
 * (Local); then pp_driver_write_trace, Collective over control, gathers every rank's record and
 * rank 0 writes a Perfetto / chrome://tracing JSON to out (one process per rank, compute
 * and communication rows, seconds from each rank's step start). */
pp_status pp_driver_record(pp_driver *d, int on, pp_error *err);
pp_status pp_driver_write_trace(pp_driver *d, pp_comm *control, FILE *out, pp_error *err);

/* What pp_driver_record keeps of the last step: every action (kind a pp_action_kind),
 * and, between them, the time blocked on messages and reductions (PP_EVENT_WAIT) and each
 * data-parallel all-reduce bucket waited for at the end of the step (PP_EVENT_BUCKET).
 * peer: the world rank messages go to or come from (-1: none); bytes: what the action
 * moves; times in seconds from the step's start (pp_driver_step_start: pp_now()). Local;
 * *out belongs to d, valid until the next recorded step or pp_driver_destroy. */
enum { PP_EVENT_WAIT = -2, PP_EVENT_BUCKET = -3 };
typedef struct pp_driver_event {
    int kind, stage, microbatch, peer;
    double bytes, t_start, t_end;
} pp_driver_event;
int pp_driver_events(const pp_driver *d, const pp_driver_event **out);   /* Local (see above) */
/* "1F3", "wait", ... into the caller's buf. Local. Thread-safe. */
void pp_driver_event_label(const pp_driver_event *e, char *buf, size_t len);
double pp_driver_step_start(const pp_driver *d);   /* Local */

/* The loss scaler's state: the scale the next step uses and the clean steps counted toward
 * its next doubling (checkpoints keep both), and setting them (a resumed run). Local; the
 * same on every rank. */
void pp_driver_loss_scale(const pp_driver *d, double *scale, int64_t *clean_steps);
void pp_driver_set_loss_scale(pp_driver *d, double scale, int64_t clean_steps);

/* The shape (index into cfg.shapes) the following steps and forward passes run at; it
 * starts as partition's. Every rank sets the same one between steps: a message from a
 * rank at another shape is an error naming both. pp_driver_stage then returns the stages
 * of that shape (the parameters are the same ones). Local. */
pp_status pp_driver_set_shape(pp_driver *d, int shape, pp_error *err);
int pp_driver_shape(const pp_driver *d);   /* Local */

/* What decides whether a step runs as one captured graph (driver/driver_graph.c): the
 * device must capture graphs and the step must need nothing of the host between its
 * launch and its end. */
typedef struct pp_graph_facts {
    unsigned device_caps;           /* PP_DEVICE_CAP_* of the driver's device */
    int ranks;                      /* in the job (the world): messages and the norm's reduction
                                       between ranks go through the host */
    int shapes;                     /* sequence buckets: a step's shape is chosen on the host */
    int recording;                  /* a trace (pp_driver_record) or a stage's profile is on: both
                                       time each call on the host */
    int loss_scaling;               /* the fp16 scaler decides on the host */
    int disabled;                   /* PP_CUDA_GRAPHS=0 */
    const char *stage_refusal;      /* a stage's op that depends on the step (pp_stage_graph_refusal) */
} pp_graph_facts;
/* NULL when a step can be one graph, else why not (a static string, or stage_refusal).
 * Local. Thread-safe. */
const char *pp_graph_refusal(const pp_graph_facts *f);
/* How this driver's steps run: "graph" (captured at its second step, replayed after),
 * "eager: <why>", or "eager: first step" before it knows. Local; owned by d. */
const char *pp_driver_step_mode(const pp_driver *d);

#ifdef __cplusplus
}
#endif
#endif
