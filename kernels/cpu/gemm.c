/* sgemm on x86 cores with AVX-512 or AVX2+FMA, for smat.c: Z = alpha X Y + beta Z (+ a
 * bias row added to every row, in the tiles' epilogue) with X and Y in either layout and Z
 * row-major. The blocking, packing and driver are shared;
 * what differs per ISA is the register tile (and AVX-512's packing of a transposed Y),
 * chosen at run time by cpuid and compiled with target attributes.
 *
 * Why not OpenBLAS: on the example GPT's products (512 rows, depths and widths 64..1024)
 * OpenBLAS's sgemm runs at 95-100 GFLOP/s on a Zen 4 core whose FMA peak is 116; a 6 x 64
 * AVX-512 tile (24 accumulators; per k four vector loads of Y and six broadcasts of X)
 * runs at 110-114 from packed operands, and the whole product at 100-108
 * (bench_gemm_mix --onnxpipe beside bench_gemm_mix). On AVX2 the tile is 6 x 16 (12
 * accumulators; per k two loads of Y, six broadcasts of X); docs/benchmarks.md has its
 * figures against OpenBLAS on a Zen 3 core.
 *
 * Blocking: Y is packed KC rows x NC columns at a time into NR-column panels (k-major),
 * which stay in L2 while each 6-row strip of X walks across them from L1. A row-major X
 * is read in place, its six rows as six streams; a transposed X is packed MC rows at a
 * time into k-major strips (in place its stride would make a strip's loads alias in L1),
 * unless each strip meets only one tile. A row-major Y under at most Y_IN_PLACE_ROWS rows
 * of X is read in place (the attention's causal blocks: packing would cost as much as
 * the product). Tiles narrower than NR columns read only the vectors they need. Each Z
 * element is summed over k in order, one KC block at a time; blocks after the first add
 * to Z. */
#include "gemm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define MR 6    /* rows of a Z tile */
#define MC 192  /* rows of a packed block of a transposed X (6-row strips) */
#define XK 8                    /* floats from one k to the next in a packed strip of a transposed X */
#define Y_IN_PLACE_ROWS 96   /* up to this many rows of X, a row-major Y is read in place */
#define KC_MAX 256
#define NC_MAX 512
#define XSTRIP (KC_MAX * XK + 16)   /* floats from one packed strip to the next */
/* rows of a transposed X that pack_xt asks for ahead of the one it copies: each row is a
 * few lines in its own 4 KiB page when X's rows are 1024 floats, which the hardware
 * prefetcher does not run ahead into (+5% on 1024 x 256 x 1024 on a Zen 3 core) */
#define XT_PREFETCH_ROWS 8
/* rows of a row-major Y that pack_y asks for ahead of the one it copies: a weight
 * gradient's Y is the output gradient (1024 x 768 floats for GPT-2's c_attn), read from L3
 * a few lines per row; packing it was 8% of 256 x 768 x 1024 on a Zen 4 core, 4-5% with
 * this (AVX2's tile there: 10-14%, 8.5-9.5%) */
#define Y_PREFETCH_ROWS 16

#define AVX512 __attribute__((target("avx512f,avx512vl")))
#define AVX2 __attribute__((target("avx2,fma")))
/* The register tiles run uninstrumented in the sanitizer build (CMake PP_SANITIZE), as
 * OpenBLAS's kernels always did: instrumented, every broadcast and load of the inner loop
 * is checked (the CI suite took 25 min with them instrumented, 20 without, on a machine
 * whose speed drifts by 10-25%, so the share is uncertain). What a tile reads is the driver's
 * rows and columns (test_gemm checks every edge of them against padded operands); the
 * packing and the driver stay instrumented. */
#define TILE_FN __attribute__((no_sanitize("address", "undefined")))

/* Z (R x cols, row stride ldz) = alpha X (R x kc; element (i, k) at x[i rs + k cs]) times
 * a panel of Y (kc x NR, row stride ys; cols <= NR) + beta Z + bias (the tile's cols of a
 * row added to every row; NULL: none); beta 0 does not read Z. */
typedef void tile_fn(int cols, int kc, const float *x, long rs, long cs, const float *y, long ys, float *z,
                     long ldz, float alpha, float beta, const float *bias);

/* One ISA's part: its tiles, tiles[R - 1][V - 1] for R rows and V vectors (of NR / 4 or
 * NR / 2 columns), its packing of Y's kc x nc block into NR-column panels (panel p:
 * columns [NR p, NR p + NR) as kc rows of NR; the columns past nc zero where a tile reads
 * them), and its block sizes. */
typedef struct isa {
    int nr, vec, kc, nc;   /* tile columns, floats per vector, packed block depth and width */
    tile_fn *const (*tiles)[4];
    void (*pack_y)(smat Y, int kc, int nc, float *dst);
} isa;

/* The packing buffer, one per thread, freed when the thread ends; what the core has,
 * asked once. */
static pthread_key_t buf_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int have_avx512, have_avx2;
static void setup(void)
{
    have_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
    have_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    (void)pthread_key_create(&buf_key, free);
}

static float *pack_buffer(void)
{
    float *b = pthread_getspecific(buf_key);
    if (!b) {
        b = aligned_alloc(64, ((size_t)KC_MAX * NC_MAX + (size_t)MC / MR * XSTRIP) * sizeof *b);
        if (b && pthread_setspecific(buf_key, b)) {
            free(b);
            b = NULL;
        }
    }
    return b;
}

/* ---- AVX-512: a 6 x 64 tile, four vectors of 16 ---- */
#define NR512 64

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
AVX512 static void pack_y512(smat Y, int kc, int nc, float *dst)
{
    for (int j0 = 0; j0 < nc; j0 += NR512, dst += (size_t)kc * NR512) {
        const int w = nc - j0 < NR512 ? nc - j0 : NR512;
        if (!Y.t) {   /* rows of Y are contiguous */
            for (int k = 0; k < kc; k++) {
                const float *s = Y.p + (long)k * Y.ld + j0;
                for (int v = 0; k + Y_PREFETCH_ROWS < kc && v < (w + 15) / 16; v++)
                    __builtin_prefetch(s + Y_PREFETCH_ROWS * Y.ld + 16 * v, 0, 3);
                for (int v = 0; v < (w + 15) / 16; v++) {
                    _mm512_store_ps(dst + k * NR512 + 16 * v, _mm512_maskz_loadu_ps(first_lanes(w - 16 * v), s + 16 * v));
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
                    for (int q = 0; q < kn; q++) _mm512_store_ps(dst + (k0 + q) * NR512 + jj, r[q]);
                }
        }
    }
}

/* Z (R x cols, row stride ldz) = alpha X (R x kc; element (i, k) at x[i rs + k cs]) times
 * the packed panel y (kc x 64, of which V vectors are read: cols <= 16 V) + beta Z + bias
 * (as tile_fn); beta 0 does not read Z. R and V are constants where it is inlined
 * (tiles512 below). */
AVX512 TILE_FN static inline __attribute__((always_inline)) void tile512(const int R, const int V, int cols, int kc,
                                                              const float *x, long rs, long cs, const float *y,
                                                              long ys, float *z, long ldz, float alpha, float beta,
                                                              const float *bias)
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
    __m512 bv[4];
    for (int v = 0; v < V; v++) bv[v] = bias ? _mm512_maskz_loadu_ps(m[v], bias + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) {
            float *p = z + i * ldz + 16 * v;
            __m512 r = _mm512_mul_ps(a, acc[i][v]);
            if (beta != 0.f) r = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(m[v], p), r);
            if (bias) r = _mm512_add_ps(r, bv[v]);
            if (m[v] == 0xffff)   /* a masked store is slow on Zen 4 */
                _mm512_storeu_ps(p, r);
            else
                _mm512_mask_storeu_ps(p, m[v], r);
        }
}

#define TILE512(R, V)                                                                                        \
    AVX512 TILE_FN static void tile512_##R##_##V(int cols, int kc, const float *x, long rs, long cs, const float *y, \
                                      long ys, float *z, long ldz, float alpha, float beta, const float *bias) \
    {                                                                                                     \
        tile512(R, V, cols, kc, x, rs, cs, y, ys, z, ldz, alpha, beta, bias);                                \
    }
#define TILES512(R) TILE512(R, 1) TILE512(R, 2) TILE512(R, 3) TILE512(R, 4)
TILES512(1) TILES512(2) TILES512(3) TILES512(4) TILES512(5) TILES512(6)
#define ROW512(R) {tile512_##R##_1, tile512_##R##_2, tile512_##R##_3, tile512_##R##_4}
/* tiles[R - 1][V - 1]: R rows, V vectors of 16 columns */
static tile_fn *const tiles512[MR][4] = {ROW512(1), ROW512(2), ROW512(3), ROW512(4), ROW512(5), ROW512(6)};


/* ---- AVX2 + FMA: a 6 x 16 tile, two vectors of 8 ---- */
#define NR2 16

/* -1 in a vector's first n lanes (n clamped to 0..8), 0 in the rest */
AVX2 static inline __m256i first_lanes8(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* as tile512, on the panel y (kc x 16, of which V vectors are read: cols <= 8 V) */
AVX2 TILE_FN static inline __attribute__((always_inline)) void tile2(const int R, const int V, int cols, int kc,
                                                            const float *x, long rs, long cs, const float *y,
                                                            long ys, float *z, long ldz, float alpha, float beta,
                                                            const float *bias)
{
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < R; i++)
#pragma GCC unroll 2
        for (int v = 0; v < V; v++) acc[i][v] = _mm256_setzero_ps();
    long off[MR];
    for (int i = 0; i < R; i++) off[i] = i * rs;
#pragma GCC unroll 4
    for (int k = 0; k < kc; k++, x += cs, y += ys) {
        __m256 yv[2];
#pragma GCC unroll 2
        for (int v = 0; v < V; v++) yv[v] = _mm256_loadu_ps(y + 8 * v);
#pragma GCC unroll 6
        for (int i = 0; i < R; i++) {
            const __m256 xi = _mm256_broadcast_ss(x + off[i]);
#pragma GCC unroll 2
            for (int v = 0; v < V; v++) acc[i][v] = _mm256_fmadd_ps(xi, yv[v], acc[i][v]);
        }
    }
    __m256i m[2];
    for (int v = 0; v < V; v++) m[v] = first_lanes8(cols - 8 * v);
    const __m256 a = _mm256_set1_ps(alpha), b = _mm256_set1_ps(beta);
    __m256 bv[2];
    for (int v = 0; v < V; v++) bv[v] = bias ? _mm256_maskload_ps(bias + 8 * v, m[v]) : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < R; i++)
#pragma GCC unroll 2
        for (int v = 0; v < V; v++) {
            float *p = z + i * ldz + 8 * v;
            __m256 r = _mm256_mul_ps(a, acc[i][v]);
            if (beta != 0.f) r = _mm256_fmadd_ps(b, _mm256_maskload_ps(p, m[v]), r);
            if (bias) r = _mm256_add_ps(r, bv[v]);
            if (cols - 8 * v >= 8)
                _mm256_storeu_ps(p, r);
            else
                _mm256_maskstore_ps(p, m[v], r);
        }
}

/* r[q][k] -> r[k][q], 8 x 8 */
AVX2 static inline void transpose8(__m256 r[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {   /* per 128-bit lane: pairs of rows interleaved */
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {   /* u[4i + q], lane L: rows 4i..4i+3 at column 4L + q */
        u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    for (int q = 0; q < 4; q++) {   /* column q and 4 + q: the low and the high lanes */
        r[q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x20);
        r[4 + q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x31);
    }
}

/* Y's block (kc x nc) into 16-column panels, as isa.pack_y says. Each element packed serves
 * m / 6 tiles, but packing is not free: with a call of memcpy per row (a size the compiler
 * cannot inline) it was a quarter of the weight gradients' 256 x 1024 x 1024, and a
 * transposed Y copied element by element 6% of the 1024 x 256 x 1024 forward. */
AVX2 static void pack_y2(smat Y, int kc, int nc, float *dst)
{
    for (int j0 = 0; j0 < nc; j0 += NR2, dst += (size_t)kc * NR2) {
        const int w = nc - j0 < NR2 ? nc - j0 : NR2;
        if (!Y.t) {   /* rows of Y are contiguous */
            for (int k = 0; k < kc; k++) {
                const float *s = Y.p + (long)k * Y.ld + j0;
                float *d = dst + k * NR2;
                if (k + Y_PREFETCH_ROWS < kc)   /* the row's 16 floats: one or two lines */
                    __builtin_prefetch(s + Y_PREFETCH_ROWS * Y.ld, 0, 3),
                        __builtin_prefetch(s + Y_PREFETCH_ROWS * Y.ld + NR2 - 1, 0, 3);
                if (w == NR2) {
                    memcpy(d, s, NR2 * sizeof *d);
                } else {
                    memcpy(d, s, (size_t)w * sizeof *d);
                    memset(d + w, 0, (size_t)(NR2 - w) * sizeof *d);
                }
            }
            continue;
        }
        for (int jj = 0; jj < NR2; jj += 8)   /* column j of Y is contiguous: 8 x 8 blocks transposed */
            for (int k0 = 0; k0 < kc; k0 += 8) {
                const int kn = kc - k0 < 8 ? kc - k0 : 8;
                const __m256i mk = first_lanes8(kn);
                __m256 r[8];
                for (int q = 0; q < 8; q++) {
                    const float *s = Y.p + (long)(j0 + jj + q) * Y.ld + k0;
                    r[q] = jj + q >= w ? _mm256_setzero_ps() : kn == 8 ? _mm256_loadu_ps(s) : _mm256_maskload_ps(s, mk);
                }
                transpose8(r);
                for (int q = 0; q < kn; q++) _mm256_store_ps(dst + (k0 + q) * NR2 + jj, r[q]);
            }
    }
}

#define TILE2(R, V)                                                                                       \
    AVX2 TILE_FN static void tile2_##R##_##V(int cols, int kc, const float *x, long rs, long cs, const float *y, \
                                     long ys, float *z, long ldz, float alpha, float beta, const float *bias) \
    {                                                                                                     \
        tile2(R, V, cols, kc, x, rs, cs, y, ys, z, ldz, alpha, beta, bias);                              \
    }
#define TILES2(R) TILE2(R, 1) TILE2(R, 2)
TILES2(1) TILES2(2) TILES2(3) TILES2(4) TILES2(5) TILES2(6)
#define ROW2(R) {tile2_##R##_1, tile2_##R##_2, NULL, NULL}
static tile_fn *const tiles2[MR][4] = {ROW2(1), ROW2(2), ROW2(3), ROW2(4), ROW2(5), ROW2(6)};

/* ---- shared: packing and the blocks ---- */

static const isa avx512 = {NR512, 16, 256, 512, tiles512, pack_y512};
static const isa avx2 = {NR2, 8, 256, 512, tiles2, pack_y2};

/* The depths [*k0, *k1) and columns [0, *n1) of Z that TRI leaves to compute for the Z
 * rows [r0, r1) of a strip (smat.h: X and Z square where TRI names them). */
static void strip_range(smat_tri tri, int r0, int r1, int n, int k, int *k0, int *k1, int *n1)
{
    *k0 = 0, *k1 = k, *n1 = n;
    if (tri == SMAT_TRI_X_LOWER) *k1 = r1 < k ? r1 : k;       /* row i sums k <= i */
    if (tri == SMAT_TRI_X_UPPER) *k0 = r0;                    /* row i sums k >= i */
    if (tri == SMAT_TRI_Z_LOWER) *n1 = r1 < n ? r1 : n;       /* columns j <= i */
}

/* A transposed X's rows [i0, i0 + rows) x depths [pc, pc + kc) (element (i, k) at
 * x[(k - pc) ld + i - i0]) as 6-row strips, each k-major: strip s's element (i, k) at
 * dst[s XSTRIP + XK (k - pc) + i - i0 - 6 s], so each k is one aligned 8-float copy (6 of
 * them used; past X's last row, only the rows there are). Under a triangle a strip gets
 * only the depths strip_range leaves it (X_UPPER: half of X). X's rows are read in order
 * (read strip by strip, a stride of 4 KiB would hit one L1 set); XSTRIP's extra line keeps
 * the strips being written in different sets. */
static void pack_xt(smat_tri tri, const float *x, long ld, int i0, int rows, int pc, int kc, int k, float *dst)
{
    int lo[MC / MR], hi[MC / MR], n1;   /* strip s packs the depths [pc + lo[s], pc + hi[s]) */
    for (int r = 0, s = 0; r < rows; r += MR, s++) {
        strip_range(tri, i0 + r, i0 + (rows - r < MR ? rows : r + MR), 0, k, &lo[s], &hi[s], &n1);
        lo[s] -= pc, hi[s] -= pc;
    }
    for (int kk = 0; kk < kc; kk++, x += ld) {
        if (kk + XT_PREFETCH_ROWS < kc)
            for (int c = 0; c < rows; c += 16) __builtin_prefetch(x + XT_PREFETCH_ROWS * ld + c, 0, 3);
        for (int r = 0, s = 0; r < rows; r += MR, s++) {
            if (kk < lo[s] || kk >= hi[s]) continue;
            float *d = dst + (size_t)s * XSTRIP + kk * XK;
            if (rows - r >= XK)
                memcpy(d, x + r, XK * sizeof *d);
            else
                memcpy(d, x + r, (size_t)(rows - r) * sizeof *d);
        }
    }
}

/* The product on blocks of I's sizes: Y kc x nc packed into ybuf (or read in place: a
 * few strips of X over a row-major Y), a transposed X MC x kc into xbuf (unless each
 * strip makes one tile). Under a triangle each 6-row strip sums only the depths, and
 * writes only the vectors of columns, that strip_range leaves; the columns it skips are
 * beta Z. */
static void gemm(const isa *I, smat_tri tri, int m, int n, int k, float alpha, smat X, smat Y, float beta,
                 const float *bias, smat Z, float *ybuf, float *xbuf)
{
    /* in place, a tile reads whole vectors of Y's rows: n a multiple of 16 stays inside them */
    const int ypack = Y.t || m > Y_IN_PLACE_ROWS || n % 16;
    for (int pc = 0; pc < k; pc += I->kc) {
        const int kc = k - pc < I->kc ? k - pc : I->kc;
        for (int jc = 0; jc < n; jc += I->nc) {
            const int nc = n - jc < I->nc ? n - jc : I->nc, xpack = X.t && nc > I->nr;
            if (ypack) I->pack_y(smat_at(Y, pc, jc), kc, nc, ybuf);
            const float *y = ypack ? ybuf : smat_at(Y, pc, jc).p;
            const long ys = ypack ? I->nr : Y.ld, panel = ypack ? kc : 1;   /* panel p at y + NR p panel */
            for (int i0 = 0; i0 < m; i0 += MC) {
                const int mc = m - i0 < MC ? m - i0 : MC;
                if (xpack) pack_xt(tri, smat_at(X, i0, pc).p, X.ld, i0, mc, pc, kc, k, xbuf);
                for (int ic = 0; ic < mc; ic += MR) {
                    const int rows = mc - ic < MR ? mc - ic : MR, r0 = i0 + ic;
                    int k0, k1, n1;
                    strip_range(tri, r0, r0 + rows, n, k, &k0, &k1, &n1);
                    const int a = k0 > pc ? k0 : pc, e = k1 < pc + kc ? k1 : pc + kc;   /* this block's depths */
                    const float b = k0 >= pc ? beta : 1.f;   /* the strip's first block sets Z, and adds the bias */
                    const float *bz = k0 >= pc && bias ? bias + jc : NULL;
                    const float *x = xpack ? xbuf + (size_t)(ic / MR) * XSTRIP + (size_t)(a - pc) * XK : smat_at(X, r0, a).p;
                    const long rs = xpack || X.t ? 1 : X.ld, cs = xpack ? XK : X.t ? X.ld : 1;
                    float *z = Z.p + (long)r0 * Z.ld + jc;
                    /* this block's columns the strip computes: the whole vectors that hold those it needs */
                    const int vecs = n1 <= jc ? 0 : (n1 - jc + I->vec - 1) / I->vec * I->vec;
                    const int w = vecs < nc ? vecs : nc;
                    if (pc == 0) smat_scale(Z, r0, r0 + rows, jc + w, jc + nc, beta);   /* one call: a row is a memset */
                    for (int jr = 0; jr < w && a < e; jr += I->nr) {
                        const int cols = w - jr < I->nr ? w - jr : I->nr;
                        I->tiles[rows - 1][(cols + I->vec - 1) / I->vec - 1](cols, e - a, x, rs, cs,
                                                                             y + jr * panel + (a - pc) * ys, ys,
                                                                             z + jr, Z.ld, alpha, b,
                                                                             bz ? bz + jr : NULL);
                    }
                }
            }
        }
    }
}

int pp_gemm(pp_gemm_isa which, smat_tri tri, int m, int n, int k, float alpha, smat X, smat Y, float beta,
            const float *bias, smat Z)
{
    (void)pthread_once(&once, setup);
    const isa *I = which == PP_GEMM_AVX512 && have_avx512 ? &avx512 : which == PP_GEMM_AVX2 && have_avx2 ? &avx2 : NULL;
    if (!I || Z.t || k <= 0 || (bias && tri != SMAT_FULL)) return 0;
    float *buf = pack_buffer();
    if (!buf) return 0;
    gemm(I, tri, m, n, k, alpha, X, Y, beta, bias, Z, buf, buf + (size_t)KC_MAX * NC_MAX);
    return 1;
}

#else

int pp_gemm(pp_gemm_isa which, smat_tri tri, int m, int n, int k, float alpha, smat X, smat Y, float beta,
            const float *bias, smat Z)
{
    (void)which, (void)tri, (void)m, (void)n, (void)k, (void)alpha, (void)X, (void)Y, (void)beta, (void)bias, (void)Z;
    return 0;
}

#endif
