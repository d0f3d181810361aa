/* For writing a device backend (backend tier: may change in a minor release, docs/library.md: ABI):
 * the hooks a backend fills and the layout of pp_device, which device.h keeps opaque. The
 * pp_device_* wrappers (kernels/device.c) call these hooks and keep the memory counters. */
#ifndef ONNXPIPE_DEVICE_BACKEND_H
#define ONNXPIPE_DEVICE_BACKEND_H

#include <onnxpipe/device.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Backend hooks. Optional hooks may be NULL; the pp_device_* wrappers check. */
typedef struct pp_device_i {
    const char *(*name)(const pp_device *d);
    pp_status (*alloc)(pp_device *d, size_t nbytes, void **out, pp_error *err);
    void (*free)(pp_device *d, void *p);
    /* dst/src in device memory unless the name says host */
    pp_status (*copy_from_host)(pp_device *d, void *dst, const void *src_host, size_t n, pp_error *err);
    pp_status (*copy_to_host)(pp_device *d, void *dst_host, const void *src, size_t n, pp_error *err);
    pp_status (*copy)(pp_device *d, void *dst, const void *src, size_t n, pp_error *err);
    pp_status (*memset)(pp_device *d, void *p, int value, size_t n, pp_error *err);
    pp_status (*synchronize)(pp_device *d, pp_error *err);          /* NULL: work is synchronous */
    /* Streams and events (CUDA). NULL on the CPU, where every call is synchronous. */
    pp_status (*stream_create)(pp_device *d, void **stream, pp_error *err);
    void (*stream_destroy)(pp_device *d, void *stream);
    pp_status (*event_record)(pp_device *d, void *stream, void **event, pp_error *err);
    pp_status (*stream_wait_event)(pp_device *d, void *stream, void *event, pp_error *err);
    void (*destroy)(pp_device *d);
    /* Timers (the profiler): a mark of the device's clock where it falls in the device's
     * work order (cuda: a timing event recorded on the compute stream; the cpu, whose work
     * is synchronous: the host clock, at once). elapsed waits until `to` has been reached. */
    pp_status (*timer_create)(pp_device *d, void **timer, pp_error *err);
    void (*timer_destroy)(pp_device *d, void *timer);
    pp_status (*timer_record)(pp_device *d, void *timer, pp_error *err);
    pp_status (*timer_elapsed)(pp_device *d, void *from, void *to, double *seconds, pp_error *err);
    /* Graphs (PP_DEVICE_CAP_GRAPHS; NULL elsewhere): the work queued between capture_begin
     * and capture_end is recorded, not run, into one graph that graph_launch runs whole, in
     * the device's work order, as often as asked. capture_end always ends the capture; on
     * an error it returns no graph. While capturing, the pp_device_* wrappers refuse copies
     * to and from the host, synchronisation and allocation (kernels/device.c). */
    pp_status (*capture_begin)(pp_device *d, pp_error *err);
    pp_status (*capture_end)(pp_device *d, void **graph, pp_error *err);
    pp_status (*graph_launch)(pp_device *d, void *graph, pp_error *err);
    void (*graph_destroy)(pp_device *d, void *graph);
} pp_device_i;

struct pp_device {
    const pp_device_i *i;
    pp_device_kind kind;
    int index;          /* GPU ordinal; 0 on the CPU */
    void *ctx;          /* backend state */
    struct pp_device_mem *mem;  /* allocation counters, kept by the wrappers (kernels/device.c) */
};

/* What a device can do that callers plan around (pp_backend.caps, kernels_backend.h):
 * here, not beside the backend list, so that a caller such as comm/ asks it without the
 * kernel and op tables. */
enum {
    PP_DEVICE_CAP_HOST_MEMORY = 1u << 0,  /* its memory is host memory: the host reads and writes
                                             tensors in place (no staging copies, no stream) */
    PP_DEVICE_CAP_GRAPHS = 1u << 1,       /* it captures queued work into graphs (the capture hooks) */
};
/* The capability bits (PP_DEVICE_CAP_*) of a device kind's backend (kernels/backends.c), 0
 * when this build lacks it; of a device, its kind's. Local. Thread-safe. */
PP_API unsigned pp_device_kind_caps(pp_device_kind kind);
PP_API unsigned pp_device_caps(const pp_device *d);

#ifdef __cplusplus
}
#endif
#endif
