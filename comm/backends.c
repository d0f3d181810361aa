/* The device communicators this build has, in one list: PP_COMM_BACKENDS (gen/pp_backends.h,
 * written by CMakeLists.txt) names them, each defined by its own files (pp_comm_backend_nccl
 * in comm/nccl_backend.c). What carries a device's buffers is asked of it here. */
#include "comm_internal.h"

#include <onnxpipe/backend/device_backend.h>
#include <onnxpipe/device.h>
#include <pp_backends.h>

#include <stdio.h>

#define X(name) extern const pp_comm_backend pp_comm_backend_##name;
PP_COMM_BACKENDS
#undef X

/* NULL-terminated: a build without CUDA has no entry */
#define X(name) &pp_comm_backend_##name,
static const pp_comm_backend *const backends[] = {PP_COMM_BACKENDS NULL};
#undef X

const pp_comm_backend *comm_backend_for(pp_device_kind kind)
{
    for (int i = 0; backends[i]; i++)
        if (backends[i]->device == kind) return backends[i];
    return NULL;
}

/* "nccl" or "none", for the error that says what the build has */
static void backend_names(char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; backends[i] && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", backends[i]->name);
    if (!backends[0]) snprintf(buf, len, "none");
}

pp_status pp_comm_for_device(pp_comm *world, pp_device *dev, pp_comm **out, pp_error *err)
{
    if (!world || !dev || !out)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "pp_comm_for_device: NULL %s",
                            !world ? "communicator" : !dev ? "device" : "out");
    *out = NULL;
    /* the host's own memory: MPI carries it */
    if (pp_device_caps(dev) & PP_DEVICE_CAP_HOST_MEMORY) {
        *out = world;
        return PP_OK;
    }
    const pp_comm_backend *b = comm_backend_for(dev->kind);
    if (!b) {
        char have[64];
        backend_names(have, sizeof have);
        return pp_error_set(err, PP_ERR_UNSUPPORTED,
                            "rank %d: no communicator for %s device %d in this build of onnxpipe (its device "
                            "communicators: %s); rebuild with its backend or use --device cpu",
                            world->rank, pp_device_kind_name(dev->kind), dev->index, have);
    }
    return b->create(world, dev, out, err);
}
