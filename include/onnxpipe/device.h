/* The device interface: memory and synchronisation on a CPU or a GPU, behind an opaque
 * handle (DESIGN.md "pp_device"; the vtable is onnxpipe/backend/device_backend.h). The
 * backends a build has are one list, kernels/backends.c (pp_backend in
 * backend/kernels_backend.h); nothing here is #ifdef'd. */
#ifndef ONNXPIPE_DEVICE_H
#define ONNXPIPE_DEVICE_H

#include <onnxpipe/core.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { PP_DEVICE_CPU = 0, PP_DEVICE_CUDA = 1, PP_DEVICE_KIND_COUNT } pp_device_kind;

typedef struct pp_device pp_device;

/* A device is opaque here; its hooks and fields are the backend tier's
 * (onnxpipe/backend/device_backend.h). Its kind. Local. */
PP_API pp_device_kind pp_device_get_kind(const pp_device *d);

/* Creates a device of this kind; a clear error when the backend is not compiled in or
 * has no usable hardware (e.g. "no CUDA device: CUDA driver version is insufficient"). The caller frees
 * *out with pp_device_destroy. Local. */
PP_API pp_status pp_device_create(pp_device_kind kind, int index, pp_device **out, pp_error *err);
PP_API void pp_device_destroy(pp_device *d);
/* The best device this process can use as device `index`: cuda when that backend is
 * compiled in and GPU `index` answers (it is opened and closed again: probe the GPU the
 * process will use, so no context lands on another one), else the cpu. When it falls
 * back, why (may be NULL) says why (e.g. "no CUDA device: CUDA driver version is
 * insufficient for CUDA runtime version"), for the CLI's "--device auto: using the cpu". Local. */
PP_API pp_device_kind pp_device_auto(int index, pp_error *why);
/* The kind a --device option names: "auto" (pp_device_auto(index); *why says why not a
 * GPU), "cpu" or "cuda"; NULL means auto. Another name is an error listing the valid ones. Local. */
PP_API pp_status pp_device_choose(const char *name, int index, pp_device_kind *kind, pp_error *why, pp_error *err);
PP_API const char *pp_device_kind_name(pp_device_kind kind);   /* "cpu", "cuda": a static string. Local; thread-safe. */

/* The backend's hooks on d (device.c checks the optional ones). Memory from pp_device_alloc belongs to the
 * caller, who frees it with pp_device_free on the same d before destroying d. Local. */
PP_API pp_status pp_device_alloc(pp_device *d, size_t nbytes, void **out, pp_error *err);
PP_API void pp_device_free(pp_device *d, void *p);
PP_API pp_status pp_device_copy_from_host(pp_device *d, void *dst, const void *src_host, size_t n, pp_error *err);
PP_API pp_status pp_device_copy_to_host(pp_device *d, void *dst_host, const void *src, size_t n, pp_error *err);
PP_API pp_status pp_device_copy(pp_device *d, void *dst, const void *src, size_t n, pp_error *err);
PP_API pp_status pp_device_memset(pp_device *d, void *p, int value, size_t n, pp_error *err);
PP_API pp_status pp_device_synchronize(pp_device *d, pp_error *err);

/* What an allocation holds, for the device's memory counters. */
typedef enum {
    PP_MEM_PARAMS,      /* the flat parameter buffers */
    PP_MEM_GRADS,       /* the flat gradient buffers */
    PP_MEM_OPTIMIZER,   /* optimizer state (Adam's m and v) */
    PP_MEM_STASH,       /* what a microbatch keeps from forward to backward, per stash slot */
    PP_MEM_SCRATCH,     /* the stages' forward / backward arenas, kernel workspaces, transient buffers */
    PP_MEM_COMM,        /* buffers that only communication reads or writes */
    PP_MEM_OTHER,       /* constants (non-trainable initializers) and the rest */
    PP_MEM_CATEGORY_COUNT
} pp_mem_category;

/* "params", "grads", "optimizer", "stash", "scratch", "comm", "other": a static string. Local; thread-safe. */
PP_API const char *pp_mem_category_name(pp_mem_category c);

/* pp_device_alloc, counted under category c (pp_device_alloc counts as PP_MEM_SCRATCH);
 * pp_device_free subtracts what the pointer was allocated with. Local; thread-safe with
 * other allocations on d (the counters take a lock); the caller frees *out. */
PP_API pp_status pp_device_alloc_as(pp_device *d, pp_mem_category c, size_t nbytes, void **out, pp_error *err);

/* Bytes allocated through the wrappers above (as asked for: a backend's rounding and the
 * cuda caching allocator's kept blocks are not counted, nor memory a library such as
 * NCCL or cuBLAS takes for itself). Peaks are since creation or the last reset; the peak
 * of the total is the most that was live at once, not the sum of the per-category peaks. */
typedef struct pp_device_memory_stats {
    int64_t current[PP_MEM_CATEGORY_COUNT];
    int64_t peak[PP_MEM_CATEGORY_COUNT];
    int64_t current_total, peak_total;
    int64_t live;               /* allocations not yet freed */
} pp_device_memory_stats;
/* Local; thread-safe. */
PP_API void pp_device_memory(pp_device *d, pp_device_memory_stats *out);
/* Every peak becomes the current figure. Local; thread-safe. */
PP_API void pp_device_memory_reset_peak(pp_device *d);

#ifdef __cplusplus
}
#endif
#endif
