/* Private to stage/, the bottom of its layers: what a stage is. Every tensor the stage
 * touches is a `tslot` with a fixed place: the flat parameter buffer, the constants buffer,
 * a stash slot (per in-flight microbatch), or an arena shared by all slots (scratch, and
 * with recompute the arena of one microbatch's recomputed tensors). The files of stage/
 * come in layers, each including the header of its own (docs/architecture.md, "stage/'s
 * layers"; tests/test_stage_layers.sh keeps them):
 *   build  (stage_build.h)  creating a stage, what it shares, its memory profile
 *   places (stage_places.h) where every tensor lives, the loss, precision, recompute, uses
 *   fuse   (stage_fuse.h)   the fusion passes the placing runs over the collected ops
 *   run    (stage_run.h)    forward, backward, the tensors' memory, the profile of calls
 * A layer calls only its own and those below it (build: places, fuse, run; places: fuse,
 * run); fuse and run call nothing of each other's. */
#ifndef PP_STAGE_TYPES_H
#define PP_STAGE_TYPES_H

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/stage_lib.h>
#include <onnxpipe/graph_ir.h>

typedef enum {
    LOC_NONE = 0,
    LOC_PARAM,      /* flat parameter buffer (gradients: flat gradient buffer, same offset) */
    LOC_PARAM16,    /* the 16-bit copy of the flat parameter buffer (mixed precision) */
    LOC_CONST,      /* constants buffer (non-trainable initializers) */
    LOC_SLOT,       /* the microbatch's stash slot */
    LOC_FWD,        /* forward scratch, reused between microbatches */
    LOC_BWD,        /* backward scratch */
    LOC_RECOMP,     /* recompute arena: what backward reads that the slot does not keep
                       (recompute.c), one microbatch's at a time */
} loc_kind;

typedef struct place {
    loc_kind loc;
    size_t offset;  /* bytes */
} place;

typedef struct tslot {
    int value;              /* graph value id, or -1 for a view / synthetic tensor */
    int view_of;            /* tslot whose memory (and gradient memory) this one shares, or -1 */
    int grad_of;            /* tslot whose gradient memory alone this one shares, or -1: its only
                               reader passes the gradient through unchanged (places.c) */
    pp_dtype dtype;
    int rank;
    int64_t dims[PP_MAX_RANK];
    size_t nbytes;
    place at;               /* forward value */
    int needs_grad;         /* a gradient is computed for it (float, on a path param/input -> loss) */
    place grad;             /* its gradient */
    int grad_received;      /* gradient arrives from the next stage (not zeroed) */
    int def_op, last_op;    /* forward op that defines it (-1: before the first) and last reads it */
    int first_bw, last_bw;  /* backward op order indices (0 = first run) touching its gradient */
    int param;              /* index into s->params, or -1 (also set on a parameter's 16-bit copy) */
    int master;             /* the fp32 parameter tslot this is the 16-bit copy of, or -1 */
} tslot;

typedef struct stage_op {
    int node;               /* graph node id, or -1 for the synthetic loss */
    const char *name;
    pp_op op;
    const char *op_type;    /* its ONNX name, for messages and profiles */
    const pp_attr *attrs;
    int nattrs;
    const pp_kernel *k;
    int nin, nout;
    int *in, *out;          /* tslot ids, -1 omitted */
    const void **host_in;   /* [nin] host data of constant inputs (graph initializers), else NULL */
    pp_attr folded[8];      /* the fusion passes' attributes (stage_fold_attr): perm_A / perm_B /
                               perm_Y of Transposes folded into a MatMul (fuse_transpose.c), and
                               causal_Y or causal_A; a causal Softmax's axis and causal
                               (fuse_causal.c); a fused op's own (attrs points here then) */
    place aux;
    size_t aux_bytes;
    size_t work_bytes;      /* the most its forward or backward call needs for itself (pp_kernel.work_bytes),
                               taken from the device's work memory (pp_device_work) */
    int backward;           /* runs in backward */
    int has_weight;         /* some input is a parameter that needs a gradient */
    int has_act;            /* some non-parameter input needs a gradient */
    int rerun;              /* run again before a backward (marked by recompute.c, run by run.c) */
    int64_t *grad_at;       /* [nin] where a parameter input's gradient goes when this op is not the
                               parameter's first use (uses.c): elements into grad_buf, else -1;
                               NULL: every input's gradient is at its own place */
} stage_op;

/* One op reading a parameter (uses.c); a stage's uses are by parameter, then node id. */
typedef struct stage_use {
    int param, op, node;
    int64_t offset;         /* elements into grad_buf: the parameter's own for its first use */
} stage_use;

struct pp_stage {
    const pp_graph *g;
    pp_device *dev;
    pp_stage_options opt;
    int first, end, last;   /* its nodes lie in ids [first, end); last: it computes the loss */
    signed char *side;      /* [nnodes] when a searched order made its nodes not all of [first, end):
                               -1 an earlier stage's node, 0 its own, 1 a later stage's; NULL: the range */

    tslot *t;
    int nt;
    int *t_of_value;        /* graph value id -> tslot or -1 */
    stage_op *ops;
    int nops;

    pp_stage_port *inputs, *outputs;
    int ninputs, noutputs;
    int *input_t, *output_t;    /* tslot of each port */

    pp_stage_param *params;
    int nparams;
    int64_t param_elems;
    float *param_buf, *grad_buf, *optim_buf;   /* optim_buf: the state slots, then the step's
                                                  pp_optim_step (pp_stage_optim_step) */
    float step_lr;          /* the lr pp_stage_set_step wrote (pp_stage_update checks it) */
    int optim_slots;
    stage_use *uses;
    int nuses;
    int64_t use_elems;      /* gradient elements after param_elems: the later uses' (uses.c) */
    void *param16_buf;      /* 16-bit copy of param_buf (same element offsets), or NULL */
    int param16_stale;      /* param_buf may have changed since the copy was made */
    char **names;           /* names of the ops the stage made (casts), freed with it */
    int nnames;

    void *const_buf;
    size_t const_bytes;
    void *slot_buf;
    size_t slot_bytes;      /* per slot */
    void *fwd_buf, *bwd_buf;
    size_t fwd_bytes, bwd_bytes;
    void *recomp_buf;
    size_t recomp_bytes;    /* one microbatch's recomputed tensors (0: no recompute) */
    size_t work_bytes;      /* the most device memory one kernel call needs for itself
                               (pp_kernel.work_bytes): reserved in the device's work memory
                               at creation, part of the estimate's scratch */
    int recomp_owner;       /* slot whose forward the recompute arena holds, or -1 */
    pp_stage_recompute_stats recomp_stats;

    int64_t *slot_step, *slot_mb;   /* [slots] what each slot's forward ran: backward replays
                                       the same RNG key (Dropout) */
    int *param_ready;       /* [nparams] weight-gradient ops (backward order) after which the
                               parameter's gradient is final */
    pp_stage_grad_hook hook;
    void *hook_user;
    pp_stage_progress_hook progress;
    void *progress_user;
    /* the loss (loss.c, which says the convention) */
    int loss_t;             /* tslot of the scalar loss (last stage), or -1 */
    float loss_seed;        /* dL_global / d(loss of a microbatch), equal microbatches */
    float *slot_seed;       /* [slots] the seed each slot's backward uses */
    const float *seeds;     /* or, when set (pp_stage_seed_from), [microbatch] in device memory */
    float loss_scale;       /* the seed is multiplied by it (fp16 loss scaling); 1 otherwise */
    const char *loss_labels;    /* graph input (or --labels name) of the labels; NULL: unknown */
    int64_t loss_ignore;    /* INT64_MIN: none */
    const float *loss_weights;  /* class weights (the graph's initializer), or NULL */
    int64_t loss_classes;
    int loss_counts;        /* the loss is a (weighted) mean skipping loss_ignore labels */
    pp_attr loss_attrs[2];  /* of the loss built over --logits / --labels */
    struct stage_profile *prof;     /* profile.c; NULL: profiling off */
};

/* Where node lies: -1 in an earlier stage, 0 in this one, 1 in a later one. */
static inline int stage_side(const pp_stage *s, int node)
{
    if (s->side) return s->side[node];
    return node < s->first ? -1 : node >= s->end ? 1 : 0;
}
/* The tensor whose memory t uses: t itself, or the base it is a view of. */
static inline int stage_base(const pp_stage *s, int t) { return s->t[t].view_of >= 0 ? s->t[t].view_of : t; }
/* A tensor holding a parameter's values: the fp32 parameter itself or its 16-bit copy. */
static inline int stage_is_param(const pp_stage *s, int t)
{
    const tslot *x = &s->t[t];
    return x->master >= 0 || (x->value >= 0 && s->g->values[x->value].is_param);
}

#endif
