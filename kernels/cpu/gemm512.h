/* Private to kernels/cpu: sgemm on AVX-512 cores (gemm512.c), used by smat.c where the
 * core has AVX-512 and the process runs one BLAS thread. */
#ifndef PP_KERNELS_CPU_GEMM512_H
#define PP_KERNELS_CPU_GEMM512_H

#include "smat.h"

/* Z (m, n) = alpha X (m, k) Y (k, n) + beta Z (beta 0: Z is not read) with X and Y in
 * either layout; returns 0, having done nothing, where it does not apply (no AVX-512,
 * Z transposed, k 0, no memory for its buffer), 1 when done. */
int pp_gemm512(int m, int n, int k, float alpha, smat X, smat Y, float beta, smat Z);

#endif
