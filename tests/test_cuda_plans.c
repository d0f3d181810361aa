/* Host-only checks of the cuda backend's library descriptions that test_cuda_launch.c does not
 * hold (it would pass 1,000 lines): cuBLASLt's GEMMs (kernels/cuda/lt_plan.c: layouts, compute
 * types, the bias epilogue, the cache key), run through a host model of cublasLtMatmul against
 * brute-force row-major products; and cuDNN's fused attention (kernels/cuda/sdpa_plan.c: every
 * tensor's dims and strides from the exporters' layouts, what cuDNN's flash kernels take, the
 * cache key, backward's workspace) on GPT-2 124M's and a Llama's shapes, each element address
 * checked against the stored tensor's own index. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lt_plan.h"
#include "sdpa_plan.h"

static pp_tensor T(pp_dtype dt, int rank, const int64_t *dims)
{
    pp_tensor t = {dt, rank, {0}, (void *)16};
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    return t;
}

static float *rnd(int64_t n, unsigned *seed)
{
    float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(rand_r(seed) % 2001 - 1000) / 1000.f;
    return p;
}

/* cublasLtMatmul as its documentation defines it, from the layouts alone: column-major D (rows
 * x cols, ld) = alpha op(A) op(B) + beta C (+ bias[i] under EPILOGUE_BIAS), op(A) the stored A
 * (rows x cols) or its transpose, matrix b of a batch at b stride elements. */
static void lt_model(const pp_cu_lt *l, float alpha, const float *A, const float *B, float beta, float *C,
                     const float *bias)
{
    assert_int_equal(l->rows[0], l->transa ? l->k : l->m);
    assert_int_equal(l->cols[1], l->transb ? l->k : l->n);
    assert_true(l->ld[0] >= l->rows[0] && l->ld[1] >= l->rows[1] && l->ld[2] >= l->rows[2]);
    for (int b = 0; b < l->batch; b++)
        for (long long i = 0; i < l->m; i++)
            for (long long j = 0; j < l->n; j++) {
                double acc = 0;
                for (long long k = 0; k < l->k; k++) {
                    const float *a = A + b * l->stride[0], *bb = B + b * l->stride[1];
                    acc += (double)(l->transa ? a[k + i * l->ld[0]] : a[i + k * l->ld[0]]) *
                           (l->transb ? bb[j + k * l->ld[1]] : bb[k + j * l->ld[1]]);
                }
                float *c = C + b * l->stride[2] + i + j * l->ld[2];
                *c = (float)(alpha * acc + (beta != 0.f ? beta * *c : 0.f) +
                             (l->epilogue == PP_CU_LT_EPILOGUE_BIAS ? bias[i] : 0.f));
            }
}

/* Every GEMM of a MatMul (batched, transposed operands) and of a Gemm with its bias row,
 * described for cuBLASLt and run through lt_model, against brute force. */
static void test_lt_gemms(void **state)
{
    (void)state;
    typedef struct lcase {
        int ta, tb;
        int64_t batch, M, K, N;
    } lcase;
    const lcase cases[] = {{0, 0, 1, 5, 7, 3}, {0, 1, 1, 4, 6, 5}, {1, 0, 3, 4, 6, 5}, {1, 1, 2, 3, 8, 4},
                           {0, 1, 4, 6, 3, 6}};
    unsigned seed = 3;
    double worst = 0;
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const lcase *c = &cases[t];
        const int64_t B = c->batch, M = c->M, K = c->K, N = c->N;
        float *x = rnd(B * M * K, &seed), *y = rnd(B * K * N, &seed), *out = rnd(B * M * N, &seed);
        const float *bias = rnd(N, &seed);
        /* Y = op(X) op(Y') per matrix, X stored (M, K) or (K, M), Y' (K, N) or (N, K) */
        pp_cu_gemm g = pp_cu_gemm_rowmajor(c->ta, c->tb, M, N, K, M * K, K * N, M * N, B);
        pp_cu_gemm_set_types(&g, PP_DTYPE_F32, PP_DTYPE_F32, PP_DTYPE_F32);
        const int with_bias = t % 2;
        pp_cu_lt l = pp_cu_lt_of(&g, with_bias ? PP_CU_R_32F : -1, y, x, out, bias);
        assert_int_equal(l.compute, PP_CU_COMPUTE_32F_FAST_TF32);
        assert_int_equal(l.epilogue, with_bias ? PP_CU_LT_EPILOGUE_BIAS : PP_CU_LT_EPILOGUE_DEFAULT);
        lt_model(&l, 1.f, y, x, 0.f, out, bias);
        double d = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double acc = with_bias ? bias[j] : 0;
                    for (int64_t k = 0; k < K; k++)
                        acc += (double)x[b * M * K + (c->ta ? k * M + i : i * K + k)] *
                               y[b * K * N + (c->tb ? j * K + k : k * N + j)];
                    d = fmax(d, fabs(acc - out[b * M * N + i * N + j]));
                }
        assert_true(d < 1e-5);
        worst = fmax(worst, d);
        free(x), free(y), free(out), free((void *)bias);
    }
    print_message("cuBLASLt layouts of %zu GEMMs (batched, transA x transB, bias rows in the epilogue) through "
                  "a cublasLtMatmul model vs brute force: max diff %.2e\n", sizeof cases / sizeof cases[0], worst);
}

/* GPT-2 124M's GEMMs (B 8 x T 1024 tokens, d 768): types, compute, layouts, the bias epilogue's
 * rules and the cache key. */
static void test_lt_gpt2(void **state)
{
    (void)state;
    /* c_attn as Gemm: Y (8192, 2304) = X (8192, 768) W (768, 2304) + b: cuBLAS m = 2304, n = 8192 */
    pp_cu_gemm_op op = {0, 0, 8192, 768, 2304};
    pp_cu_gemm g = pp_cu_gemm_op_gemm(&op, PP_CU_Y);
    assert_true(pp_cu_gemm_set_types(&g, PP_DTYPE_BF16, PP_DTYPE_BF16, PP_DTYPE_BF16));
    const int64_t row[1] = {2304}, row2[2] = {1, 2304}, full[2] = {8192, 2304};
    pp_tensor b1 = T(PP_DTYPE_F32, 1, row), b2 = T(PP_DTYPE_BF16, 2, row2), bf = T(PP_DTYPE_F32, 2, full);
    pp_tensor bh = T(PP_DTYPE_F16, 1, row);
    int bt = -1;
    assert_true(pp_cu_lt_bias_epilogue(&b1, 2304, 1.f, PP_DTYPE_BF16, &bt) && bt == PP_CU_R_32F);
    assert_true(pp_cu_lt_bias_epilogue(&b2, 2304, 1.f, PP_DTYPE_BF16, &bt) && bt == PP_CU_R_16BF);
    assert_false(pp_cu_lt_bias_epilogue(&b1, 2304, 0.5f, PP_DTYPE_BF16, &bt));   /* beta scales C */
    assert_false(pp_cu_lt_bias_epilogue(&bf, 2304, 1.f, PP_DTYPE_BF16, &bt));    /* [M, N]: broadcast */
    assert_false(pp_cu_lt_bias_epilogue(&bh, 2304, 1.f, PP_DTYPE_BF16, &bt));    /* a third dtype */
    assert_false(pp_cu_lt_bias_epilogue(&b1, 768, 1.f, PP_DTYPE_BF16, &bt));     /* not a row of N */
    char *base = malloc(1 << 16);
    const char *a16 = base + (16 - (uintptr_t)base % 16);
    pp_cu_lt l = pp_cu_lt_of(&g, PP_CU_R_32F, a16, a16 + 64, a16 + 128, a16 + 256);
    assert_int_equal(l.compute, PP_CU_COMPUTE_32F);   /* 16-bit operands: fp32 compute, not TF32 */
    assert_true(l.type[0] == PP_CU_R_16BF && l.type[1] == PP_CU_R_16BF && l.type[2] == PP_CU_R_16BF);
    assert_true(l.rows[0] == 2304 && l.cols[0] == 768 && l.ld[0] == 2304);     /* W as stored, column-major */
    assert_true(l.rows[1] == 768 && l.cols[1] == 8192 && l.ld[1] == 768);      /* X */
    assert_true(l.rows[2] == 2304 && l.cols[2] == 8192 && l.ld[2] == 2304);    /* Y */
    assert_true(l.bias_type == PP_CU_R_32F && l.align[3] == 16);
    /* the key: the same call again is the same entry; another alignment, epilogue or dtype is not */
    pp_cu_lt same = pp_cu_lt_of(&g, PP_CU_R_32F, a16, a16 + 64, a16 + 128, a16 + 256);
    assert_memory_equal(&l, &same, sizeof l);
    pp_cu_lt odd = pp_cu_lt_of(&g, PP_CU_R_32F, a16 + 2, a16 + 64, a16 + 128, a16 + 256);
    assert_int_equal(odd.align[0], 2);
    assert_memory_not_equal(&l, &odd, sizeof l);
    pp_cu_lt plain = pp_cu_lt_of(&g, -1, a16, a16 + 64, a16 + 128, NULL);
    assert_true(plain.epilogue == PP_CU_LT_EPILOGUE_DEFAULT && plain.bias_type == 0 && plain.align[3] == 0);
    assert_memory_not_equal(&l, &plain, sizeof l);
    /* attention's scores, unfused in fp32: (B H) = 96 strided products of T x 64 by 64 x T */
    pp_cu_gemm s = pp_cu_gemm_rowmajor(0, 1, 1024, 1024, 64, 1024 * 64, 1024 * 64, 1024 * 1024, 96);
    pp_cu_lt ls = pp_cu_lt_of(&s, -1, a16, a16, a16, NULL);
    assert_true(ls.batch == 96 && ls.stride[0] == 65536 && ls.stride[2] == 1048576);
    assert_int_equal(ls.compute, PP_CU_COMPUTE_32F_FAST_TF32);
    free(base);
    print_message("GPT-2 124M GEMMs on cuBLASLt: bf16 with fp32 compute, bias row in the epilogue (fp32 or bf16; "
                  "not beta != 1, [M, N] or another dtype), keys by shape, type, epilogue and alignment\n");
}

/* ---------------- cuDNN's fused attention ---------------- */

/* The plan of an Attention call on stored Q, K, V, Y (4-D; perm: stage/fuse_attention.c's BSHD
 * layout, else [B, H, S, D]) and an optional mask. */
static pp_status plan_of(pp_dtype io, const int64_t *q, const int64_t *kv, int bshd, int causal, const pp_tensor *mask,
                         int backward, pp_attn_args *a, pp_cu_sdpa *p, pp_error *err)
{
    pp_tensor in[4] = {T(io, 4, q), T(io, 4, kv), T(io, 4, kv), {0}};
    if (mask) in[3] = *mask;
    pp_tensor out = T(io, 4, q);
    static const int64_t perm[4] = {0, 2, 1, 3};
    pp_attr attrs[6] = {{.name = "is_causal", .type = PP_ATTR_INT, .i = causal},
                        {.name = "scale", .type = PP_ATTR_FLOAT, .f = 0.125f}};
    int n = 2;
    static const char *const names[4] = {"perm_Q", "perm_K", "perm_V", "perm_Y"};
    for (int i = 0; bshd && i < 4; i++)
        attrs[n++] = (pp_attr){.name = names[i], .type = PP_ATTR_INTS, .n = 4, .ints = perm};
    pp_kernel_ctx c = {.node = "attn", .op = PP_OP_ATTENTION, .op_type = "Attention", .opset = 23, .attrs = attrs,
                       .nattrs = n, .in = in, .nin = mask ? 4 : 3, .out = &out, .nout = 1};
    PP_CHECK(pp_args_attention(&c, a, err));
    return pp_cu_sdpa_plan(p, a, io, mask ? mask->dtype : PP_DTYPE_F32, backward, "attn", err);
}

/* Element (i0, i1, i2, i3) of plan tensor t: its offset by the plan's strides. */
static long long at(const pp_cu_sdpa_tensor *t, long long i0, long long i1, long long i2, long long i3)
{
    return i0 * t->st[0] + i1 * t->st[1] + i2 * t->st[2] + i3 * t->st[3];
}

static void test_sdpa_gpt2(void **state)
{
    (void)state;
    /* GPT-2 124M, microbatch 8: the exports' heads [B, T, H, D] = [8, 1024, 12, 64], read in place */
    const long long B = 8, S = 1024, H = 12, D = 64;
    const int64_t q[4] = {B, S, H, D};
    pp_attn_args a;
    pp_cu_sdpa p, p2;
    pp_error err = {0};
    assert_int_equal(plan_of(PP_DTYPE_BF16, q, q, 1, 1, NULL, 1, &a, &p, &err), PP_OK);
    assert_true(p.b == B && p.hq == H && p.hkv == H && p.sq == S && p.skv == S && p.dk == D && p.dv == D);
    assert_true(p.dtype == PP_CUDNN_DATA_BFLOAT16 && p.causal && !p.has_bias && p.scale == 0.125f);
    /* every tensor reads the stored [B, T, H, D] element (b, s, h, d) at b T H D + s H D + h D + d */
    const int mem[7] = {PP_SDPA_Q, PP_SDPA_K, PP_SDPA_V, PP_SDPA_O, PP_SDPA_DQ, PP_SDPA_DK, PP_SDPA_DV};
    long long bad = 0, checked = 0;
    for (int t = 0; t < 7; t++) {
        const pp_cu_sdpa_tensor *x = &p.t[mem[t]];
        assert_true(x->dims[0] == B && x->dims[1] == H && x->dims[2] == S && x->dims[3] == D && x->st[3] == 1);
        for (long long b = 0; b < B; b += 3)
            for (long long h = 0; h < H; h += 5)
                for (long long s = 0; s < S; s += 97)
                    for (long long d = 0; d < D; d += 7, checked++)
                        bad += at(x, b, h, s, d) != b * S * H * D + s * H * D + h * D + d;
    }
    /* K^T and V^T are K and V with their last two dims swapped: the same addresses */
    for (long long b = 0; b < B; b += 3)
        for (long long h = 0; h < H; h += 5)
            for (long long s = 0; s < S; s += 97)
                for (long long d = 0; d < D; d += 7, checked++)
                    bad += at(&p.t[PP_SDPA_KT], b, h, d, s) != at(&p.t[PP_SDPA_K], b, h, s, d) ||
                           at(&p.t[PP_SDPA_VT], b, h, d, s) != at(&p.t[PP_SDPA_V], b, h, s, d);
    assert_int_equal(bad, 0);
    assert_true(p.t[PP_SDPA_KT].dims[2] == D && p.t[PP_SDPA_KT].dims[3] == S);
    assert_true(p.t[PP_SDPA_Q].st[0] == S * H * D && p.t[PP_SDPA_Q].st[1] == D && p.t[PP_SDPA_Q].st[2] == H * D);
    /* the statistics and backward's fp32 work tensors, packed */
    const pp_cu_sdpa_tensor *st = &p.t[PP_SDPA_STATS], *acc = &p.t[PP_SDPA_DQ_ACCUM];
    assert_true(st->dims[3] == 1 && st->st[0] == H * S && st->st[1] == S && st->st[2] == 1);
    assert_true(acc->st[0] == H * S * D && acc->st[2] == D && acc->st[3] == 1);
    assert_int_equal(pp_cu_sdpa_stats_bytes(&p), B * H * S * 4);   /* 3 MiB, not the 384 MiB of B H T^2 fp32 */
    /* backward's workspace: cuDNN's 1000 bytes, the rowsum at 1024, the dQ accumulator after it,
     * then (dK added to, dV not asked for) two bf16 temporaries */
    pp_cu_sdpa_ws w;
    pp_cu_sdpa_bwd_ws(&p, 1000, 6u, &w);
    assert_int_equal(w.sum_at, 1024);
    assert_int_equal(w.accum_at, 1024 + B * H * S * 4);
    assert_int_equal(w.accum_bytes, B * H * S * D * 4);   /* zeroed before cuDNN 9.6 */
    assert_int_equal(w.tmp_at[0], 0);
    assert_int_equal(w.tmp_at[1], w.accum_at + B * H * S * D * 4);
    assert_int_equal(w.tmp_at[2], w.tmp_at[1] + B * H * S * D * 2);
    assert_int_equal(w.bytes, w.tmp_at[2] + B * H * S * D * 2);
    pp_cu_sdpa_bwd_ws(&p, 0, 0, &w);
    assert_true(w.sum_at == 0 && w.bytes == (size_t)(B * H * S * 4 + B * H * S * D * 4));
    /* the key: the same call is the same plan; forward and backward, another scale, are not */
    assert_int_equal(plan_of(PP_DTYPE_BF16, q, q, 1, 1, NULL, 1, &a, &p2, &err), PP_OK);
    assert_memory_equal(&p, &p2, sizeof p);
    assert_int_equal(plan_of(PP_DTYPE_BF16, q, q, 1, 1, NULL, 0, &a, &p2, &err), PP_OK);
    assert_memory_not_equal(&p, &p2, sizeof p);
    assert_int_equal(plan_of(PP_DTYPE_F16, q, q, 1, 0, NULL, 1, &a, &p2, &err), PP_OK);
    assert_true(p2.dtype == PP_CUDNN_DATA_HALF && !p2.causal);
    print_message("fused attention, GPT-2 124M (B 8, T 1024, 12 heads of 64) in the exports' [B, T, H, D]: "
                  "%lld addresses of Q, K, V, O, their gradients, K^T and V^T checked, %lld wrong; stats %zu bytes; "
                  "backward workspace %zu bytes with two temporaries\n", checked, bad, pp_cu_sdpa_stats_bytes(&p),
                  w.bytes);
}

static void test_sdpa_llama_and_refusals(void **state)
{
    (void)state;
    /* Llama-style grouped-query heads, [B, H, S, D] as RoPE leaves them: 8 query, 2 kv heads of 128 */
    const int64_t q[4] = {2, 8, 256, 128}, kv[4] = {2, 2, 256, 128};
    pp_attn_args a;
    pp_cu_sdpa p;
    pp_error err = {0};
    assert_int_equal(plan_of(PP_DTYPE_BF16, q, kv, 0, 1, NULL, 1, &a, &p, &err), PP_OK);
    assert_true(p.hq == 8 && p.hkv == 2 && p.t[PP_SDPA_K].dims[1] == 2 && p.t[PP_SDPA_DK].dims[1] == 2);
    assert_true(p.t[PP_SDPA_K].st[0] == 2 * 256 * 128 && p.t[PP_SDPA_K].st[1] == 256 * 128 &&
                p.t[PP_SDPA_K].st[2] == 128);
    /* an additive mask [1, 1, S, S]: cuDNN's bias, broadcast over batch and heads */
    const int64_t md[4] = {1, 1, 256, 256};
    pp_tensor m = T(PP_DTYPE_F32, 4, md);
    assert_int_equal(plan_of(PP_DTYPE_BF16, q, kv, 0, 0, &m, 0, &a, &p, &err), PP_OK);
    const pp_cu_sdpa_tensor *bias = &p.t[PP_SDPA_BIAS];
    assert_true(p.has_bias && p.bias_dtype == PP_CUDNN_DATA_FLOAT);
    assert_true(bias->dims[0] == 1 && bias->dims[1] == 1 && bias->dims[2] == 256 && bias->dims[3] == 256);
    assert_true(bias->st[2] == 256 && bias->st[3] == 1);
    /* what cuDNN's flash kernels do not take: refused with the reason, the stage keeps the chain */
    typedef struct refusal {
        pp_dtype io;
        int64_t q[4], kv[4];
        const pp_tensor *mask;
        const char *why;
    } refusal;
    const int64_t pd[4] = {2, 1, 1, 256};
    pp_tensor boolmask = T(PP_DTYPE_BOOL, 4, md), padmask = T(PP_DTYPE_F32, 4, pd);
    const refusal no[5] = {
        {PP_DTYPE_F32, {2, 8, 256, 128}, {2, 2, 256, 128}, NULL, "float32"},
        {PP_DTYPE_BF16, {2, 8, 256, 68}, {2, 2, 256, 68}, NULL, "multiples of 8"},
        {PP_DTYPE_BF16, {2, 8, 256, 256}, {2, 2, 256, 256}, NULL, "up to 128"},
        {PP_DTYPE_BF16, {2, 8, 256, 128}, {2, 2, 256, 128}, &boolmask, "bool mask"},
        {PP_DTYPE_BF16, {2, 8, 256, 128}, {2, 2, 256, 128}, &padmask, "broadcast over the queries"},
    };
    for (int i = 0; i < 5; i++) {
        err = (pp_error){0};
        assert_int_equal(plan_of(no[i].io, no[i].q, no[i].kv, 0, 1, no[i].mask, 0, &a, &p, &err), PP_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, no[i].why));
        assert_non_null(strstr(err.msg, "attn"));
    }
    print_message("fused attention: Llama grouped-query heads (8 over 2, head 128) and a [1, 1, S, S] mask planned; "
                  "float32, head 68 or 256, a bool mask and a padding mask [B, 1, 1, S] refused with the reason\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lt_gemms),
        cmocka_unit_test(test_lt_gpt2),
        cmocka_unit_test(test_sdpa_gpt2),
        cmocka_unit_test(test_sdpa_llama_and_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
