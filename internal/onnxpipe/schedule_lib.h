/* onnxpipe scheduler: the pipeline schedule IR (what every rank does in one training
 * step, in order), its generators, the lowering pass that inserts communication, the
 * validator that proves a schedule deadlock-free, an event-driven simulator, and
 * renderers (ASCII timeline, Perfetto/chrome://tracing JSON, PyTorch-style CSV).
 * Pure data and pure functions: no MPI, no devices. Internal tier (the library, the CLI,
 * tests and bench); what a trainer uses (the kinds, the IR's actions, create, validate,
 * simulate) is schedule.h. */
#ifndef ONNXPIPE_SCHEDULE_LIB_H
#define ONNXPIPE_SCHEDULE_LIB_H

#include <onnxpipe/core.h>
#include <onnxpipe/schedule.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The schedule's layout (opaque in schedule.h): create with pp_schedule_create /
 * pp_schedule_new, free with pp_schedule_destroy. The library reads fields directly; change
 * actions only through pp_schedule_append, or in place when building deliberately broken
 * schedules in tests. */
struct pp_schedule {
    pp_schedule_kind kind;
    int pp;             /* ranks in the pipeline */
    int chunks;         /* virtual stages per rank (v); 1 except for interleaved and zb-v (2) */
    int num_stages;     /* virtual stages in the model */
    int microbatches;   /* m */
    int lowered;        /* 1 when SEND/RECV, REDUCE_GRADS and OPTIMIZER_STEP are in */
    int *stage_rank;    /* [num_stages] rank holding each virtual stage */
    int *count;         /* [pp] actions per rank */
    int *capacity;      /* [pp] allocated actions per rank */
    pp_action **actions;/* [pp][count[r]] */
};

/* Local; a static string. Thread-safe. */
const char *pp_action_kind_name(pp_action_kind kind);      /* "FORWARD", ..., "REDUCE_GRADS" */

/* The compute-only order (FORWARD/BACKWARD/... actions only, lowered = 0). Local; the caller frees
 * it with pp_schedule_destroy. Thread-safe. */
pp_status pp_schedule_generate(pp_schedule_kind kind, int pp, int microbatches, int chunks,
                               pp_schedule **out, pp_error *err);
/* Inserts SEND/RECV pairs (placed in the order of a unit-cost simulation, so that no
 * two ranks wait on each other in a cycle), then REDUCE_GRADS after each stage's last
 * backward and OPTIMIZER_STEP at the end. In place; s must be compute-only. Local. */
pp_status pp_schedule_lower(pp_schedule *s, pp_error *err);
/* Adds only REDUCE_GRADS / OPTIMIZER_STEP to a schedule that already has its
 * communication (e.g. loaded from a compute+comms CSV without them). Local. */
pp_status pp_schedule_finish(pp_schedule *s, pp_error *err);

/* An empty schedule to fill by hand: stage_rank [num_stages] is copied. Local (as are append
 * and destroy); the caller frees it with pp_schedule_destroy. */
pp_status pp_schedule_new(int pp, int num_stages, int microbatches, const int *stage_rank,
                          pp_schedule **out, pp_error *err);
pp_status pp_schedule_append(pp_schedule *s, int rank, pp_action a, pp_error *err);

/* Total actions over all ranks. Local. Thread-safe. */
long pp_schedule_action_count(const pp_schedule *s);
/* PyTorch's text form: "0F1", "1B0", "2I0", "2W0", "0SEND_F1", "1RECV_F1", "1SEND_B0",
 * "0RECV_B0"; REDUCE_GRADS prints as "3REDUCE_GRADS" (PyTorch: "3REDUCE_GRAD") and
 * OPTIMIZER_STEP, which PyTorch has not, as "OPTIMIZER_STEP".
 * Returns buf (the caller's). Local; thread-safe for distinct bufs. */
const char *pp_action_format(const pp_action *a, char *buf, size_t len);

/* ---------------------------------------------------------------------------
 * CSV in the text form of torch.distributed.pipelining (one row per rank, one action
 * per cell, empty cells are idle steps). compute_only = 1 writes FORWARD / BACKWARD
 * actions only (PyTorch's "compute_only" format), 0 writes everything but
 * OPTIMIZER_STEP, which is implied at the end of every rank ("compute_comms").
 * Local. */
pp_status pp_schedule_write_csv(const pp_schedule *s, FILE *out, int compute_only, pp_error *err);
/* Reads either format; pp = number of rows, stage -> rank from where stages appear.
 * "REDUCE_GRAD" (PyTorch's, and onnxpipe's files before it took DESIGN.md's name) reads
 * as REDUCE_GRADS.
 * A compute-only file is lowered; a compute+comms file gets REDUCE_GRADS and
 * OPTIMIZER_STEP where it has none. The result is not validated: call validate. Local; the caller
 * frees it with pp_schedule_destroy. */
pp_status pp_schedule_read_csv(FILE *in, const char *name, pp_schedule **out, pp_error *err);

/* ---------------------------------------------------------------------------
 * Simulation. Costs are per microbatch per virtual stage, in seconds (pp_stage_cost,
 * schedule.h). */
/* F = B = W = 1 s, nothing else costs anything. Local. */
void pp_costs_unit(pp_costs *c);

/* Model of execution: each rank runs its actions in order on one compute stream;
 * SEND is non-blocking (the message arrives send_latency + send_time + send_bytes /
 * bandwidth after it is issued, with the boundary's stage costs, as with MPI_Isend / NCCL
 * on a side stream); RECV posts the receive (MPI_Irecv) and the FORWARD/BACKWARD that
 * uses the data waits for it; REDUCE_GRADS starts an all-reduce that runs beside compute
 * for `allreduce` plus the stage's own `allreduce` seconds (the driver
 * starts it bucket by bucket during the stage's last backward: earlier than modelled);
 * OPTIMIZER_STEP waits for this rank's all-reduces. (The validator assumes the worst
 * case instead: blocking sends and receives.) */
struct pp_sim_result {
    int pp;
    double makespan;         /* s, end of the last action */
    double bubble;           /* idle fraction over all ranks: 1 - sum(busy) / (pp * makespan) */
    double *busy;            /* [pp] s of compute (F, B, I, W, OPTIMIZER_STEP) per rank */
    double *rank_bubble;     /* [pp] 1 - busy / makespan */
    int *peak_inflight;      /* [pp] most microbatches forwarded but not yet backwarded
                                (BACKWARD or BACKWARD_INPUT), i.e. stashed activations */
    double *peak_act_bytes;  /* [pp] bytes of those stashes at their peak */
    int *peak_w_pending;     /* [pp] most BACKWARD_WEIGHT passes waiting (zero-bubble) */
    int *offset;             /* [pp + 1] global index of rank r's first action */
    double *start, *end;     /* [offset[pp]] time of every action (global index) */
    int n_critical;
    int *critical;           /* [n_critical] global action indices, first to last: the
                                chain of dependencies that sets the makespan */
};

/* The textbook bubble fraction of s's kind for uniform stage costs and free
 * communication: gpipe and 1f1b (p-1)/(m+p-1); interleaved (p-1)/(v*m+p-1);
 * zb-h1 (p-1)(F+B-W) / (m(F+B+W) + (p-1)(F+B-W)) with the costs' F, B, W, when
 * m >= p (with fewer microbatches the steady state never forms: NaN); zb-v
 * (p-1)F / (2m(F+B+W) + (p-1)F) when F = B = W and m >= 2p-1 (the lower bound of its
 * placement, met: NaN otherwise). F, B, W are the uniform costs, or the stages' means
 * where costs has per-stage ones. NaN for custom schedules. Local. Thread-safe. */
double pp_schedule_closed_form_bubble(const pp_schedule *s, const pp_costs *costs);
/* The same for a reader: "closed form (p-1)/(m+p-1) = 27.27% for equal stages and free
 * links", or where there is none
 * "no closed form: ..." saying why. buf >= 96 bytes (the caller's), returned. Local. */
const char *pp_schedule_closed_form_text(const pp_schedule *s, const pp_costs *costs, char *buf,
                                         size_t len);

/* ---------------------------------------------------------------------------
 * Rendering. */

/* ASCII timeline: one row per rank, one column per time quantum (the shortest compute
 * action, grown so that the row fits in max_cols columns), cells "F3" / "B3" / "I3" /
 * "W3" (with the stage in front, "1F3", when chunks > 1), '=' where an action goes on,
 * '.' for idle. Local. */
void pp_schedule_print_timeline(const pp_schedule *s, const pp_sim_result *r, FILE *out,
                                int max_cols);
/* Human-readable summary: per-stage costs (when costs->stage is given), step time,
 * bubble vs the closed form, per-rank busy time, bubble and peaks, critical path. Local. */
void pp_sim_result_print_summary(const pp_schedule *s, const pp_costs *costs,
                                 const pp_sim_result *r, FILE *out);
/* Summary as one JSON object: schedule, makespan, bubble vs closed form, per-rank busy,
 * bubble and peaks, critical path. Local. */
void pp_sim_result_write_json(const pp_schedule *s, const pp_costs *costs,
                              const pp_sim_result *r, FILE *out, int pretty);

/* Perfetto / chrome://tracing JSON ("traceEvents"), streamed: one process per rank,
 * one thread (row) per activity; usable for simulated and for executed steps. */
typedef struct pp_trace pp_trace;
enum { PP_TRACE_ROW_COMPUTE = 0, PP_TRACE_ROW_COMM = 1 };
/* Writes the header to out (t keeps it; the caller closes it after pp_trace_end). Local; the caller
 * frees t with pp_trace_end. */
pp_status pp_trace_begin(FILE *out, pp_trace **t, pp_error *err);
/* Names a track ("rank 3" / "compute"); row -1 names the rank's process. Local. */
void pp_trace_name(pp_trace *t, int rank, int row, const char *name);
/* One complete event; times in seconds from the start of the step. Local. */
void pp_trace_event(pp_trace *t, int rank, int row, const char *name, double t_start,
                    double t_end);
/* Closes the JSON and frees t; reports a write error on out. Accepts NULL. Local. */
pp_status pp_trace_end(pp_trace *t, pp_error *err);
/* The simulated step as a trace: compute on row 0, SEND/RECV and all-reduce on row 1. Local. */
pp_status pp_schedule_write_trace(const pp_schedule *s, const pp_sim_result *r, FILE *out,
                                  pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
