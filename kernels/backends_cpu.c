/* The backend hook of a cpu-only build: the cpu device is built into kernels/device.c,
 * so there is nothing more to register. A CUDA build (cmake/cuda.cmake) replaces this
 * file with kernels/cuda/backends_cuda.cu, which registers the cuda device. */
#include <onnxpipe/device.h>

void pp_backends_init(void) {}
