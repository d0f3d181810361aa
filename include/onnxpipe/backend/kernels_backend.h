/* For writing a kernel backend (backend tier: may change in a minor release, docs/library.md: ABI):
 * the op library, forward and backward of every op of the registry (op.h) in one table
 * per (backend, compute dtype) indexed by pp_op, the kernel context and capabilities
 * (PP_KCAP_*), the backends this build has (one list, kernels/backends.c), and the
 * flat-buffer ops every backend fills. Kernels know tensors and attributes, never
 * graphs or schedules; shapes are inferred by graph/ and outputs are allocated by the caller. */
#ifndef ONNXPIPE_KERNELS_BACKEND_H
#define ONNXPIPE_KERNELS_BACKEND_H

#include <onnxpipe/backend/device_backend.h>
#include <onnxpipe/backend/op.h>
#include <onnxpipe/optim.h>
#include <onnxpipe/tensor.h>

#include <math.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Keys a counter-based RNG (Dropout), so that a random draw depends on what is being
 * computed and never on which rank computes it, nor on how the global batch is split:
 * sample s of a step draws the same numbers in any microbatch of any replica (kernels
 * take the draws of element i of an n-element tensor at pp_el_rng_base(...) + i). */
typedef struct pp_rng_key {
    uint64_t seed;
    uint64_t step;
    uint64_t sample;    /* the microbatch's first sample in the step's global batch */
    uint64_t node;      /* node index in the whole graph */
    uint64_t samples;   /* samples in the microbatch; 0: the draws are not tied to samples */
} pp_rng_key;

/* One call of one node. */
typedef struct pp_kernel_ctx {
    const char *node;           /* node name, for error messages */
    pp_op op;
    const char *op_type;        /* its ONNX name, for error messages */
    int64_t opset;              /* ai.onnx opset of the model */
    const pp_attr *attrs;
    int nattrs;
    const pp_tensor *in;        /* [nin]; data NULL = omitted optional input, or (in backward)
                                   an input the kernel did not ask to keep (saves_in) */
    int nin;
    const void *const *host_in; /* [nin] or NULL: host copies of the constant inputs (initializers,
                                   folded shape/axes/starts/ratio tensors), NULL entries for the
                                   others. A device whose memory the host cannot read (cuda) needs
                                   it for the ops that read constant values (Slice, ReduceSum axes,
                                   Dropout ratio); the stage fills it once at plan time. */
    pp_tensor *out;             /* [nout]; shapes set and memory allocated by the caller;
                                   data NULL = omitted optional output */
    int nout;
    void *aux;                  /* aux_bytes(ctx) bytes the kernel keeps from forward to backward
                                   (e.g. LayerNorm mean/rstd, a Dropout mask); NULL if 0 */
    pp_device *dev;
    int training;               /* Dropout drops, BatchNorm uses batch statistics */
    pp_rng_key rng;
    unsigned grad_fresh;        /* backward, only for a kernel with assigns_fresh: bit i: grad_in[i]
                                   holds garbage and this call is its first writer, so the kernel
                                   assigns (=) every element instead of adding (the stage's first
                                   writer of a gradient skips zeroing it); 0 everywhere else */
    void *work;                 /* NULL, or work_size bytes of device scratch this call may use as
                                   it likes (the stage's work arena, sized by pp_kernel.work_bytes):
                                   a kernel that needs memory for itself takes it here instead of
                                   allocating, so a step allocates nothing */
    size_t work_size;
} pp_kernel_ctx;

/* What a kernel can do beyond its op's ONNX form (pp_kernel.caps), for the stage's plan. */
enum {
    PP_KCAP_ASSIGNS_FRESH = 1u << 0,  /* backward honours c->grad_fresh (else the caller zeroes first) */
    PP_KCAP_MATMUL_ALPHA = 1u << 1,   /* MatMul: a scalar fourth input scales the product */
    PP_KCAP_MATMUL_BIAS = 1u << 2,    /* MatMul: a third input [N] or [M, N] is added to the product */
    PP_KCAP_MATMUL_STRIDED = 1u << 3, /* MatMul: operands and output may be transposed views
                                         (attributes set by stage/fuse.c) */
    PP_KCAP_MATMUL_CAUSAL = 1u << 4,  /* MatMul: attributes causal_Y / causal_A (stage/fuse.c)
                                         say attention's causal mask zeroes a triangle, which
                                         the kernel then skips */
    PP_KCAP_MATMUL_TRANS_B = 1u << 5, /* MatMul: attribute trans_B = 1 (stage/fuse.c) says B is
                                         stored transposed (Linear's weight, W (N, K); a batch of
                                         them, attention's K^T, where the kernel has no
                                         PP_KCAP_MATMUL_STRIDED to fold it as a perm) */
    PP_KCAP_SOFTMAX_CAUSAL = 1u << 6, /* Softmax: attribute causal = 1 (stage/fuse.c) says the
                                         scores are under attention's causal mask, so row r of
                                         each T x T block sums columns 0..r only and is 0 past
                                         them (LogSoftmax shares the kernel and refuses it) */
    PP_KCAP_STEP_RANDOM = 1u << 7,    /* its result depends on the step (c->rng.step: Dropout's
                                         draws), so a graph captured at one step cannot replay it */
    PP_KCAP_ATTENTION_FUSED = 1u << 8, /* Attention: a fused kernel (flash attention: the scores
                                         never stored) that beats the exporters' unfused chain, so
                                         stage/fuse_attention.c makes Attention ops of that chain
                                         by default (--fused-attention auto) and the kernel takes
                                         the perm_Q / _K / _V / _Y layouts it sets */
    PP_KCAP_MATMUL_TRANS_A = 1u << 9,  /* MatMul: attribute trans_A = 1 (stage/fuse.c) says A is
                                         stored with its last two dims swapped (a Transpose of
                                         them folded away), like trans_B for B */
};

/* One op on one backend in one compute dtype. The backend's table slot of an op says
 * which op it is; what backward reads of the forward is the op's (pp_op_info.saves_in,
 * saves_out): c->in / c->out hold those tensors in backward. */
typedef struct pp_kernel {
    /* Bytes of aux memory for this call (NULL: none). Called with in/out shapes set. */
    size_t (*aux_bytes)(const pp_kernel_ctx *c);
    pp_status (*forward)(const pp_kernel_ctx *c, pp_error *err);
    /* Gradients: grad_out[k] is dL/d(out k) (data NULL: no gradient flows into output k);
     * ACCUMULATES (+=) into grad_in[i] for every i whose data is non-NULL (assigns where
     * c->grad_fresh says so, see there), and skips the
     * others. So a caller can ask for input gradients first and weight gradients later
     * (zero-bubble B and W) by passing different non-NULL sets. NULL for ops with no gradient. */
    pp_status (*backward)(const pp_kernel_ctx *c, const pp_tensor *grad_out, pp_tensor *grad_in,
                          pp_error *err);
    unsigned caps;              /* PP_KCAP_* */
    /* Bytes of device memory one call needs for itself (the cpu Conv's im2col columns, the
     * 16-bit adapter's fp32 shadows): it takes them from c->work when the caller passes that
     * (the stage does), else allocates and frees them before it returns; the stage's memory
     * estimate counts them in its scratch (NULL: none). grad_out NULL: a forward call; else a
     * backward one, with grad_out / grad_in as backward gets them. Called at plan time with
     * shapes and dtypes set and data a non-NULL placeholder wherever the call has data. */
    size_t (*work_bytes)(const pp_kernel_ctx *c, const pp_tensor *grad_out, const pp_tensor *grad_in);
    /* Whether this kernel runs this call, asked at plan time by a fusion before it makes the op
     * (shapes, dtypes and attributes set, data a non-NULL placeholder; on a planning device, whose
     * ctx is NULL, only what needs no device): PP_OK, having prepared what the call will need
     * (e.g. cuDNN's execution plans), or PP_ERR_UNSUPPORTED with the reason, and the stage keeps
     * the ops unfused. NULL: every call its op's arguments accept. */
    pp_status (*prepare)(const pp_kernel_ctx *c, pp_error *err);
} pp_kernel;

/* The kernels of one backend in one compute dtype. */
typedef struct pp_kernel_table {
    pp_dtype dtype;             /* the floating compute type: F32, or BF16 / F16 (native 16-bit kernels) */
    const pp_kernel *kernels;   /* [PP_OP_COUNT], indexed by pp_op; forward NULL: no kernel */
} pp_kernel_table;

/* ---- backends ---- */

typedef struct pp_flat_ops pp_flat_ops;

/* One backend: a device kind with its constructor, kernel tables and flat kernels.
 * The build's backends are one list, kernels/backends.c (what CMake compiled in). */
typedef struct pp_backend {
    const char *name;               /* "cpu", "cuda" */
    pp_device_kind kind;
    unsigned caps;                  /* PP_DEVICE_CAP_* (device.h) */
    pp_status (*create)(int index, pp_device **out, pp_error *err);
    const pp_kernel_table *tables;  /* [ntables], one per compute dtype */
    int ntables;
    const pp_flat_ops *flat;        /* its flat-buffer kernels (kernels/dispatch.c calls them) */
} pp_backend;

/* The backend of a device kind, or NULL when this build does not have it. Local; static (the build's
 * constant list). Thread-safe. */
PP_API const pp_backend *pp_backend_get(pp_device_kind kind);
/* The backends of this build in order (the cpu first): the i-th, or NULL past the end. Local; static.
 * Thread-safe. */
PP_API const pp_backend *pp_backend_at(int i);

/* The kernel of op on this device kind computing in dtype, or NULL. For PP_DTYPE_BF16 and
 * PP_DTYPE_F16 every op with an F32 kernel has one: the backend's native 16-bit kernel where
 * its table has one, else the adapter of kernels/lowp.c around the F32 kernel (16-bit tensors
 * are converted exactly to fp32 shadows, the F32 kernel runs, 16-bit outputs and gradients are
 * rounded back; F32 tensors, e.g. a weight gradient in the fp32 master buffer, pass as they
 * are). Local; static. Thread-safe. */
PP_API const pp_kernel *pp_kernel_find(pp_op op, pp_device_kind device, pp_dtype dtype);

/* Scalars of one optimizer step, computed once on the host in double and rounded to
 * float as torch does; every backend's update loop uses these. */
typedef struct pp_optim_scalars {
    float c1, c2;           /* 1 - beta1, 1 - beta2 */
    float step_size;        /* Adam: lr / (1 - beta1^t) */
    float bc2_sqrt;         /* Adam: sqrt(1 - beta2^t) */
    float bc1, bc2;         /* LAMB: 1 - beta1^t, 1 - beta2^t */
    float shrink;           /* AdamW: 1 - lr wd */
    float l2;               /* Adam: wd added to the gradient (0 for AdamW) */
} pp_optim_scalars;
/* Local; pure. Thread-safe. */
PP_API pp_optim_scalars pp_optim_scalars_of(const pp_optim_hparams *h);

/* What changes from one optimizer step to the next, in device memory, where the update
 * kernels read it (so that a graph captured at one step replays any step): the step's
 * scalars (its lr and step number), and what the step's checks decided. */
typedef struct pp_optim_step {
    pp_optim_scalars k;     /* pp_optim_scalars_of(h) at this step's lr and step */
    float lr;
    float grad_scale;       /* gradients are multiplied by it (global-norm clipping); 1: as they are */
    int32_t first;          /* step 1 (SGD's momentum buffer starts as the gradient) */
    int32_t skip;           /* nonzero: a gradient or a loss was NaN or Inf: nothing changes */
} pp_optim_step;

/* The checks' decision, one function for the host and the device (a graph decides as the
 * host would): sumsq is the squared global gradient norm (NaN or Inf when a gradient is:
 * squares of floats summed in double cannot overflow), bad_losses the microbatch losses
 * that were NaN or Inf. Sets s->grad_scale (min(1, clip_norm / norm); clip_norm 0: off)
 * and s->skip. */
static inline PP_HD void pp_optim_step_decide(double sumsq, double bad_losses, float clip_norm, pp_optim_step *s)
{
    const double norm = sqrt(sumsq);
    s->skip = bad_losses > 0 || !(norm <= 1.7976931348623157e308);   /* NaN fails the comparison */
    s->grad_scale = clip_norm > 0 && norm > (double)clip_norm ? (float)((double)clip_norm / norm) : 1.0f;
}

/* The flat-buffer kernels of a device, in its backend (the cpu's as any other's); the
 * library's pp_kernel_* wrappers (kernels/dispatch.c) check the arguments and dispatch to
 * them by the device's kind. Results said to be in device memory stay there, so that a
 * step's checks need no read until its end, and a graph can hold them. */
struct pp_flat_ops {
    /* step: the step's pp_optim_step, in device memory (h: the hyper-parameters that stay) */
    pp_status (*optim_update)(pp_device *dev, const pp_optim_hparams *h, const pp_optim_step *step, float *param,
                              const float *grad, float *state, int64_t n, pp_error *err);
    /* *acc (device memory) += the sum of x[i]^2 in double, in an order fixed by n alone */
    pp_status (*sumsq_add)(pp_device *dev, const float *x, int64_t n, double *acc, pp_error *err);
    pp_status (*scale)(pp_device *dev, float *x, int64_t n, float s, pp_error *err);
    pp_status (*accumulate)(pp_device *dev, float *y, const float *x, int64_t n, pp_error *err);
    pp_status (*find_nonfinite)(pp_device *dev, const float *x, int64_t n, int64_t *index, pp_error *err);
    pp_status (*convert)(pp_device *dev, void *dst, pp_dtype dst_dtype, const void *src, pp_dtype src_dtype,
                         int64_t n, pp_error *err);  /* dtypes checked by pp_kernel_convert */
    /* A microbatch's loss into the step's sums (device memory): acc[0] += weight[0] x loss[0]
     * in double; when the loss is NaN or Inf, acc[1] += 1 and, for the first such, acc[2] =
     * microbatch. loss and weight: one float each, in device memory. */
    pp_status (*loss_add)(pp_device *dev, double *acc, const float *loss, const float *weight, int64_t microbatch,
                          pp_error *err);
    /* step->grad_scale and step->skip (device memory) by pp_optim_step_decide from the sum
     * of terms[0..n) in index order and bad_losses[0] (device memory) */
    pp_status (*optim_decide)(pp_device *dev, const double *terms, int64_t n, const double *bad_losses,
                              float clip_norm, pp_optim_step *step, pp_error *err);
};
/* The flat ops of a device kind's backend, or an error naming it. Local; static. Thread-safe. */
PP_API pp_status pp_kernel_flat_ops(pp_device_kind kind, const char *what, const pp_flat_ops **out, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
