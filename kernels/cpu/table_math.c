/* The cpu kernel table of the "math" family (see kernels/registry.c). */
#include <onnxpipe/kernels.h>

static const pp_kernel kernels_math[] = {
    {0},
};

const pp_kernel_table pp_cpu_kernels_math = {kernels_math, 0};
