/* The backend hook of a CUDA build (replaces kernels/backends_cpu.c, see cmake/cuda.cmake):
 * registers the cuda device, whose constructor registers the cuda kernel tables. */
#include <onnxpipe/device.h>

pp_status pp_device_cuda_create(int index, pp_device **out, pp_error *err);

void pp_backends_init(void) { pp_device_register(PP_DEVICE_CUDA, pp_device_cuda_create); }
