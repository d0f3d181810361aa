/* sgemm on AVX-512 cores, for smat.c: Z = alpha X Y + beta Z with X and Y in either
 * layout and Z row-major.
 *
 * Why not OpenBLAS here: on the example GPT's products (512 rows, depths and widths
 * 64..1024) OpenBLAS's sgemm runs at 95-100 GFLOP/s on a Zen 4 core whose FMA peak is
 * 116; a 6 x 64 register tile (24 accumulators; per k four vector loads of Y and six
 * broadcasts of X) runs at 110-114 from packed operands, and the whole product at
 * 100-108 (bench_gemm_mix --onnxpipe beside bench_gemm_mix).
 *
 * Blocking: Y is packed KC rows x NC columns at a time into 64-column panels (k-major),
 * which stay in L2 while each 6-row strip of X walks across them from L1. A row-major X
 * is read in place, its six rows as six streams; a transposed X is packed MC rows at a
 * time into k-major strips (in place its stride would make a strip's loads alias in L1),
 * unless each strip meets only one tile. A row-major Y under at most Y_IN_PLACE_ROWS rows
 * of X is read in place (the attention's causal blocks: packing would cost as much as
 * the product). Tiles narrower than 64 columns read only the vectors they need. Each Z
 * element is summed over k in order, one KC block at a time; blocks after the first add
 * to Z. */
#include "gemm512.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define MR 6    /* rows of a Z tile */
#define NR 64   /* columns of a Z tile: four vectors */
#define KC 256  /* depth of a packed block */

#define NC 512  /* columns of a packed block of Y: KC x NC floats = 512 KiB */
#define MC 192  /* rows of a packed block of a transposed X (6-row strips) */
#define XK 8                    /* floats from one k to the next in a packed strip of a transposed X */
#define XSTRIP (KC * XK + 16)   /* floats from one packed strip to the next */
#define Y_IN_PLACE_ROWS 96   /* up to this many rows of X, a row-major Y is read in place */

#define AVX512 __attribute__((target("avx512f,avx512vl")))

/* The packing buffer, one per thread, freed when the thread ends; whether the core has
 * what the tiles use, asked once. */
static pthread_key_t buf_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int have_avx512;
static void setup(void)
{
    have_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
    (void)pthread_key_create(&buf_key, free);
}

static float *pack_buffer(void)
{
    float *b = pthread_getspecific(buf_key);
    if (!b) {
        b = aligned_alloc(64, ((size_t)KC * NC + (size_t)MC / MR * XSTRIP) * sizeof *b);
        if (b && pthread_setspecific(buf_key, b)) {
            free(b);
            b = NULL;
        }
    }
    return b;
}

/* The mask of a vector's first n lanes (n clamped to 0..16). */
AVX512 static inline __mmask16 first_lanes(int n)
{
    return n >= 16 ? 0xffff : n > 0 ? (__mmask16)((1u << n) - 1) : 0;
}

/* r[q][k] -> r[k][q] */
AVX512 static inline void transpose16(__m512 r[16])
{
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {   /* per 128-bit lane: pairs of rows interleaved */
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {   /* u[4i + q], lane L: rows 4i..4i+3 at column 4L + q */
        u[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    for (int q = 0; q < 4; q++) {   /* column 4L + q: lane L of u[q], u[4 + q], u[8 + q], u[12 + q] */
        const __m512 v = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x88), w = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xdd);
        const __m512 v2 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x88),
                     w2 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xdd);
        r[q] = _mm512_shuffle_f32x4(v, v2, 0x88);
        r[4 + q] = _mm512_shuffle_f32x4(w, w2, 0x88);
        r[8 + q] = _mm512_shuffle_f32x4(v, v2, 0xdd);
        r[12 + q] = _mm512_shuffle_f32x4(w, w2, 0xdd);
    }
}

/* Y's block (kc x nc from Y's element (0, 0)) into 64-column panels: panel p holds
 * columns [64 p, 64 p + 64) as kc rows of 64; of the last, the vectors that hold columns
 * below nc are written (the columns past nc zero), the tiles read no more. */
AVX512 static void pack_y(smat Y, int kc, int nc, float *dst)
{
    for (int j0 = 0; j0 < nc; j0 += NR, dst += (size_t)kc * NR) {
        const int w = nc - j0 < NR ? nc - j0 : NR;
        if (!Y.t) {   /* rows of Y are contiguous */
            for (int k = 0; k < kc; k++) {
                const float *s = Y.p + (long)k * Y.ld + j0;
                for (int v = 0; v < (w + 15) / 16; v++) {
                    _mm512_store_ps(dst + k * NR + 16 * v, _mm512_maskz_loadu_ps(first_lanes(w - 16 * v), s + 16 * v));
                }
            }
        } else {      /* column j of Y is contiguous: 16 x 16 blocks transposed */
            for (int jj = 0; jj < w; jj += 16)
                for (int k0 = 0; k0 < kc; k0 += 16) {
                    const int kn = kc - k0 < 16 ? kc - k0 : 16;
                    const __mmask16 mk = first_lanes(kn);
                    __m512 r[16];
                    for (int q = 0; q < 16; q++)
                        r[q] = jj + q < w ? _mm512_maskz_loadu_ps(mk, Y.p + (long)(j0 + jj + q) * Y.ld + k0)
                                          : _mm512_setzero_ps();
                    transpose16(r);
                    for (int q = 0; q < kn; q++) _mm512_store_ps(dst + (k0 + q) * NR + jj, r[q]);
                }
        }
    }
}

/* Z (R x cols, row stride ldz) = alpha X (R x kc; element (i, k) at x[i rs + k cs]) times
 * the packed panel y (kc x 64, of which V vectors are read: cols <= 16 V) + beta Z;
 * beta 0 does not read Z. R and V are constants where it is inlined (tiles[][] below). */
AVX512 static inline __attribute__((always_inline)) void tile(const int R, const int V, int cols, int kc,
                                                              const float *x, long rs, long cs, const float *y,
                                                              long ys, float *z, long ldz, float alpha, float beta)
{
    __m512 acc[MR][4];
#pragma GCC unroll 6
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) acc[i][v] = _mm512_setzero_ps();
    long off[MR];
    for (int i = 0; i < R; i++) off[i] = i * rs;
    for (int k = 0; k < kc; k++, x += cs, y += ys) {
        __m512 yv[4];
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) yv[v] = _mm512_loadu_ps(y + 16 * v);
#pragma GCC unroll 6
        for (int i = 0; i < R; i++) {
            const __m512 xi = _mm512_set1_ps(x[off[i]]);
#pragma GCC unroll 4
            for (int v = 0; v < V; v++) acc[i][v] = _mm512_fmadd_ps(xi, yv[v], acc[i][v]);
        }
    }
    __mmask16 m[4];
    for (int v = 0; v < V; v++) m[v] = first_lanes(cols - 16 * v);
    const __m512 a = _mm512_set1_ps(alpha), b = _mm512_set1_ps(beta);
#pragma GCC unroll 6
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) {
            float *p = z + i * ldz + 16 * v;
            __m512 r = _mm512_mul_ps(a, acc[i][v]);
            if (beta != 0.f) r = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(m[v], p), r);
            if (m[v] == 0xffff)   /* a masked store is slow on Zen 4 */
                _mm512_storeu_ps(p, r);
            else
                _mm512_mask_storeu_ps(p, m[v], r);
        }
}

typedef void tile_fn(int cols, int kc, const float *x, long rs, long cs, const float *y, long ys, float *z,
                     long ldz, float alpha, float beta);
#define TILE(R, V)                                                                                        \
    AVX512 static void tile_##R##_##V(int cols, int kc, const float *x, long rs, long cs, const float *y, \
                                      long ys, float *z, long ldz, float alpha, float beta)               \
    {                                                                                                     \
        tile(R, V, cols, kc, x, rs, cs, y, ys, z, ldz, alpha, beta);                                      \
    }
#define TILES(R) TILE(R, 1) TILE(R, 2) TILE(R, 3) TILE(R, 4)
TILES(1) TILES(2) TILES(3) TILES(4) TILES(5) TILES(6)
#define ROW(R) {tile_##R##_1, tile_##R##_2, tile_##R##_3, tile_##R##_4}
/* tiles[R - 1][V - 1]: R rows, V vectors of 16 columns */
static tile_fn *const tiles[MR][4] = {ROW(1), ROW(2), ROW(3), ROW(4), ROW(5), ROW(6)};

/* A transposed X's rows [0, rows) x columns [0, kc) (element (i, k) at x[k ld + i]) as
 * 6-row strips, each k-major: strip s's element (i, k) at dst[s XSTRIP + XK k + i], so
 * each k is one aligned 8-float store. X's rows are read in order (read strip by strip,
 * a stride of 4 KiB would hit one L1 set); XSTRIP's extra line keeps the strips being
 * written in different sets. */
AVX512 static void pack_xt(const float *x, long ld, int rows, int kc, float *dst)
{
    for (int k = 0; k < kc; k++, x += ld)
        for (int i0 = 0, s = 0; i0 < rows; i0 += MR, s++) {
            /* 8 floats stored unmasked (a masked store is slow on Zen 4), 6 of them used */
            const int r = rows - i0;
            const __m256 v = r >= 8 ? _mm256_loadu_ps(x + i0) : _mm256_maskz_loadu_ps((__mmask8)((1u << r) - 1), x + i0);
            _mm256_store_ps(dst + (size_t)s * XSTRIP + k * XK, v);
        }
}

/* The product on blocks: Y KC x NC packed into ybuf (or read in place: a few strips of X
 * over a row-major Y), a transposed X MC x KC into xbuf (unless each strip makes one
 * tile). */
AVX512 static void gemm(int m, int n, int k, float alpha, smat X, smat Y, float beta, smat Z, float *ybuf,
                        float *xbuf)
{
    /* in place, a tile reads whole vectors of Y's rows: n a multiple of 16 stays inside them */
    const int ypack = Y.t || m > Y_IN_PLACE_ROWS || n % 16;
    for (int pc = 0; pc < k; pc += KC) {
        const int kc = k - pc < KC ? k - pc : KC;
        const float b = pc ? 1.f : beta;
        for (int jc = 0; jc < n; jc += NC) {
            const int nc = n - jc < NC ? n - jc : NC, xpack = X.t && nc > NR;
            if (ypack) pack_y(smat_at(Y, pc, jc), kc, nc, ybuf);
            const float *y = ypack ? ybuf : smat_at(Y, pc, jc).p;
            const long ys = ypack ? NR : Y.ld, panel = ypack ? kc : 1;   /* panel p at y + 64 p panel */
            for (int i0 = 0; i0 < m; i0 += MC) {
                const int mc = m - i0 < MC ? m - i0 : MC;
                if (xpack) pack_xt(smat_at(X, i0, pc).p, X.ld, mc, kc, xbuf);
                for (int ic = 0; ic < mc; ic += MR) {
                    const int rows = mc - ic < MR ? mc - ic : MR;
                    const float *x = xpack ? xbuf + (size_t)(ic / MR) * XSTRIP : smat_at(X, i0 + ic, pc).p;
                    const long rs = xpack || X.t ? 1 : X.ld, cs = xpack ? XK : X.t ? X.ld : 1;
                    float *z = Z.p + (long)(i0 + ic) * Z.ld + jc;
                    for (int jr = 0; jr < nc; jr += NR) {
                        const int cols = nc - jr < NR ? nc - jr : NR;
                        tiles[rows - 1][(cols + 15) / 16 - 1](cols, kc, x, rs, cs, y + jr * panel, ys, z + jr,
                                                              Z.ld, alpha, b);
                    }
                }
            }
        }
    }
}

int pp_gemm512(int m, int n, int k, float alpha, smat X, smat Y, float beta, smat Z)
{
    (void)pthread_once(&once, setup);
    if (Z.t || k <= 0 || !have_avx512) return 0;
    float *buf = pack_buffer();
    if (!buf) return 0;
    gemm(m, n, k, alpha, X, Y, beta, Z, buf, buf + (size_t)KC * NC);
    return 1;
}

#else

int pp_gemm512(int m, int n, int k, float alpha, smat X, smat Y, float beta, smat Z)
{
    (void)m, (void)n, (void)k, (void)alpha, (void)X, (void)Y, (void)beta, (void)Z;
    return 0;
}

#endif
