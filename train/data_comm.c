/* The job's device-buffer communicator and GPU choice in a build without CUDA (a CUDA
 * build compiles data_comm_nccl.c instead): everything runs on the cpu, so the MPI world
 * carries the activations and gradients too. */
#include "data_comm.h"

pp_status pp_train_data_comm(pp_comm *world, pp_device *dev, pp_comm **out, pp_error *err)
{
    *out = NULL;
    if (dev->kind != PP_DEVICE_CPU)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "device %s: this build has no NCCL (rebuild with CUDA)",
                            pp_device_kind_name(dev->kind));
    *out = world;
    return PP_OK;
}

pp_status pp_train_gpu_index(const char *busid, int fallback, int *index, pp_error *err)
{
    (void)busid;
    (void)err;
    *index = fallback;
    return PP_OK;
}
