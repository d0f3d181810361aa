/* kernels/cpu/gemm.c, the sgemm behind smat.c's products, on each of its register tiles
 * (AVX-512's 6 x 64, AVX2+FMA's 6 x 16), against the same product summed in double by
 * loops and against OpenBLAS's cblas_sgemm, on shapes that cross each of its edges: rows
 * around its 6-row strips, the 192-row blocks of a packed transposed X and the 96 rows up
 * to which Y is read in place; columns around its 8- and 16-column vectors, 16- and
 * 64-column tiles and 512-column blocks; depths around its 256-deep blocks; X and Y in
 * both layouts with padded leading dimensions; alpha and beta, with beta 0 over a
 * NaN-filled Z (which must not be read); a bias row added in the epilogue (bitwise equal to
 * Z filled with it and the product added with beta 1, the roundings of (X Y) + b).
 * smat_gemm's full product (which also takes a transposed Z) is checked the same way. A core without a tile's ISA checks that pp_gemm
 * declines it and that smat_gemm still computes (on the other tile or OpenBLAS). The
 * bound is the float rounding of a k-term sum, 2 k u (|alpha| sum |x y| + |beta z|),
 * u = 2^-24: a lost or doubled term is far above it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include <cblas.h>

#include "gemm.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float uniform(void) { return (float)next() / 4294967296.0f * 2.f - 1.f; }

static const char *const names[] = {"AVX-512", "AVX2"};
static int have(pp_gemm_isa which)
{
    return which == PP_GEMM_AVX512 ? __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")
                                   : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#define VIA_SMAT (-1)   /* check()'s via: smat_gemm, else a pp_gemm_isa */

typedef struct shape {
    int m, n, k, xt, yt, zt;
    float alpha, beta;
    smat_tri tri;   /* SMAT_FULL unless named */
    int bias;       /* Z also gets a bias row (n floats) added to every row; smat_gemm_bias when beta is 0 */
} shape;

/* A matrix (r x c) in the layout t with a padded leading dimension, random entries. */
static smat matrix(int r, int c, int t, int pad)
{
    const int ld = (t ? r : c) + pad;
    const size_t len = (size_t)(t ? c : r) * ld;
    float *p = malloc((len ? len : 1) * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < len; i++) p[i] = uniform();
    return (smat){p, t, ld};
}
static float get(smat a, int i, int j) { return *smat_at(a, i, j).p; }

/* Z = alpha X Y + beta Z through VIA (pp_gemm on a tile, or smat_gemm) on s.tri against
 * the double loops and cblas_sgemm of the full product; returns 0 when pp_gemm declined.
 * Under X_LOWER (X_UPPER) X is 0 above (below) its diagonal, so the whole Z must match;
 * under Z_LOWER an entry above the diagonal must be beta Z (a skipped tile; 0 when beta
 * is 0) or the full product's (a tile the diagonal crosses). */
static int check(shape s, int via)
{
    const int pad = (int)(next() % 3) * 5;
    smat X = matrix(s.m, s.k, s.xt, pad), Y = matrix(s.k, s.n, s.yt, pad), Z = matrix(s.m, s.n, s.zt, pad);
    for (int i = 0; i < s.m; i++)
        for (int q = 0; q < s.k; q++)
            if ((s.tri == SMAT_TRI_X_LOWER && q > i) || (s.tri == SMAT_TRI_X_UPPER && q < i)) *smat_at(X, i, q).p = 0.f;
    const size_t zlen = (size_t)(s.zt ? s.n : s.m) * Z.ld;
    float *z0 = malloc(zlen * sizeof *z0), *zb = malloc(zlen * sizeof *zb);
    assert_non_null(z0), assert_non_null(zb);
    for (size_t i = 0; i < zlen; i++) z0[i] = zb[i] = s.beta == 0.f ? NAN : Z.p[i];
    for (size_t i = 0; i < zlen; i++) Z.p[i] = z0[i];
    float *bias = NULL;
    if (s.bias) {
        bias = malloc((size_t)s.n * sizeof *bias);
        assert_non_null(bias);
        for (int j = 0; j < s.n; j++) bias[j] = uniform();
    }
    int done = 1;
    if (via == VIA_SMAT && s.bias)
        smat_gemm_bias(s.m, s.n, s.k, s.alpha, X, Y, bias, Z);
    else if (via == VIA_SMAT)
        smat_gemm(s.tri, s.m, s.n, s.k, s.alpha, X, Y, s.beta, Z);
    else
        done = pp_gemm((pp_gemm_isa)via, s.tri, s.m, s.n, s.k, s.alpha, X, Y, s.beta, bias, Z);
    if (done && s.bias && s.beta == 0.f && !s.zt) {   /* bitwise: the bias rows, then the product with beta 1 */
        float *zf = malloc(zlen * sizeof *zf);
        assert_non_null(zf);
        for (int i = 0; i < s.m; i++)
            for (int j = 0; j < s.n; j++) zf[(size_t)i * Z.ld + j] = bias[j];
        const smat Zf = {zf, 0, Z.ld};
        if (via == VIA_SMAT) smat_gemm(SMAT_FULL, s.m, s.n, s.k, s.alpha, X, Y, 1.f, Zf);
        else assert_true(pp_gemm((pp_gemm_isa)via, SMAT_FULL, s.m, s.n, s.k, s.alpha, X, Y, 1.f, NULL, Zf));
        for (int i = 0; i < s.m; i++)
            for (int j = 0; j < s.n; j++) assert_true(get(Z, i, j) == get(Zf, i, j));
        free(zf);
    }
    if (done) {
        /* OpenBLAS on the same operands; a transposed Z as Z^T = Y^T X^T */
        const smat A = s.zt ? smat_t(Y) : X, B = s.zt ? smat_t(X) : Y;
        cblas_sgemm(CblasRowMajor, A.t ? CblasTrans : CblasNoTrans, B.t ? CblasTrans : CblasNoTrans, s.zt ? s.n : s.m,
                    s.zt ? s.m : s.n, s.k, s.alpha, A.p, A.ld, B.p, B.ld, s.beta, zb, Z.ld);
        const smat Zb = {zb, s.zt, Z.ld}, Z0 = {z0, s.zt, Z.ld};
        for (int i = 0; i < s.m && bias; i++)
            for (int j = 0; j < s.n; j++) *smat_at(Zb, i, j).p += bias[j];
        double worst = 0, worst_blas = 0;
        for (int i = 0; i < s.m; i++)
            for (int j = 0; j < s.n; j++) {
                double sum = 0, mag = 0;
                for (int q = 0; q < s.k; q++) {
                    const double t = (double)get(X, i, q) * get(Y, q, j);
                    sum += t, mag += fabs(t);
                }
                const double zi = s.beta == 0.f ? 0 : get(Z0, i, j);
                const double bj = bias ? bias[j] : 0;
                const double ref = s.alpha * sum + s.beta * zi + bj;
                const double bound =
                    2.0 * (s.k + 3) * 0x1p-24 * (fabs(s.alpha) * mag + fabs(s.beta * zi) + fabs(bj)) + 1e-30;
                double e = fabs(get(Z, i, j) - ref) / bound;
                const double eb = fabs(get(Zb, i, j) - ref) / bound;
                if (s.tri == SMAT_TRI_Z_LOWER && j > i && get(Z, i, j) == (s.beta == 0.f ? 0.f : s.beta * get(Z0, i, j)))
                    e = 0;
                if (!(e <= worst)) worst = e;   /* NaN sticks */
                if (eb > worst_blas) worst_blas = eb;
            }
        if (!(worst <= 1.0))
            fprintf(stderr,
                    "m %d n %d k %d tri %d X%s Y%s Z%s alpha %g beta %g bias %d: error %.3g of the bound (OpenBLAS %.3g)\n",
                    s.m, s.n, s.k, (int)s.tri, s.xt ? "^T" : "", s.yt ? "^T" : "", s.zt ? "^T" : "", s.alpha, s.beta,
                    s.bias, worst, worst_blas);
        assert_true(worst <= 1.0);
        assert_true(worst_blas <= 1.0);
    }
    free(X.p), free(Y.p), free(Z.p), free(z0), free(zb), free(bias);
    return done;
}

static const int rows[] = {1, 5, 6, 7, 13, 95, 96, 97, 191, 192, 200};
static const int cols[] = {1, 7, 8, 9, 15, 16, 17, 33, 63, 64, 65, 130, 512, 530};
static const int depths[] = {1, 7, 255, 256, 257, 600};
#define LEN(a) ((int)(sizeof a / sizeof a[0]))

/* every edge of each dimension with the others at random from their lists, in all four
 * operand layouts, alternately through pp_gemm on WHICH's tile and smat_gemm */
static void edges(pp_gemm_isa which)
{
    int checked = 0, declined = 0, direct = 0, biased = 0;
    const float alphas[] = {1.f, -0.5f}, betas[] = {0.f, 1.f, 0.25f};
    for (int dim = 0; dim < 3; dim++) {
        const int len = dim == 0 ? LEN(rows) : dim == 1 ? LEN(cols) : LEN(depths);
        for (int e = 0; e < len; e++)
            for (int layout = 0; layout < 4; layout++) {
                shape s = {rows[next() % LEN(rows)], cols[next() % LEN(cols)], depths[next() % LEN(depths)],
                           layout & 1, layout >> 1, 0, alphas[next() % 2], betas[next() % 3], SMAT_FULL, 0};
                if (dim == 0) s.m = rows[e];
                if (dim == 1) s.n = cols[e];
                if (dim == 2) s.k = depths[e];
                const int via_smat = (e + layout) & 1;
                s.zt = via_smat && (next() & 1);
                s.bias = next() % 3 == 0;
                if (s.bias && via_smat) s.beta = 0.f;   /* smat_gemm_bias: Z = alpha X Y + bias */
                direct += !via_smat;
                biased += s.bias;
                if (check(s, via_smat ? VIA_SMAT : (int)which)) checked++;
                else declined++;
            }
    }
    printf("gemm %s tile: %d products (%d with a bias row) within the float bound of the double loops (and OpenBLAS), "
           "%d declined (%s)\n",
           names[which], checked, biased, declined, have(which) ? "the core has it" : "the core lacks it: not run");
    assert_int_equal(declined, have(which) ? 0 : direct);
}
static void test_edges_avx512(void **state) { (void)state, edges(PP_GEMM_AVX512); }
static void test_edges_avx2(void **state) { (void)state, edges(PP_GEMM_AVX2); }

/* The causal triangles (smat.h) through pp_gemm on WHICH's tile in one pass and through
 * smat_gemm (which takes them there where the tile applies, else cuts them into
 * SMAT_BLOCK blocks): sides around the 6-row strips, 16-column tiles, 2 SMAT_BLOCK and
 * the 256-deep blocks (a strip's depths then start or end in a later block), X and Y in
 * both layouts, alpha and beta. */
static void triangles(pp_gemm_isa which)
{
    static const int sides[] = {32, 37, 48, 96, 131, 256, 300};
    const float betas[] = {0.f, 1.f, 0.25f};
    int checked = 0, declined = 0, direct = 0;
    for (int t = SMAT_TRI_Z_LOWER; t <= SMAT_TRI_X_UPPER; t++)
        for (int e = 0; e < LEN(sides); e++)
            for (int layout = 0; layout < 8; layout++) {
                const int T = sides[e], other = 16 + (int)(next() % 80);
                shape s = {T, t == SMAT_TRI_Z_LOWER ? T : other, t == SMAT_TRI_Z_LOWER ? other : T, layout & 1,
                           (layout >> 1) & 1, 0, layout & 4 ? -0.5f : 1.f, betas[next() % 3], (smat_tri)t, 0};
                const int via_smat = layout & 4;
                s.zt = via_smat && (next() & 1);
                direct += !via_smat;
                if (check(s, via_smat ? VIA_SMAT : (int)which)) checked++;
                else declined++;
            }
    printf("gemm %s tile: %d triangle products within the float bound of the double loops, %d declined (%s)\n",
           names[which], checked, declined, have(which) ? "the core has it" : "the core lacks it: not run");
    assert_int_equal(declined, have(which) ? 0 : direct);
}
static void test_triangles_avx512(void **state) { (void)state, triangles(PP_GEMM_AVX512); }
static void test_triangles_avx2(void **state) { (void)state, triangles(PP_GEMM_AVX2); }

/* The example GPT's own products (microbatch 4: 512 rows, d 256, 4 heads of 64, MLP 1024),
 * forward (with and without a bias row) and both backward forms. */
static void test_model_shapes(void **state)
{
    (void)state;
    static const shape gpt[] = {
        {512, 768, 256, 0, 0, 0, 1.f, 0.f, SMAT_FULL, 0},  {512, 256, 768, 0, 1, 0, 1.f, 1.f, SMAT_FULL, 0},  {256, 768, 512, 1, 0, 0, 1.f, 1.f, SMAT_FULL, 0},
        {512, 1024, 256, 0, 0, 0, 1.f, 1.f, SMAT_FULL, 0}, {512, 256, 1024, 0, 1, 0, 1.f, 0.f, SMAT_FULL, 0}, {1024, 256, 512, 1, 0, 0, 1.f, 1.f, SMAT_FULL, 0},
        {128, 128, 64, 0, 1, 0, 0.125f, 1.f, SMAT_FULL, 0}, {32, 64, 128, 0, 0, 0, 1.f, 0.f, SMAT_FULL, 0},  {32, 64, 96, 1, 0, 0, 1.f, 1.f, SMAT_FULL, 0},
        {96, 32, 64, 0, 1, 0, 0.125f, 0.f, SMAT_FULL, 0},
        /* Linear's bias row in the epilogue: forward, and past the 256-deep blocks */
        {512, 768, 256, 0, 0, 0, 1.f, 0.f, SMAT_FULL, 1}, {512, 256, 1024, 0, 1, 0, 1.f, 0.f, SMAT_FULL, 1},
    };
    for (int which = 0; which < LEN(names); which++) {
        int n = 0;
        for (int i = 0; i < LEN(gpt); i++) n += check(gpt[i], which);
        printf("gemm %s tile: %d of the example GPT's %d product forms checked\n", names[which], n, LEN(gpt));
        assert_int_equal(n, have((pp_gemm_isa)which) ? LEN(gpt) : 0);
    }
}

static void *in_thread(void *arg)
{
    (void)arg;
    shape s = {40, 70, 300, 1, 1, 0, 1.f, 0.f, SMAT_FULL, 0};
    return (void *)(intptr_t)check(s, VIA_SMAT);
}

/* Each thread has its own packing buffer, freed when it ends (ASan sees a misuse). */
static void test_threads(void **state)
{
    (void)state;
    pthread_t t[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, in_thread, NULL), 0);
    for (int i = 0; i < 2; i++) {
        void *r;
        assert_int_equal(pthread_join(t[i], &r), 0);
        assert_int_equal((intptr_t)r, 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edges_avx512),
        cmocka_unit_test(test_edges_avx2),
        cmocka_unit_test(test_triangles_avx512),
        cmocka_unit_test(test_triangles_avx2),
        cmocka_unit_test(test_model_shapes),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
