/* Matrix products on sgemm for matmul.c: a product of possibly transposed matrices, and
 * the same on a causal triangle (smat.h): in one pass on gemm.c, else cut into blocks of
 * SMAT_BLOCK rows or columns. */
#include "smat.h"

#include "gemm.h"

#include <cblas.h>

/* gemm.c where it applies (one BLAS thread: it is single-threaded): on an AVX-512 core;
 * on AVX2+FMA for products with a row-major X and for triangles (its 6 x 16 tile beats
 * OpenBLAS there on a Zen 3 core; on a full product with a transposed X it runs at
 * 0.8-0.9x of OpenBLAS: docs/benchmarks.md). 0 where it does not apply. */
static int own_gemm(smat_tri tri, int m, int n, int k, float alpha, smat X, smat Y, float beta, const float *bias,
                    smat Z)
{
    return openblas_get_num_threads() == 1 && (pp_gemm(PP_GEMM_AVX512, tri, m, n, k, alpha, X, Y, beta, bias, Z) ||
                                               ((!X.t || tri != SMAT_FULL) &&
                                                pp_gemm(PP_GEMM_AVX2, tri, m, n, k, alpha, X, Y, beta, bias, Z)));
}

/* the full product: gemm.c where it applies, else OpenBLAS */
static void gemm(int m, int n, int k, float alpha, smat X, smat Y, float beta, smat Z)
{
    enum CBLAS_TRANSPOSE T = CblasTrans, NT = CblasNoTrans;
    if (m <= 0 || n <= 0) return;
    if (Z.t) {   /* Z^T = Y^T X^T */
        gemm(n, m, k, alpha, smat_t(Y), smat_t(X), beta, smat_t(Z));
        return;
    }
    if (own_gemm(SMAT_FULL, m, n, k, alpha, X, Y, beta, NULL, Z)) return;
    cblas_sgemm(CblasRowMajor, X.t ? T : NT, Y.t ? T : NT, m, n, k, alpha, X.p, X.ld, Y.p, Y.ld, beta, Z.p, Z.ld);
}

void smat_gemm(smat_tri tri, int m, int n, int k, float alpha, smat X, smat Y, float beta, smat Z)
{
    if (tri == SMAT_FULL || m < 2 * SMAT_BLOCK) {
        gemm(m, n, k, alpha, X, Y, beta, Z);
        return;
    }
    if (own_gemm(tri, m, n, k, alpha, X, Y, beta, NULL, Z)) return;   /* the triangle in one pass */
    for (int b0 = 0; b0 < m; b0 += SMAT_BLOCK) {
        const int b1 = b0 + SMAT_BLOCK < m ? b0 + SMAT_BLOCK : m;
        switch (tri) {
        case SMAT_TRI_Z_LOWER:   /* columns [b0, b1) from row b0 down; above them beta Z */
            gemm(m - b0, b1 - b0, k, alpha, smat_at(X, b0, 0), smat_at(Y, 0, b0), beta, smat_at(Z, b0, b0));
            smat_scale(Z, 0, b0, b0, b1, beta);
            break;
        case SMAT_TRI_X_LOWER:   /* rows [b0, b1) sum k < b1 */
            gemm(b1 - b0, n, b1 < k ? b1 : k, alpha, smat_at(X, b0, 0), Y, beta, smat_at(Z, b0, 0));
            break;
        case SMAT_TRI_X_UPPER:   /* rows [b0, b1) sum k >= b0 */
            gemm(b1 - b0, n, k - b0, alpha, smat_at(X, b0, b0), smat_at(Y, b0, 0), beta, smat_at(Z, b0, 0));
            break;
        case SMAT_FULL: break;
        }
    }
}

void smat_fill_rows(smat Z, int m, int n, const float *b, int rows)
{
    for (int i = 0; i < m; i++) {
        const float *r = b + (long)(i % rows) * n;
        if (!Z.t) memcpy(Z.p + (long)i * Z.ld, r, (size_t)n * sizeof *r);
        else for (int j = 0; j < n; j++) Z.p[(long)j * Z.ld + i] = r[j];
    }
}

void smat_gemm_bias(int m, int n, int k, float alpha, smat X, smat Y, const float *bias, smat Z)
{
    if (m <= 0 || n <= 0 || own_gemm(SMAT_FULL, m, n, k, alpha, X, Y, 0.f, bias, Z)) return;
    smat_fill_rows(Z, m, n, bias, 1);   /* Z = the bias rows, then Z += alpha X Y */
    gemm(m, n, k, alpha, X, Y, 1.f, Z);
}
