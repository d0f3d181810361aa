/* Pipeline schedules as a trainer names them (public tier): the kinds (gpipe, 1f1b,
 * interleaved, zb-h1, zb-v), their names and default chunks, and the per-stage costs the
 * planner and the trainer's stage costs are given in. The schedule IR, its generators,
 * validator, simulator and renderers are internal (internal/onnxpipe/schedule_lib.h). */
#ifndef ONNXPIPE_SCHEDULE_H
#define ONNXPIPE_SCHEDULE_H

#include <onnxpipe/core.h>

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

#ifdef __cplusplus
}
#endif
#endif
