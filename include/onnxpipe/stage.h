/* The stage executor: trains one pipeline stage (a contiguous range of a graph's nodes)
 * on one device. Forward on a microbatch keeps only what backward needs in that
 * microbatch's stash slot; backward (whole, or split into input and weight halves for
 * zero-bubble schedules) accumulates parameter gradients into one flat buffer; the
 * optimizer updates the flat parameter buffer. DESIGN.md "pp_stage". */
#ifndef ONNXPIPE_STAGE_H
#define ONNXPIPE_STAGE_H

#include <onnxpipe/core.h>
#include <onnxpipe/device.h>
#include <onnxpipe/graph.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/partition.h>
#include <onnxpipe/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_stage pp_stage;

/* How the last stage computes its loss when the graph does not end in one. */
typedef struct pp_loss_spec {
    const char *logits;     /* value name of the logits [..., C] */
    const char *labels;     /* graph input with the int64 labels [...] */
    int64_t ignore_index;   /* labels equal to this do not count; default -100 like PyTorch */
} pp_loss_spec;

/* Activation recomputation (pp_recompute, partition.h; stage/recompute.c) names.
 * "none", "selective", "full". Local; thread-safe (static strings). */
PP_API const char *pp_recompute_name(pp_recompute r);
/* Parses one of those names; an error lists them. Local. */
PP_API pp_status pp_recompute_parse(const char *text, pp_recompute *out, pp_error *err);

typedef struct pp_stage_options {
    int slots;                  /* stash slots = peak in-flight microbatches (>= 1) */
    int64_t microbatch;         /* samples per microbatch */
    int64_t global_batch;       /* samples per optimizer step over all microbatches and replicas;
                                   the loss is a mean over it, so gradients sum across them */
    pp_optim_hparams optim;     /* kind, betas, eps, weight decay (lr is given per step) */
    pp_loss_spec loss;          /* used when the stage holds no SoftmaxCrossEntropyLoss output;
                                   a last stage without either runs forward only (training = 0) */
    uint64_t seed;              /* Dropout RNG seed */
    int64_t first_sample;       /* this replica's first sample in the global batch: Dropout draws
                                   by global sample, the same for any layout (pp_rng_key) */
    int training;               /* 1: Dropout drops, BatchNorm uses batch statistics */
    pp_dtype precision;         /* PP_DTYPE_BF16 / PP_DTYPE_F16: mixed precision (stage/precision.c:
                                   16-bit activations and matrix-product operands, fp32 master
                                   weights, gradients and optimizer state); F32 or 0: fp32 */
    pp_recompute recompute;     /* what the stash keeps; 0: everything (PP_RECOMPUTE_NONE) */
    int whole_backward;         /* 1: every backward is PP_BACKWARD_FULL (no zero-bubble split), so
                                   the output gradients of ops with weights live in backward
                                   scratch instead of the slot (the driver sets it from the
                                   schedule); 0: they stay in the slot for a later weight half */
    const pp_stage *share;          /* non-NULL: a stage of the same nodes of the model at another
                                   shape (a sequence bucket: its partition made with
                                   pp_partition_options.same_split). This stage uses its flat
                                   parameter, gradient, optimizer-state and 16-bit parameter buffers
                                   (one copy: its parameter table must be the same, else an error
                                   names the first difference) and its stash, scratch and recompute
                                   arenas where they are large enough (only one stage of a group
                                   runs at a time: pp_stage_activate). Borrowed; share must outlive
                                   this stage */
} pp_stage_options;

/* Builds stage `index` of partition part (whose graph must outlive the stage). Local; the stage keeps
 * part's graph, dev and opt->loss's names (opt is copied); the caller frees it with pp_stage_destroy. */
PP_API pp_status pp_stage_create(const pp_partition *part, int index, pp_device *dev, const pp_stage_options *opt,
                                 pp_stage **out, pp_error *err);
/* Builds a stage holding nodes [first, end) of g in topological order; `last`
 * says whether it computes the loss. Parameters are copied from g's initializers
 * onto dev. g must outlive the stage. Local; the stage keeps g, dev and opt->loss's names (opt is
 * copied); the caller frees it with pp_stage_destroy. pp_stage_destroy accepts NULL. */
PP_API pp_status pp_stage_create_range(const pp_graph *g, int first, int end, int last, pp_device *dev,
                                       const pp_stage_options *opt, pp_stage **out, pp_error *err);
PP_API void pp_stage_destroy(pp_stage *s);
/* s, of a group sharing buffers (pp_stage_options.share), runs next after prev (another of
 * the group, or s itself: nothing to do) ran: prev's BatchNorm running statistics are
 * copied into s (each stage keeps its own constants), s's 16-bit parameter copy is made
 * again before its next forward and its recompute arena is taken as holding no slot.
 * Between steps only. Local. */
PP_API pp_status pp_stage_activate(pp_stage *s, pp_stage *prev, pp_error *err);

/* What crosses the stage's boundaries. Inputs are, in this order: activations received
 * from the previous stage (sorted by value id), then graph inputs this stage reads (data:
 * input_ids, labels). Outputs are the activations sent to the next stage: every value
 * produced at or before this stage that a later stage reads (skips pass through). */
typedef struct pp_stage_port {
    const char *name;
    int value;              /* value id in the graph */
    int is_data;            /* a graph input fed from the dataset (inputs only) */
    pp_dtype dtype;
    pp_shape shape;         /* per microbatch */
    size_t nbytes;
} pp_stage_port;

/* Local. The device is the one given at creation (borrowed); ports are owned by s, valid while s lives. */
PP_API pp_device *pp_stage_device(const pp_stage *s);
PP_API int pp_stage_num_inputs(const pp_stage *s);
PP_API const pp_stage_port *pp_stage_input(const pp_stage *s, int i);
PP_API int pp_stage_num_outputs(const pp_stage *s);
PP_API const pp_stage_port *pp_stage_output(const pp_stage *s, int i);

/* Buffers in device memory, for a comm to receive into or send from directly.
 *  input:       slot's forward input i (write before pp_stage_forward)
 *  output:      slot's forward output i (valid after pp_stage_forward)
 *  grad_output: gradient of output i (write before pp_stage_backward; not on the last stage)
 *  grad_input:  gradient of activation input i (valid after the backward input half)
 * Local; owned by s, valid while s lives. */
PP_API void *pp_stage_input_buffer(pp_stage *s, int slot, int i);
PP_API void *pp_stage_output_buffer(pp_stage *s, int slot, int i);
PP_API void *pp_stage_grad_output_buffer(pp_stage *s, int slot, int i);
PP_API void *pp_stage_grad_input_buffer(pp_stage *s, int slot, int i);
/* A graph output this stage produces (e.g. logits), valid after pp_stage_forward; NULL
 * if the value is not a graph output of this stage. Local; owned by s, valid while s lives. */
PP_API void *pp_stage_value_buffer(pp_stage *s, int slot, int value);
/* The dtype the stage stores graph value `value` in (16-bit under mixed precision where
 * the graph says float32), or PP_DTYPE_UNDEFINED if the stage does not hold it. Local. */
PP_API pp_dtype pp_stage_value_dtype(const pp_stage *s, int value);

typedef enum {
    PP_BACKWARD_FULL = 3,   /* input and weight gradients */
    PP_BACKWARD_INPUT = 1,  /* gradients of activations (what the previous stage waits for) */
    PP_BACKWARD_WEIGHT = 2, /* parameter gradients (zero-bubble W), after INPUT of the same slot */
} pp_backward_part;

/* Training mode (Dropout drops, BatchNorm uses and updates batch statistics) on or off
 * for the following forwards; it starts as opt->training. Local. */
PP_API void pp_stage_set_training(pp_stage *s, int on);

/* Runs the forward of microbatch `microbatch` of step `step` in stash slot `slot`. Local. */
PP_API pp_status pp_stage_forward(pp_stage *s, int slot, int64_t step, int64_t microbatch, pp_error *err);
/* The last stage's loss for that slot (mean over the microbatch), after forward. Local. */
PP_API double pp_stage_loss(const pp_stage *s, int slot);
/* The loss's seed and share (stage/loss.c says the convention). A slot's seed, dL/d(loss
 * of its microbatch), starts as microbatch / global_batch (1 / global_batch for a 'sum'
 * loss). A trainer whose labels have ignore_index entries or class weights gives each
 * slot, before its backward, the weight of its microbatch's labels and of the global
 * batch's (pp_loss_labels_weight): the seed becomes their ratio (0 when the global batch
 * weighs nothing), so the gradient is the global mean whatever the layout. Local. */
PP_API void pp_stage_set_loss_weight(pp_stage *s, int slot, double weight, double global_weight);
/* The slot's share of the step's loss, seed x loss (loss as pp_stage_loss read it); the
 * step's loss is the sum of the shares over microbatches and replicas. Local. */
PP_API double pp_stage_loss_share(const pp_stage *s, int slot, double loss);
/* --precision names: "fp32", "bf16", "fp16" (also "float32", "bfloat16", "float16") to
 * PP_DTYPE_F32 / BF16 / F16; 1 if name is one of them. Local; thread-safe. */
PP_API int pp_precision_parse(const char *name, pp_dtype *out);
/* "fp32", "bf16" or "fp16" (0 is fp32): a static string. Local; thread-safe. */
PP_API const char *pp_precision_name(pp_dtype precision);
/* fp16 loss scaling: the seeds of the following backwards are multiplied by scale, so
 * every gradient comes out scale times too large (the driver unscales the flat gradient
 * buffer before the optimizer). 1 turns it off. Local. */
PP_API void pp_stage_set_loss_scale(pp_stage *s, float scale);
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
PP_API pp_status pp_stage_loss_labels(const pp_stage *s, pp_loss_labels *out, pp_error *err);
/* The weight of labels y [groups x per], `groups` microbatches of `per` labels back to
 * back, counted once: a label other than ignore_index counts its class weight, or 1
 * (with class weights, one outside [0, classes) counts nothing). weight[j] (NULL: not
 * wanted) receives group j's; returns the sum over all, added label by label. Local;
 * Thread-safe (pure). */
PP_API double pp_loss_labels_weight(const pp_loss_labels *l, const int64_t *y, int64_t groups, int64_t per,
                                    double *weight);

/* After a forward whose loss is NaN or Inf: runs the slot's forward again checking every
 * input and every op's outputs, and fails with PP_ERR_NUMERIC naming step, microbatch,
 * node and tensor of the first non-finite value (PP_OK if it finds none). Local (both this and
 * pp_stage_backward, which runs the slot's backward `part`). */
PP_API pp_status pp_stage_diagnose(pp_stage *s, int slot, int64_t step, int64_t microbatch, pp_error *err);
PP_API pp_status pp_stage_backward(pp_stage *s, int slot, pp_backward_part part, pp_error *err);

/* Parameters: one flat fp32 buffer on the device, with a table by initializer name. */
typedef struct pp_stage_param {
    const char *name;
    int value;
    int64_t offset;         /* elements from the start of the flat buffer */
    int64_t numel;
    pp_shape shape;
} pp_stage_param;

/* Local. The table, the flat buffers (device memory), the hyperparameters and the graph are owned by s
 * (the graph is the one given at creation), valid while s lives. */
PP_API int pp_stage_num_params(const pp_stage *s);
PP_API const pp_stage_param *pp_stage_param_at(const pp_stage *s, int i);
PP_API int64_t pp_stage_param_elems(const pp_stage *s);   /* flat buffer length (with alignment gaps) */
PP_API float *pp_stage_params(pp_stage *s);
PP_API float *pp_stage_grads(pp_stage *s);
PP_API float *pp_stage_optim_state(pp_stage *s);          /* slots x param_elems floats: parameter p's
                                                      slots (Adam: m then v, p->numel each) lie
                                                      back to back from slots x p->offset */
PP_API int pp_stage_optim_slots(const pp_stage *s);        /* pp_optim_state_slots of its optimizer */
PP_API const pp_optim_hparams *pp_stage_optim(const pp_stage *s);
PP_API const pp_graph *pp_stage_graph(const pp_stage *s);

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
PP_API int pp_stage_num_buffers(const pp_stage *s);
PP_API pp_status pp_stage_buffer_at(pp_stage *s, int i, pp_stage_buffer *out, pp_error *err);

/* Gradient buckets can be reduced while backward goes on: during a backward that computes
 * weight gradients the hook runs after each op that finished some, with done = how many
 * such ops have run; parameter i's gradient is final (for this microbatch) once
 * done >= pp_stage_param_ready(s, i). fn NULL removes the hook. */
typedef void (*pp_stage_grad_hook)(void *user, int done);
/* Local; s keeps fn and user (borrowed) until the hook is replaced or removed. */
PP_API void pp_stage_set_grad_hook(pp_stage *s, pp_stage_grad_hook fn, void *user);
PP_API int pp_stage_param_ready(const pp_stage *s, int i);

/* Messages can move while a stage computes: the hook runs after every op of forward,
 * backward and recompute (MPI moves data only inside its calls, so the driver tests its
 * outstanding messages there, and a peer waiting on one need not wait for this stage's
 * whole pass). fn NULL removes it. */
typedef void (*pp_stage_progress_hook)(void *user);
/* Local; s keeps fn and user (borrowed) until the hook is replaced or removed. */
PP_API void pp_stage_set_progress_hook(pp_stage *s, pp_stage_progress_hook fn, void *user);

PP_API pp_status pp_stage_zero_grads(pp_stage *s, pp_error *err);   /* Local */
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
PP_API int pp_stage_param_uses(pp_stage *s, int value, pp_stage_use *out, int cap);
PP_API pp_status pp_stage_sum_uses(pp_stage *s, pp_error *err);
/* sum of squared gradients of this stage's parameters (clipping sums it across stages). Local. */
PP_API pp_status pp_stage_grad_sumsq(pp_stage *s, double *out, pp_error *err);
/* Checks gradients for NaN/Inf; names the parameter and step. Local. */
PP_API pp_status pp_stage_check_grads(pp_stage *s, int64_t step, pp_error *err);
/* One optimizer step with learning rate lr; gradients are multiplied by grad_scale first
 * (global-norm clipping: min(1, max_norm / norm)); step counts from 1. Local. */
PP_API pp_status pp_stage_step(pp_stage *s, float lr, float grad_scale, int64_t step, pp_error *err);

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
PP_API int64_t pp_stage_bytes_category(const pp_stage_bytes *b, pp_mem_category c);
/* Local. */
PP_API void pp_stage_allocation(const pp_stage *s, pp_stage_bytes *out);
/* What pp_stage_create(part, index, a device of this kind, opt) would allocate, without a
 * device: the same placement runs (ops, fusions, tensor places, arena sizes) and nothing is
 * allocated or loaded. Errors are pp_stage_create's. Local. */
PP_API pp_status pp_stage_estimate(const pp_partition *part, int index, pp_device_kind kind,
                                   const pp_stage_options *opt, pp_stage_bytes *out, pp_error *err);

/* The memory profile of g for the partitioner's memory balance (pp_memory_profile,
 * partition.h): the whole graph planned as one stage on a device of this kind with opt (its
 * optimizer, precision, recompute and loss; slots ignored), each allocation attributed to
 * the node whose value it holds (graph inputs to their first reader), and for every value
 * what a stage pays for it as an input or output port. Errors are pp_stage_estimate's (a
 * graph without a loss needs opt->loss). Local; the caller frees *out with
 * pp_memory_profile_destroy. */
PP_API pp_status pp_stage_memory_profile(const pp_graph *g, pp_device_kind kind, const pp_stage_options *opt,
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
PP_API void pp_stage_recompute_get(const pp_stage *s, pp_stage_recompute_stats *out);

/* Profiling: wall time and FLOPs of the stage's kernel calls, summed per op type.
 * Off by default (it then costs one pointer test per op). FLOPs count MatMul/Gemm as
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
PP_API pp_status pp_stage_profile_enable(pp_stage *s, int on, pp_error *err);
PP_API void pp_stage_profile_reset(pp_stage *s);
/* One row per op type of the stage, by total time, largest first; *n rows. NULL when
 * profiling is off. Local; owned by s, valid until the next call on s. */
PP_API const pp_stage_op_profile *pp_stage_profile_get(pp_stage *s, int *n);

/* Every kernel call one by one while profiling is on and events are kept (on = 1):
 * op index (pp_stage_op_describe), forward or backward, start and end (pp_now seconds),
 * FLOPs of the call. Events are cleared by pp_stage_profile_clear_events. */
typedef struct pp_stage_op_event {
    int op;
    int backward;           /* 0 forward, 1 backward, 2 a forward run again by recompute */
    double t_start, t_end;
    double flops;
} pp_stage_op_event;
/* Local; the events are owned by s, valid until the next call on s. */
PP_API pp_status pp_stage_profile_events(pp_stage *s, int on, pp_error *err);
PP_API const pp_stage_op_event *pp_stage_profile_get_events(const pp_stage *s, int *n);
PP_API void pp_stage_profile_clear_events(pp_stage *s);
/* Op o of the stage's forward (fused ops are one op): node name, op type, input and
 * output shapes ("[8,16,32] [32,32] -> [8,16,32]"), forward FLOPs of one call. */
typedef struct pp_stage_op_info {
    const char *name, *op_type;
    char shapes[192];
    double flops;
} pp_stage_op_info;
/* Local; out's name and op_type are owned by s, valid while s lives. */
PP_API int pp_stage_num_ops(const pp_stage *s);
PP_API void pp_stage_op_describe(const pp_stage *s, int o, pp_stage_op_info *out);

#ifdef __cplusplus
}
#endif
#endif
