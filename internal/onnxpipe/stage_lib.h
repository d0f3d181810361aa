/* The stage executor's API beyond the public tier's (internal tier: the library, the CLI,
 * tests and bench): the recompute and precision names, a stage over a node range, buffer
 * sharing between shapes, loss scaling and shares, numeric diagnosis, optimizer state,
 * persistent buffers, gradient and progress hooks, per-use gradients, norms, memory
 * estimates and profiles, profiling. The handle and what a trainer drives are stage.h. */
#ifndef ONNXPIPE_STAGE_LIB_H
#define ONNXPIPE_STAGE_LIB_H

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/partition_lib.h>
#include <onnxpipe/stage.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The loss's seed and share (stage/loss.c says the convention). A slot's seed, dL/d(loss
 * of its microbatch), starts as microbatch / global_batch (1 / global_batch for a 'sum'
 * loss). A trainer whose labels have ignore_index entries or class weights gives each
 * slot, before its backward, the weight of its microbatch's labels and of the global
 * batch's (pp_loss_labels_weight): the seed becomes their ratio (0 when the global batch
 * weighs nothing), so the gradient is the global mean whatever the layout. Local. */
void pp_stage_set_loss_weight(pp_stage *s, int slot, double weight, double global_weight);
/* What a mean loss divides by, so a trainer can weigh microbatches (see above). */
typedef struct pp_loss_labels {
    const char *labels;          /* the graph input (or the --labels name) holding the labels */
    int64_t ignore_index;        /* labels equal to it count for nothing; INT64_MIN: none */
    const float *class_weights;  /* label y counts class_weights[y] (0 <= y < classes), or NULL: 1 */
    int64_t classes;
} pp_loss_labels;
/* PP_ERR_UNSUPPORTED when the stage has no loss, the labels are computed from something
 * other than a graph input by reshapes, the class weights are not a float initializer, or
 * the loss is not a mean (then the default seeds are the right ones). Local; out's labels and
 * class_weights are owned by s (and its graph), valid while s lives. */
pp_status pp_stage_loss_labels(const pp_stage *s, pp_loss_labels *out, pp_error *err);
/* The weight of labels y [groups x per], `groups` microbatches of `per` labels back to
 * back, counted once: a label other than ignore_index counts its class weight, or 1
 * (with class weights, one outside [0, classes) counts nothing). weight[j] (NULL: not
 * wanted) receives group j's; returns the sum over all, added label by label. Local;
 * Thread-safe (pure). */
double pp_loss_labels_weight(const pp_loss_labels *l, const int64_t *y, int64_t groups, int64_t per,
                             double *weight);

/* Activation recomputation (pp_recompute, partition.h; stage/recompute.c) names.
 * "none", "selective", "full". Local; thread-safe (static strings). */
const char *pp_recompute_name(pp_recompute r);
/* Parses one of those names; an error lists them. Local. */
pp_status pp_recompute_parse(const char *text, pp_recompute *out, pp_error *err);

/* Builds a stage holding nodes [first, end) of g in topological order; `last`
 * says whether it computes the loss. Parameters are copied from g's initializers
 * onto dev. g must outlive the stage. Local; the stage keeps g, dev and opt->loss's names (opt is
 * copied); the caller frees it with pp_stage_destroy. */
pp_status pp_stage_create_range(const pp_graph *g, int first, int end, int last, pp_device *dev,
                                const pp_stage_options *opt, pp_stage **out, pp_error *err);
/* s, of a group sharing buffers (pp_stage_options.share), runs next after prev (another of
 * the group, or s itself: nothing to do) ran: prev's BatchNorm running statistics are
 * copied into s (each stage keeps its own constants), s's 16-bit parameter copy is made
 * again before its next forward and its recompute arena is taken as holding no slot.
 * Between steps only. Local. */
pp_status pp_stage_activate(pp_stage *s, pp_stage *prev, pp_error *err);

/* The dtype the stage stores graph value `value` in (16-bit under mixed precision where
 * the graph says float32), or PP_DTYPE_UNDEFINED if the stage does not hold it. Local. */
pp_dtype pp_stage_value_dtype(const pp_stage *s, int value);

/* The slot's share of the step's loss, seed x loss (loss as pp_stage_loss read it); the
 * step's loss is the sum of the shares over microbatches and replicas. Local. */
double pp_stage_loss_share(const pp_stage *s, int slot, double loss);

/* --precision names: "fp32", "bf16", "fp16" (also "float32", "bfloat16", "float16") to
 * PP_DTYPE_F32 / BF16 / F16; 1 if name is one of them. Local; thread-safe. */
int pp_precision_parse(const char *name, pp_dtype *out);
/* "fp32", "bf16" or "fp16" (0 is fp32): a static string. Local; thread-safe. */
const char *pp_precision_name(pp_dtype precision);
/* fp16 loss scaling: the seeds of the following backwards are multiplied by scale, so
 * every gradient comes out scale times too large (the driver unscales the flat gradient
 * buffer before the optimizer). 1 turns it off. Local. */
void pp_stage_set_loss_scale(pp_stage *s, float scale);
/* After a step whose loss was NaN or Inf: runs the slot's forward (its inputs fed or
 * received again) checking every input and every op's outputs, and fails with
 * PP_ERR_NUMERIC naming step, microbatch, node and tensor of the first non-finite value
 * (PP_OK if it finds none); it stops there, its outputs are then partly computed. Local. */
pp_status pp_stage_diagnose(pp_stage *s, int slot, int64_t step, int64_t microbatch, pp_error *err);

/* What a step needs of the last stage without reading the device (the driver keeps the
 * step's sums on it, driver/driver_step.c): the slot's loss (one float of device memory,
 * NULL without a loss), the seed its backward will use (pp_stage_set_loss_weight's, before
 * the loss scale), and where the seeds come from: seeds[microbatch] in device memory,
 * copied by each backward (so a graph replays any step's weights), or NULL: the host's
 * seed of the slot, written at each backward. Local. */
float *pp_stage_loss_data(pp_stage *s, int slot);
float pp_stage_loss_seed(const pp_stage *s, int slot);
void pp_stage_seed_from(pp_stage *s, const float *seeds);

/* The optimizer step in two parts (pp_stage_step is both): set_step writes the step's
 * pp_optim_step (lr, step, clipping factor) into the stage's device memory, where the
 * update kernels read it; optim_step (the device's copy, which optim_decide may change
 * first) is that memory; update runs the kernels over every parameter (step is checked
 * only). Local. */
pp_status pp_stage_set_step(pp_stage *s, float lr, float grad_scale, int64_t step, pp_error *err);
pp_optim_step *pp_stage_optim_step(pp_stage *s);
pp_status pp_stage_update(pp_stage *s, int64_t step, pp_error *err);

/* Why the stage's step cannot be captured into a graph and replayed (an op whose result
 * depends on the step: PP_KCAP_STEP_RANDOM, Dropout's draws while training), into why;
 * 0 when it can. Local. */
int pp_stage_graph_refusal(const pp_stage *s, char *why, size_t len);

/* The optimizer state (device memory) and hyperparameters, owned by s. Local. */
float *pp_stage_optim_state(pp_stage *s);          /* slots x param_elems floats: parameter p's
                                               slots (Adam: m then v, p->numel each) lie
                                               back to back from slots x p->offset */
int pp_stage_optim_slots(const pp_stage *s);        /* pp_optim_state_slots of its optimizer */
const pp_optim_hparams *pp_stage_optim(const pp_stage *s);

/* Persistent state that is not trained but changes while training: BatchNormalization's
 * running mean and variance (initializers the training forward updates). Checkpoints
 * keep them by initializer name. None when the stage is not training. */
typedef struct pp_stage_buffer {
    const char *name;       /* initializer name */
    int value;
    void *data;             /* device memory, nbytes */
    pp_dtype dtype;
    pp_shape shape;
    size_t nbytes;
} pp_stage_buffer;
/* Local; out's name and data are owned by s, valid while s lives. */
int pp_stage_num_buffers(const pp_stage *s);
pp_status pp_stage_buffer_at(pp_stage *s, int i, pp_stage_buffer *out, pp_error *err);

/* Gradient buckets can be reduced while backward goes on: during a backward that computes
 * weight gradients the hook runs after each op that finished some, with done = how many
 * such ops have run; parameter i's gradient is final (for this microbatch) once
 * done >= pp_stage_param_ready(s, i). fn NULL removes the hook. */
typedef void (*pp_stage_grad_hook)(void *user, int done);
/* Local; s keeps fn and user (borrowed) until the hook is replaced or removed. */
void pp_stage_set_grad_hook(pp_stage *s, pp_stage_grad_hook fn, void *user);
int pp_stage_param_ready(const pp_stage *s, int i);

/* Messages can move while a stage computes: the hook runs after every op of forward,
 * backward and recompute (MPI moves data only inside its calls, so the driver tests its
 * outstanding messages there, and a peer waiting on one need not wait for this stage's
 * whole pass). fn NULL removes it. */
typedef void (*pp_stage_progress_hook)(void *user);
/* Local; s keeps fn and user (borrowed) until the hook is replaced or removed. */
void pp_stage_set_progress_hook(pp_stage *s, pp_stage_progress_hook fn, void *user);

/* A parameter read by several ops (a weight tied inside the stage) keeps one gradient per
 * reading op, a "use", through the step, so that the uses are added in one order on every
 * layout: ascending graph node id, wherever they lie (the driver adds them across stages).
 * pp_stage_param_uses writes up to cap of parameter `value`'s uses in that order and
 * returns how many it has (0: not one of this stage's parameters); the first one's gradient
 * is the parameter's own (in pp_stage_grads, with its alignment), the others' lie after
 * param_elems. pp_stage_sum_uses adds each parameter's later uses into its own gradient in
 * that order: a caller running a stage alone calls it after the step's last backward,
 * before reading gradients or pp_stage_step. */
typedef struct pp_stage_use {
    int node;               /* the reading node (graph id) */
    float *grad;            /* its gradient, the parameter's numel */
} pp_stage_use;
/* Local; grad is device memory owned by s, valid while s lives. */
int pp_stage_param_uses(pp_stage *s, int value, pp_stage_use *out, int cap);
/* sum of squared gradients of this stage's parameters, read on the host. Local. */
pp_status pp_stage_grad_sumsq(pp_stage *s, double *out, pp_error *err);
/* Checks gradients for NaN/Inf; names the parameter and step. Local. */
pp_status pp_stage_check_grads(pp_stage *s, int64_t step, pp_error *err);

/* What the stage allocates on its device, in bytes: the flat parameter, gradient and
 * optimizer-state buffers, the stash (slots x bytes per slot: the schedule's peak of
 * microbatches in flight), forward and backward scratch arenas, the recompute arena (one
 * microbatch's recomputed tensors, shared by all slots; 0 without recompute), the 16-bit
 * parameter copy (mixed precision) and constants; scratch includes the most memory one
 * kernel call allocates for itself (pp_kernel.work_bytes: the 16-bit adapter's fp32
 * shadows, the cpu Conv's columns), which a call frees before the next. The device
 * counters' categories (device.h) see them as pp_stage_bytes_category says. */
typedef struct pp_stage_bytes {
    int64_t params, grads, optimizer, stash, scratch, constants, total;
    int64_t param_copy;     /* the 16-bit copy of the parameters (mixed precision), else 0 */
    int64_t recompute;
    int64_t work;           /* of scratch: the largest kernel call's own allocation (transient: a
                               rank with several stages needs the largest, not the sum) */
    int slots;
    int64_t port_max;       /* the largest tensor crossing the stage's boundary (a driver sizes
                               its communication buffers by it); not in total */
} pp_stage_bytes;
/* b's bytes in device counter category c: params with the 16-bit copy, stash with the
 * recompute arena, other = constants; comm is the driver's (0 here). Local. */
int64_t pp_stage_bytes_category(const pp_stage_bytes *b, pp_mem_category c);
/* Local. */
void pp_stage_allocation(const pp_stage *s, pp_stage_bytes *out);
/* What pp_stage_create(part, index, a device of this kind, opt) would allocate, without a
 * device: the same placement runs (ops, fusions, tensor places, arena sizes) and nothing is
 * allocated or loaded. Errors are pp_stage_create's. Local. */
pp_status pp_stage_estimate(const pp_partition *part, int index, pp_device_kind kind,
                            const pp_stage_options *opt, pp_stage_bytes *out, pp_error *err);

/* The memory profile of g for the partitioner's memory balance (pp_memory_profile,
 * partition.h): the whole graph planned as one stage on a device of this kind with opt (its
 * optimizer, precision, recompute and loss; slots ignored), each allocation attributed to
 * the node whose value it holds (graph inputs to their first reader), and for every value
 * what a stage pays for it as an input or output port. Errors are pp_stage_estimate's (a
 * graph without a loss needs opt->loss). Local; the caller frees *out with
 * pp_memory_profile_destroy. */
pp_status pp_stage_memory_profile(const pp_graph *g, pp_device_kind kind, const pp_stage_options *opt,
                                  pp_memory_profile **out, pp_error *err);

/* Recomputation so far (counted always; zero without recompute): runs of the forward's
 * re-run ops before a backward, how many of those were for a backward weight half whose
 * arena another slot's forward or backward had taken in between (zero-bubble schedules),
 * and their wall time in seconds (pp_now). */
typedef struct pp_stage_recompute_stats {
    int64_t runs, weight_reruns;
    double seconds;
} pp_stage_recompute_stats;
/* Local. */
void pp_stage_recompute_get(const pp_stage *s, pp_stage_recompute_stats *out);

/* Profiling: device time (stage/profile.c: the device's timers around each call) and
 * FLOPs of the stage's kernel calls, summed per op type. Off by default (it then costs one pointer test per op). FLOPs count MatMul/Gemm as
 * 2·M·N·K per product (backward: one product per gradient asked for), other ops one
 * per output element. The optimizer step and gradient zeroing are not kernel calls. */
typedef struct pp_stage_op_profile {
    const char *op_type;
    int64_t forward_calls, backward_calls;
    double forward_s, backward_s;           /* seconds */
    double forward_flops, backward_flops;
    int64_t recompute_calls;                /* forwards run again by recompute (not in forward_*) */
    double recompute_s;
} pp_stage_op_profile;

/* on = 1 starts (and zeroes) the counters, on = 0 stops and frees them. Local (both). */
pp_status pp_stage_profile_enable(pp_stage *s, int on, pp_error *err);
void pp_stage_profile_reset(pp_stage *s);
int pp_stage_profiling(const pp_stage *s);   /* 1 while enabled. Local. */
/* Reads the device's timers of the calls made since the last flush into the rows and
 * events (cuda: waits for the last call's end event). Call it once the device has run
 * them (after a step's end, or a synchronisation). Local. */
pp_status pp_stage_profile_flush(pp_stage *s, pp_error *err);
/* One row per op type of the stage, by total time, largest first; *n rows (the calls
 * flushed so far). NULL when profiling is off. Local; owned by s, valid until the next call on s. */
const pp_stage_op_profile *pp_stage_profile_get(pp_stage *s, int *n);

/* Every kernel call one by one while profiling is on and events are kept (on = 1):
 * op index (pp_stage_op_describe), forward or backward, start and end (seconds on the
 * pp_now clock: the device's timers, anchored at the host time of the first call after a
 * flush), FLOPs of the call. Events are cleared by pp_stage_profile_clear_events. */
typedef struct pp_stage_op_event {
    int op;
    int backward;           /* 0 forward, 1 backward, 2 a forward run again by recompute */
    double t_start, t_end;
    double flops;
} pp_stage_op_event;
/* Local; the events are owned by s, valid until the next call on s. */
pp_status pp_stage_profile_events(pp_stage *s, int on, pp_error *err);
const pp_stage_op_event *pp_stage_profile_get_events(const pp_stage *s, int *n);
void pp_stage_profile_clear_events(pp_stage *s);
/* Op o of the stage's forward (fused ops are one op): node name, op type, input and
 * output shapes ("[8,16,32] [32,32] -> [8,16,32]"), forward FLOPs of one call, and the
 * attributes its kernel gets (with the marks of stage/fuse.c: causal_Y, causal, trans_B, ..). */
typedef struct pp_stage_op_info {
    const char *name, *op_type;
    char shapes[192];
    double flops;
    const pp_attr *attrs;
    int nattrs;
} pp_stage_op_info;
/* Local; out's name, op_type and attrs are owned by s, valid while s lives. */
int pp_stage_num_ops(const pp_stage *s);
void pp_stage_op_describe(const pp_stage *s, int o, pp_stage_op_info *out);

/* The flat buffers' length in elements (with alignment gaps), and the graph the stage was
 * built from (its partition's). Local; owned by s. */
int64_t pp_stage_param_elems(const pp_stage *s);
const pp_graph *pp_stage_graph(const pp_stage *s);
#ifdef __cplusplus
}
#endif
#endif
