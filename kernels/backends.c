/* The backends this build has, in one list: PP_DEVICE_BACKENDS (gen/pp_backends.h,
 * written by CMakeLists.txt) names them, each defined by its own folder (pp_backend_cpu
 * in kernels/cpu/table.c, pp_backend_cuda in kernels/cuda/table.cu). Kernel lookup by
 * (op, device kind, dtype) goes through it, 16-bit dtypes falling back to kernels/lowp.c. */
#include <onnxpipe/backend/device_backend.h>
#include <onnxpipe/backend/kernels_backend.h>

#include "lowp.h"

#include <pp_backends.h>

#define X(name) extern const pp_backend pp_backend_##name;
PP_DEVICE_BACKENDS
#undef X

#define X(name) &pp_backend_##name,
static const pp_backend *const backends[] = {PP_DEVICE_BACKENDS};
#undef X

#define NBACKENDS ((int)(sizeof backends / sizeof backends[0]))

const pp_backend *pp_backend_at(int i)
{
    return i >= 0 && i < NBACKENDS ? backends[i] : NULL;
}

const pp_backend *pp_backend_get(pp_device_kind kind)
{
    for (int i = 0; i < NBACKENDS; i++)
        if (backends[i]->kind == kind) return backends[i];
    return NULL;
}

unsigned pp_device_kind_caps(pp_device_kind kind)
{
    const pp_backend *b = pp_backend_get(kind);
    return b ? b->caps : 0;
}

unsigned pp_device_caps(const pp_device *d)
{
    return d ? pp_device_kind_caps(d->kind) : 0;
}

/* the backend's own kernel of op in dtype, or NULL */
static const pp_kernel *own_kernel(pp_op op, pp_device_kind device, pp_dtype dtype)
{
    const pp_backend *b = pp_backend_get(device);
    if (!b || (int)op < 0 || op >= PP_OP_COUNT) return NULL;
    for (int t = 0; t < b->ntables; t++)
        if (b->tables[t].dtype == dtype && b->tables[t].kernels[op].forward) return &b->tables[t].kernels[op];
    return NULL;
}

const pp_kernel *pp_kernel_find(pp_op op, pp_device_kind device, pp_dtype dtype)
{
    const pp_kernel *k = own_kernel(op, device, dtype);
    if (k || !pp_backend_get(device) || (int)op < 0 || op >= PP_OP_COUNT) return k;
    /* 16-bit compute without a native kernel: the adapter around the F32 one */
    return dtype == PP_DTYPE_BF16 || dtype == PP_DTYPE_F16 ? pp_lowp_adapter(op, device) : NULL;
}

int pp_kernel_native(pp_op op, pp_device_kind device, pp_dtype dtype) { return own_kernel(op, device, dtype) != NULL; }
