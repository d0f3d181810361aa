/* The stage executor: trains one pipeline stage (a contiguous range of a graph's nodes)
 * on one device. Forward on a microbatch keeps only what backward needs in that
 * microbatch's stash slot; backward (whole, or split into input and weight halves for
 * zero-bubble schedules) accumulates parameter gradients into one flat buffer; the
 * optimizer updates the flat parameter buffer. DESIGN.md "pp_stage". What a trainer driving
 * stages by hand uses (examples/custom_trainer.c); the rest (memory estimates, profiling,
 * hooks, loss scaling, label weights, checkpoint buffers) is internal:
 * internal/onnxpipe/stage_lib.h. */
#ifndef ONNXPIPE_STAGE_H
#define ONNXPIPE_STAGE_H

#include <onnxpipe/core.h>
#include <onnxpipe/device.h>
#include <onnxpipe/graph.h>
#include <onnxpipe/optim.h>
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

/* Whether a stage makes one Attention op of each exported attention chain (Q K^T, scale, mask,
 * Softmax, P V and their head Transposes: stage/fuse_attention.c). AUTO: where the device's
 * Attention kernel is a fused one (cuDNN's flash attention, under bf16 / fp16) and takes the
 * call; ON: wherever the kernel takes it (the cpu's, e.g. to test the fusion); OFF: never. */
typedef enum { PP_FUSED_ATTENTION_AUTO = 0, PP_FUSED_ATTENTION_ON, PP_FUSED_ATTENTION_OFF } pp_fused_attention;

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
    pp_fused_attention fused_attention; /* 0: AUTO */
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

/* The options of a plain fp32 training stage: one stash slot, microbatch and global batch
 * 1 (set both), AdamW with PyTorch's defaults (betas 0.9, 0.999, eps 1e-8, weight decay
 * 0.01), labels equal to -100 ignored, training mode on, no recompute, attention fused
 * where the device's kernel is a fused one. Local. Thread-safe. */
PP_API pp_stage_options pp_stage_options_default(void);

/* Builds stage `index` of partition part (whose graph must outlive the stage). Local; the stage keeps
 * part's graph, dev and opt->loss's names (opt is copied); the caller frees it with pp_stage_destroy. */
PP_API pp_status pp_stage_create(const pp_partition *part, int index, pp_device *dev, const pp_stage_options *opt,
                                 pp_stage **out, pp_error *err);
/* Frees the stage; accepts NULL. Local. */
PP_API void pp_stage_destroy(pp_stage *s);

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
/* Runs the slot's backward `part` (after its forward). Local. */
PP_API pp_status pp_stage_backward(pp_stage *s, int slot, pp_backward_part part, pp_error *err);

/* Parameters: one flat fp32 buffer on the device, with a table by initializer name. */
typedef struct pp_stage_param {
    const char *name;
    int value;
    int64_t offset;         /* elements from the start of the flat buffer */
    int64_t numel;
    pp_shape shape;
} pp_stage_param;

/* Local. The table and the flat buffers (device memory; as long as the parameters'
 * offset + numel reach) are owned by s, valid while s lives. */
PP_API int pp_stage_num_params(const pp_stage *s);
PP_API const pp_stage_param *pp_stage_param_at(const pp_stage *s, int i);
PP_API float *pp_stage_params(pp_stage *s);
PP_API float *pp_stage_grads(pp_stage *s);

PP_API pp_status pp_stage_zero_grads(pp_stage *s, pp_error *err);   /* Local */
/* A parameter read by several ops (a weight tied inside the stage) keeps one gradient per
 * reading op through the step, so that they are added in one order on every layout. A
 * caller running a stage alone adds them with pp_stage_sum_uses after the step's last
 * backward, before reading gradients or pp_stage_step. Local. */
PP_API pp_status pp_stage_sum_uses(pp_stage *s, pp_error *err);
/* One optimizer step with learning rate lr; the update multiplies the gradients by
 * grad_scale as it reads them (global-norm clipping: min(1, max_norm / norm); the gradient
 * buffer keeps them as they were); step counts from 1. Local. */
PP_API pp_status pp_stage_step(pp_stage *s, float lr, float grad_scale, int64_t step, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
