/* Pipeline schedules as a trainer uses them (public tier): the kinds (gpipe, 1f1b,
 * interleaved, zb-h1, zb-v), the schedule of a kind for pp ranks and m microbatches as an
 * opaque handle, the action list each rank walks in order (what the driver runs, and what a
 * custom trainer runs on its own stages: examples/custom_trainer.c), the validator that
 * proves a schedule deadlock-free, and the simulator that times a step from per-stage costs
 * (its bubble). Hand-built and CSV schedules, the lowering pass and the renderers are
 * internal (internal/onnxpipe/schedule_lib.h). */
#ifndef ONNXPIPE_SCHEDULE_H
#define ONNXPIPE_SCHEDULE_H

#include <onnxpipe/core.h>

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PP_SCHED_GPIPE = 0,   /* all forwards, then all backwards; m activations in flight */
    PP_SCHED_1F1B,        /* PipeDream-flush: warm-up p-1-r forwards on rank r, then one
                             forward one backward, then cool-down */
    PP_SCHED_INTERLEAVED, /* Megatron interleaved 1F1B, v chunks per rank; needs
                             microbatches to be a multiple of pp */
    PP_SCHED_ZB_H1,       /* zero-bubble H1: 1F1B order with backward split into
                             BACKWARD_INPUT + BACKWARD_WEIGHT, weight passes deferred
                             into the cool-down bubbles; same activation stash as 1F1B */
    PP_SCHED_ZB_V,        /* zero-bubble V (ZB-V): two chunks per rank placed in a V, backward
                             split into BACKWARD_INPUT + BACKWARD_WEIGHT; the order of PyTorch's
                             ScheduleZBVZeroBubble. Needs chunks == 2 */
    PP_SCHED_CUSTOM,      /* loaded from a file or built by hand */
    PP_SCHED_KIND_COUNT
} pp_schedule_kind;

/* Local; a static string. Thread-safe. */
PP_API const char *pp_schedule_kind_name(pp_schedule_kind kind);  /* "gpipe", "1f1b", ... */
/* Accepts the names above; the error lists the valid ones. Local. Thread-safe. */
PP_API pp_status pp_schedule_kind_parse(const char *name, pp_schedule_kind *out, pp_error *err);
/* The chunks (virtual stages per rank) a kind takes when the user names none: 2 for
 * interleaved and zb-v, else 1. Local. Thread-safe. */
PP_API int pp_schedule_default_chunks(pp_schedule_kind kind);

/* What one virtual stage costs per microbatch, in seconds, and what it stashes and sends
 * (the simulator's and the planner's input). */
typedef struct pp_stage_cost {
    double forward;          /* s */
    double backward_input;   /* s; a full BACKWARD costs backward_input + backward_weight */
    double backward_weight;  /* s */
    double act_bytes;        /* bytes stashed per in-flight microbatch */
    double send_bytes;       /* bytes sent to the next stage per microbatch (the
                                gradient sent back has the same size) */
    double send_time;        /* s per message across the boundary after this stage, on top
                                of send_latency + send_bytes / bandwidth (a link of its own:
                                the planner gives each boundary its link's time here) */
    double allreduce;        /* s of this stage's data-parallel all-reduce, on top of the
                                schedule-wide one (each stage's gradients are its own) */
} pp_stage_cost;

/* ---------------------------------------------------------------------------
 * The IR (a contract for the driver that runs it).
 *
 * Virtual stage s (0 .. num_stages-1) is a contiguous slice of the model; data flows
 * s -> s+1 forward and s+1 -> s backward. Rank r holds the stages with
 * stage_rank[s] == r. The generators place stage s on rank s % pp, Megatron's
 * "looped" placement (rank r holds stages r, r+pp, r+2pp, ...), except zb-v, whose
 * 2·pp stages go down and back up the ranks in a V (rank r holds stages r and
 * 2·pp-1-r; rank pp-1 holds the two middle stages, and the first and last stage share
 * rank 0).
 *
 * Every rank walks its own action array in order. Field meanings per kind:
 *   FORWARD          run stage `stage` forward on `microbatch` (its input is the model
 *                    input when stage == 0, else the activation received or computed
 *                    locally by stage-1); stash what backward needs.        peer = -1
 *   BACKWARD         full backward of (stage, microbatch): input gradient and weight
 *                    gradient (accumulated); frees the stash.                peer = -1
 *   BACKWARD_INPUT   zero-bubble split, part 1: gradient w.r.t. the stage input only
 *                    (what the previous stage waits for).                    peer = -1
 *   BACKWARD_WEIGHT  zero-bubble split, part 2: weight gradient of (stage, microbatch);
 *                    always after its BACKWARD_INPUT.                        peer = -1
 *   SEND_ACT         send the output activation of (stage, microbatch) to stage+1,
 *                    which lives on rank `peer`.
 *   RECV_ACT         receive the input activation of (stage, microbatch) from
 *                    stage-1 on rank `peer`.
 *   SEND_GRAD        send the input gradient of (stage, microbatch) to stage-1 on
 *                    rank `peer`.
 *   RECV_GRAD        receive the output gradient of (stage, microbatch) from stage+1
 *                    on rank `peer`.
 *   REDUCE_GRADS     by here the data-parallel all-reduce of stage `stage`'s gradients
 *                    is under way (microbatch = -1, peer = -1); placed after the stage's
 *                    last backward and the sends that follow it. The driver starts the
 *                    all-reduce earlier, bucket by bucket, from the gradient hook inside
 *                    that last backward as each bucket's gradients become final
 *                    (driver/driver.c: bucket_hook); this action starts any bucket the
 *                    hook left (none after a hooked backward) and nothing waits here.
 *                    DESIGN.md's name; text form "REDUCE_GRADS" (the CSV reader also
 *                    takes PyTorch's "REDUCE_GRAD").
 *   OPTIMIZER_STEP   the end of the rank's step (stage = -1, microbatch = -1, peer = -1),
 *                    its last action: wait for its all-reduce buckets, sum tied
 *                    gradients, the loss and the global gradient norm over the job, clip,
 *                    then the optimizer step of all its stages (driver/driver_step.c:
 *                    driver_optimizer_step). DESIGN.md's name, also its text form.
 * A SEND and its RECV name the same microbatch; their stages differ by one (SEND_ACT
 * of stage s matches RECV_ACT of stage s+1, SEND_GRAD of s matches RECV_GRAD of s-1).
 * Stages on the same rank exchange data without SEND/RECV.
 *
 * Deadlock freedom is proven for the worst case, where a send blocks until the
 * matching receive is posted and a receive blocks until data arrives (rendezvous):
 * a driver may use blocking or non-blocking point-to-point calls. */
typedef enum {
    PP_ACT_FORWARD = 0,
    PP_ACT_BACKWARD,
    PP_ACT_BACKWARD_INPUT,
    PP_ACT_BACKWARD_WEIGHT,
    PP_ACT_SEND_ACT,
    PP_ACT_RECV_ACT,
    PP_ACT_SEND_GRAD,
    PP_ACT_RECV_GRAD,
    PP_ACT_REDUCE_GRADS,
    PP_ACT_OPTIMIZER_STEP,
    PP_ACT_KIND_COUNT
} pp_action_kind;

/* Fixed size (16 bytes), plain data; kind holds a pp_action_kind. */
typedef struct pp_action {
    int32_t kind;
    int32_t stage;       /* virtual stage index, -1 for OPTIMIZER_STEP */
    int32_t microbatch;  /* 0 .. microbatches-1, -1 for REDUCE_GRADS / OPTIMIZER_STEP */
    int32_t peer;        /* rank on the other side of a SEND/RECV, else -1 */
} pp_action;

typedef struct pp_schedule pp_schedule;

/* Generates, lowers and validates the schedule of `kind` for pp ranks, `microbatches`
 * microbatches and `chunks` virtual stages per rank (1, except interleaved: 2..64, and
 * zb-v: 2).
 * Invalid combinations fail with PP_ERR_INVALID_ARG and a message saying what holds
 * (e.g. interleaved needs microbatches % pp == 0). Local; the caller frees it with
 * pp_schedule_destroy. Thread-safe. */
PP_API pp_status pp_schedule_create(pp_schedule_kind kind, int pp, int microbatches, int chunks,
                                    pp_schedule **out, pp_error *err);
/* Frees the schedule; accepts NULL. Local. */
PP_API void pp_schedule_destroy(pp_schedule *s);
/* Simulates all ranks together with rendezvous message matching and checks: no
 * deadlock; stage -> rank consistency and correct peers; every (stage, microbatch)
 * forwarded exactly once and backwarded exactly once (BACKWARD, or BACKWARD_INPUT then
 * BACKWARD_WEIGHT); forward before backward; every send matched by exactly one
 * receive; REDUCE_GRADS once per stage after its backwards; OPTIMIZER_STEP last.
 * Compute-only schedules are checked for order and completeness (no communication).
 * On failure, when report is not NULL, prints the per-rank grid with the stuck or
 * offending actions marked. O(actions + stages * microbatches). Local. Thread-safe. */
PP_API pp_status pp_schedule_validate(const pp_schedule *s, FILE *report, pp_error *err);

/* The virtual stages (pp x chunks) and the rank holding stage s (-1 for a stage out of
 * range). Local. Thread-safe. */
PP_API int pp_schedule_num_stages(const pp_schedule *s);
PP_API int pp_schedule_stage_rank(const pp_schedule *s, int stage);
/* The actions of one rank; *n receives their number. NULL for a bad rank. Local; owned by s, valid
 * until s changes. Thread-safe. */
PP_API const pp_action *pp_schedule_rank_actions(const pp_schedule *s, int rank, int *n);

/* ---------------------------------------------------------------------------
 * Simulation. Costs are per microbatch per virtual stage, in seconds (pp_stage_cost). */
typedef struct pp_costs {
    pp_stage_cost uniform;       /* used for every stage when `stage` is NULL */
    const pp_stage_cost *stage;  /* [num_stages] or NULL */
    int num_stages;              /* length of `stage` */
    double send_latency;         /* s per message */
    double bandwidth;            /* bytes/s between neighbours; 0 = infinite */
    double allreduce;            /* s per REDUCE_GRADS (data-parallel all-reduce), plus the
                                    stage's own pp_stage_cost.allreduce */
    double optimizer;            /* s per OPTIMIZER_STEP */
    const double *action;        /* NULL, or s of each FORWARD, BACKWARD, BACKWARD_INPUT and
                                    BACKWARD_WEIGHT action in place of its stage's cost, by the
                                    action's global index (rank r's i-th: the counts of ranks
                                    before r, plus i; other entries unread); a negative entry
                                    keeps the stage's cost: a replay of measured actions */
} pp_costs;

typedef struct pp_sim_result pp_sim_result;

/* Times one step of s under costs (a zeroed pp_costs with only .uniform set is the common
 * case). Each rank runs its actions in order on one compute stream; a SEND is non-blocking
 * (its message arrives send_latency + send_time + send_bytes / bandwidth later), a RECV's
 * data is waited for by the compute that uses it, REDUCE_GRADS runs beside compute and
 * OPTIMIZER_STEP waits for it. Local; the caller frees the result with
 * pp_sim_result_destroy (which accepts NULL). Thread-safe. */
PP_API pp_status pp_schedule_simulate(const pp_schedule *s, const pp_costs *costs,
                                      pp_sim_result **out, pp_error *err);
PP_API void pp_sim_result_destroy(pp_sim_result *r);  /* Local; accepts NULL */

/* The simulated step's makespan (s, end of the last action) and its bubble (the idle
 * fraction over all ranks: 1 - sum(busy) / (pp x makespan)). Local. Thread-safe. */
PP_API double pp_sim_result_makespan(const pp_sim_result *r);
PP_API double pp_sim_result_bubble(const pp_sim_result *r);

#ifdef __cplusplus
}
#endif
#endif
