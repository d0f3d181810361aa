/* Host-only checks of the cuda backend's launch arithmetic (kernels/cuda/launch.c) on the
 * real shapes of the example GPT (L=4, d=256, H=4, T=128, B=8) and ResNet-18 (batch 1..8,
 * 224x224 and 64x64), against values derived by hand in the comments; the GEMM plans run
 * through a host model of cuBLAS's column-major strided-batched sgemm against brute-force
 * row-major products; plus the clean failure of the cuda device where there is no GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <onnxpipe/device.h>
#include <stdlib.h>
#include <string.h>

#include "launch.h"
#include "launch_io.h"

static pp_tensor T(int rank, const int64_t *dims)
{
    pp_tensor t = {PP_DTYPE_F32, rank, {0}, (void *)1};
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    return t;
}

static void test_grids(void **state)
{
    (void)state;
    /* GPT activations (B*T, d) = 1024 x 256 = 262144 floats: 1024 blocks of 256 */
    pp_cu_launch l = pp_cu_launch_1d(8 * 128 * 256);
    assert_int_equal(l.grid, 1024);
    assert_int_equal(l.block, 256);
    assert_int_equal(pp_cu_launch_1d(1).grid, 1);
    assert_int_equal(pp_cu_launch_1d(0).grid, 1);
    assert_int_equal(pp_cu_launch_1d(257).grid, 2);
    assert_int_equal(pp_cu_launch_1d((int64_t)1 << 40).grid, PP_CU_MAX_GRID);
    /* attention softmax rows: B*H*T = 4096 rows of T = 128 -> block 128 */
    l = pp_cu_launch_rows(8 * 4 * 128, 128);
    assert_int_equal(l.grid, 4096);
    assert_int_equal(l.block, 128);
    /* LayerNorm rows of d = 256, GPT-2 d = 768 -> 1024, vocab 50257 -> 1024 (clamped), 3 -> 32 */
    assert_int_equal(pp_cu_launch_rows(1024, 256).block, 256);
    assert_int_equal(pp_cu_launch_rows(1024, 768).block, 1024);
    assert_int_equal(pp_cu_launch_rows(1024, 50257).block, 1024);
    assert_int_equal(pp_cu_launch_rows(1, 3).block, 32);
    /* two-pass reductions (sumsq, LAMB norms) cap the blocks at 1024 partials: the GPT
     * embedding 256 x 256 = 65536 floats -> 256 blocks; the MLP weight 4 d^2 = 262144 ->
     * 1024; GPT-2's 50257 x 768 = 38597376 -> ceil(n / 256) = 150771, capped to 1024
     * (each block of LAMB's second pass folds every partial: 1024 reads, not 150771) */
    l = pp_cu_launch_parts(256 * 256, 1024);
    assert_int_equal(l.grid, 256);
    assert_int_equal(l.block, 256);
    assert_int_equal(pp_cu_launch_parts(4 * 256 * 256, 1024).grid, 1024);
    assert_int_equal(pp_cu_launch_1d(50257LL * 768).grid, 150771);
    assert_int_equal(pp_cu_launch_parts(50257LL * 768, 1024).grid, 1024);
    assert_int_equal(pp_cu_launch_parts(0, 1024).grid, 1);
    print_message("grids: 1-D, row and two-pass launches match the hand-derived sizes\n");
}

static void test_alloc_round(void **state)
{
    (void)state;
    assert_int_equal(pp_cu_alloc_round(1), 512);
    assert_int_equal(pp_cu_alloc_round(512), 512);
    assert_int_equal(pp_cu_alloc_round(513), 1024);
    assert_int_equal(pp_cu_alloc_round((1 << 20) + 1), 2 << 20);
    assert_int_equal(pp_cu_alloc_round(5 << 20), 6 << 20);
    assert_true(pp_cu_alloc_fits(1024, 600));
    assert_false(pp_cu_alloc_fits(4096, 600));   /* more than twice the rounded 1024 */
    assert_false(pp_cu_alloc_fits(512, 600));
}

/* GPT block, B=8, T=128, d=256, H=4, dh=64 */
static void test_gpt_matmuls(void **state)
{
    (void)state;
    pp_error err = {0};
    pp_cu_mm p;
    int serial;
    /* x (8,128,256) @ W_qkv (256,768): B is one matrix -> fold: M' = 1024 */
    pp_tensor x = T(3, (int64_t[]){8, 128, 256}), w = T(2, (int64_t[]){256, 768}), y = T(3, (int64_t[]){8, 128, 768});
    assert_int_equal(pp_matmul_batch_make(&x, &w, &y, &p, "qkv", &err), PP_OK);
    assert_true(p.fold_a);
    pp_cu_gemm g = pp_cu_mm_gemm(&p, PP_CU_Y, &serial);
    /* column-major C^T (768 x 1024) = W^T x^T: m = N = 768, n = 1024, k = 256, lda = 768, ldb = 256 */
    assert_int_equal(serial, 0);
    assert_int_equal(g.m, 768);
    assert_int_equal(g.n, 1024);
    assert_int_equal(g.k, 256);
    assert_int_equal(g.lda, 768);
    assert_int_equal(g.ldb, 256);
    assert_int_equal(g.ldc, 768);
    assert_int_equal(g.transa, 0);
    assert_int_equal(g.transb, 0);
    assert_int_equal(g.batch, 1);
    /* dW (256,768) += x^T (256,1024) dY (1024,768): m = 768, n = 256, k = 1024, transb = T, ldb = 256 */
    g = pp_cu_mm_gemm(&p, PP_CU_DB, &serial);
    assert_int_equal(g.m, 768);
    assert_int_equal(g.n, 256);
    assert_int_equal(g.k, 1024);
    assert_int_equal(g.transa, 0);
    assert_int_equal(g.transb, 1);
    assert_int_equal(g.lda, 768);
    assert_int_equal(g.ldb, 256);
    /* dx (1024,256) += dY (1024,768) W^T: m = 256, n = 1024, k = 768, transa = T, lda = 768 */
    g = pp_cu_mm_gemm(&p, PP_CU_DA, &serial);
    assert_int_equal(g.m, 256);
    assert_int_equal(g.n, 1024);
    assert_int_equal(g.k, 768);
    assert_int_equal(g.transa, 1);
    assert_int_equal(g.lda, 768);
    assert_int_equal(g.ldb, 768);
    assert_int_equal(g.ldc, 256);

    /* scores: q (8,4,128,64) @ k^T (8,4,64,128): 32 matrices, strided batch */
    pp_tensor q = T(4, (int64_t[]){8, 4, 128, 64}), kt = T(4, (int64_t[]){8, 4, 64, 128}),
              s = T(4, (int64_t[]){8, 4, 128, 128});
    assert_int_equal(pp_matmul_batch_make(&q, &kt, &s, &p, "scores", &err), PP_OK);
    assert_false(p.fold_a);
    g = pp_cu_mm_gemm(&p, PP_CU_Y, &serial);
    assert_int_equal(serial, 0);
    assert_int_equal(g.batch, 32);
    assert_int_equal(g.m, 128);
    assert_int_equal(g.n, 128);
    assert_int_equal(g.k, 64);
    assert_int_equal(g.lda, 128);       /* k^T stored (64,128) row-major */
    assert_int_equal(g.ldb, 64);        /* q stored (128,64) */
    assert_int_equal(g.stride_a, 64 * 128);
    assert_int_equal(g.stride_b, 128 * 64);
    assert_int_equal(g.stride_c, 128 * 128);
    /* dq (128,64) = dS (128,128) k (128,64)^... : m = 64, n = 128, k = 128, strides dS 16384, k^T 8192, dq 8192 */
    g = pp_cu_mm_gemm(&p, PP_CU_DA, &serial);
    assert_int_equal(serial, 0);
    assert_int_equal(g.m, 64);
    assert_int_equal(g.n, 128);
    assert_int_equal(g.k, 128);
    assert_int_equal(g.stride_b, 128 * 128);
    assert_int_equal(g.stride_a, 64 * 128);
    assert_int_equal(g.stride_c, 128 * 64);
    /* context: P (8,4,128,128) @ v (8,4,128,64) */
    pp_tensor pm = T(4, (int64_t[]){8, 4, 128, 128}), v = T(4, (int64_t[]){8, 4, 128, 64}),
              o = T(4, (int64_t[]){8, 4, 128, 64});
    assert_int_equal(pp_matmul_batch_make(&pm, &v, &o, &p, "ctx", &err), PP_OK);
    g = pp_cu_mm_gemm(&p, PP_CU_DB, &serial);
    /* dv (128,64) = P^T dO: m = 64, n = 128, k = 128, transb = T, strides P 16384, dO 8192, dv 8192 */
    assert_int_equal(serial, 0);
    assert_int_equal(g.batch, 32);
    assert_int_equal(g.m, 64);
    assert_int_equal(g.n, 128);
    assert_int_equal(g.k, 128);
    assert_int_equal(g.transb, 1);
    assert_int_equal(g.stride_b, 128 * 128);
    assert_int_equal(g.stride_a, 128 * 64);
    assert_int_equal(g.stride_c, 128 * 64);
    /* a weight shared by a batch (A batched, B one matrix but A broadcast too): dB would
     * race in one strided call, so it runs serially */
    pp_tensor a1 = T(3, (int64_t[]){1, 4, 8}), b3 = T(3, (int64_t[]){5, 8, 2}), y3 = T(3, (int64_t[]){5, 4, 2});
    assert_int_equal(pp_matmul_batch_make(&a1, &b3, &y3, &p, "bc", &err), PP_OK);
    g = pp_cu_mm_gemm(&p, PP_CU_DA, &serial);
    assert_int_equal(serial, 1);
    assert_int_equal(g.batch, 1);
    g = pp_cu_mm_gemm(&p, PP_CU_Y, &serial);
    assert_int_equal(serial, 0);
    assert_int_equal(g.stride_b, 0);    /* A (cuBLAS B) shared */
    assert_int_equal(g.stride_a, 16);
    /* errors name the node */
    pp_tensor bad = T(2, (int64_t[]){7, 3});
    assert_int_equal(pp_matmul_batch_make(&x, &bad, &y, &p, "qkv", &err), PP_ERR_SHAPE);
    assert_non_null(strstr(err.msg, "qkv"));
    print_message("GPT matmuls: folded projections, 32-matrix strided attention, serial shared-operand gradients\n");
}

/* cublasSgemmStridedBatched as its documentation defines it, column-major:
 * C_b[i + j ldc] = alpha sum_l op(A_b)(i, l) op(B_b)(l, j) + beta C_b[i + j ldc],
 * op(A)(i, l) = transa ? A[l + i lda] : A[i + l lda]; X_b = X + b stride_x. */
static void cublas_model(const pp_cu_gemm *g, float alpha, const float *A, const float *B, float beta, float *C)
{
    for (int b = 0; b < g->batch; b++) {
        const float *a = A + b * g->stride_a, *bb = B + b * g->stride_b;
        float *c = C + b * g->stride_c;
        for (int i = 0; i < g->m; i++)
            for (int j = 0; j < g->n; j++) {
                double acc = 0;
                for (int l = 0; l < g->k; l++)
                    acc += (double)(g->transa ? a[l + i * g->lda] : a[i + l * g->lda]) *
                           (g->transb ? bb[j + l * g->ldb] : bb[l + j * g->ldb]);
                c[i + j * g->ldc] = (float)(alpha * acc + (beta != 0.f ? beta * c[i + j * g->ldc] : 0.f));
            }
    }
}

static float *rnd(int64_t n, unsigned *seed)
{
    float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(rand_r(seed) % 2001 - 1000) / 1000.f;
    return p;
}

static double max_diff(const float *a, const float *b, int64_t n)
{
    double d = 0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* One MatMul part as matmul.cu's mm_part issues it: one call, or the serial loop. */
static void mm_part_model(const pp_cu_mm *p, pp_cu_part part, const float *X, const float *Y, float *C, float beta)
{
    int serial;
    pp_cu_gemm g = pp_cu_mm_gemm(p, part, &serial);
    if (!serial) {
        cublas_model(&g, 1.f, Y, X, beta, C);
        return;
    }
    assert_int_equal(g.batch, 1);
    for (int64_t b = 0; b < p->batch; b++) {
        int64_t ox, oy, oc;
        pp_cu_mm_offsets(p, part, b, &ox, &oy, &oc);
        cublas_model(&g, 1.f, Y + oy, X + ox, beta, C + oc);
    }
}

/* numpy matmul by brute force over the broadcast batch: operand index of output batch
 * index b for an operand with batch dims od[0..orank) right-aligned to out dims bd */
static int64_t bcast_index(int64_t b, const int64_t *bd, int brank, const int64_t *od, int orank)
{
    int64_t idx = 0, mul = 1;
    for (int d = brank - 1; d >= 0; d--) {
        int64_t i = b % bd[d];
        b /= bd[d];
        int e = d - (brank - orank);
        if (e >= 0) {
            idx += (od[e] == 1 ? 0 : i) * mul;
            mul *= od[e];
        }
    }
    return idx;
}

typedef struct mm_case {
    int ra, rb;
    int64_t a[4], b[4];
} mm_case;

/* MatMul forward and both gradients (accumulated onto random values, beta = 1) through
 * the plan and the cuBLAS model, against brute force: folded, strided, broadcast-strided,
 * serial and 1-D operands. */
static void test_matmul_model(void **state)
{
    (void)state;
    const mm_case cases[] = {
        {3, 2, {2, 3, 4}, {4, 5}},              /* fold: weight shared by the batch */
        {4, 4, {2, 3, 4, 5}, {2, 3, 5, 6}},     /* uniform strides, attention-like */
        {2, 3, {4, 5}, {3, 5, 6}},              /* A broadcast: stride 0, dA serial */
        {4, 3, {3, 1, 4, 5}, {2, 5, 6}},        /* both broadcast: no uniform stride, serial */
        {3, 4, {1, 4, 5}, {2, 3, 5, 6}},        /* A (1, ...) against a 2-D batch */
        {4, 2, {2, 1, 3, 4}, {4, 2}},           /* fold with a unit batch dim */
        {1, 3, {5}, {2, 5, 3}},                 /* 1-D A */
        {3, 1, {2, 4, 5}, {5}},                 /* 1-D B */
        {1, 1, {6}, {6}},                       /* dot */
    };
    unsigned seed = 11;
    double worst = 0;
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const mm_case *mc = &cases[t];
        pp_tensor A = T(mc->ra, mc->a), B = T(mc->rb, mc->b);
        /* promoted shapes and the output */
        int64_t M = mc->ra > 1 ? mc->a[mc->ra - 2] : 1, K = mc->a[mc->ra - 1], N = mc->rb > 1 ? mc->b[mc->rb - 1] : 1;
        int abr = mc->ra > 2 ? mc->ra - 2 : 0, bbr = mc->rb > 2 ? mc->rb - 2 : 0, br = abr > bbr ? abr : bbr;
        int64_t bd[4], nb = 1, na_m = 1, nb_m = 1;
        for (int d = 0; d < br; d++) {
            int ea = d - (br - abr), eb = d - (br - bbr);
            int64_t x = ea >= 0 ? mc->a[ea] : 1, y = eb >= 0 ? mc->b[eb] : 1;
            bd[d] = x > y ? x : y;
            nb *= bd[d];
        }
        for (int d = 0; d < abr; d++) na_m *= mc->a[d];
        for (int d = 0; d < bbr; d++) nb_m *= mc->b[d];
        int64_t yd[4] = {0};
        int yr = 0;
        for (int d = 0; d < br; d++) yd[yr++] = bd[d];
        if (mc->ra > 1) yd[yr++] = M;
        if (mc->rb > 1) yd[yr++] = N;
        pp_tensor Y = T(yr, yd);
        pp_cu_mm p;
        pp_error err = {0};
        assert_int_equal(pp_matmul_batch_make(&A, &B, &Y, &p, "mm", &err), PP_OK);
        const int64_t nA = na_m * M * K, nB = nb_m * K * N, nY = nb * M * N;
        float *a = rnd(nA, &seed), *b = rnd(nB, &seed), *dy = rnd(nY, &seed);
        float *y = rnd(nY, &seed), *da = rnd(nA, &seed), *db = rnd(nB, &seed);
        float *ry = malloc((size_t)nY * 4), *rda = malloc((size_t)nA * 4), *rdb = malloc((size_t)nB * 4);
        memcpy(rda, da, (size_t)nA * 4);
        memcpy(rdb, db, (size_t)nB * 4);
        for (int64_t bi = 0; bi < nb; bi++) {
            int64_t ia = bcast_index(bi, bd, br, mc->a, abr), ib = bcast_index(bi, bd, br, mc->b, bbr);
            const float *am = a + ia * M * K, *bm = b + ib * K * N, *g = dy + bi * M * N;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double acc = 0;
                    for (int64_t l = 0; l < K; l++) acc += (double)am[i * K + l] * bm[l * N + j];
                    ry[bi * M * N + i * N + j] = (float)acc;
                }
            for (int64_t i = 0; i < M; i++)
                for (int64_t l = 0; l < K; l++)
                    for (int64_t j = 0; j < N; j++) {
                        rda[ia * M * K + i * K + l] += g[i * N + j] * bm[l * N + j];
                        rdb[ib * K * N + l * N + j] += am[i * K + l] * g[i * N + j];
                    }
        }
        mm_part_model(&p, PP_CU_Y, a, b, y, 0.f);
        mm_part_model(&p, PP_CU_DA, dy, b, da, 1.f);
        mm_part_model(&p, PP_CU_DB, a, dy, db, 1.f);
        double d = fmax(max_diff(y, ry, nY), fmax(max_diff(da, rda, nA), max_diff(db, rdb, nB)));
        assert_true(d < 1e-4);
        worst = fmax(worst, d);
        free(a), free(b), free(dy), free(y), free(da), free(db), free(ry), free(rda), free(rdb);
    }
    print_message("MatMul plans through the cuBLAS model vs brute force (Y, dA += , dB +=), %zu broadcast cases: "
                  "max diff %.2e\n", sizeof cases / sizeof cases[0], worst);
}

/* MatMul with A and / or B stored transposed (attributes trans_A, trans_B: Linear's weight W
 * (N, K), a Transpose of an operand's last two dims, stage/fuse_transpose.c) through pp_matmul_batch_of
 * and the cuBLAS model, Y, dA += and dB += (the parts' X and Y as launch.h says), against brute
 * force: a shared weight (one folded GEMM, or none under trans_A), a strided batch, and a
 * broadcast A (serial dA). */
static void test_matmul_trans_model(void **state)
{
    (void)state;
    typedef struct tcase {
        int ta, tb;
        mm_case m;      /* stored shapes */
    } tcase;
    const tcase cases[] = {
        {0, 1, {3, 2, {2, 3, 4}, {5, 4}}},          /* B (N, K) = (5, 4) shared */
        {0, 1, {3, 3, {2, 3, 4}, {2, 5, 4}}},       /* a batch of B */
        {0, 1, {2, 3, {3, 4}, {2, 5, 4}}},          /* A broadcast */
        {1, 0, {3, 2, {2, 4, 3}, {4, 5}}},          /* A (K, M) per matrix, B shared: no fold */
        {1, 1, {4, 4, {2, 2, 4, 3}, {2, 2, 5, 4}}}, /* both, a 2-D batch (attention's K^T form) */
        {1, 0, {2, 3, {4, 3}, {2, 4, 5}}},          /* A (K, M) broadcast: serial dA */
    };
    const pp_attr flags[2] = {{.name = "trans_A", .type = PP_ATTR_INT, .i = 1},
                              {.name = "trans_B", .type = PP_ATTR_INT, .i = 1}};
    unsigned seed = 17;
    double worst = 0;
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const mm_case *mc = &cases[t].m;
        const int ta = cases[t].ta, tb = cases[t].tb;
        pp_tensor in[2] = {T(mc->ra, mc->a), T(mc->rb, mc->b)};
        const int64_t M = mc->a[mc->ra - (ta ? 1 : 2)], K = mc->a[mc->ra - (ta ? 2 : 1)];
        const int64_t N = mc->b[mc->rb - (tb ? 2 : 1)];
        int64_t na = 1, nbm = 1;
        for (int d = 0; d + 2 < mc->ra; d++) na *= mc->a[d];
        for (int d = 0; d + 2 < mc->rb; d++) nbm *= mc->b[d];
        const int64_t nb = na > nbm ? na : nbm;
        int64_t yd[4];
        const int yr = (mc->ra > mc->rb ? mc->ra : mc->rb);
        const mm_case *big = mc->ra >= mc->rb ? mc : NULL;
        for (int d = 0; d + 2 < yr; d++) yd[d] = big ? mc->a[d] : mc->b[d];
        yd[yr - 2] = M, yd[yr - 1] = N;
        pp_tensor Y = T(yr, yd);
        pp_attr attrs[2];
        int nattrs = 0;
        if (ta) attrs[nattrs++] = flags[0];
        if (tb) attrs[nattrs++] = flags[1];
        pp_kernel_ctx c = {.node = "linear", .attrs = attrs, .nattrs = nattrs, .in = in, .nin = 2};
        pp_cu_mm p;
        pp_error err = {0};
        assert_int_equal(pp_matmul_batch_of(&c, &Y, &p, &err), PP_OK);
        assert_true(p.ta == ta && p.tb == tb && !(ta && p.fold_a));
        const int64_t nA = na * M * K, nB = nbm * N * K, nY = nb * M * N;
        float *a = rnd(nA, &seed), *b = rnd(nB, &seed), *dy = rnd(nY, &seed);
        float *y = rnd(nY, &seed), *da = rnd(nA, &seed), *db = rnd(nB, &seed);
        float *ry = malloc((size_t)nY * 4), *rda = malloc((size_t)nA * 4), *rdb = malloc((size_t)nB * 4);
        memcpy(rda, da, (size_t)nA * 4);
        memcpy(rdb, db, (size_t)nB * 4);
        for (int64_t q = 0; q < nb; q++) {
            const int64_t oa = (na > 1 ? q : 0) * M * K, ob = (nbm > 1 ? q : 0) * N * K;
            const float *g = dy + q * M * N;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double acc = 0;
                    for (int64_t l = 0; l < K; l++) {
                        const int64_t ia = oa + (ta ? l * M + i : i * K + l), ib = ob + (tb ? j * K + l : l * N + j);
                        acc += (double)a[ia] * b[ib];
                        rda[ia] += g[i * N + j] * b[ib];
                        rdb[ib] += g[i * N + j] * a[ia];
                    }
                    ry[q * M * N + i * N + j] = (float)acc;
                }
        }
        mm_part_model(&p, PP_CU_Y, a, b, y, 0.f);
        mm_part_model(&p, PP_CU_DA, ta ? b : dy, ta ? dy : b, da, 1.f);
        mm_part_model(&p, PP_CU_DB, tb ? dy : a, tb ? a : dy, db, 1.f);
        double d = fmax(max_diff(y, ry, nY), fmax(max_diff(da, rda, nA), max_diff(db, rdb, nB)));
        assert_true(d < 1e-4);
        worst = fmax(worst, d);
        free(a), free(b), free(dy), free(y), free(da), free(db), free(ry), free(rda), free(rdb);
    }
    print_message("MatMul trans_A / trans_B plans through the cuBLAS model vs brute force (Y, dA +=, dB +=), "
                  "%zu cases: max diff %.2e\n", sizeof cases / sizeof cases[0], worst);
}

/* Gemm Y = alpha op(A) op(B) + beta C and dA, dB (+= alpha ...) for every transA/transB,
 * through pp_cu_gemm_op_gemm / _operands and the cuBLAS model, against brute force. */
static void test_gemm_model(void **state)
{
    (void)state;
    const int64_t M = 3, K = 5, N = 4;
    const float alpha = 0.75f, beta = 1.5f;
    unsigned seed = 5;
    double worst = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            pp_cu_gemm_op op = {ta, tb, M, K, N};
            /* A stored (M, K) or (K, M); B stored (K, N) or (N, K) */
            float *a = rnd(M * K, &seed), *b = rnd(K * N, &seed), *c = rnd(M * N, &seed), *dy = rnd(M * N, &seed);
            float *da = rnd(M * K, &seed), *db = rnd(K * N, &seed), y[12], ry[12], rda[15], rdb[20];
            memcpy(rda, da, sizeof rda);
            memcpy(rdb, db, sizeof rdb);
#define AT(i, l) (ta ? a[(l) * M + (i)] : a[(i) * K + (l)])
#define BT(l, j) (tb ? b[(j) * K + (l)] : b[(l) * N + (j)])
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double acc = 0;
                    for (int64_t l = 0; l < K; l++) acc += (double)AT(i, l) * BT(l, j);
                    ry[i * N + j] = (float)(alpha * acc + beta * c[i * N + j]);
                    y[i * N + j] = c[i * N + j];    /* gemm forward: C broadcast into Y first */
                }
            for (int64_t i = 0; i < M; i++)
                for (int64_t l = 0; l < K; l++)
                    for (int64_t j = 0; j < N; j++) {
                        rda[ta ? l * M + i : i * K + l] += alpha * dy[i * N + j] * BT(l, j);
                        rdb[tb ? j * K + l : l * N + j] += alpha * AT(i, l) * dy[i * N + j];
                    }
#undef AT
#undef BT
            const void *x, *yy;
            pp_cu_gemm g = pp_cu_gemm_op_gemm(&op, PP_CU_Y);
            pp_cu_gemm_op_operands(&op, PP_CU_Y, a, b, dy, &x, &yy);
            cublas_model(&g, alpha, yy, x, beta, y);
            g = pp_cu_gemm_op_gemm(&op, PP_CU_DA);
            pp_cu_gemm_op_operands(&op, PP_CU_DA, a, b, dy, &x, &yy);
            cublas_model(&g, alpha, yy, x, 1.f, da);
            g = pp_cu_gemm_op_gemm(&op, PP_CU_DB);
            pp_cu_gemm_op_operands(&op, PP_CU_DB, a, b, dy, &x, &yy);
            cublas_model(&g, alpha, yy, x, 1.f, db);
            double d = fmax(max_diff(y, ry, M * N), fmax(max_diff(da, rda, M * K), max_diff(db, rdb, K * N)));
            assert_true(d < 1e-5);
            worst = fmax(worst, d);
            free(a), free(b), free(c), free(dy), free(da), free(db);
        }
    print_message("Gemm plans (transA x transB, alpha %.2f, beta %.2f) through the cuBLAS model: max diff %.2e\n",
                  (double)alpha, (double)beta, worst);
}

static void test_gemm_op(void **state)
{
    (void)state;
    /* Gemm transB=1 (a Linear): A (8,512) B (1000,512) -> Y (8,1000) */
    pp_cu_gemm_op op = {0, 1, 8, 512, 1000};
    pp_cu_gemm g = pp_cu_gemm_op_gemm(&op, PP_CU_Y);
    assert_int_equal(g.m, 1000);
    assert_int_equal(g.n, 8);
    assert_int_equal(g.k, 512);
    assert_int_equal(g.transa, 1);
    assert_int_equal(g.lda, 512);
    assert_int_equal(g.ldb, 512);
    /* dA (8,512) = dY (8,1000) B (1000,512): m = 512, n = 8, k = 1000, no transposes */
    g = pp_cu_gemm_op_gemm(&op, PP_CU_DA);
    assert_int_equal(g.m, 512);
    assert_int_equal(g.n, 8);
    assert_int_equal(g.k, 1000);
    assert_int_equal(g.transa, 0);
    assert_int_equal(g.transb, 0);
    assert_int_equal(g.lda, 512);
    assert_int_equal(g.ldb, 1000);
    /* dB (1000,512) = dY^T (1000,8) A (8,512): m = 512, n = 1000, k = 8, transb = T */
    g = pp_cu_gemm_op_gemm(&op, PP_CU_DB);
    assert_int_equal(g.m, 512);
    assert_int_equal(g.n, 1000);
    assert_int_equal(g.k, 8);
    assert_int_equal(g.transa, 0);
    assert_int_equal(g.transb, 1);
    assert_int_equal(g.ldb, 1000);
    assert_int_equal(g.ldc, 512);
    /* empty operands (N = 0, K = 0) keep every leading dimension >= 1, as cuBLAS demands */
    g = pp_cu_gemm_rowmajor(0, 1, 4, 0, 0, 0, 0, 0, 1);
    assert_true(g.m == 0 && g.k == 0 && g.lda == 1 && g.ldb == 1 && g.ldc == 1);
}

static void test_bcast_reduce(void **state)
{
    (void)state;
    pp_error err = {0};
    /* bias add (8,128,256) + (256): merged to (1024, 256) with the bias stride 0 on rows */
    pp_tensor y = T(3, (int64_t[]){8, 128, 256}), b = T(1, (int64_t[]){256});
    const pp_tensor *ins[2] = {&y, &b};
    pp_cu_bcast bc;
    assert_int_equal(pp_cu_bcast_init(&bc, &y, ins, 2, "add", &err), PP_OK);
    assert_int_equal(bc.rank, 2);
    assert_int_equal(bc.dims[0], 1024);
    assert_int_equal(bc.dims[1], 256);
    assert_int_equal(bc.st[0][0], 256);
    assert_int_equal(bc.st[1][0], 0);
    assert_int_equal(bc.st[1][1], 1);
    assert_false(bc.same);
    /* its gradient: sum over 1024 rows into 256 */
    pp_cu_reduce r;
    assert_int_equal(pp_cu_reduce_to_shape(&r, &b, &y, "add", &err), PP_OK);
    assert_int_equal(r.nout, 256);
    assert_int_equal(r.nred, 1024);
    assert_int_equal(r.rrank, 2);
    assert_int_equal(r.rst[0], 128 * 256);
    assert_int_equal(r.rst[1], 256);
    /* ResNet GlobalAveragePool as ReduceMean over H, W of (8,512,7,7): 4096 outputs of 49 */
    int red[4] = {0, 0, 1, 1};
    pp_cu_reduce_init(&r, 4, (int64_t[]){8, 512, 7, 7}, red);
    assert_int_equal(r.nout, 4096);
    assert_int_equal(r.nred, 49);
    /* causal mask (1,1,128,128) onto scores (8,4,128,128): outer 32 broadcast, inner same */
    pp_tensor s = T(4, (int64_t[]){8, 4, 128, 128}), m = T(4, (int64_t[]){1, 1, 128, 128});
    const pp_tensor *ins2[2] = {&s, &m};
    assert_int_equal(pp_cu_bcast_init(&bc, &s, ins2, 2, "mask", &err), PP_OK);
    assert_int_equal(bc.rank, 2);
    assert_int_equal(bc.dims[0], 32);
    assert_int_equal(bc.dims[1], 16384);
    assert_int_equal(bc.st[1][0], 0);
    /* transpose (8,128,4,64) -> (8,4,128,64) (heads split): src strides (128*256, 64, 256, 1) */
    pp_tensor h = T(4, (int64_t[]){8, 128, 4, 64});
    pp_cu_strided st;
    pp_cu_strided_transpose(&st, &h, (int64_t[]){0, 2, 1, 3});
    assert_int_equal(st.n, 8 * 128 * 256);
    assert_int_equal(st.rank, 4);
    assert_int_equal(st.src_st[1], 64);
    assert_int_equal(st.src_st[2], 256);
    assert_int_equal(st.dst_st[1], 128 * 64);
    /* softmax rows of the scores over the last axis */
    pp_cu_rows rows = pp_cu_rows_of(s.dims, 4, 3, 4);
    assert_int_equal(rows.outer, 4096);
    assert_int_equal(rows.n, 128);
    assert_int_equal(rows.inner, 1);
}

/* ResNet-18 convs and pools, NCHW */
static void test_resnet_conv(void **state)
{
    (void)state;
    pp_error err = {0};
    for (int64_t n = 1; n <= 8; n *= 2)
        for (int big = 0; big < 2; big++) {
            int64_t H = big ? 224 : 64, OH = H / 2, PH = OH / 2;
            /* conv1: 7x7 stride 2 pad 3, 3 -> 64: OH = (H + 6 - 7) / 2 + 1 = H / 2 */
            pp_tensor x = T(4, (int64_t[]){n, 3, H, H}), w = T(4, (int64_t[]){64, 3, 7, 7}),
                      y = T(4, (int64_t[]){n, 64, OH, OH});
            pp_cu_conv cv;
            assert_int_equal(pp_cu_conv_plan(&cv, &x, &w, &y, (int64_t[]){3, 3, 3, 3}, (int64_t[]){2, 2},
                                             (int64_t[]){1, 1}, 1, "conv1", &err), PP_OK);
            assert_int_equal(cv.x[0], n);
            assert_int_equal(cv.xst[0], 3 * H * H);
            assert_int_equal(cv.xst[1], H * H);
            assert_int_equal(cv.y[2], OH);
            assert_int_equal(cv.yst[0], 64 * OH * OH);
            assert_int_equal(cv.pad[0], 3);
            assert_int_equal(cv.stride[1], 2);
            assert_int_equal(cv.w[2], 7);
            /* layer2 downsample 1x1 stride 2, 64 -> 128 on PH: out PH / 2 */
            pp_tensor xd = T(4, (int64_t[]){n, 64, PH, PH}), wd = T(4, (int64_t[]){128, 64, 1, 1}),
                      yd = T(4, (int64_t[]){n, 128, PH / 2, PH / 2});
            assert_int_equal(pp_cu_conv_plan(&cv, &xd, &wd, &yd, NULL, (int64_t[]){2, 2}, NULL, 1, "down", &err),
                             PP_OK);
            assert_int_equal(cv.pad[0], 0);
            assert_int_equal(cv.y[3], PH / 2);
        }
    /* grouped 3x3 (64 channels in 32 groups, ResNeXt-style) on 56x56, pad 1: the filter
     * is K x C/g = 64 x 2; a 1-D dilated conv (N, 3, 16) * (5, 3, 3), dilation 2 runs as
     * H = 1: W' = 16 - 2 (3 - 1) = 12 */
    {
        pp_cu_conv cv;
        pp_tensor xg = T(4, (int64_t[]){8, 64, 56, 56}), wg = T(4, (int64_t[]){64, 2, 3, 3}),
                  yg = T(4, (int64_t[]){8, 64, 56, 56});
        assert_int_equal(pp_cu_conv_plan(&cv, &xg, &wg, &yg, (int64_t[]){1, 1, 1, 1}, NULL, NULL, 32, "g", &err), PP_OK);
        assert_int_equal(cv.groups, 32);
        assert_int_equal(cv.w[0], 64);
        assert_int_equal(cv.w[1], 2);
        assert_int_equal(cv.x[1], 64);
        pp_tensor x1 = T(3, (int64_t[]){2, 3, 16}), w1 = T(3, (int64_t[]){5, 3, 3}), y1 = T(3, (int64_t[]){2, 5, 12});
        assert_int_equal(pp_cu_conv_plan(&cv, &x1, &w1, &y1, NULL, NULL, (int64_t[]){2}, 1, "c1", &err), PP_OK);
        assert_true(cv.x[2] == 1 && cv.x[3] == 16 && cv.w[2] == 1 && cv.w[3] == 3 && cv.y[2] == 1 && cv.y[3] == 12);
        assert_true(cv.dil[0] == 1 && cv.dil[1] == 2 && cv.pad[0] == 0 && cv.stride[0] == 1);
        assert_int_equal(cv.xst[0], 3 * 16);
        /* groups that do not divide the channels are a shape error */
        assert_int_equal(pp_cu_conv_plan(&cv, &xg, &wg, &yg, (int64_t[]){1, 1, 1, 1}, NULL, NULL, 16, "g", &err),
                         PP_ERR_SHAPE);
    }
    /* a wrong output size and asymmetric pads are errors naming the node */
    pp_tensor x = T(4, (int64_t[]){1, 3, 64, 64}), w = T(4, (int64_t[]){64, 3, 7, 7}), y = T(4, (int64_t[]){1, 64, 31, 31});
    pp_cu_conv cv;
    assert_int_equal(pp_cu_conv_plan(&cv, &x, &w, &y, (int64_t[]){3, 3, 3, 3}, (int64_t[]){2, 2}, NULL, 1, "c", &err),
                     PP_ERR_SHAPE);
    y.dims[2] = y.dims[3] = 32;
    assert_int_equal(pp_cu_conv_plan(&cv, &x, &w, &y, (int64_t[]){3, 3, 2, 3}, (int64_t[]){2, 2}, NULL, 1, "c", &err),
                     PP_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "asymmetric"));
    print_message("ResNet-18 conv/pool descriptors for batch 1..8 at 224 and 64 match the hand-derived dims\n");
}

/* Where there is no usable GPU (this build machine), the cuda device fails cleanly and
 * auto picks the cpu; on a GPU host both find it. */
static void test_device_fallback(void **state)
{
    (void)state;
    pp_error err = {0}, why = {0};
    pp_device *d = NULL;
    pp_status st = pp_device_create(PP_DEVICE_CUDA, 0, &d, &err);
    pp_device_kind k = pp_device_auto(0, &why);
    if (st == PP_OK) {
        assert_int_equal(k, PP_DEVICE_CUDA);
        pp_device_destroy(d);
        return;
    }
    assert_null(d);
    assert_int_equal(k, PP_DEVICE_CPU);
    assert_true(strstr(err.msg, "no CUDA device") || strstr(err.msg, "not compiled"));
    print_message("no GPU: cuda device says \"%s\"; auto picks cpu\n", err.msg);
}

/* Pooling windows along one dim, over a sweep of input sizes, kernels, strides, dilations
 * and (asymmetric) pads with ceil-mode-sized outputs: the span counts against the cpu's
 * window walk (inside: in [0, in); padded: below in + pe), and the gather inverse against
 * the forward enumeration of every (output, tap) that lands on an input position. */
static void test_pool_window(void **state)
{
    (void)state;
    int cases = 0;
    for (int64_t in = 1; in <= 9; in++)
        for (int64_t k = 1; k <= 4; k++)
            for (int64_t s = 1; s <= 3; s++)
                for (int64_t d = 1; d <= 2; d++)
                    for (int64_t pb = 0; pb < k; pb++)
                        for (int64_t pe = 0; pe < k; pe++) {
                            int64_t room = in + pb + pe - ((k - 1) * d + 1);
                            if (room < 0) continue;
                            int64_t out = (room + s - 1) / s + 1; /* ceil mode */
                            if ((out - 1) * s >= in + pb) out--;
                            int hit[16][4] = {{0}}; /* [i][j]: output whose tap j is input i, +1 */
                            for (int64_t o = 0; o < out; o++) {
                                int64_t want_in = 0, want_pad = 0, got_in, got_pad;
                                for (int64_t j = 0; j < k; j++) {
                                    int64_t i = o * s - pb + j * d;
                                    if (i >= 0 && i < in) {
                                        want_in++;
                                        hit[i][j] = (int)o + 1;
                                    }
                                    if (i < in + pe) want_pad++;
                                }
                                pp_cu_window_span(o, in, k, s, d, pb, pe, &got_in, &got_pad);
                                assert_int_equal(got_in, want_in);
                                assert_int_equal(got_pad, want_pad);
                            }
                            for (int64_t i = 0; i < in; i++)
                                for (int64_t j = 0; j < k; j++)
                                    assert_int_equal(pp_cu_window_out(i, j, out, s, d, pb), hit[i][j] - 1);
                            cases++;
                        }
    /* ResNet's 3x3/2 pad 1 max pool on 112: outputs 0..55; input 0 is tap 1 of output 0 */
    int64_t a, b;
    pp_cu_window_span(0, 112, 3, 2, 1, 1, 1, &a, &b);
    assert_int_equal(a, 2);
    assert_int_equal(b, 3);
    assert_int_equal(pp_cu_window_out(0, 1, 56, 2, 1, 1), 0);
    assert_int_equal(pp_cu_window_out(0, 0, 56, 2, 1, 1), -1);
    assert_int_equal(pp_cu_window_out(111, 0, 56, 2, 1, 1), -1); /* 111 + 1 = 2 * 56: output 56 does not exist */
    assert_int_equal(pp_cu_window_out(111, 2, 56, 2, 1, 1), 55);  /* 55 * 2 - 1 + 2 = 111 */
    print_message("pool window spans and gather inverse agree with brute force on %d geometries\n", cases);
}

/* BatchNormalization as cuDNN NCHW: (N, C, H, W) -> (N, C, HW, 1), (N, C) -> (N, C, 1, 1) */
static void test_bn_dims(void **state)
{
    (void)state;
    int d[4];
    pp_tensor x = T(4, (int64_t[]){8, 64, 56, 56});
    pp_cu_bn_dims(&x, d);
    assert_true(d[0] == 8 && d[1] == 64 && d[2] == 56 * 56 && d[3] == 1);
    x = T(2, (int64_t[]){32, 10});
    pp_cu_bn_dims(&x, d);
    assert_true(d[0] == 32 && d[1] == 10 && d[2] == 1 && d[3] == 1);
    x = T(3, (int64_t[]){4, 16, 100});
    pp_cu_bn_dims(&x, d);
    assert_true(d[0] == 4 && d[1] == 16 && d[2] == 100 && d[3] == 1);
}

/* The 16-bit GEMMs: cuBLAS types and compute type from the dtypes, with the leading
 * dimensions and batch strides (in elements) of the fp32 plan unchanged; attention's
 * batched product and a weight gradient accumulated into float32. */
static void test_gemm_16bit(void **state)
{
    (void)state;
    pp_error err = {0};
    pp_cu_mm p;
    int serial;
    /* scores (8,4,128,128) = q (8,4,128,64) @ k^T (8,4,64,128), bfloat16: one strided-batched call */
    pp_tensor q = T(4, (int64_t[]){8, 4, 128, 64}), k = T(4, (int64_t[]){8, 4, 64, 128}),
              s = T(4, (int64_t[]){8, 4, 128, 128});
    q.dtype = k.dtype = s.dtype = PP_DTYPE_BF16;
    assert_int_equal(pp_matmul_batch_make(&q, &k, &s, &p, "scores", &err), PP_OK);
    const pp_cu_gemm f32 = pp_cu_mm_gemm(&p, PP_CU_Y, &serial);
    assert_int_equal(f32.atype, PP_CU_R_32F);
    assert_int_equal(f32.ctype, PP_CU_R_32F);
    pp_cu_gemm g = f32;
    assert_true(pp_cu_gemm_set_types(&g, q.dtype, k.dtype, s.dtype));
    assert_int_equal(serial, 0);
    assert_int_equal(g.atype, PP_CU_R_16BF);
    assert_int_equal(g.btype, PP_CU_R_16BF);
    assert_int_equal(g.ctype, PP_CU_R_16BF);
    assert_int_equal(g.compute, PP_CU_COMPUTE_32F);
    assert_int_equal(g.batch, 32);
    assert_true(g.m == 128 && g.n == 128 && g.k == 64 && g.lda == 128 && g.ldb == 64 && g.ldc == 128);
    assert_true(g.stride_a == 64 * 128 && g.stride_b == 128 * 64 && g.stride_c == 128 * 128);
    g.atype = g.btype = g.ctype = f32.atype;
    g.compute = f32.compute;
    assert_memory_equal(&g, &f32, sizeof g);   /* only the types differ from the fp32 call */
    /* dW (256,768) += x^T dY in float16 into the float32 master gradient: C 32F, beta 1 by the kernel */
    pp_tensor x = T(3, (int64_t[]){8, 128, 256}), w = T(2, (int64_t[]){256, 768}), y = T(3, (int64_t[]){8, 128, 768});
    x.dtype = w.dtype = y.dtype = PP_DTYPE_F16;
    assert_int_equal(pp_matmul_batch_make(&x, &w, &y, &p, "qkv", &err), PP_OK);
    g = pp_cu_mm_gemm(&p, PP_CU_DB, &serial);
    assert_true(pp_cu_gemm_set_types(&g, PP_DTYPE_F16, PP_DTYPE_F16, PP_DTYPE_F32));
    assert_int_equal(g.atype, PP_CU_R_16F);
    assert_int_equal(g.btype, PP_CU_R_16F);
    assert_int_equal(g.ctype, PP_CU_R_32F);
    assert_int_equal(g.compute, PP_CU_COMPUTE_32F);
    assert_true(g.m == 768 && g.n == 256 && g.k == 1024 && g.transb == 1 && g.ldb == 256 && g.ldc == 768);
    /* Gemm transB=1 in bfloat16 with a bfloat16 dA */
    pp_cu_gemm_op op = {0, 1, 8, 512, 1000};
    g = pp_cu_gemm_op_gemm(&op, PP_CU_DA);
    assert_true(pp_cu_gemm_set_types(&g, PP_DTYPE_BF16, PP_DTYPE_BF16, PP_DTYPE_BF16));
    assert_true(g.m == 512 && g.n == 8 && g.k == 1000 && g.lda == 512 && g.ldb == 1000 && g.ldc == 512);
    assert_int_equal(g.ctype, PP_CU_R_16BF);
    /* mixes cuBLAS does not take leave the plan alone and send the kernel to the adapter */
    const pp_dtype bad[][3] = {{PP_DTYPE_BF16, PP_DTYPE_F16, PP_DTYPE_F32},
                               {PP_DTYPE_BF16, PP_DTYPE_F32, PP_DTYPE_BF16},
                               {PP_DTYPE_F32, PP_DTYPE_F32, PP_DTYPE_BF16},
                               {PP_DTYPE_F16, PP_DTYPE_F16, PP_DTYPE_BF16},
                               {PP_DTYPE_I64, PP_DTYPE_I64, PP_DTYPE_F32}};
    for (int i = 0; i < 5; i++) {
        pp_cu_gemm b = f32;
        assert_false(pp_cu_gemm_set_types(&b, bad[i][0], bad[i][1], bad[i][2]));
        assert_memory_equal(&b, &f32, sizeof b);
    }
    print_message("16-bit GEMMs: attention (32 x 128x128x64, strides in elements) bf16, dW f16 -> f32, Gemm dA bf16; "
                  "5 mixes refused\n");
}

/* The 16-bit Conv: cuDNN types, compute and math type from the dtypes with the fp32 plan's
 * dims unchanged; which calls run natively and which go to the adapter; and the
 * backward-filter workspace, whose 16-bit dW temporary (a float32 master gradient) sits
 * after cuDNN's part, 256-byte aligned. */
static void test_conv_16bit(void **state)
{
    (void)state;
    pp_error err = {0};
    /* ResNet-18 layer1 3x3 pad 1, 64 -> 64 on 56x56, batch 8 */
    pp_tensor x = T(4, (int64_t[]){8, 64, 56, 56}), w = T(4, (int64_t[]){64, 64, 3, 3}),
              y = T(4, (int64_t[]){8, 64, 56, 56}), b = T(1, (int64_t[]){64});
    const int64_t pads[] = {1, 1, 1, 1};
    pp_cu_conv f32, cv;
    assert_int_equal(pp_cu_conv_plan(&f32, &x, &w, &y, pads, NULL, NULL, 1, "l1", &err), PP_OK);
    assert_int_equal(f32.dtype, PP_CUDNN_DATA_FLOAT);
    assert_int_equal(f32.compute, PP_CUDNN_DATA_FLOAT);
    assert_int_equal(f32.math, PP_CUDNN_DEFAULT_MATH);
    const pp_dtype lp[2] = {PP_DTYPE_BF16, PP_DTYPE_F16};
    const int want[2] = {PP_CUDNN_DATA_BFLOAT16, PP_CUDNN_DATA_HALF};
    for (int i = 0; i < 2; i++) {
        x.dtype = w.dtype = y.dtype = lp[i];
        assert_int_equal(pp_cu_conv_plan(&cv, &x, &w, &y, pads, NULL, NULL, 1, "l1", &err), PP_OK);
        assert_int_equal(cv.dtype, want[i]);
        assert_int_equal(cv.compute, PP_CUDNN_DATA_FLOAT);
        assert_int_equal(cv.math, PP_CUDNN_TENSOR_OP_MATH);
        cv.dtype = f32.dtype;
        cv.math = f32.math;
        assert_memory_equal(&cv, &f32, sizeof cv);   /* only the types differ from the fp32 plan */
    }
    /* a mix is refused by the plan, naming the node and the dtypes */
    x.dtype = y.dtype = PP_DTYPE_BF16;
    w.dtype = PP_DTYPE_F32;
    assert_int_equal(pp_cu_conv_plan(&cv, &x, &w, &y, pads, NULL, NULL, 1, "mix", &err), PP_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "'mix'"));
    assert_non_null(strstr(err.msg, "bfloat16, float32 and bfloat16"));

    /* native or adapter: forward with a float32, 16-bit or other bias; backward by gradient dtype */
    w.dtype = PP_DTYPE_BF16;
    pp_tensor in[3] = {x, w, b}, g[3] = {x, w, b};
    assert_true(pp_cu_conv_native(in, 3, &y, NULL));                 /* bias float32: the master weight */
    in[2].dtype = PP_DTYPE_BF16;
    assert_true(pp_cu_conv_native(in, 3, &y, NULL));
    in[2].dtype = PP_DTYPE_F16;
    assert_false(pp_cu_conv_native(in, 3, &y, NULL));
    in[2].data = NULL;                                               /* an omitted bias is no bias */
    assert_true(pp_cu_conv_native(in, 3, &y, NULL));
    assert_true(pp_cu_conv_native(in, 2, &y, NULL));
    y.dtype = PP_DTYPE_F32;                                          /* cuDNN's Y is X's type */
    assert_false(pp_cu_conv_native(in, 2, &y, NULL));
    y.dtype = PP_DTYPE_BF16;
    assert_false(pp_cu_conv_native(in, 1, &y, NULL));                /* arity errors: the F32 kernel's */
    g[0].dtype = g[1].dtype = PP_DTYPE_BF16;
    g[2].dtype = PP_DTYPE_F32;
    assert_true(pp_cu_conv_native(in, 3, &y, g));                    /* dX, dW bf16, dB float32 */
    g[1].dtype = PP_DTYPE_F32;
    assert_true(pp_cu_conv_native(in, 3, &y, g));                    /* dW into the fp32 master gradient */
    g[2].dtype = PP_DTYPE_BF16;
    assert_false(pp_cu_conv_native(in, 3, &y, g));                   /* a 16-bit dB: the reduction writes fp32 */
    g[2].data = NULL;
    assert_true(pp_cu_conv_native(in, 3, &y, g));                   /* not asked for */
    g[0].dtype = PP_DTYPE_F32;
    assert_false(pp_cu_conv_native(in, 3, &y, g));                  /* cuDNN's dX is X's type */
    g[0].data = NULL;
    assert_true(pp_cu_conv_native(in, 3, &y, g));
    g[1].dtype = PP_DTYPE_F16;
    assert_false(pp_cu_conv_native(in, 3, &y, g));

    /* backward-filter workspace: W is 64 x 64 x 3 x 3 = 36864 elements, 73728 bytes in 16 bits */
    size_t bytes, at;
    x.dtype = w.dtype = y.dtype = PP_DTYPE_F16;
    assert_int_equal(pp_cu_conv_plan(&cv, &x, &w, &y, pads, NULL, NULL, 1, "l1", &err), PP_OK);
    assert_false(pp_cu_conv_filter_ws(&f32, 1000, PP_DTYPE_F32, &bytes, &at));
    assert_true(bytes == 1000 && at == 0);
    assert_false(pp_cu_conv_filter_ws(&cv, 1000, PP_DTYPE_F16, &bytes, &at));
    assert_true(bytes == 1000 && at == 0);
    assert_true(pp_cu_conv_filter_ws(&cv, 1000, PP_DTYPE_F32, &bytes, &at));
    assert_int_equal(at, 1024);
    assert_int_equal(bytes, 1024 + 73728);
    assert_true(pp_cu_conv_filter_ws(&cv, 0, PP_DTYPE_F32, &bytes, &at));
    assert_true(at == 0 && bytes == 73728);
    assert_true(pp_cu_conv_filter_ws(&cv, 512, PP_DTYPE_F32, &bytes, &at));
    assert_true(at == 512 && bytes == 512 + 73728);
    print_message("16-bit Conv: bf16/f16 descriptors (fp32 compute, tensor-op math) with the fp32 dims; "
                  "native vs adapter for 14 dtype mixes; dW temporary at 1024 of %zu bytes\n", (size_t)1024 + 73728);
}

/* When a call takes the 128-bit path (kernels/cuda/io.cuh, launch_io.c) */
static void test_vec_of(void **state)
{
    (void)state;
    static _Alignas(16) unsigned char buf[4096];
    const void *al[3] = {buf, buf + 1024, NULL};
    assert_int_equal(pp_cu_vec_of(768, al, 3), PP_CU_VEC);          /* GPT-2 rows: 768 = 96 x 8 */
    assert_int_equal(pp_cu_vec_of(50257, al, 3), 1);                /* GPT-2's vocabulary: odd */
    assert_int_equal(pp_cu_vec_of(12, al, 3), 1);                   /* not a multiple of 8 */
    assert_int_equal(pp_cu_vec_of(0, al, 3), 1);
    const void *off[2] = {buf, buf + 2};                            /* a bfloat16 one element in */
    assert_int_equal(pp_cu_vec_of(768, off, 2), 1);
    const void *off8[2] = {buf, buf + 8};                           /* 8 bytes: a float32 float4 would do, 16-bit uint4 not */
    assert_int_equal(pp_cu_vec_of(768, off8, 2), 1);
    /* every row of a [m, d] tensor starts on 16 bytes when d is a multiple of 8, for 2- and 4-byte elements */
    for (int64_t r = 0; r < 7; r++) {
        assert_int_equal((r * 768 * 2) % 16, 0);
        assert_int_equal((r * 768 * 4) % 16, 0);
    }
    assert_int_equal(pp_cu_launch_vec(8 * 128 * 256, PP_CU_VEC).grid, 128);   /* 262144 / 8 groups / 256 */
    assert_int_equal(pp_cu_launch_vec(1000, 1).grid, 4);
    print_message("vector path: 128-bit accesses exactly where every tensor is 16-byte aligned and rows are multiples "
                  "of %d elements\n", PP_CU_VEC);
}

/* The row kernels' plans for the shapes that matter (GPT-2 124M: 32 x 1024 rows of 768; Llama
 * 7B and 70B rows of 4096 and 8192) against hand-derived sizes, then a host model of the
 * backward's work split (chunks of rows, each thread the columns of its accesses, the chunk
 * sums added in chunk order) against a brute-force double sum: every (row, column) visited
 * once, dscale within float rounding. */
static void rownorm_model(int64_t m, int64_t d, int vec, double *worst)
{
    const pp_cu_rownorm p = pp_cu_rownorm_plan(m, d, vec, 1);
    assert_true(p.block % 32 == 0 && p.block >= 32 && p.block <= 1024);
    assert_true((int64_t)p.grid * p.rows_per_block >= m && ((int64_t)p.grid - 1) * p.rows_per_block < m);
    assert_int_equal(p.part_bytes, (size_t)p.grid * 2 * (size_t)d * sizeof(float));
    assert_int_equal(p.smem, 2 * (size_t)d * sizeof(float) <= PP_CU_ROWNORM_SMEM ? 2 * (size_t)d * sizeof(float) : 0);
    float *part = calloc((size_t)p.grid * (size_t)d, sizeof(float));
    unsigned char *seen = calloc((size_t)(m * d), 1);
    for (unsigned b = 0; b < p.grid; b++) {
        const int64_t r0 = b * p.rows_per_block, r1 = r0 + p.rows_per_block < m ? r0 + p.rows_per_block : m;
        for (int64_t r = r0; r < r1; r++)
            for (unsigned t = 0; t < p.block; t++)
                for (int64_t v = t; v < d / p.vec; v += p.block)
                    for (int k = 0; k < p.vec; k++) {
                        const int64_t j = v * p.vec + k;
                        seen[r * d + j]++;
                        part[b * d + j] += (float)((r * 31 + j * 7) % 17) - 8.f;
                    }
    }
    for (int64_t i = 0; i < m * d; i++) assert_int_equal(seen[i], 1);
    for (int64_t j = 0; j < d; j++) {
        float s = 0.f;
        double ref = 0;
        for (unsigned b = 0; b < p.grid; b++) s += part[b * d + j];
        for (int64_t r = 0; r < m; r++) ref += (double)((r * 31 + j * 7) % 17) - 8.0;
        const double e = fabs(s - ref) / (1 + fabs(ref));
        if (e > *worst) *worst = e;
    }
    free(part);
    free(seen);
}

static void test_rownorm_plan(void **state)
{
    (void)state;
    /* GPT-2 124M, bf16: 32768 rows of 768 -> 96 threads of one 128-bit access, 1024 chunks of
     * 32 rows, the chunk's sums 6 KiB of shared memory, 1024 x 6 KiB of partial sums */
    pp_cu_rownorm p = pp_cu_rownorm_plan(32768, 768, PP_CU_VEC, 1);
    assert_int_equal(p.vec, 8);
    assert_int_equal(p.block, 96);
    assert_int_equal(p.grid, 1024);
    assert_int_equal(p.rows_per_block, 32);
    assert_int_equal(p.smem, 6144);
    assert_int_equal(p.part_bytes, (size_t)1024 * 6144);
    /* the same rows unaligned: 768 threads of one element */
    p = pp_cu_rownorm_plan(32768, 768, 1, 0);
    assert_true(p.vec == 1 && p.block == 768 && p.smem == 0 && p.part_bytes == 0);
    /* Llama 7B (d 4096): 512 threads, 32 KiB shared; 70B (d 8192): 64 KiB does not fit, the
     * sums go to the workspace slices */
    p = pp_cu_rownorm_plan(8192, 4096, PP_CU_VEC, 1);
    assert_true(p.block == 512 && p.smem == 32768 && p.grid == 1024 && p.rows_per_block == 8);
    p = pp_cu_rownorm_plan(8192, 8192, PP_CU_VEC, 1);
    assert_true(p.block == 1024 && p.smem == 0 && p.part_bytes == (size_t)1024 * 65536);
    /* d = 6144 (GPT-NeoX-20B): 48 KiB of sums, which with the block reduction's static
     * buffer exceeds the 48 KiB a launch has: the workspace; 6016 (47 KiB) still fits */
    assert_int_equal(pp_cu_rownorm_plan(8192, 6144, PP_CU_VEC, 1).smem, 0);
    assert_int_equal(pp_cu_rownorm_plan(8192, 6016, PP_CU_VEC, 1).smem, 48128);
    /* d = 16384 unvectorised: 1024 threads of 16 accesses each */
    assert_int_equal(pp_cu_rownorm_plan(4, 16384, 1, 0).block, 1024);
    /* a vector width the rows do not divide falls back to 1; tiny rows take one warp */
    assert_int_equal(pp_cu_rownorm_plan(10, 12, PP_CU_VEC, 0).vec, 1);
    assert_int_equal(pp_cu_rownorm_plan(10, 12, 1, 0).block, 32);
    /* fewer rows than chunks: a row each; 1025 rows: 513 chunks of 2 */
    p = pp_cu_rownorm_plan(5, 64, PP_CU_VEC, 1);
    assert_true(p.grid == 5 && p.rows_per_block == 1);
    p = pp_cu_rownorm_plan(1025, 64, PP_CU_VEC, 1);
    assert_true(p.grid == 513 && p.rows_per_block == 2);
    double worst = 0;
    rownorm_model(1025, 64, PP_CU_VEC, &worst);
    rownorm_model(3000, 40, 1, &worst);
    rownorm_model(37, 2056, PP_CU_VEC, &worst);     /* 257 accesses: 288 threads, the last warp partly idle */
    rownorm_model(2100, 1280, 1, &worst);           /* 1280 elements: 1024 threads, some loop twice */
    print_message("row norms: GPT-2 / Llama plans as derived; the backward's work split visits every element once, "
                  "its chunked column sums within %.1e of double\n", worst);
    assert_true(worst < 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grids),       cmocka_unit_test(test_alloc_round), cmocka_unit_test(test_gpt_matmuls),
        cmocka_unit_test(test_gemm_op),     cmocka_unit_test(test_bcast_reduce), cmocka_unit_test(test_resnet_conv),
        cmocka_unit_test(test_device_fallback), cmocka_unit_test(test_pool_window), cmocka_unit_test(test_bn_dims),
        cmocka_unit_test(test_matmul_model),
        cmocka_unit_test(test_matmul_trans_model), cmocka_unit_test(test_gemm_model),
        cmocka_unit_test(test_gemm_16bit),
        cmocka_unit_test(test_conv_16bit),
        cmocka_unit_test(test_vec_of), cmocka_unit_test(test_rownorm_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
