/* The op library: forward and backward of every supported op, looked up by
 * (op type, device kind, dtype). Kernels know tensors and attributes, never graphs
 * or schedules; shapes are inferred by graph/ and outputs are allocated by the caller. */
#ifndef ONNXPIPE_KERNELS_H
#define ONNXPIPE_KERNELS_H

#include <onnxpipe/core.h>
#include <onnxpipe/device.h>
#include <onnxpipe/tensor.h>

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
    const char *op_type;
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
} pp_kernel_ctx;

typedef struct pp_kernel {
    const char *op_type;
    pp_device_kind device;
    pp_dtype dtype;             /* the floating compute type (PP_DTYPE_F32 today) */
    /* Bytes of aux memory for this call (NULL: none). Called with in/out shapes set. */
    size_t (*aux_bytes)(const pp_kernel_ctx *c);
    pp_status (*forward)(const pp_kernel_ctx *c, pp_error *err);
    /* Gradients: grad_out[k] is dL/d(out k) (data NULL: no gradient flows into output k);
     * ACCUMULATES (+=) into grad_in[i] for every i whose data is non-NULL (assigns where
     * c->grad_fresh says so, see there), and skips the
     * others. So a caller can ask for input gradients first and weight gradients later
     * (zero-bubble B and W) by passing different non-NULL sets. c->in / c->out hold the
     * tensors named in saves_in / saves_out. NULL for ops with no gradient. */
    pp_status (*backward)(const pp_kernel_ctx *c, const pp_tensor *grad_out, pp_tensor *grad_in,
                          pp_error *err);
    unsigned saves_in;          /* bit i: backward reads forward input i */
    unsigned saves_out;         /* bit k: backward reads forward output k */
    int assigns_fresh;          /* backward honours c->grad_fresh (else the caller zeroes first) */
} pp_kernel;

/* The kernel for op_type on this device computing in dtype, or NULL. */
const pp_kernel *pp_kernel_find(const char *op_type, pp_device_kind device, pp_dtype dtype);

/* The registered kernels of one device kind: the first max of them into out (out may be
 * NULL when max is 0); returns how many there are. A backend's tables are registered by
 * pp_backends_init (device.h), with or without a usable device. */
int pp_kernel_list(pp_device_kind device, const pp_kernel **out, int max);

/* Registration tables, one per kernel family and device. The cpu tables are built in;
 * another backend (cuda) registers its tables when it is initialised. */
typedef struct pp_kernel_table {
    const pp_kernel *kernels;
    int count;
} pp_kernel_table;
pp_status pp_kernel_register_table(const pp_kernel_table *table, pp_error *err);

/* ---- flat-buffer kernels used by the stage: optimizers, norms, accumulation ---- */

typedef enum { PP_OPTIM_SGD = 0, PP_OPTIM_ADAM, PP_OPTIM_ADAMW, PP_OPTIM_LAMB } pp_optim_kind;
const char *pp_optim_kind_name(pp_optim_kind k);            /* "sgd", "adam", "adamw", "lamb" */
int pp_optim_kind_parse(const char *name, pp_optim_kind *out);  /* 1 if name is one of those */

typedef struct pp_optim_hparams {
    pp_optim_kind kind;
    float lr;
    float momentum;         /* SGD */
    int nesterov;           /* SGD */
    float beta1, beta2, eps;/* Adam, AdamW, LAMB */
    float weight_decay;     /* SGD, Adam: L2 added to the gradient; AdamW, LAMB: decoupled */
    int64_t step;           /* 1-based step count, for bias correction */
} pp_optim_hparams;

/* Number of fp32 state slots per parameter element: SGD 1 (momentum; 0 without),
 * Adam/AdamW/LAMB 2 (m, v). */
int pp_optim_state_slots(const pp_optim_hparams *h);

/* Updates one parameter tensor of n elements in place. state holds
 * pp_optim_state_slots() arrays of n floats each, back to back. LAMB's trust ratio
 * is computed over this tensor (call once per parameter tensor). */
pp_status pp_kernel_optim_update(pp_device *dev, const pp_optim_hparams *h, float *param,
                                 const float *grad, float *state, int64_t n, pp_error *err);
/* sum of x[i]^2 over n elements, in double, returned on the host */
pp_status pp_kernel_sumsq(pp_device *dev, const float *x, int64_t n, double *out, pp_error *err);
/* x[i] *= s */
pp_status pp_kernel_scale(pp_device *dev, float *x, int64_t n, float s, pp_error *err);
/* y[i] += x[i] */
pp_status pp_kernel_accumulate(pp_device *dev, float *y, const float *x, int64_t n, pp_error *err);
/* Index of the first NaN or Inf in x, or -1. */
pp_status pp_kernel_find_nonfinite(pp_device *dev, const float *x, int64_t n, int64_t *index,
                                   pp_error *err);

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
pp_optim_scalars pp_optim_scalars_of(const pp_optim_hparams *h);
/* Checks h and the state pointer for an update of n elements (names the optimizer). */
pp_status pp_optim_check(const pp_optim_hparams *h, const float *state, int64_t n, pp_error *err);

/* The flat-buffer kernels of a non-cpu device, registered by its backend; the
 * pp_kernel_* functions above dispatch to them by dev->kind (after checking arguments). */
typedef struct pp_flat_ops {
    pp_status (*optim_update)(pp_device *dev, const pp_optim_hparams *h, float *param, const float *grad,
                              float *state, int64_t n, pp_error *err);
    pp_status (*sumsq)(pp_device *dev, const float *x, int64_t n, double *out, pp_error *err);
    pp_status (*scale)(pp_device *dev, float *x, int64_t n, float s, pp_error *err);
    pp_status (*accumulate)(pp_device *dev, float *y, const float *x, int64_t n, pp_error *err);
    pp_status (*find_nonfinite)(pp_device *dev, const float *x, int64_t n, int64_t *index, pp_error *err);
} pp_flat_ops;
void pp_kernel_register_flat(pp_device_kind kind, const pp_flat_ops *ops);
/* The registered flat ops of a device kind, or an error naming it (never for the cpu). */
pp_status pp_kernel_flat_ops(pp_device_kind kind, const char *what, const pp_flat_ops **out, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
