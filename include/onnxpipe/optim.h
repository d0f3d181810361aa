/* The optimizers a trainer chooses (public tier): their kinds and names, the
 * hyper-parameters a stage, the trainer and a checkpoint carry, and how many state slots
 * each keeps per parameter element. The update loops are the backends'
 * (onnxpipe/backend/kernels_backend.h: pp_flat_ops, pp_optim_scalars). */
#ifndef ONNXPIPE_OPTIM_H
#define ONNXPIPE_OPTIM_H

#include <onnxpipe/core.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { PP_OPTIM_SGD = 0, PP_OPTIM_ADAM, PP_OPTIM_ADAMW, PP_OPTIM_LAMB } pp_optim_kind;
/* Local; the names are static strings. Thread-safe. */
PP_API const char *pp_optim_kind_name(pp_optim_kind k);            /* "sgd", "adam", "adamw", "lamb" */
PP_API int pp_optim_kind_parse(const char *name, pp_optim_kind *out);  /* 1 if name is one of those */

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
 * Adam/AdamW/LAMB 2 (m, v). Local. Thread-safe. */
PP_API int pp_optim_state_slots(const pp_optim_hparams *h);

#ifdef __cplusplus
}
#endif
#endif
