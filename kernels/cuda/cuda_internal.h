/* Private to the cuda backend: the device context every kernel reaches through
 * c->dev->ctx (stream, cuBLAS and cuDNN handles, a growing workspace, pinned staging),
 * and the checks that turn CUDA / cuBLAS / cuDNN errors into pp_status with the
 * library's own text and the node's name. */
#ifndef PP_KERNELS_CUDA_INTERNAL_H
#define PP_KERNELS_CUDA_INTERNAL_H

#include <onnxpipe/backend/device_backend.h>
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/kernels.h>

#include "cublas_api.h"
#include <cuda_runtime.h>
#include <cudnn.h>

#include "launch.h"

typedef struct cu_block {
    void *ptr;
    size_t size;        /* bytes, rounded (launch.h pp_cu_alloc_round) */
    int in_use;
} cu_block;

/* One slot of the host -> device upload ring: pinned memory the host fills and a copy
 * reads in stream order; done marks the copy's end, so the slot is reused only after it. */
typedef struct cu_upload {
    void *buf;
    size_t bytes;
    cudaEvent_t done;
    int pending;                    /* done recorded and not yet waited for */
} cu_upload;

#define PP_CUDA_UPLOADS 8
#define PP_CUDA_UPLOAD_MAX ((size_t)64 << 20)   /* larger uploads copy directly and synchronise */

typedef struct pp_cuda {
    int ordinal;
    cudaStream_t stream;            /* every kernel, copy and memset of the device runs here */
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    cu_block *blocks;               /* caching allocator: every cudaMalloc'd block, used or not */
    int nblocks, capblocks;
    size_t cached_bytes;            /* held by blocks, in use or not */
    void *workspace;                /* cuBLAS / cuDNN / reduction workspace, grows to the largest ask */
    size_t workspace_bytes;
    void *pinned;                   /* pinned host staging for small device -> host reads */
    size_t pinned_bytes;
    cu_upload up[PP_CUDA_UPLOADS];  /* pinned staging ring for host -> device copies */
    int next_up;
    cudaEvent_t *events;            /* ring of events handed out by event_record */
    int nevents, next_event;
    struct cu_conv_algo *convs;     /* cuDNN descriptors and algorithms per Conv shape (conv.cu) */
    int nconvs;
    struct cu_lt *lt;               /* cuBLASLt: handle, workspace, plans per GEMM (gemm_lt.cu) */
    struct cu_sdpa *sdpa;           /* cuDNN's fused attention plans per call shape (sdpa.cu) */
} pp_cuda;

/* Frees the Conv cache (conv.cu); cu_destroy calls it. */
void pp_cu_conv_cache_free(pp_cuda *cu);
/* cuBLASLt's handle and 32 MiB workspace, made with the device; freed with its plans
 * (gemm_lt.cu). pp_device_cuda_create and cu_destroy call them. */
pp_status pp_cu_lt_create(pp_cuda *cu, pp_error *err);
void pp_cu_lt_destroy(pp_cuda *cu);
/* Frees the fused-attention plans (sdpa.cu); cu_destroy calls it. */
void pp_cu_sdpa_cache_free(pp_cuda *cu);
/* GEMM g (launch.h: cuBLAS's A = our Y at yp, B = our X at xp, C at cp) on cuBLASLt, with
 * bias_type's bias row at bias added in the epilogue (bias NULL: none). *done = 0, nothing run,
 * where cuBLASLt's heuristic has no algorithm for it or cublasLtMatmul refuses it: the caller
 * runs cublasGemmEx. */
pp_status pp_cu_lt_gemm(const pp_kernel_ctx *c, const pp_cu_gemm *g, const void *xp, const void *yp, void *cp,
                        float alpha, float beta, const void *bias, int bias_type, int *done, pp_error *err);

#define PP_CUDA_EVENTS 64

static inline pp_cuda *cu_of(const pp_device *d) { return (pp_cuda *)d->ctx; }

/* "node 'x' (Op): <lib> <call> failed: <library text>"; node may be NULL (device calls). */
pp_status pp_cu_fail(const pp_kernel_ctx *c, pp_error *err, const char *lib, const char *call, const char *text);
/* Argument and shape errors, "node 'x' (Op): <message>": pp_args_fail (kernels/op_args.h). */

#define CU_TRY(c, expr)                                                                  \
    do {                                                                                 \
        cudaError_t cu_e_ = (expr);                                                      \
        if (cu_e_ != cudaSuccess) return pp_cu_fail((c), err, "CUDA", #expr, cudaGetErrorString(cu_e_)); \
    } while (0)
#define CUBLAS_TRY(c, expr)                                                              \
    do {                                                                                 \
        cublasStatus_t cu_e_ = (expr);                                                   \
        if (cu_e_ != CUBLAS_STATUS_SUCCESS)                                              \
            return pp_cu_fail((c), err, "cuBLAS", #expr, pp_cublas()->cublasGetStatusString(cu_e_));  \
    } while (0)
#define CUDNN_TRY(c, expr)                                                               \
    do {                                                                                 \
        cudnnStatus_t cu_e_ = (expr);                                                    \
        if (cu_e_ != CUDNN_STATUS_SUCCESS)                                               \
            return pp_cu_fail((c), err, "cuDNN", #expr, cudnnGetErrorString(cu_e_));     \
    } while (0)
/* after every <<<...>>>: a bad configuration is reported here, an async fault later
 * at the next synchronising call */
#define CU_LAUNCHED(c) CU_TRY(c, cudaGetLastError())

/* Calls launch(T()) with T the type of dtype's element size (float for 4 bytes, so that a
 * scatter adds floats; unsigned long long for 8, whose atomicAdd adds int64 too; a copy
 * moves the bits either way), then checks the launch; another size is an error. */
template <typename F> static pp_status pp_cu_by_size(const pp_kernel_ctx *c, pp_dtype dt, F launch, pp_error *err)
{
    switch (pp_dtype_size(dt)) {
    case 8: launch((unsigned long long)0); break;
    case 4: launch(0.f); break;
    case 2: launch((uint16_t)0); break;
    case 1: launch((uint8_t)0); break;
    default: return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "dtype %s cannot be moved here", pp_dtype_name(dt));
    }
    CU_LAUNCHED(c);
    return PP_OK;
}

/* Workspace of at least n bytes, valid until the next call on this device's stream
 * order (kernels use it and return). Grows through the caching allocator, so it
 * allocates only while the first step finds the largest need. */
pp_status pp_cuda_workspace(const pp_kernel_ctx *c, size_t n, void **out, pp_error *err);
/* n bytes of pinned host memory for a device -> host read (grows the same way). */
pp_status pp_cuda_pinned(pp_device *d, size_t n, void **out, pp_error *err);

/* Host copy of constant input k (c->host_in), or an error saying what the stage must pass. */
pp_status pp_cu_host_input(const pp_kernel_ctx *c, int k, const char *what, const void **out, pp_error *err);

/* kernel entry points (table.cu lists them) */
#define PP_CU_FWD(name) pp_status name(const pp_kernel_ctx *c, pp_error *err)
#define PP_CU_BWD(name) pp_status name(const pp_kernel_ctx *c, const pp_tensor *grad_out, pp_tensor *grad_in, \
                                       pp_error *err)
#define PP_CU_AUX(name) size_t name(const pp_kernel_ctx *c)

/* dst += scale * (src summed over the dims where dst broadcasts; numpy alignment): the
 * gradient of a broadcast input. dst and src are device tensors (elementwise.cu) of
 * float32, bfloat16 or float16 (widened exactly, summed in fp32, dst rounded once). */
pp_status pp_cu_sum_into(const pp_kernel_ctx *c, const pp_tensor *dst, const pp_tensor *src, float scale,
                         pp_error *err);
/* dst += scale * sum over r's reduced dims of src; src's dtype st and dst's dt are float32,
 * bfloat16 or float16 (summed in fp32, dst rounded once) */
pp_status pp_cu_reduce_launch(const pp_kernel_ctx *c, const pp_cu_reduce *r, const void *src, pp_dtype st,
                              void *dst, pp_dtype dt, float scale, pp_error *err);
/* dst += scale * src broadcast to dst's shape (float32, bfloat16 or float16 each) */
pp_status pp_cu_broadcast_add(const pp_kernel_ctx *c, const pp_tensor *dst, const pp_tensor *src, float scale,
                              pp_error *err);
/* out = in broadcast to out's shape (Expand, Gemm's C, Conv's bias); between float dtypes
 * the value is converted as Cast does (rounded to nearest even into 16 bits) */
pp_status pp_cu_broadcast_copy(const pp_kernel_ctx *c, const pp_tensor *out, const pp_tensor *in, pp_error *err);

/* The cuda device's constructor (device_cuda.cu), for the backend entry in table.cu. */
pp_status pp_device_cuda_create(int index, pp_device **out, pp_error *err);

#endif
