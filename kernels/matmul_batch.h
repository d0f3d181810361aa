/* Private to kernels/: the batch of a numpy MatMul, A (..., M, K) @ B (..., K, N)
 * with broadcast batch dims, shared by the cpu and cuda kernels (kernels/matmul_batch.c). */
#ifndef PP_KERNELS_MATMUL_BATCH_H
#define PP_KERNELS_MATMUL_BATCH_H

#include <onnxpipe/backend/kernels_backend.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_matmul_batch {
    int64_t M, K, N;
    int64_t batch;                  /* output matrices */
    int brank;
    int64_t bdims[PP_MAX_RANK];     /* output batch dims */
    int64_t astr[PP_MAX_RANK];      /* per batch dim: A's matrix stride (0: broadcast) */
    int64_t bstr[PP_MAX_RANK];
    int64_t a_mats, b_mats;         /* matrices stored in A and in B */
    int fold_a;                     /* B is one matrix and A is not broadcast: one GEMM with M' = batch M */
    int ta;                         /* A's matrices are stored transposed, (..., K, M) (no fold) */
    int tb;                         /* B's matrices are stored transposed, (..., N, K) */
} pp_matmul_batch;

/* Y: the output, or its gradient (same shape). 1-D operands are promoted as numpy does.
 * Errors name the node and the shapes. */
pp_status pp_matmul_batch_make(const pp_tensor *A, const pp_tensor *B, const pp_tensor *Y, pp_matmul_batch *p,
                          const char *node, pp_error *err);
/* The same for a MatMul kernel call: A = c->in[0], B = c->in[1], each stored with its last
 * two dims swapped when the node has attribute trans_A / trans_B = 1 (stage/fuse_transpose.c folds
 * Linear's Transpose(W), and other Transposes of an operand's last two dims, so:
 * PP_KCAP_MATMUL_TRANS_A / _B). */
pp_status pp_matmul_batch_of(const pp_kernel_ctx *c, const pp_tensor *Y, pp_matmul_batch *p, pp_error *err);
/* Matrix indices of A and B that output matrix b reads. */
void pp_matmul_batch_index(const pp_matmul_batch *p, int64_t b, int64_t *ia, int64_t *ib);

#ifdef __cplusplus
}
#endif
#endif
