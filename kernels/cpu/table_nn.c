/* The cpu kernel table of the "nn" family (see kernels/registry.c). */
#include <onnxpipe/kernels.h>

static const pp_kernel kernels_nn[] = {
    {0},
};

const pp_kernel_table pp_cpu_kernels_nn = {kernels_nn, 0};
