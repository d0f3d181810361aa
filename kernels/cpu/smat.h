/* Private to kernels/cpu: a float matrix in memory, possibly transposed, and products of
 * them (gemm.c with one BLAS thread on AVX-512 or AVX2 cores, else OpenBLAS sgemm), in full
 * or on a causal triangle (matmul.c). */
#ifndef PP_KERNELS_CPU_SMAT_H
#define PP_KERNELS_CPU_SMAT_H

#include <string.h>

/* Element (i, j) at p[t ? j ld + i : i ld + j]. */
typedef struct smat {
    float *p;
    int t, ld;
} smat;

static inline smat smat_t(smat m) { return (smat){m.p, !m.t, m.ld}; }

/* The submatrix whose element (0, 0) is m's (i, j). */
static inline smat smat_at(smat m, int i, int j)
{
    return (smat){m.p + (m.t ? (long)j * m.ld + i : (long)i * m.ld + j), m.t, m.ld};
}

/* Z's rows [i0, i1), columns [j0, j1): beta Z (0 when beta is 0; nothing to do when 1).
 * What a triangle's product leaves in the entries it skips. */
static inline void smat_scale(smat Z, int i0, int i1, int j0, int j1, float beta)
{
    if (beta == 1.f || i0 >= i1 || j0 >= j1) return;
    if (Z.t) {   /* the same entries of Z^T, row-major */
        smat_scale(smat_t(Z), j0, j1, i0, i1, beta);
        return;
    }
    for (int i = i0; i < i1; i++) {   /* row by row: a memset, or a loop that vectorises */
        float *z = Z.p + (long)i * Z.ld;
        if (beta == 0.f)
            memset(z + j0, 0, (size_t)(j1 - j0) * sizeof *z);
        else
            for (int j = j0; j < j1; j++) z[j] *= beta;
    }
}

/* Which triangle of a square matrix of a product is all that matters:
 *  SMAT_TRI_Z_LOWER: only Z's entries on and below the diagonal are wanted (Z m x m);
 *  SMAT_TRI_X_LOWER: X is 0 above its diagonal (X m x m), so row i sums k <= i only;
 *  SMAT_TRI_X_UPPER: X is 0 below its diagonal (X m x m), so row i sums k >= i only. */
typedef enum { SMAT_FULL, SMAT_TRI_Z_LOWER, SMAT_TRI_X_LOWER, SMAT_TRI_X_UPPER } smat_tri;

/* Below 2 SMAT_BLOCK rows a triangle's product is computed in full. Where gemm.c applies
 * it takes the triangle in one pass (gemm.h); on OpenBLAS the triangle is cut into blocks
 * of SMAT_BLOCK rows (columns for SMAT_TRI_Z_LOWER), each one sgemm call. Measured on the
 * six attention products of the example GPT (T = 128, 64 per head, 4 heads) when gemm.c
 * also took the blocks: 315 us with 16 against 357 with 32 and 499 in full; on OpenBLAS
 * 16 and 32 tie. */
#define SMAT_BLOCK 16

/* Z (m, n) = alpha X (m, k) Y (k, n) + beta Z, skipping what the triangle makes zero or
 * unwanted (in gemm.c's strips and tiles, or in blocks); for SMAT_TRI_Z_LOWER an entry
 * above the diagonal is beta Z (0 when beta is 0) where its tile or block is skipped, the
 * full product's where the diagonal crosses it. The skipped terms are exact zeros, so what
 * is kept equals the full product up to the order in which sgemm sums. */
void smat_gemm(smat_tri tri, int m, int n, int k, float alpha, smat X, smat Y, float beta, smat Z);

/* Z (m, n) = the ROWS rows of n floats at B, repeated: row i is B's row i % ROWS. */
void smat_fill_rows(smat Z, int m, int n, const float *b, int rows);

/* Z (m, n) = alpha X (m, k) Y (k, n) + BIAS, the n floats of BIAS added to every row: in
 * gemm.c's epilogue where it applies (Z is then written once, not filled first and read
 * back), else Z filled with the bias rows and the product added. Either way each entry is
 * the bias plus the product rounded as sgemm sums it, as Linear's (A B) + b. */
void smat_gemm_bias(int m, int n, int k, float alpha, smat X, smat Y, const float *bias, smat Z);

#endif
