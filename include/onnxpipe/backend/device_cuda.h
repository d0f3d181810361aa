/* What only the cuda backend knows about its devices (kernels/cuda/device_cuda.cu;
 * defined in CUDA builds only, like comm_nccl.h): which ordinal a PCI bus id is, and the
 * stream a device runs everything on (for a NCCL communicator that shares its order). */
#ifndef ONNXPIPE_DEVICE_CUDA_H
#define ONNXPIPE_DEVICE_CUDA_H

#include <onnxpipe/device.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA ordinal of the GPU at busid ("0000:3b:00.0", placement's gpu_busid), through
 * cudaDeviceGetByPCIBusId; an error naming the bus id when no visible GPU sits there
 * (CUDA_VISIBLE_DEVICES may hide it). Local; thread-safe. */
PP_API pp_status pp_cuda_device_index(const char *busid, int *index, pp_error *err);
/* The cudaStream_t every kernel and copy of d runs on; NULL when d is not a cuda device. Owned by d; valid
 * while d lives. Local; thread-safe. */
PP_API void *pp_cuda_device_stream(const pp_device *d);

#ifdef __cplusplus
}
#endif
#endif
