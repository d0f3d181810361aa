/* The job's device-buffer communicator and GPU choice in a CUDA build (replaces
 * data_comm.c, see cmake/cuda.cmake): on a cuda device, a NCCL twin of the MPI world
 * whose compute stream is the device's own, so sends and all-reduces start after the
 * kernels that wrote their buffers and the kernels that read a receive wait for it,
 * while NCCL runs on streams of its own (comm_nccl.h). */
#include "data_comm.h"

#include <onnxpipe/comm_nccl.h>
#include <onnxpipe/device_cuda.h>

pp_status pp_train_data_comm(pp_comm *world, pp_device *dev, pp_comm **out, pp_error *err)
{
    *out = NULL;
    if (dev->kind == PP_DEVICE_CPU) {
        *out = world;
        return PP_OK;
    }
    return pp_comm_nccl_create(world, dev->index, pp_cuda_device_stream(dev), out, err);
}

pp_status pp_train_gpu_index(const char *busid, int fallback, int *index, pp_error *err)
{
    *index = fallback;
    if (!busid || !busid[0]) return PP_OK;
    return pp_cuda_device_index(busid, index, err);
}
