/* Private to the driver (scheduler/driver*.c): per-stage runtime state. */
#ifndef PP_DRIVER_INTERNAL_H
#define PP_DRIVER_INTERNAL_H

#include <onnxpipe/driver_lib.h>

#define MAX_PORTS 32    /* tensors crossing one stage boundary, and the shape header's tag */
#define SHAPE_PORT (MAX_PORTS - 1)
#define TAG_LIMIT (1 << 20)   /* comm.h: tags below this */

typedef struct vstage {
    int index;              /* virtual stage */
    pp_stage *s;
    int nslots;
    int *slot_of_mb;        /* [microbatches] slot or -1 */
    int *free_slots, nfree;
    int *draining, ndrain;  /* slots done with, oldest first, whose sends may still be under way */
    char *bw_done;          /* [microbatches] backward finished (full, or the weight half) */
    char *grad_sent;        /* [microbatches] input gradient sent or handed to a local stage */
    pp_request **sends;     /* [nslots][2 * MAX_PORTS] sends still reading the slot */
    pp_request **recv_act;  /* [microbatches][MAX_PORTS] */
    pp_request **recv_grad; /* [microbatches][MAX_PORTS] */
    struct bucket *buckets; /* the gradients in data-parallel all-reduce buckets */
    int nbuckets;
    void *reduce_buf;       /* the 16-bit staging copy of the gradients (reduce_dtype BF16), else NULL */
    int last_backward;      /* index in the rank's actions of the stage's last (weight) backward */
    pp_stage **shape_s;     /* [nshapes] the stage at each shape (s is the current one; the one of
                               cfg.partition owns the buffers the others share), or NULL */
    pp_request **hdr_send;  /* [microbatches x 2] shape headers on their way (driver_shape.c) */
    pp_request **hdr_recv;  /* [microbatches x 2] shape headers expected */
    int64_t *hdr_in;        /* [microbatches x 2 x 2] where they arrive */
    void *staging;          /* graph steps: [microbatches][data_bytes] the data inputs, fed before
                               the graph runs (driver_graph.c), else NULL */
    size_t data_bytes;      /* the stage's data inputs' bytes per microbatch */
} vstage;

/* A contiguous range of a stage's flat gradient buffer, all-reduced across the
 * replicas as soon as the last backward of the step has finished it. */
typedef struct bucket {
    int64_t offset, count;  /* elements */
    int ready;              /* weight-gradient ops after which it is final (pp_stage_param_ready) */
    pp_request *req;        /* its all-reduce once started */
    int started;
} bucket;

#define DEFAULT_BUCKET_BYTES (4 << 20)

/* One use of a tied parameter (pp_stage_param_uses), in the order of the sum. */
typedef struct tied_use {
    int node;               /* the reading node: the order of the sum */
    int rank;               /* in the group's comm (0 without one) */
    float *grad;            /* this rank's use: its gradient; NULL on other ranks */
    int own;                /* its stage's first use: the parameter's own gradient (in the buckets) */
} tied_use;

/* A parameter read by several ops (of one stage or several: driver_tied.c) whose uses
 * are summed in node order. */
typedef struct tied_group {
    int value;
    int64_t numel;
    pp_comm *comm;          /* the ranks of my replica holding it, when more than this one */
    int nlocal;
    int *local_stage;       /* [nlocal] indices into vs of my stages holding it */
    int nuses;
    tied_use *uses;         /* [nuses] every use on every rank of the group, by node */
} tied_group;

struct pp_driver {
    pp_driver_config cfg;
    pp_grid *grid;
    const pp_action *acts;
    int nacts;
    int num_stages, microbatches;
    int tag_wrap;           /* microbatches per tag cycle (see msg_tag) */
    int *local;             /* [num_stages] index into vs, or -1 */
    vstage *vs;
    int nvs;
    tied_group *tied;
    int ntied;
    float *tied_buf;        /* where a tied sum from another rank arrives (tied_buf_elems), or NULL */
    int64_t tied_buf_elems;
    int *norm_index;        /* [graph values] a parameter's place in the norm's sum (driver_step.c), or -1 */
    int *norm_stage;        /* [graph values] the stage counting a tied parameter, or -1 */
    int nnorm;
    double *stats;          /* device memory [ST_TERMS + nnorm]: the step's sums (below), read once at its end */
    double *stats_host;     /* [ST_TERMS + nnorm] where they are read */
    float *seeds;           /* device memory [microbatches]: each microbatch's loss seed (the last stage's) */
    double *norm_sums;      /* [2 + dp + nnorm] the step's world reduction (host): loss, bad losses, the
                               first bad microbatch + 1 of each replica (0: none), the squares */
    struct driver_graph *graph;     /* a step as one graph (driver_graph.c), or NULL: eager */
    int in_graph;           /* the step being walked is captured: inputs from staging, no host */
    void *zeros, *scratch;  /* gradients a side does not compute / does not need */
    pp_driver_event *trace;     /* [trace_cap] when recording (pp_driver_record), else NULL */
    int ntrace, trace_cap;
    double trace_t0;
    vstage *hooked;         /* the stage whose last backward is running with the bucket hook */
    pp_status hook_status;  /* the first error a bucket all-reduce met inside the hook */
    pp_error hook_err;
    double compute_s, wait_s;
    double last_progress;   /* when driver_progress last tested a message */
    float loss_scale;       /* the loss scaler (driver_step.c); 0: off */
    int64_t clean_steps;    /* steps since the last overflow or doubling */
    int nshapes, shape;     /* cfg.shapes' count (0: one shape) and the one steps run at */
    int64_t shape_hdr[2];   /* what this rank's messages carry: its shape, its rank */
};

/* d->stats, the step's sums in device memory: the loss (sum of seed x microbatch loss), the
 * microbatch losses that were NaN or Inf and the first of them, then one sum of squares per
 * trained parameter (its place: norm_index). */
enum { ST_LOSS, ST_BAD_LOSSES, ST_FIRST_BAD, ST_TERMS };

vstage *driver_local(pp_driver *d, int stage);
/* driver.c: waits for every slot still draining (its sends under way) and frees it. */
pp_status driver_drain(pp_driver *d, pp_error *err);
/* driver.c: the stages' progress hook (pp_stage_set_progress_hook; user = the driver). */
void driver_progress(void *user);
/* driver.c: the tag of a message (boundary = lower stage of the pair, grad 0/1, port);
 * waiting for requests (NULL entries skipped, time counted as wait) posted on the grid's
 * world (wait_all: the stages' tensors) or on another communicator (wait_on: the shape
 * headers travel on the control communicator, MPI, where the world is NCCL's); an isend
 * recorded in the slot's list so the slot is not reused before it has left. */
int driver_msg_tag(const pp_driver *d, int boundary, int mb, int grad, int port);
pp_status driver_wait_all(pp_driver *d, pp_request **reqs, int n, pp_error *err);
pp_status driver_wait_on(pp_driver *d, pp_comm *comm, pp_request **reqs, int n, pp_error *err);
pp_status driver_add_send(pp_driver *d, vstage *v, int slot, const void *buf, size_t bytes, int peer, int tag,
                          pp_error *err);
void driver_trace_begin(pp_driver *d);
void driver_trace_add(pp_driver *d, const pp_action *a, double t_start, double t_end);
/* A wait or bucket (PP_EVENT_*) while recording; bytes 0 when unknown. */
void driver_trace_comm(pp_driver *d, int kind, int peer, double bytes, double t_start, double t_end);
/* driver_shape.c: with several shapes, every message between stages is followed by a
 * header with the sender's shape (on the control communicator, host memory): sent with a
 * microbatch's activations (grad 0) or input gradients (grad 1), expected with them, and
 * checked before their data is waited for (a mismatch names both ranks and shapes); the
 * per-stage state (free: v->s is the owner stage again afterwards), and waiting for the
 * headers sent. No-ops with one shape. */
pp_status driver_send_shape(pp_driver *d, vstage *v, int mb, int grad, int peer, pp_error *err);
pp_status driver_recv_shape(pp_driver *d, vstage *v, int mb, int grad, int peer, pp_error *err);
pp_status driver_check_shape(pp_driver *d, vstage *v, int mb, int grad, pp_error *err);
pp_status driver_init_shapes(pp_driver *d, vstage *v, const pp_stage_options *so, pp_error *err);
pp_status driver_drain_shapes(pp_driver *d, vstage *v, pp_error *err);
void driver_free_shapes(pp_driver *d, vstage *v);
/* driver_tied.c: the groups of parameters read by several ops (collective over the world,
 * after the stages are made), their sum in node order at the end of a step, and freeing. */
pp_status driver_init_tied(pp_driver *d, pp_error *err);
pp_status driver_reduce_tied(pp_driver *d, tied_group *g, pp_error *err);
void driver_free_tied(pp_driver *d);
/* driver.c: the walk of a step's actions (the step's sums and gradients zeroed first),
 * eager or captured (d->in_graph), up to the optimizer; and putting the walk's state back
 * as it is between steps (after a capture that failed). */
pp_status driver_walk(pp_driver *d, int64_t step, pp_error *err);
void driver_reset_walk(pp_driver *d);
/* driver_step.c. After the walk: wait for the reductions, sum tied gradients, add the
 * squares into the step's sums, read them (the step's one read), reduce them over the
 * world, and driver_finish_step. */
pp_status driver_optimizer_step(pp_driver *d, int64_t step, float lr, pp_step_stats *stats, pp_error *err);
/* The part of the end of a step that stays on the device (a graph's): tied sums, the
 * squares, the optimizer's decision (pp_kernel_optim_decide) and update from d->stats. */
pp_status driver_device_tail(pp_driver *d, int64_t step, pp_error *err);
/* d->stats read into norm_sums (host layout), then reduced over control. */
pp_status driver_read_sums(pp_driver *d, pp_error *err);
/* From the reduced sums: loss, norm, clipping, the scaler, NaN/Inf (an error naming where,
 * or a skipped step), and, when update, the optimizer step (after before_update). */
pp_status driver_finish_step(pp_driver *d, int64_t step, float lr, int update, pp_step_stats *stats, pp_error *err);
/* driver_eval.c: after a step whose loss was NaN or Inf, each rank of replicas with a bad
 * microbatch runs that microbatch's forward again on its stages checking every op
 * (pp_stage_diagnose, fed and received as in the step); *found gets this rank's first
 * finding (found->msg empty: none). Collective over the replica's ranks. */
pp_status driver_diagnose_walk(pp_driver *d, int64_t step, int mb, pp_error *found, pp_error *err);
/* driver_graph.c: a step as one graph where the device and the layout allow (see there):
 * *ran 1 when it ran the step (stats filled), 0 when the caller runs it eagerly. */
pp_status driver_graph_step(pp_driver *d, int64_t step, float lr, pp_step_stats *stats, int *ran, pp_error *err);
void driver_graph_free(pp_driver *d);
/* Starts the all-reduce of every bucket of v that is final after `done` weight-gradient
 * ops (all of them when done < 0); driver_step.c. */
pp_status driver_start_buckets(pp_driver *d, vstage *v, int done, pp_error *err);

#endif
