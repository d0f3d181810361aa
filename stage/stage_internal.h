/* Private to stage/: the tensor places a stage is built into. Every tensor the stage touches
 * is a `tslot` with a fixed place: the flat parameter buffer, the constants buffer,
 * a stash slot (per in-flight microbatch), or an arena shared by all slots (scratch, and
 * with recompute the arena of one microbatch's recomputed tensors). */
#ifndef PP_STAGE_INTERNAL_H
#define PP_STAGE_INTERNAL_H

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
    pp_attr folded[8];      /* fuse.c: perm_A / perm_B / perm_Y of Transposes folded into a MatMul,
                               and causal_Y or causal_A; a causal Softmax's axis and causal; a
                               fused Attention's (fuse_attention.c; attrs points here then) */
    place aux;
    size_t aux_bytes;
    size_t work_bytes;      /* the most its forward or backward call needs for itself (pp_kernel.work_bytes),
                               taken from the device's work memory (pp_device_work) */
    int backward;           /* runs in backward */
    int has_weight;         /* some input is a parameter that needs a gradient */
    int has_act;            /* some non-parameter input needs a gradient */
    int rerun;              /* recompute runs it again before a backward (recompute.c) */
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

/* stage.c: all of g placed as its last stage on a device of this kind, nothing allocated
 * (what the memory profile reads) */
pp_status stage_place_whole(const pp_graph *g, pp_device_kind kind, const pp_stage_options *opt, pp_stage **out,
                            pp_error *err);
/* places.c: every tensor's place (stage_place_tensors); and the tslot of graph value v,
 * created on first use; a port (input 1: an input, else an output) over tslot t */
pp_status stage_place_tensors(pp_stage *s, pp_error *err);
pp_status stage_tslot_of(pp_stage *s, int v, pp_error *err, int *out);
pp_status stage_add_port(pp_stage *s, int input, int t, int is_data, pp_error *err);
/* loss.c: the last stage's loss found or built, its default seed (after stage_fuse);
 * the slot's seed written as the loss's gradient, where backward starts */
pp_status stage_place_loss(pp_stage *s, pp_error *err);
pp_status stage_seed_backward(pp_stage *s, int slot, pp_error *err);
/* precision.c: under --precision bf16/fp16, the storage dtype of every float tensor,
 * the 16-bit copies of parameters that matrix products read, the casts that round their
 * other fp32 operands, and each op's kernel for the dtypes it sees (after stage_place_loss,
 * before place_grads); and the 16-bit parameter copy brought up to date (before a forward). */
pp_status stage_place_precision(pp_stage *s, pp_error *err);
pp_status stage_refresh_params16(pp_stage *s, pp_error *err);
/* A tensor holding a parameter's values: the fp32 parameter itself or its 16-bit copy. */
static inline int stage_is_param(const pp_stage *s, int t)
{
    const tslot *x = &s->t[t];
    return x->master >= 0 || (x->value >= 0 && s->g->values[x->value].is_param);
}
/* uses.c: every parameter's uses, and the buffers of the later ones (after place_persistent);
 * where op o's input k's gradient goes instead of its own place, or NULL. */
pp_status stage_place_uses(pp_stage *s, pp_error *err);
void *stage_use_grad(pp_stage *s, int o, int k);
/* recompute.c. in_slot[t] (base tslots) comes in as KEEP_BW | KEEP_LIVE bits; for
 * tensors backward reads that the slot will not keep it becomes KEEP_ARENA (and the ops
 * that make them, transitively, are marked rerun). Then, before a backward of slot (whole
 * or either half), stage_recompute re-runs them unless the arena holds that slot already. */
enum { KEEP_BW = 1, KEEP_LIVE = 2, KEEP_ARENA = 4 };
pp_status stage_place_recompute(pp_stage *s, char *in_slot, pp_error *err);
pp_status stage_recompute(pp_stage *s, int slot, pp_backward_part part, pp_error *err);
/* run.c: runs forward op o of slot (rerun: as recompute does, no BatchNorm running-stat
 * update) with the RNG key of (step, microbatch) */
pp_status stage_run_forward_op(pp_stage *s, int o, int slot, int64_t step, int64_t microbatch, int rerun,
                               pp_error *err);
/* memplan.c: assigns offsets so that buffers whose [start, end] intervals overlap do not
 * overlap in memory; returns the arena size. offsets[i] out; sizes in bytes. */
typedef struct mem_interval {
    size_t size;
    int start, end;
    size_t offset;
} mem_interval;
size_t stage_memplan(mem_interval *iv, int n);
/* share.c: the check that s's parameter layout is that of s->opt.share; the buffer of
 * that stage s uses for `which` (one of SHARE_*) when it has one of at least need bytes,
 * else NULL; whether s allocated p itself (it frees only those). */
enum { SHARE_PARAMS, SHARE_GRADS, SHARE_OPTIM, SHARE_PARAM16, SHARE_STASH, SHARE_FWD, SHARE_BWD, SHARE_RECOMP };
pp_status stage_check_share(const pp_stage *s, pp_error *err);
void *stage_shared_buffer(const pp_stage *s, int which, size_t need);
int stage_owns(const pp_stage *s, const void *p);
/* fuse.c: replaces op patterns by one op (the exact-GELU chain by Gelu) after collect() */
pp_status stage_fuse(pp_stage *s, pp_error *err);
/* fuse.c's pattern helpers: the op (of this stage, an `op`) that alone reads tslot t, graph-wide,
 * else -1 (op_of_node: op of node first + i, or -1); the input of binary op o that is not t,
 * or -2 when t is not one; attribute a added after op m's own (stage_op.folded; 0 where
 * they do not fit, else 1); op m made an `id` op run by kernel k, its attributes dropped. */
int stage_only_reader(const pp_stage *s, const int *op_of_node, int t, pp_op op);
int stage_other_input(const stage_op *op, int t);
int stage_fold_attr(stage_op *m, pp_attr a);
void stage_op_become(stage_op *m, pp_op id, const pp_kernel *k);
/* The values of tslot t if it is a float32 constant (not trained) of shape [1, .., 1, R, C]
 * (a mask, a rotary table), else NULL. */
const float *stage_const_matrix(const pp_stage *s, int t, int64_t R, int64_t C);
/* More of fuse.c's helpers: a float scalar constant (not a trained one): 1 and its value in
 * *f, else 0; whether tslot t is a float constant [T, T] (or [1, .., 1, T, T]) whose entries
 * above the diagonal are all <= -1e4 (or -inf): a causal mask under which exp underflows to
 * exactly 0 after Softmax subtracts the row's maximum; the one live op that reads tslot t or
 * a view of it (through Casts and Dropouts that became views: HF's torchscript export writes
 * Softmax, Cast, Dropout, MatMul), if it is an `op` and neither t nor those views leave the
 * stage, else -1; the op of this stage, not gone, that makes tslot t, or -1. */
int stage_scalar_const(const pp_stage *s, int t, float *f);
int stage_causal_mask(const pp_stage *s, int t, int64_t T);
int stage_only_reader_via_views(const pp_stage *s, const char *gone, int t, pp_op op);
int stage_producer(const pp_stage *s, const int *op_of_node, const char *gone, int t);
/* fuse_attention.c: each attention chain (Q K^T, its scale, mask, Softmax, P V, and the
 * Transposes of the heads around them) becomes one Attention op where s->opt.fused_attention
 * and the device's kernel say so (pp_stage_options); returns how many, or -1 with *err set. */
int stage_fuse_attention(pp_stage *s, const int *op_of_node, char *gone, pp_error *err);
/* fuse_rope.c: if op o is the Neg of HF's rotate_half, x * cos + rotate_half(x) * sin becomes
 * one RotaryEmbedding run by kernel k (the chain's other ops gone). */
void stage_fuse_rope(pp_stage *s, const pp_kernel *k, const int *op_of_node, int o, char *gone);
/* fuse_residual_norm.c: if op o is a LayerNormalization / RMSNormalization over the last axis
 * of an Add of two activations, the Add becomes SkipLayerNormalization /
 * SkipSimplifiedLayerNormalization writing both the sum and the norm (op o gone). */
pp_status stage_fuse_residual_norm(pp_stage *s, const int *op_of_node, int o, char *gone, pp_error *err);
/* profile.c: a timer recorded before a kernel call (*start: its index), and after it the
 * call of op o (grad_in NULL: forward; rerun: a forward run again by recompute) with its
 * end timer, read at pp_stage_profile_flush; freeing s->prof (NULL after). */
typedef struct stage_profile stage_profile;
pp_status stage_profile_begin(pp_stage *s, int *start, pp_error *err);
pp_status stage_profile_add(pp_stage *s, int o, const pp_tensor *grad_in, int rerun, int start, pp_error *err);
void stage_profile_free(pp_stage *s);
/* Where node lies: -1 in an earlier stage, 0 in this one, 1 in a later one. */
static inline int stage_side(const pp_stage *s, int node)
{
    if (s->side) return s->side[node];
    return node < s->first ? -1 : node >= s->end ? 1 : 0;
}
/* The tensor whose memory t uses: t itself, or the base it is a view of. */
static inline int stage_base(const pp_stage *s, int t) { return s->t[t].view_of >= 0 ? s->t[t].view_of : t; }
/* run.c */
void *stage_ptr(pp_stage *s, int slot, place p);
void *stage_tensor_data(pp_stage *s, int slot, int t);
/* Whether backward of op reads its forward input k (the registry's saves_in, less a factor
 * kept only for the gradient of inputs that need none: pp_op_info.saves_for_other). */
int stage_op_saves_in(const pp_stage *s, const stage_op *op, int k);
/* The larger pp_kernel.work_bytes of op o's forward and backward calls (while placing:
 * the stage's device must still be there; stage_place_tensors keeps it in
 * stage_op.work_bytes). */
size_t stage_op_work_bytes(pp_stage *s, int o);
void *stage_grad_data(pp_stage *s, int slot, int t);

#endif
