/* The cuda pp_device: one stream per device that every kernel and copy runs on, cuBLAS
 * and cuDNN handles bound to it, a caching allocator over cudaMalloc (the stage allocates
 * once; blocks are reused, never returned to the driver until destroy), a growing
 * workspace, pinned staging for device -> host reads and a pinned ring for host -> device
 * copies (no stream drain per upload), a ring of events, timing events for the profiler
 * and CUDA Graphs captured from the stream. */
#include "cuda_internal.h"

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/backend/device_cuda.h>

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

pp_status pp_cu_fail(const pp_kernel_ctx *c, pp_error *err, const char *lib, const char *call, const char *text)
{
    if (c && c->node)
        return pp_error_set(err, PP_ERR_DEVICE, "node '%s' (%s): %s call %s failed: %s", c->node, c->op_type, lib, call,
                            text);
    return pp_error_set(err, PP_ERR_DEVICE, "cuda device: %s call %s failed: %s", lib, call, text);
}

pp_status pp_cu_host_input(const pp_kernel_ctx *c, int k, const char *what, const void **out, pp_error *err)
{
    *out = c->host_in && k < c->nin ? c->host_in[k] : NULL;
    if (!*out)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err,
                         "input %d (%s) must be a constant known at plan time: the cuda kernel reads it from the host "
                         "copy in pp_kernel_ctx.host_in, which is missing", k, what);
    return PP_OK;
}

/* ---------------- caching allocator ---------------- */

static pp_status cu_alloc(pp_device *d, size_t nbytes, void **out, pp_error *err)
{
    pp_cuda *cu = cu_of(d);
    size_t want = pp_cu_alloc_round(nbytes);
    int best = -1;
    for (int i = 0; i < cu->nblocks; i++)
        if (!cu->blocks[i].in_use && pp_cu_alloc_fits(cu->blocks[i].size, want) &&
            (best < 0 || cu->blocks[i].size < cu->blocks[best].size))
            best = i;
    if (best >= 0) {
        cu->blocks[best].in_use = 1;
        *out = cu->blocks[best].ptr;
        return PP_OK;
    }
    if (cu->nblocks == cu->capblocks) {
        int cap = cu->capblocks ? 2 * cu->capblocks : 64;
        cu_block *b = (cu_block *)pp_realloc_array(cu->blocks, (size_t)cap, sizeof *b);
        if (!b) return pp_error_set(err, PP_ERR_NOMEM, "cuda allocator: out of host memory for %d blocks", cap);
        cu->blocks = b;
        cu->capblocks = cap;
    }
    void *p = NULL;
    /* cudaMalloc allocates on the calling thread's current device, which another device
     * object (or another thread) may have changed since this one was created */
    cudaError_t e = cudaSetDevice(cu->ordinal);
    if (e == cudaSuccess) e = cudaMalloc(&p, want);
    if (e == cudaErrorMemoryAllocation) {
        /* give the unused cached blocks back and try once more */
        (void)cudaGetLastError();
        PP_CHECK(pp_device_synchronize(d, err));
        int k = 0;
        for (int i = 0; i < cu->nblocks; i++) {
            if (cu->blocks[i].in_use) cu->blocks[k++] = cu->blocks[i];
            else {
                cudaFree(cu->blocks[i].ptr);
                cu->cached_bytes -= cu->blocks[i].size;
            }
        }
        cu->nblocks = k;
        e = cudaMalloc(&p, want);
    }
    if (e != cudaSuccess) {
        char a[32], b[32];
        return pp_error_set(err, e == cudaErrorMemoryAllocation ? PP_ERR_NOMEM : PP_ERR_DEVICE,
                            "cuda device %d: cudaMalloc of %s failed (%s held by onnxpipe): %s", d->index,
                            pp_format_bytes((double)want, a, sizeof a), pp_format_bytes((double)cu->cached_bytes, b, sizeof b),
                            cudaGetErrorString(e));
    }
    cu->blocks[cu->nblocks++] = (cu_block){p, want, 1};
    cu->cached_bytes += want;
    *out = p;
    return PP_OK;
}

/* Back to the cache: stream order makes the block safe for the next kernel that gets it. */
static void cu_free(pp_device *d, void *p)
{
    pp_cuda *cu = cu_of(d);
    for (int i = 0; i < cu->nblocks; i++)
        if (cu->blocks[i].ptr == p) {
            cu->blocks[i].in_use = 0;
            return;
        }
}

pp_status pp_cuda_workspace(const pp_kernel_ctx *c, size_t n, void **out, pp_error *err)
{
    pp_device *d = c->dev;
    pp_cuda *cu = cu_of(d);
    if (n > cu->workspace_bytes) {
        /* through the wrappers, so the device's counters see it as scratch */
        if (cu->workspace) pp_device_free(d, cu->workspace);
        cu->workspace = NULL;
        cu->workspace_bytes = 0;
        PP_CHECK(pp_device_alloc_as(d, PP_MEM_SCRATCH, pp_cu_alloc_round(n), &cu->workspace, err));
        cu->workspace_bytes = pp_cu_alloc_round(n);
    }
    *out = cu->workspace;
    return PP_OK;
}

pp_status pp_cuda_pinned(pp_device *d, size_t n, void **out, pp_error *err)
{
    pp_cuda *cu = cu_of(d);
    if (n > cu->pinned_bytes) {
        if (cu->pinned) cudaFreeHost(cu->pinned);
        cu->pinned = NULL;
        cu->pinned_bytes = 0;
        size_t want = pp_cu_alloc_round(n);
        void *p = NULL;
        cudaError_t e = cudaMallocHost(&p, want);
        if (e != cudaSuccess) return pp_cu_fail(NULL, err, "CUDA", "cudaMallocHost", cudaGetErrorString(e));
        cu->pinned = p;
        cu->pinned_bytes = want;
    }
    *out = cu->pinned;
    return PP_OK;
}

/* ---------------- copies and synchronisation ---------------- */

#define DEV_TRY(expr)                                                                                 \
    do {                                                                                              \
        cudaError_t cu_e_ = (expr);                                                                   \
        if (cu_e_ != cudaSuccess) return pp_cu_fail(NULL, err, "CUDA", #expr, cudaGetErrorString(cu_e_)); \
    } while (0)

static const char *cu_name(const pp_device *d)
{
    (void)d;
    return "cuda";
}

/* Host -> device: the host buffer may be reused as soon as this returns. A copy from
 * pageable memory would make the driver wait for the whole stream (every queued kernel
 * and NCCL call) at each microbatch's input and loss seed; so up to PP_CUDA_UPLOAD_MAX
 * bytes go through a ring of pinned slots instead, and the host waits only for the copy
 * that last used the slot, PP_CUDA_UPLOADS uploads ago. */
static pp_status cu_copy_from_host(pp_device *d, void *dst, const void *src, size_t n, pp_error *err)
{
    pp_cuda *cu = cu_of(d);
    if (!n) return PP_OK;
    if (n > PP_CUDA_UPLOAD_MAX) {
        DEV_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, cu->stream));
        DEV_TRY(cudaStreamSynchronize(cu->stream));
        return PP_OK;
    }
    cu_upload *u = &cu->up[cu->next_up];
    cu->next_up = (cu->next_up + 1) % PP_CUDA_UPLOADS;
    if (u->pending) DEV_TRY(cudaEventSynchronize(u->done));
    u->pending = 0;
    if (!u->done) DEV_TRY(cudaEventCreateWithFlags(&u->done, cudaEventDisableTiming));
    if (n > u->bytes) {
        if (u->buf) DEV_TRY(cudaFreeHost(u->buf));
        u->buf = NULL;
        u->bytes = 0;
        void *p = NULL;
        DEV_TRY(cudaMallocHost(&p, pp_cu_alloc_round(n)));
        u->buf = p;
        u->bytes = pp_cu_alloc_round(n);
    }
    memcpy(u->buf, src, n);
    DEV_TRY(cudaMemcpyAsync(dst, u->buf, n, cudaMemcpyHostToDevice, cu->stream));
    DEV_TRY(cudaEventRecord(u->done, cu->stream));
    u->pending = 1;
    return PP_OK;
}

/* Device -> host after all queued work; small reads go through pinned staging. */
static pp_status cu_copy_to_host(pp_device *d, void *dst, const void *src, size_t n, pp_error *err)
{
    pp_cuda *cu = cu_of(d);
    if (n <= ((size_t)1 << 20)) {
        void *stage;
        PP_CHECK(pp_cuda_pinned(d, n, &stage, err));
        DEV_TRY(cudaMemcpyAsync(stage, src, n, cudaMemcpyDeviceToHost, cu->stream));
        DEV_TRY(cudaStreamSynchronize(cu->stream));
        memcpy(dst, stage, n);
        return PP_OK;
    }
    DEV_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, cu->stream));
    DEV_TRY(cudaStreamSynchronize(cu->stream));
    return PP_OK;
}

static pp_status cu_copy(pp_device *d, void *dst, const void *src, size_t n, pp_error *err)
{
    DEV_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, cu_of(d)->stream));
    return PP_OK;
}

static pp_status cu_memset(pp_device *d, void *p, int value, size_t n, pp_error *err)
{
    DEV_TRY(cudaMemsetAsync(p, value, n, cu_of(d)->stream));
    return PP_OK;
}

static pp_status cu_synchronize(pp_device *d, pp_error *err)
{
    DEV_TRY(cudaStreamSynchronize(cu_of(d)->stream));
    return PP_OK;
}

static pp_status cu_stream_create(pp_device *d, void **stream, pp_error *err)
{
    cudaStream_t s;
    DEV_TRY(cudaSetDevice(cu_of(d)->ordinal));
    DEV_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *stream = s;
    return PP_OK;
}

static void cu_stream_destroy(pp_device *d, void *stream)
{
    (void)d;
    if (stream) cudaStreamDestroy((cudaStream_t)stream);
}

/* stream NULL = the device's own stream. The event stays valid for the next
 * PP_CUDA_EVENTS - 1 records (a ring, so nobody has to destroy it). */
static pp_status cu_event_record(pp_device *d, void *stream, void **event, pp_error *err)
{
    pp_cuda *cu = cu_of(d);
    cudaEvent_t e = cu->events[cu->next_event];
    cu->next_event = (cu->next_event + 1) % cu->nevents;
    DEV_TRY(cudaEventRecord(e, stream ? (cudaStream_t)stream : cu->stream));
    *event = e;
    return PP_OK;
}

static pp_status cu_stream_wait_event(pp_device *d, void *stream, void *event, pp_error *err)
{
    DEV_TRY(cudaStreamWaitEvent(stream ? (cudaStream_t)stream : cu_of(d)->stream, (cudaEvent_t)event, 0));
    return PP_OK;
}

/* ---------------- timers (timing events on the compute stream) ---------------- */

static pp_status cu_timer_create(pp_device *d, void **timer, pp_error *err)
{
    cudaEvent_t e;
    DEV_TRY(cudaSetDevice(cu_of(d)->ordinal));
    DEV_TRY(cudaEventCreate(&e));   /* default flags: it records a time */
    *timer = e;
    return PP_OK;
}

static void cu_timer_destroy(pp_device *d, void *timer)
{
    (void)d;
    cudaEventDestroy((cudaEvent_t)timer);
}

static pp_status cu_timer_record(pp_device *d, void *timer, pp_error *err)
{
    DEV_TRY(cudaEventRecord((cudaEvent_t)timer, cu_of(d)->stream));
    return PP_OK;
}

static pp_status cu_timer_elapsed(pp_device *d, void *from, void *to, double *seconds, pp_error *err)
{
    (void)d;
    float ms = 0;
    DEV_TRY(cudaEventSynchronize((cudaEvent_t)to));
    DEV_TRY(cudaEventElapsedTime(&ms, (cudaEvent_t)from, (cudaEvent_t)to));
    *seconds = 1e-3 * (double)ms;
    return PP_OK;
}

/* ---------------- graphs: the stream captured, instantiated, replayed ---------------- */

/* Thread-local mode: a call that could synchronise is an error on this thread only (the
 * NCCL watchdog's thread may query its events meanwhile). */
static pp_status cu_capture_begin(pp_device *d, pp_error *err)
{
    DEV_TRY(cudaStreamBeginCapture(cu_of(d)->stream, cudaStreamCaptureModeThreadLocal));
    return PP_OK;
}

static pp_status cu_capture_end(pp_device *d, void **graph, pp_error *err)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    *graph = NULL;
    cudaError_t e = cudaStreamEndCapture(cu_of(d)->stream, &g);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&x, g, 0);
    if (g) cudaGraphDestroy(g);   /* the executable graph keeps what it needs */
    if (e != cudaSuccess) {
        (void)cudaGetLastError();   /* an invalidated capture leaves its error behind */
        return pp_cu_fail(NULL, err, "CUDA", "cudaStreamEndCapture / cudaGraphInstantiate", cudaGetErrorString(e));
    }
    *graph = x;
    return PP_OK;
}

static pp_status cu_graph_launch(pp_device *d, void *graph, pp_error *err)
{
    DEV_TRY(cudaGraphLaunch((cudaGraphExec_t)graph, cu_of(d)->stream));
    return PP_OK;
}

static void cu_graph_destroy(pp_device *d, void *graph)
{
    (void)d;
    cudaGraphExecDestroy((cudaGraphExec_t)graph);
}

static void cu_destroy(pp_device *d)
{
    const pp_cublas_api *cb = pp_cublas();
    pp_cuda *cu = cu_of(d);
    if (cu) {
        cudaSetDevice(cu->ordinal); /* handles and memory belong to it, not to the current one */
        if (cu->stream) cudaStreamSynchronize(cu->stream);
        for (int i = 0; i < cu->nblocks; i++) cudaFree(cu->blocks[i].ptr);
        free(cu->blocks);
        if (cu->pinned) cudaFreeHost(cu->pinned);
        for (int i = 0; i < PP_CUDA_UPLOADS; i++) {
            if (cu->up[i].buf) cudaFreeHost(cu->up[i].buf);
            if (cu->up[i].done) cudaEventDestroy(cu->up[i].done);
        }
        for (int i = 0; cu->events && i < cu->nevents; i++)
            if (cu->events[i]) cudaEventDestroy(cu->events[i]);
        free(cu->events);
        pp_cu_conv_cache_free(cu);
        pp_cu_sdpa_cache_free(cu);
        pp_cu_lt_destroy(cu);
        if (cu->dnn) cudnnDestroy(cu->dnn);
        if (cu->blas) cb->cublasDestroy(cu->blas);
        if (cu->stream) cudaStreamDestroy(cu->stream);
        free(cu);
    }
    free(d);
}

static const pp_device_i cuda_device_i = {
    /* .name              = */ cu_name,
    /* .alloc             = */ cu_alloc,
    /* .free              = */ cu_free,
    /* .copy_from_host    = */ cu_copy_from_host,
    /* .copy_to_host      = */ cu_copy_to_host,
    /* .copy              = */ cu_copy,
    /* .memset            = */ cu_memset,
    /* .synchronize       = */ cu_synchronize,
    /* .stream_create     = */ cu_stream_create,
    /* .stream_destroy    = */ cu_stream_destroy,
    /* .event_record      = */ cu_event_record,
    /* .stream_wait_event = */ cu_stream_wait_event,
    /* .destroy           = */ cu_destroy,
    /* .timer_create      = */ cu_timer_create,
    /* .timer_destroy     = */ cu_timer_destroy,
    /* .timer_record      = */ cu_timer_record,
    /* .timer_elapsed     = */ cu_timer_elapsed,
    /* .capture_begin     = */ cu_capture_begin,
    /* .capture_end       = */ cu_capture_end,
    /* .graph_launch      = */ cu_graph_launch,
    /* .graph_destroy     = */ cu_graph_destroy,
};

/* Fails cleanly with "no CUDA device: <reason>" where there is no driver or GPU. */
pp_status pp_device_cuda_create(int index, pp_device **out, pp_error *err)
{
    const pp_cublas_api *cb = pp_cublas();
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return pp_error_set(err, PP_ERR_DEVICE, "no CUDA device: %s", cudaGetErrorString(e));
    }
    if (count == 0) return pp_error_set(err, PP_ERR_DEVICE, "no CUDA device: the driver reports 0 GPUs");
    if (index < 0 || index >= count)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "CUDA device %d out of range (0..%d)", index, count - 1);
    PP_CHECK(pp_cublas_load(err));
    pp_device *d = (pp_device *)pp_calloc(1, sizeof *d);
    pp_cuda *cu = (pp_cuda *)pp_calloc(1, sizeof *cu);
    cudaEvent_t *ev = (cudaEvent_t *)pp_calloc(PP_CUDA_EVENTS, sizeof *ev);
    if (!d || !cu || !ev) {
        free(d);
        free(cu);
        free(ev);
        return pp_error_set(err, PP_ERR_NOMEM, "cuda device %d: out of host memory", index);
    }
    *d = (pp_device){&cuda_device_i, PP_DEVICE_CUDA, index, cu, NULL};   /* mem: pp_device_create adds it */
    cu->ordinal = index;
    cu->events = ev;
    cu->nevents = PP_CUDA_EVENTS;
    pp_status st = PP_OK;
    /* each step keeps its library's status and reports that library's own text */
#define INIT_TRY(lib, type, ok, expr, text_of)                         \
    do {                                                               \
        type s_ = (expr);                                              \
        if (s_ != (ok)) {                                              \
            st = pp_cu_fail(NULL, err, lib, #expr, text_of(s_));       \
            goto fail;                                                 \
        }                                                              \
    } while (0)
#define CUDA_INIT(expr) INIT_TRY("CUDA", cudaError_t, cudaSuccess, expr, cudaGetErrorString)
#define CUBLAS_INIT(expr) INIT_TRY("cuBLAS", cublasStatus_t, CUBLAS_STATUS_SUCCESS, expr, cb->cublasGetStatusString)
#define CUDNN_INIT(expr) INIT_TRY("cuDNN", cudnnStatus_t, CUDNN_STATUS_SUCCESS, expr, cudnnGetErrorString)
    CUDA_INIT(cudaSetDevice(index));
    CUDA_INIT(cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking));
    for (int i = 0; i < cu->nevents; i++) CUDA_INIT(cudaEventCreateWithFlags(&cu->events[i], cudaEventDisableTiming));
    CUBLAS_INIT(cb->cublasCreate(&cu->blas));
    CUBLAS_INIT(cb->cublasSetStream(cu->blas, cu->stream));
    /* TF32 tensor cores for fp32 GEMMs (10-bit mantissa products, fp32 accumulation), as
     * cuDNN's default math for Conv; NVIDIA_TF32_OVERRIDE=0 in the environment turns TF32
     * off in both libraries (full fp32, e.g. to compare with the cpu at 1e-5) */
    CUBLAS_INIT(cb->cublasSetMathMode(cu->blas, CUBLAS_TF32_TENSOR_OP_MATH));
    CUDNN_INIT(cudnnCreate(&cu->dnn));
    CUDNN_INIT(cudnnSetStream(cu->dnn, cu->stream));
    if ((st = pp_cu_lt_create(cu, err)) != PP_OK) goto fail;
#undef CUDNN_INIT
#undef CUBLAS_INIT
#undef CUDA_INIT
#undef INIT_TRY
    *out = d;
    return PP_OK;
fail:
    cu_destroy(d);
    return st;
}

pp_status pp_cuda_device_index(const char *busid, int *index, pp_error *err)
{
    cudaError_t e = cudaDeviceGetByPCIBusId(index, busid);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return pp_error_set(err, PP_ERR_DEVICE, "no visible CUDA device at PCI bus id '%s': %s (check CUDA_VISIBLE_DEVICES)",
                            busid, cudaGetErrorString(e));
    }
    return PP_OK;
}

void *pp_cuda_device_stream(const pp_device *d)
{
    return d && d->kind == PP_DEVICE_CUDA ? (void *)cu_of(d)->stream : NULL;
}
