/* The backend hook of a CUDA build (replaces kernels/backends_cpu.c, see cmake/cuda.cmake):
 * registers the cuda device and the cuda kernel tables. The tables are host data, so they
 * are registered even where no GPU answers (tests list them without a device); the device
 * constructor registers them again (a no-op) and reports a registration error. */
#include <onnxpipe/device.h>

#include "cuda_internal.h"

#include <string.h>

pp_status pp_device_cuda_create(int index, pp_device **out, pp_error *err);

void pp_backends_init(void)
{
    pp_error err;
    pp_device_register(PP_DEVICE_CUDA, pp_device_cuda_create);
    memset(&err, 0, sizeof err);
    (void)pp_cuda_register_kernels(&err);
}
