/* cuBLASLt's description of one GEMM (kernels/cuda/gemm_lt.cu) in plain C, compiled into every
 * build and tested without a GPU (tests/test_cuda_launch.c): the matrix layouts (rows, columns,
 * leading dims, batch and strides) of a launch.h GEMM, its compute type, the epilogue that adds
 * Gemm's bias row, the pointer alignments the heuristic is told, and the key under which the
 * device caches the descriptors and the heuristic's algorithm. */
#ifndef PP_KERNELS_CUDA_LT_PLAN_H
#define PP_KERNELS_CUDA_LT_PLAN_H

#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cuBLASLt's values, restated like launch.h's (gemm_lt.cu static_asserts them) */
#define PP_CU_COMPUTE_32F_FAST_TF32 77
#define PP_CU_LT_EPILOGUE_DEFAULT 1
#define PP_CU_LT_EPILOGUE_BIAS 4

/* The one workspace cuBLASLt gets, allocated once per device. */
#define PP_CU_LT_WORKSPACE ((size_t)32 << 20)

/* One cublasLtMatmul: D = alpha op(A) op(B) + beta C (+ bias), column-major, C and D one matrix;
 * A is our Y and B our X as in launch.h. Also the cache key, compared with memcmp: pp_cu_lt_of
 * zeroes it first and it has no padding bytes (the 8-byte fields first, an even count of ints;
 * lt_plan.c asserts the size), so two calls with the same shapes, types, transposes, epilogue
 * and alignments compare equal. */
typedef struct pp_cu_lt {
    long long m, n, k;
    long long rows[3], cols[3], ld[3];  /* A, B, C (= D) as stored */
    long long stride[3];                /* elements between a batch's matrices of A, B, C */
    int transa, transb;
    int batch;
    int type[3];                        /* PP_CU_R_* of A, B, C (= D) */
    int compute;                        /* PP_CU_COMPUTE_32F, or _32F_FAST_TF32 for float32 operands */
    int epilogue;                       /* PP_CU_LT_EPILOGUE_* */
    int bias_type;                      /* the bias vector's PP_CU_R_* under EPILOGUE_BIAS, else 0 */
    int align[4];                       /* bytes (1 .. 16) to which A, B, C and the bias are aligned */
    int zero;                           /* 0: fills what would be padding */
} pp_cu_lt;

/* The description of GEMM g (launch.h) on those pointers; bias_type < 0: no bias (DEFAULT
 * epilogue), else a bias of m elements of that PP_CU_R_* type added before D is rounded
 * (EPILOGUE_BIAS). Float32 operands compute in TF32 (FAST_TF32), as the cuBLAS handle's math
 * mode does; NVIDIA_TF32_OVERRIDE=0 turns it off in the library. */
pp_cu_lt pp_cu_lt_of(const pp_cu_gemm *g, int bias_type, const void *a, const void *b, const void *c,
                     const void *bias);

/* Gemm's bias C in the epilogue of Y = alpha op(A) op(B) + beta C: when C is a row of the N
 * outputs ([N] or [1, N]) added once (beta 1) and of Y's dtype or float32, returns 1 and its
 * PP_CU_R_* type in *bias_type (the row is Y's columns, cuBLAS's m); else 0, and the caller
 * broadcasts C into Y and runs the GEMM with beta. */
int pp_cu_lt_bias_epilogue(const pp_tensor *C, long long N, float beta, pp_dtype y, int *bias_type);

#ifdef __cplusplus
}
#endif
#endif
