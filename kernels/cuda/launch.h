/* Launch configuration and library-call arithmetic of the cuda backend, in plain C so
 * that it is compiled into every build and tested without a GPU (tests/test_cuda_launch.c):
 * grid sizes, allocator rounding, row-major -> cuBLAS column-major GEMM descriptions
 * (MatMul with broadcast batches, Gemm and their gradients), broadcast / strided / reduce
 * index plans, and cuDNN descriptor dims for Conv and pooling. */
#ifndef PP_KERNELS_CUDA_LAUNCH_H
#define PP_KERNELS_CUDA_LAUNCH_H

#include <onnxpipe/tensor.h>

#include "matmul_batch.h"
#include "op_args.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PP_CU_BLOCK 256          /* threads of elementwise kernels */
#define PP_CU_MAX_GRID 1048576   /* grid-stride loops beyond this many blocks */

typedef struct pp_cu_launch {
    unsigned grid, block;       /* 1-D */
} pp_cu_launch;

/* n elements, one per thread, grid-stride beyond PP_CU_MAX_GRID blocks (grid >= 1). */
pp_cu_launch pp_cu_launch_1d(int64_t n);
/* A two-pass block reduction over n elements (sum of squares, LAMB's norms): grid-stride
 * blocks of PP_CU_BLOCK, at most max_blocks of them, so that the second pass, which folds
 * one partial per block, reads at most max_blocks values. */
pp_cu_launch pp_cu_launch_parts(int64_t n, unsigned max_blocks);
/* One block per row of n elements: block = next power of two >= n, clamped to [32, 1024]. */
pp_cu_launch pp_cu_launch_rows(int64_t rows, int64_t n);

/* Caching allocator: sizes are rounded to 512 B below 1 MiB and to 2 MiB above; a cached
 * block of `have` bytes serves a request of `want` (rounded) when want <= have <= 2 want. */
size_t pp_cu_alloc_round(size_t n);
int pp_cu_alloc_fits(size_t have, size_t want);

/* cuBLAS's values of cudaDataType_t and cublasComputeType_t, restated so that this file
 * stays plain C (matmul.cu static_asserts that they match the CUDA headers). */
#define PP_CU_R_32F 0
#define PP_CU_R_16F 2
#define PP_CU_R_16BF 14
#define PP_CU_COMPUTE_32F 68

/* One cublasSgemmStridedBatched call (column-major), or, with 16-bit operands, one
 * cublasGemmStridedBatchedEx (cublasGemmEx for batch 1). */
typedef struct pp_cu_gemm {
    int transa, transb;             /* 1 = CUBLAS_OP_T */
    int m, n, k;
    int lda, ldb, ldc;              /* in elements, whatever the type */
    long long stride_a, stride_b, stride_c;   /* elements between the batch's matrices */
    int batch;
    int atype, btype, ctype;        /* PP_CU_R_*: cuBLAS's A (our Y), B (our X) and C */
    int compute;                    /* PP_CU_COMPUTE_32F */
} pp_cu_gemm;

/* The types of g for C = op(X) op(Y) from the tensors' dtypes: all float32 (cublasSgemm*,
 * the default every plan below starts from), or X and Y both bfloat16 or both float16 with
 * C that dtype or float32 (a weight gradient accumulated into the fp32 master gradient):
 * cublasGemm*Ex with fp32 compute. Returns 0, leaving g as it was, for any other mix. */
int pp_cu_gemm_set_types(pp_cu_gemm *g, pp_dtype x, pp_dtype y, pp_dtype c);

/* Row-major C (M, N) = op(X) (M, K) op(Y) (K, N), X stored (M, K) or, when tx, (K, M);
 * Y stored (K, N) or, when ty, (N, K). As column-major this is C^T = op(Y)^T op(X)^T, so
 * cuBLAS's A is Y and its B is X: transa = ty, transb = tx, m = N, n = M. sx, sy, sc:
 * batch strides in elements. */
pp_cu_gemm pp_cu_gemm_rowmajor(int tx, int ty, int64_t M, int64_t N, int64_t K, int64_t sx, int64_t sy,
                               int64_t sc, int64_t batch);

/* MatMul: the shared batch of products (kernels/matmul_batch.h) drives the cuBLAS calls. */
typedef pp_matmul_batch pp_cu_mm;

typedef enum {
    PP_CU_Y,    /* Y = A B:      X = A,  Y = B  */
    PP_CU_DA,   /* dA += dY B^T: X = dY, Y = B; under trans_A (p->ta: A and dA stored
                   (K, M)) dA^T += B dY^T: X = B, Y = dY */
    PP_CU_DB,   /* dB += A^T dY: X = A,  Y = dY; under trans_B (p->tb: B and dB stored
                   (N, K)) dB^T += dY^T A: X = dY, Y = A */
} pp_cu_part;
/* The GEMM of one part. *serial = 1 when the batch cannot be one strided call (a
 * broadcast pattern that is no uniform stride, or a gradient accumulated into an operand
 * shared by several output matrices): then the returned call has batch 1 and the caller
 * runs it for b = 0..batch-1 at the offsets of pp_cu_mm_offsets, in stream order. */
pp_cu_gemm pp_cu_mm_gemm(const pp_cu_mm *p, pp_cu_part part, int *serial);
/* Element offsets of X, Y and C (the part's operands above) for output matrix b of a
 * serial part. */
void pp_cu_mm_offsets(const pp_cu_mm *p, pp_cu_part part, int64_t b, int64_t *ox, int64_t *oy, int64_t *oc);

/* Gemm: Y (M, N) = alpha op(A) op(B) + beta C. */
typedef struct pp_cu_gemm_op {
    int ta, tb;
    int64_t M, K, N;
} pp_cu_gemm_op;
/* part PP_CU_Y: X = A, Y = B; PP_CU_DA: stored dA from (dY, B); PP_CU_DB: stored dB from
 * (A, dY). For the gradients the returned struct's comment order is (X, Y) =
 * DA: ta ? (B, dY) : (dY, B);  DB: tb ? (dY, A) : (A, dY). */
pp_cu_gemm pp_cu_gemm_op_gemm(const pp_cu_gemm_op *g, pp_cu_part part);
/* The (X, Y) operands of that call, from the stored A, B and dY (Y's gradient). */
void pp_cu_gemm_op_operands(const pp_cu_gemm_op *g, pp_cu_part part, const void *A, const void *B, const void *dY,
                            const void **x, const void **y);

/* Elementwise broadcast of up to 3 inputs onto out, with contiguous dims merged. */
#define PP_CU_MAX_IN 3
typedef struct pp_cu_bcast {
    int nin, rank;
    int64_t n;                              /* out elements */
    int64_t dims[PP_MAX_RANK];              /* merged out dims */
    int64_t st[PP_CU_MAX_IN][PP_MAX_RANK];  /* element strides per input, 0 = broadcast */
    int same;                               /* every input has out's shape: index = i */
} pp_cu_bcast;
pp_status pp_cu_bcast_init(pp_cu_bcast *b, const pp_tensor *out, const pp_tensor *const *in, int nin,
                           const char *node, pp_error *err);

/* dst[i . dst_st] (+)= src[i . src_st] over dims: Transpose, Slice, Concat, Split. Dims of
 * size 1 are dropped and dims contiguous in both are merged. */
typedef struct pp_cu_strided {
    int rank;
    int64_t n;
    int64_t dims[PP_MAX_RANK];
    int64_t dst_st[PP_MAX_RANK], src_st[PP_MAX_RANK];
} pp_cu_strided;
void pp_cu_strided_init(pp_cu_strided *s, int rank, const int64_t *dims, const int64_t *dst_st,
                        const int64_t *src_st);
/* Transpose: out = in permuted by perm (out dim d = in dim perm[d]). */
void pp_cu_strided_transpose(pp_cu_strided *s, const pp_tensor *in, const int64_t *perm);

/* Sum of src over some of its dims into dst (dst has src's shape with those dims 1):
 * ReduceSum/Mean and the gradient of a broadcast input. */
typedef struct pp_cu_reduce {
    int64_t nout, nred;                     /* dst elements, elements summed into each */
    int krank, rrank;
    int64_t kdims[PP_MAX_RANK], kst[PP_MAX_RANK];   /* kept dims (dst order) and src strides */
    int64_t rdims[PP_MAX_RANK], rst[PP_MAX_RANK];   /* reduced dims and src strides */
} pp_cu_reduce;
/* reduce[d] = 1: dim d of src is summed. */
void pp_cu_reduce_init(pp_cu_reduce *r, int rank, const int64_t *src_dims, const int *reduce);
/* The dims where dst (right-aligned, numpy broadcasting) is 1 and src is not. */
pp_status pp_cu_reduce_to_shape(pp_cu_reduce *r, const pp_tensor *dst, const pp_tensor *src, const char *node,
                                pp_error *err);

/* A row view (op_args.h's pp_rows): outer * inner rows of n elements at stride inner. */
typedef pp_rows pp_cu_rows;
pp_cu_rows pp_cu_rows_of(const int64_t *dims, int rank, int axis_from, int axis_to);

/* cuDNN's values of cudnnDataType_t and cudnnMathType_t, restated like cuBLAS's above
 * (conv.cu static_asserts them). */
#define PP_CUDNN_DATA_FLOAT 0
#define PP_CUDNN_DATA_HALF 2
#define PP_CUDNN_DATA_BFLOAT16 9
#define PP_CUDNN_DEFAULT_MATH 0
#define PP_CUDNN_TENSOR_OP_MATH 1

/* cuDNN NCHW descriptors for a 1-D or 2-D Conv (1-D becomes H = 1; pooling uses the cpu's pp_window). */
typedef struct pp_cu_conv {
    int x[4], w[4], y[4];           /* N C H W; K C/g kh kw; N K OH OW */
    int xst[4], yst[4];             /* packed strides */
    int pad[2], stride[2], dil[2];  /* H, W */
    int groups;
    int dtype;                      /* PP_CUDNN_DATA_*: X, W and Y alike (the legacy API takes no mix) */
    int compute;                    /* the convolution descriptor's: PP_CUDNN_DATA_FLOAT, fp32 accumulation */
    int math;                       /* float32: DEFAULT (TF32 on A100/H100, as cuBLAS); 16-bit: TENSOR_OP */
} pp_cu_conv;
/* Conv: kernel_shape from W; pads (begin..., end...) must be symmetric for cuDNN. X, W and
 * Y (or Y's gradient) share one dtype, float32, bfloat16 or float16 (PP_ERR_UNSUPPORTED
 * otherwise); 16-bit ones run as cuDNN's PSEUDO_HALF / PSEUDO_BFLOAT16 configurations. */
pp_status pp_cu_conv_plan(pp_cu_conv *cv, const pp_tensor *X, const pp_tensor *W, const pp_tensor *Y,
                          const int64_t *pads, const int64_t *strides, const int64_t *dilations, int64_t groups,
                          const char *node, pp_error *err);
/* Whether a Conv call runs on cuDNN in its tensors' own dtypes; else the 16-bit kernel hands
 * it to the adapter (kernels/lowp.c). in: X, W, optional B; y: the output (forward, grad_in
 * NULL) or its gradient (backward, grad_in as backward gets it). X, W and y of one dtype; B
 * (forward, with data) of that dtype or float32; the requested gradients: dX of X's dtype,
 * dW of W's or float32 (a master gradient, see pp_cu_conv_filter_ws), dB float32. */
int pp_cu_conv_native(const pp_tensor *in, int nin, const pp_tensor *y, const pp_tensor *grad_in);
/* The workspace of a backward-filter call whose cuDNN algorithm asks algo_ws bytes, into a
 * dW of dtype dw: *bytes to ask for. cuDNN writes dW in the filter's dtype, so a float32 dW
 * under a 16-bit filter (returns 1) is computed into a 16-bit temporary of W's elements at
 * byte *temp_at of the workspace (after cuDNN's part, 256-byte aligned) and then added into
 * dW; otherwise (returns 0) cuDNN accumulates into dW itself and *temp_at = 0. */
int pp_cu_conv_filter_ws(const pp_cu_conv *cv, size_t algo_ws, pp_dtype dw, size_t *bytes, size_t *temp_at);

/* Pooling windows along one spatial dim, as the cpu's window walk counts them: of the k
 * positions o s - pb + j d (j < k) of output o, *inside lie in [0, in) and *padded below
 * in + pe (the input and its pads; a position is never before -pb). AveragePool divides by
 * inside_h inside_w, or padded_h padded_w with count_include_pad. */
static inline PP_HD void pp_cu_window_span(int64_t o, int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb,
                                           int64_t pe, int64_t *inside, int64_t *padded)
{
    *inside = *padded = 0;
    for (int64_t j = 0; j < k; j++) {
        int64_t i = o * s - pb + j * d;
        *inside += i >= 0 && i < in;
        *padded += i < in + pe;
    }
}

/* Output position along one dim whose window puts tap j on input position i, or -1:
 * o s - pb + j d = i with 0 <= o < out. The backward of pooling gathers through it. */
static inline PP_HD int64_t pp_cu_window_out(int64_t i, int64_t j, int64_t out, int64_t s, int64_t d, int64_t pb)
{
    int64_t t = i + pb - j * d;
    if (t < 0 || t % s) return -1;
    return t / s < out ? t / s : -1;
}

/* BatchNormalization as cuDNN's 4-D NCHW: x (N, C, spatial...) -> (N, C, prod(spatial), 1). */
void pp_cu_bn_dims(const pp_tensor *x, int dims[4]);

#ifdef __cplusplus
}
#endif
#endif
