/* The NCCL entry of the communicator list (comm/backends.c; CUDA builds only): a cuda
 * device's buffers go through a NCCL twin of the MPI world whose compute stream is the
 * device's own, and placement's GPU bus ids become CUDA ordinals. */
#include "comm_internal.h"

#include <onnxpipe/backend/device_backend.h>
#include <onnxpipe/comm_nccl.h>
#include <onnxpipe/backend/device_cuda.h>

/* Sends and all-reduces start after the kernels that wrote their buffers and the kernels
 * that read a receive wait for it, while NCCL runs on streams of its own (comm_nccl.h). */
static pp_status nccl_for_device(pp_comm *world, pp_device *dev, pp_comm **out, pp_error *err)
{
    return pp_comm_nccl_create(world, dev->index, pp_cuda_device_stream(dev), out, err);
}

const pp_comm_backend pp_comm_backend_nccl = {
    /* .name            = */ "nccl",
    /* .device          = */ PP_DEVICE_CUDA,
    /* .create          = */ nccl_for_device,
    /* .device_at_busid = */ pp_cuda_device_index,
};
