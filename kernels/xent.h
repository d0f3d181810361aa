/* Private to kernels/: what both backends' SoftmaxCrossEntropyLoss read from a call
 * (reduction, ignore_index, shapes), parsed and checked once in kernels/xent.c. */
#ifndef PP_KERNELS_XENT_H
#define PP_KERNELS_XENT_H

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/kernels.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { PP_XENT_NONE, PP_XENT_SUM, PP_XENT_MEAN };

typedef struct pp_xent {
    int64_t n, c, d;            /* batch, classes, positions per sample (prod d1..dk) */
    int reduction;              /* PP_XENT_* */
    int has_ignore;
    int64_t ignore;
    int lab64;                  /* labels are int64 (else int32) */
    int weighted;               /* a weights input [C] is given */
} pp_xent;

/* scores [N, C, d1..dk], labels [N, d1..dk] int64/int32, optional weights [C]; errors
 * name the node and the bad value. */
pp_status pp_xent_setup(const pp_kernel_ctx *c, pp_xent *e, pp_error *err);

/* aux of both backends: what backward reads instead of the probabilities, per position p
 * (n * d + s) the scores' max mx[p] and log-sum-exp ls[p] (log softmax = x - mx - ls), then
 * the summed weight of the labels (the mean's divisor): 2 n d + 1 floats (0 when the call
 * is malformed: forward reports why). */
size_t pp_xent_aux_bytes(const pp_kernel_ctx *c);

#ifdef __cplusplus
}
#endif
#endif
