/* Private to kernels/cpu: sgemm on x86 cores with AVX-512 or AVX2+FMA (gemm.c), used by
 * smat.c where the process runs one BLAS thread and the tile beats OpenBLAS. */
#ifndef PP_KERNELS_CPU_GEMM_H
#define PP_KERNELS_CPU_GEMM_H

#include "smat.h"

/* which register tile: AVX-512's 6 x 64 or AVX2+FMA's 6 x 16 */
typedef enum pp_gemm_isa { PP_GEMM_AVX512, PP_GEMM_AVX2 } pp_gemm_isa;

/* Z (m, n) = alpha X (m, k) Y (k, n) + beta Z (beta 0: Z is not read) + BIAS (n floats
 * added to every row; NULL: none) with X and Y in either layout, on WHICH's tile, in full
 * or on TRI's triangle as smat_gemm says (the triangle cut per 6-row strip and 16-column
 * tile rather than in SMAT_BLOCK blocks); returns 0, having done nothing, where it does
 * not apply (the core lacks WHICH, Z transposed, k 0, a bias on a triangle, no memory for
 * its buffer), 1 when done. */
int pp_gemm(pp_gemm_isa which, smat_tri tri, int m, int n, int k, float alpha, smat X, smat Y, float beta,
            const float *bias, smat Z);

#endif
