/* Private to scheduler/: the execution engine shared by the validator, the simulator
 * and the lowering pass, and the generators' entry points. */
#ifndef PP_SCHED_INTERNAL_H
#define PP_SCHED_INTERNAL_H

#include <onnxpipe/schedule_lib.h>
#include <onnxpipe/driver_lib.h>

/* How the engine runs a schedule.
 *   RUN_COMPUTE_ONLY  no SEND/RECV in the schedule: a stage waits directly for its
 *                     neighbour's compute (free, instant communication).
 *   RUN_RENDEZVOUS    a SEND waits until its RECV is posted (the validator's worst case).
 *   RUN_ASYNC         a SEND is issued and the rank goes on (the simulator). */
typedef enum { RUN_COMPUTE_ONLY, RUN_RENDEZVOUS, RUN_ASYNC } run_mode;

/* Token types: things that happen once per (stage, microbatch) and that actions wait
 * for. The token array is [num_stages][microbatches][TOK_COUNT], so the events of one
 * (stage, microbatch) share a cache line or two. */
enum {
    TOK_FWD,        /* FORWARD done */
    TOK_BIN,        /* input gradient done (BACKWARD or BACKWARD_INPUT) */
    TOK_WGT,        /* weight gradient done (BACKWARD or BACKWARD_WEIGHT) */
    TOK_ACT_MSG,    /* activation for stage s arrived (SEND_ACT of s-1 issued) */
    TOK_GRAD_MSG,   /* output gradient for stage s arrived (SEND_GRAD of s+1 issued) */
    TOK_ACT_POST,   /* RECV_ACT of stage s posted */
    TOK_GRAD_POST,  /* RECV_GRAD of stage s posted */
    TOK_ACT_IN,     /* RECV_ACT of stage s complete */
    TOK_GRAD_IN,    /* RECV_GRAD of stage s complete */
    TOK_COUNT
};

typedef struct engine {
    const pp_schedule *s;
    run_mode mode;
    const pp_costs *costs;  /* NULL: every action takes no time */
    int want_path;          /* record producers for the critical path */

    int *offset;            /* [pp + 1] global action index of rank r's first action */
    uint8_t *seen;          /* [S * m * TOK_COUNT] 1 once a token is produced */
    double *tok;            /* same shape: time it was produced (NULL under RUN_RENDEZVOUS) */
    int *tok_src;           /* same shape: global index of the producing action */
    double *start, *end;    /* [actions] (NULL under RUN_RENDEZVOUS) */
    int *pred;              /* [actions] action whose end fixed this one's start, -1 none
                               (only with want_path) */
    int *pc;                /* [pp] next action per rank */
    long *blocked;          /* [pp] token a rank waits for, -1 none */
    int nblocked;           /* ranks waiting */
    double *clock;          /* [pp] time the rank's compute stream is free */
    int *clock_src;         /* [pp] the action that made the stream busy until clock, -1 */
    int *stack, nstack;     /* ranks to run */
    int *wdone;             /* [S] microbatches whose weight gradient is done */
    int *reduced;           /* [S] REDUCE_GRADS seen */
    double *reduce_end;     /* [pp] latest all-reduce end per rank */
    int *reduce_src;        /* [pp] the REDUCE_GRADS whose all-reduce ends last */
    int *nreduced;          /* [pp] REDUCE_GRADS done per rank */
    int *nstages_on;        /* [pp] stages held by each rank */
    int fail_rank;          /* rank of the offending or first stuck action, -1 none */
} engine;

/* Allocates the engine's arrays for s. costs may be NULL. */
pp_status engine_init(engine *e, const pp_schedule *s, run_mode mode, const pp_costs *costs,
                      int want_path, pp_error *err);
void engine_free(engine *e);
/* Checks every action's fields, then runs all ranks to completion. Errors:
 * PP_ERR_INVALID_ARG for a malformed or misordered action, PP_ERR_DEADLOCK when ranks
 * wait on each other forever (e->pc then holds every rank's stuck action). On any
 * error e->pc holds where each rank stopped. */
pp_status engine_run(engine *e, pp_error *err);
/* Index of a token in e->tok / e->tok_src. */
long engine_tok_id(const engine *e, int type, int stage, int mb);
/* A phrase naming what token t stands for ("FORWARD of stage 2 microbatch 3 (rank 2)"). */
void engine_describe_token(const engine *e, long t, char *buf, size_t len);
/* Checks that every (stage, microbatch) was forwarded and backwarded (after a run). */
pp_status engine_check_complete(const engine *e, pp_error *err);

const pp_stage_cost *stage_cost(const pp_costs *c, int stage);

/* Grows rank's action array to hold at least n actions (count unchanged). */
pp_status schedule_reserve(pp_schedule *s, int rank, int n, pp_error *err);

/* Compute-only generators (scheduler/generate.c); arguments already checked. */
pp_status generate_order(pp_schedule *s, pp_schedule_kind kind, pp_error *err);
/* The rank a generated schedule of `kind` places virtual stage `stage` on. */
int generate_stage_rank(pp_schedule_kind kind, int pp, int stage);

static inline int action_is_compute(int kind)
{
    return kind == PP_ACT_FORWARD || kind == PP_ACT_BACKWARD ||
           kind == PP_ACT_BACKWARD_INPUT || kind == PP_ACT_BACKWARD_WEIGHT;
}
static inline int action_is_comm(int kind)
{
    return kind >= PP_ACT_SEND_ACT && kind <= PP_ACT_RECV_GRAD;
}

#endif
