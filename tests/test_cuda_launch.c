/* Host-only checks of the cuda backend's launch arithmetic (kernels/cuda/launch.c) on the
 * real shapes of the example GPT (L=4, d=256, H=4, T=128, B=8) and ResNet-18 (batch 1..8,
 * 224x224 and 64x64), against values derived by hand in the comments; plus the clean
 * failure of the cuda device where there is no GPU (this machine). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <onnxpipe/device.h>
#include <string.h>

#include "launch.h"

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
    print_message("grids: 1-D and row launches match the hand-derived sizes\n");
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
    assert_int_equal(pp_mm_plan_make(&x, &w, &y, &p, "qkv", &err), PP_OK);
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
    assert_int_equal(pp_mm_plan_make(&q, &kt, &s, &p, "scores", &err), PP_OK);
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
    assert_int_equal(pp_mm_plan_make(&pm, &v, &o, &p, "ctx", &err), PP_OK);
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
    assert_int_equal(pp_mm_plan_make(&a1, &b3, &y3, &p, "bc", &err), PP_OK);
    g = pp_cu_mm_gemm(&p, PP_CU_DA, &serial);
    assert_int_equal(serial, 1);
    assert_int_equal(g.batch, 1);
    g = pp_cu_mm_gemm(&p, PP_CU_Y, &serial);
    assert_int_equal(serial, 0);
    assert_int_equal(g.stride_b, 0);    /* A (cuBLAS B) shared */
    assert_int_equal(g.stride_a, 16);
    /* errors name the node */
    pp_tensor bad = T(2, (int64_t[]){7, 3});
    assert_int_equal(pp_mm_plan_make(&x, &bad, &y, &p, "qkv", &err), PP_ERR_SHAPE);
    assert_non_null(strstr(err.msg, "qkv"));
    print_message("GPT matmuls: folded projections, 32-matrix strided attention, serial shared-operand gradients\n");
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
    pp_device_kind k = pp_device_auto(&why);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grids),       cmocka_unit_test(test_alloc_round), cmocka_unit_test(test_gpt_matmuls),
        cmocka_unit_test(test_gemm_op),     cmocka_unit_test(test_bcast_reduce), cmocka_unit_test(test_resnet_conv),
        cmocka_unit_test(test_device_fallback), cmocka_unit_test(test_pool_window), cmocka_unit_test(test_bn_dims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
