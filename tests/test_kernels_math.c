/* Tests of the cpu "math" kernels: every backward against central finite differences
 * (kernel_check.h), every forward against brute-force loops or closed forms written
 * here, and the optimizers against torch.optim (tests/ref/optim_ref.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "kernel_check.h"
#include "kernels_math_ref.h"
#include <onnxpipe/backend/kernels_backend.h>

/* ---------------- gradients vs finite differences ---------------- */

#define T3(a, b, c) .rank = 3, .dims = {a, b, c}
#define T2(a, b) .rank = 2, .dims = {a, b}
#define T1(a) .rank = 1, .dims = {a}
#define T4(a, b, c, d) .rank = 4, .dims = {a, b, c, d}
#define T0 .rank = 0
#define CASE(nm, o, ni, no) .name = nm, .op = o, .nin = ni, .nout = no

/* values kept away from kinks (Relu at 0) so finite differences are smooth */
static const float away_from_zero[24] = {0.5f, -0.7f, 1.2f, -1.9f, 0.3f, -0.25f, 2.1f, -0.4f,
                                         0.9f, -1.1f, 0.15f, -0.6f, 1.7f, -0.2f, 0.45f, -1.4f,
                                         0.8f, -0.35f, 1.05f, -2.2f, 0.6f, -0.9f, 0.27f, -0.55f};
#define AWAY .fill = KC_DATA, .data = away_from_zero

static const kc_case elementwise_cases[] = {
    {CASE("add_same", "Add", 2, 1), .in = {{T3(2, 3, 4)}, {T3(2, 3, 4)}}, .out = {{T3(2, 3, 4)}}},
    {CASE("add_234_4", "Add", 2, 1), .in = {{T3(2, 3, 4)}, {T1(4)}}, .out = {{T3(2, 3, 4)}}},
    {CASE("add_scalar", "Add", 2, 1), .in = {{T3(2, 3, 4)}, {T0}}, .out = {{T3(2, 3, 4)}}},
    {CASE("sub_4_234", "Sub", 2, 1), .in = {{T1(4)}, {T3(2, 3, 4)}}, .out = {{T3(2, 3, 4)}}},
    {CASE("mul_214_31", "Mul", 2, 1), .in = {{T3(2, 1, 4)}, {T2(3, 1)}}, .out = {{T3(2, 3, 4)}}},
    {CASE("mul_scalar", "Mul", 2, 1), .in = {{T0}, {T3(2, 3, 4)}}, .out = {{T3(2, 3, 4)}}},
    {CASE("div_234_4", "Div", 2, 1), .in = {{T3(2, 3, 4)}, {T1(4), .fill = KC_POSITIVE}}, .out = {{T3(2, 3, 4)}}},
    {CASE("div_214_31", "Div", 2, 1), .in = {{T3(2, 1, 4)}, {T2(3, 1), .fill = KC_POSITIVE}}, .out = {{T3(2, 3, 4)}}},
    {CASE("pow_same", "Pow", 2, 1), .in = {{T2(3, 4), .fill = KC_POSITIVE}, {T2(3, 4)}}, .out = {{T2(3, 4)}}},
    {CASE("pow_scalar_exp", "Pow", 2, 1), .in = {{T3(2, 3, 4), .fill = KC_POSITIVE}, {T0}}, .out = {{T3(2, 3, 4)}}},
    {CASE("sqrt", "Sqrt", 1, 1), .in = {{T2(3, 5), .fill = KC_POSITIVE}}, .out = {{T2(3, 5)}}},
    {CASE("neg", "Neg", 1, 1), .in = {{T2(3, 5)}}, .out = {{T2(3, 5)}}},
    {CASE("reciprocal", "Reciprocal", 1, 1), .in = {{T2(3, 5), .fill = KC_POSITIVE}}, .out = {{T2(3, 5)}}},
    {CASE("relu", "Relu", 1, 1), .in = {{T2(4, 6), AWAY}}, .out = {{T2(4, 6)}}},
    {CASE("leaky_relu", "LeakyRelu", 1, 1), .in = {{T2(4, 6), AWAY}}, .out = {{T2(4, 6)}},
     .attrs = {{.name = "alpha", .type = PP_ATTR_FLOAT, .f = 0.2f}}, .nattrs = 1},
    {CASE("sigmoid", "Sigmoid", 1, 1), .in = {{T2(3, 5)}}, .out = {{T2(3, 5)}}},
    {CASE("tanh", "Tanh", 1, 1), .in = {{T2(3, 5)}}, .out = {{T2(3, 5)}}},
    {CASE("erf", "Erf", 1, 1), .in = {{T2(3, 5)}}, .out = {{T2(3, 5)}}},
    {CASE("gelu", "Gelu", 1, 1), .opset = 20, .in = {{T2(3, 5)}}, .out = {{T2(3, 5)}}},
    {CASE("gelu_tanh", "Gelu", 1, 1), .opset = 20, .in = {{T2(3, 5)}}, .out = {{T2(3, 5)}},
     .attrs = {{.name = "approximate", .type = PP_ATTR_STRING, .s = "tanh"}}, .nattrs = 1},
    {CASE("identity", "Identity", 1, 1), .in = {{T2(3, 5)}}, .out = {{T2(3, 5)}}},
};

static void run_cases(const kc_case *cases, int n)
{
    for (int i = 0; i < n; i++) {
        double e = kc_check(&cases[i]);
        double tol = cases[i].tol ? cases[i].tol : 2e-3;
        if (!(e >= 0 && e <= tol)) printf("FAILED %s: %.3g (tolerance %.3g)\n", cases[i].name, e, tol);
        assert_true(e >= 0 && e <= tol);
    }
}

static void test_elementwise_grad(void **state)
{
    (void)state;
    run_cases(elementwise_cases, (int)(sizeof elementwise_cases / sizeof elementwise_cases[0]));
}

/* ---------------- forward values vs brute force ---------------- */

static void test_elementwise_forward(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof elementwise_cases / sizeof elementwise_cases[0]; i++) {
        const kc_case *c = &elementwise_cases[i];
        double d = mr_elementwise_maxdiff(c);
        printf("%-40s forward vs brute force (double) max |diff| %.3g\n", c->name, d);
        assert_true(d >= 0 && d < 1e-5);
    }
}

#define ATTR_I(nm, v) {.name = nm, .type = PP_ATTR_INT, .i = v}
#define ATTR_F(nm, v) {.name = nm, .type = PP_ATTR_FLOAT, .f = v}
#define ATTR_INTS(nm, ...) {.name = nm, .type = PP_ATTR_INTS, .ints = (const int64_t[]){__VA_ARGS__}, \
                            .n = (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))}

static const kc_case matmul_cases[] = {
    {CASE("matmul_2d", "MatMul", 2, 1), .in = {{T2(3, 4)}, {T2(4, 5)}}, .out = {{T2(3, 5)}}},
    {CASE("matmul_batched", "MatMul", 2, 1), .in = {{T3(2, 3, 4)}, {T3(2, 4, 5)}}, .out = {{T3(2, 3, 5)}}},
    {CASE("matmul_folded_234_45", "MatMul", 2, 1), .in = {{T3(2, 3, 4)}, {T2(4, 5)}}, .out = {{T3(2, 3, 5)}}},
    {CASE("matmul_bcast_2134_345", "MatMul", 2, 1), .in = {{T4(2, 1, 3, 4)}, {T3(3, 4, 5)}},
     .out = {{T4(2, 3, 3, 5)}}},
    {CASE("matmul_bcast_34_245", "MatMul", 2, 1), .in = {{T2(3, 4)}, {T3(2, 4, 5)}}, .out = {{T3(2, 3, 5)}}},
    {CASE("matmul_1d_4_45", "MatMul", 2, 1), .in = {{T1(4)}, {T2(4, 5)}}, .out = {{T1(5)}}},
    {CASE("matmul_1d_234_4", "MatMul", 2, 1), .in = {{T3(2, 3, 4)}, {T1(4)}}, .out = {{T2(2, 3)}}},
    {CASE("matmul_1d_4_4", "MatMul", 2, 1), .in = {{T1(4)}, {T1(4)}}, .out = {{T0}}},
};

static const kc_case gemm_cases[] = {
    {CASE("gemm_nn_cN", "Gemm", 3, 1), .in = {{T2(3, 4)}, {T2(4, 5)}, {T1(5)}}, .out = {{T2(3, 5)}}},
    {CASE("gemm_tn_cMN", "Gemm", 3, 1), .in = {{T2(4, 3)}, {T2(4, 5)}, {T2(3, 5)}}, .out = {{T2(3, 5)}},
     .attrs = {ATTR_I("transA", 1), ATTR_F("alpha", 0.5f), ATTR_F("beta", 2.f)}, .nattrs = 3},
    {CASE("gemm_nt_cM1", "Gemm", 3, 1), .in = {{T2(3, 4)}, {T2(5, 4)}, {T2(3, 1)}}, .out = {{T2(3, 5)}},
     .attrs = {ATTR_I("transB", 1), ATTR_F("alpha", 1.5f)}, .nattrs = 2},
    {CASE("gemm_tt_cscalar", "Gemm", 3, 1), .in = {{T2(4, 3)}, {T2(5, 4)}, {T0}}, .out = {{T2(3, 5)}},
     .attrs = {ATTR_I("transA", 1), ATTR_I("transB", 1), ATTR_F("beta", 0.7f)}, .nattrs = 3},
    {CASE("gemm_nt_noC", "Gemm", 2, 1), .in = {{T2(3, 4)}, {T2(5, 4)}}, .out = {{T2(3, 5)}},
     .attrs = {ATTR_I("transB", 1)}, .nattrs = 1},
};

/* MatMul with Transposes folded in by the stage (stage/fuse_transpose.c): perm_A / perm_B read the
 * operand as Transpose(input, perm), perm_Y writes Transpose(Y, perm_Y); attention's
 * q k^T, probs v into [B, T, H, D/H], and transposed (column-major) matrices. A third
 * input is a fused bias [N] or [M, N] (attention's causal mask) added to every matrix. */
static const kc_case matmul_perm_cases[] = {
    {CASE("matmul_perm_q_kT", "MatMul", 2, 1), .in = {{T4(2, 3, 2, 4)}, {T4(2, 5, 2, 4)}}, .out = {{T4(2, 2, 3, 5)}},
     .attrs = {ATTR_INTS("perm_A", 0, 2, 1, 3), ATTR_INTS("perm_B", 0, 2, 3, 1)}, .nattrs = 2},
    {CASE("matmul_perm_pv_Y", "MatMul", 2, 1), .in = {{T4(2, 2, 3, 5)}, {T4(2, 5, 2, 4)}}, .out = {{T4(2, 3, 2, 4)}},
     .attrs = {ATTR_INTS("perm_B", 0, 2, 1, 3), ATTR_INTS("perm_Y", 0, 2, 1, 3)}, .nattrs = 2},
    {CASE("matmul_perm_colmajor_AY", "MatMul", 2, 1), .in = {{T3(2, 4, 3)}, {T3(2, 4, 5)}}, .out = {{T3(2, 5, 3)}},
     .attrs = {ATTR_INTS("perm_A", 0, 2, 1), ATTR_INTS("perm_Y", 0, 2, 1)}, .nattrs = 2},
    {CASE("matmul_perm_q_kT_biasMN", "MatMul", 3, 1), .in = {{T4(2, 3, 2, 4)}, {T4(2, 5, 2, 4)}, {T2(3, 5)}},
     .out = {{T4(2, 2, 3, 5)}}, .attrs = {ATTR_INTS("perm_A", 0, 2, 1, 3), ATTR_INTS("perm_B", 0, 2, 3, 1)},
     .nattrs = 2},
    {CASE("matmul_batched_biasMN", "MatMul", 3, 1), .in = {{T3(2, 3, 4)}, {T3(2, 4, 5)}, {T2(3, 5)}},
     .out = {{T3(2, 3, 5)}}},
    {CASE("matmul_batched_biasN", "MatMul", 3, 1), .in = {{T3(2, 3, 4)}, {T3(2, 4, 5)}, {T1(5)}}, .out = {{T3(2, 3, 5)}}},
};

/* Element of x at logical index l when the operand is Transpose(x, perm) (to_mem 0) or x
 * is Transpose(logical, perm) (to_mem 1); perm NULL: l itself. */
static float perm_at(const pp_tensor *x, const int64_t *perm, int to_mem, const int64_t *l)
{
    int64_t off = 0;
    for (int d = 0; d < x->rank; d++) {
        int64_t i = 0;
        if (!perm) i = l[d];
        else if (to_mem) i = l[perm[d]];
        else for (int j = 0; j < x->rank; j++) if (perm[j] == d) i = l[j];
        off = off * x->dims[d] + i;
    }
    return ((const float *)x->data)[off];
}

/* The folded MatMul by explicit index maps and triple loops, plus the bias, in double. */
static double matmul_perm_maxdiff(const kc_case *c)
{
    pp_tensor in[KC_MAX_IO], out[KC_MAX_IO];
    const pp_attr *pa = pp_attr_find(c->attrs, c->nattrs, "perm_A"), *pb = pp_attr_find(c->attrs, c->nattrs, "perm_B");
    const pp_attr *py = pp_attr_find(c->attrs, c->nattrs, "perm_Y");
    const int64_t *PA = pa ? pa->ints : NULL, *PB = pb ? pb->ints : NULL, *PY = py ? py->ints : NULL;
    double worst = -1;
    if (mr_forward(c, in, out) == PP_OK) {
        const int r = out[0].rank;
        int64_t ya[PP_MAX_RANK] = {0}, yb[PP_MAX_RANK] = {0}, yd[PP_MAX_RANK] = {0}, n = 1;   /* logical dims */
        for (int d = 0; d < r; d++) {
            ya[d] = PA ? in[0].dims[PA[d]] : in[0].dims[d];
            yb[d] = PB ? in[1].dims[PB[d]] : in[1].dims[d];
        }
        for (int d = 0; d < r; d++) yd[d] = d < r - 1 ? ya[d] : yb[d];
        for (int d = 0; d < r; d++) n *= yd[d];
        const int64_t K = ya[r - 1];
        worst = 0;
        for (int64_t f = 0; f < n; f++) {
            int64_t l[PP_MAX_RANK], la[PP_MAX_RANK], lb[PP_MAX_RANK], q = f;
            for (int d = r - 1; d >= 0; d--) l[d] = q % yd[d], q /= yd[d];
            memcpy(la, l, sizeof la);
            memcpy(lb, l, sizeof lb);
            double acc = 0;
            for (int64_t k = 0; k < K; k++) {
                la[r - 1] = k, lb[r - 2] = k;
                acc += (double)perm_at(&in[0], PA, 0, la) * perm_at(&in[1], PB, 0, lb);
            }
            if (c->nin > 2) {   /* [N] or [M, N] */
                const float *bias = in[2].data;
                acc += bias[in[2].rank == 1 ? l[r - 1] : l[r - 2] * yd[r - 1] + l[r - 1]];
            }
            double d = fabs(acc - perm_at(&out[0], PY, 1, l));
            if (!(d <= worst)) worst = d;
        }
    }
    mr_free(c, in, out);
    return worst;
}

/* MatMul with Linear's weight Transpose folded in (stage/fuse_transpose.c, trans_B): B is stored
 * (.., N, K); a weight shared by the batch (one GEMM), with a fused bias [N], and a batch
 * of B matrices. */
static const kc_case matmul_trans_b_cases[] = {
    {CASE("matmul_trans_b_weight", "MatMul", 2, 1), .in = {{T3(2, 3, 4)}, {T2(5, 4)}}, .out = {{T3(2, 3, 5)}},
     .attrs = {ATTR_I("trans_B", 1)}, .nattrs = 1},
    {CASE("matmul_trans_b_biasN", "MatMul", 3, 1), .in = {{T2(3, 4)}, {T2(5, 4)}, {T1(5)}}, .out = {{T2(3, 5)}},
     .attrs = {ATTR_I("trans_B", 1)}, .nattrs = 1},
    {CASE("matmul_trans_b_batched", "MatMul", 2, 1), .in = {{T3(2, 3, 4)}, {T3(2, 5, 4)}}, .out = {{T3(2, 3, 5)}},
     .attrs = {ATTR_I("trans_B", 1)}, .nattrs = 1},
};

/* Y[b, i, j] = sum_k A[b, i, k] B[b, j, k] (+ bias[j]) by triple loops, in double. */
static double matmul_trans_b_maxdiff(const kc_case *c)
{
    pp_tensor in[KC_MAX_IO], out[KC_MAX_IO];
    double worst = -1;
    if (mr_forward(c, in, out) == PP_OK) {
        const pp_tensor *A = &in[0], *B = &in[1];
        const int64_t M = A->dims[A->rank - 2], K = A->dims[A->rank - 1], N = B->dims[B->rank - 2];
        const int64_t batch = pp_tensor_numel(A) / (M * K), bmats = pp_tensor_numel(B) / (N * K);
        const float *a = A->data, *b = B->data, *y = out[0].data, *bias = c->nin > 2 ? in[2].data : NULL;
        worst = 0;
        for (int64_t q = 0; q < batch; q++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double acc = bias ? bias[j] : 0;
                    for (int64_t k = 0; k < K; k++)
                        acc += (double)a[(q * M + i) * K + k] * b[((bmats > 1 ? q : 0) * N + j) * K + k];
                    double d = fabs(acc - y[(q * M + i) * N + j]);
                    if (!(d <= worst)) worst = d;
                }
    }
    mr_free(c, in, out);
    return worst;
}

#define NCASES(a) ((int)(sizeof a / sizeof a[0]))

static void test_matmul(void **state)
{
    (void)state;
    for (int i = 0; i < NCASES(matmul_cases); i++) {
        double d = mr_matmul_maxdiff(&matmul_cases[i]);
        printf("%-40s forward vs triple loop max |diff| %.3g\n", matmul_cases[i].name, d);
        assert_true(d >= 0 && d < 1e-5);
    }
    for (int i = 0; i < NCASES(gemm_cases); i++) {
        double d = mr_gemm_maxdiff(&gemm_cases[i]);
        printf("%-40s forward vs triple loop max |diff| %.3g\n", gemm_cases[i].name, d);
        assert_true(d >= 0 && d < 1e-5);
    }
    for (int i = 0; i < NCASES(matmul_perm_cases); i++) {
        double d = matmul_perm_maxdiff(&matmul_perm_cases[i]);
        printf("%-40s forward vs index maps + triple loop max |diff| %.3g\n", matmul_perm_cases[i].name, d);
        assert_true(d >= 0 && d < 1e-5);
    }
    for (int i = 0; i < NCASES(matmul_trans_b_cases); i++) {
        double d = matmul_trans_b_maxdiff(&matmul_trans_b_cases[i]);
        printf("%-40s forward vs triple loop over W (N, K) max |diff| %.3g\n", matmul_trans_b_cases[i].name, d);
        assert_true(d >= 0 && d < 1e-5);
    }
    run_cases(matmul_cases, NCASES(matmul_cases));
    run_cases(gemm_cases, NCASES(gemm_cases));
    run_cases(matmul_perm_cases, NCASES(matmul_perm_cases));
    run_cases(matmul_trans_b_cases, NCASES(matmul_trans_b_cases));
}

/* distinct values 0.05 apart (shuffled), so a finite-difference step never changes a max */
static float distinct[256];
#define DISTINCT .fill = KC_DATA, .data = distinct

static const kc_case conv_cases[] = {
    {CASE("conv2d_bias", "Conv", 3, 1), .in = {{T4(2, 3, 5, 5)}, {T4(4, 3, 3, 3)}, {T1(4)}},
     .out = {{T4(2, 4, 3, 3)}}},
    {CASE("conv2d_pads_strides", "Conv", 2, 1), .in = {{T4(1, 2, 6, 5)}, {T4(3, 2, 3, 2)}},
     .out = {{T4(1, 3, 3, 5)}}, .attrs = {ATTR_INTS("pads", 1, 0, 1, 1), ATTR_INTS("strides", 2, 1)}, .nattrs = 2},
    {CASE("conv2d_dilation_group", "Conv", 3, 1), .in = {{T4(1, 4, 7, 7)}, {T4(6, 2, 3, 3)}, {T1(6)}},
     .out = {{T4(1, 6, 5, 5)}},
     .attrs = {ATTR_I("group", 2), ATTR_INTS("dilations", 2, 2), ATTR_INTS("pads", 1, 1, 1, 1)}, .nattrs = 3},
    {CASE("conv2d_depthwise_same", "Conv", 2, 1), .in = {{T4(1, 3, 5, 5)}, {T4(3, 1, 3, 3)}},
     .out = {{T4(1, 3, 3, 3)}},
     .attrs = {ATTR_I("group", 3), ATTR_INTS("strides", 2, 2), {.name = "auto_pad", .type = PP_ATTR_STRING,
                                                                 .s = "SAME_UPPER"}}, .nattrs = 3},
    {CASE("conv2d_1x1", "Conv", 2, 1), .in = {{T4(2, 4, 3, 3)}, {T4(5, 4, 1, 1)}}, .out = {{T4(2, 5, 3, 3)}}},
    {CASE("conv1d", "Conv", 3, 1), .in = {{T3(2, 3, 9)}, {T3(4, 3, 3)}, {T1(4)}}, .out = {{T3(2, 4, 5)}},
     .attrs = {ATTR_INTS("strides", 2), ATTR_INTS("pads", 1, 1)}, .nattrs = 2},
};

static const kc_case pool_cases[] = {
    {CASE("maxpool2d_pads", "MaxPool", 1, 1), .in = {{T4(2, 2, 5, 5), DISTINCT}}, .out = {{T4(2, 2, 3, 3)}},
     .attrs = {ATTR_INTS("kernel_shape", 2, 2), ATTR_INTS("strides", 2, 2), ATTR_INTS("pads", 1, 1, 1, 1)},
     .nattrs = 3},
    {CASE("maxpool2d_ceil", "MaxPool", 1, 1), .in = {{T4(1, 2, 5, 5), DISTINCT}}, .out = {{T4(1, 2, 3, 3)}},
     .attrs = {ATTR_INTS("kernel_shape", 2, 2), ATTR_INTS("strides", 2, 2), ATTR_I("ceil_mode", 1)}, .nattrs = 3},
    {CASE("maxpool1d_dilation", "MaxPool", 1, 1), .in = {{T3(1, 2, 8), DISTINCT}}, .out = {{T3(1, 2, 4)}},
     .attrs = {ATTR_INTS("kernel_shape", 3), ATTR_INTS("dilations", 2)}, .nattrs = 2},
    {CASE("avgpool2d_pads_exclude", "AveragePool", 1, 1), .in = {{T4(1, 2, 5, 5)}}, .out = {{T4(1, 2, 3, 3)}},
     .attrs = {ATTR_INTS("kernel_shape", 3, 3), ATTR_INTS("strides", 2, 2), ATTR_INTS("pads", 1, 1, 1, 1)},
     .nattrs = 3},
    {CASE("avgpool2d_pads_include", "AveragePool", 1, 1), .in = {{T4(1, 2, 5, 5)}}, .out = {{T4(1, 2, 3, 3)}},
     .attrs = {ATTR_INTS("kernel_shape", 3, 3), ATTR_INTS("strides", 2, 2), ATTR_INTS("pads", 1, 1, 1, 1),
               ATTR_I("count_include_pad", 1)}, .nattrs = 4},
    {CASE("avgpool2d_ceil_include", "AveragePool", 1, 1), .in = {{T4(1, 1, 6, 6)}}, .out = {{T4(1, 1, 3, 3)}},
     .attrs = {ATTR_INTS("kernel_shape", 3, 3), ATTR_INTS("strides", 2, 2), ATTR_I("ceil_mode", 1),
               ATTR_I("count_include_pad", 1)}, .nattrs = 4},
    {CASE("avgpool1d", "AveragePool", 1, 1), .in = {{T3(2, 2, 7)}}, .out = {{T3(2, 2, 3)}},
     .attrs = {ATTR_INTS("kernel_shape", 3), ATTR_INTS("strides", 2)}, .nattrs = 2},
    {CASE("global_avgpool", "GlobalAveragePool", 1, 1), .in = {{T4(2, 3, 4, 5)}}, .out = {{T4(2, 3, 1, 1)}}},
};

#define BN_IN(...) .in = {{__VA_ARGS__}, {T1(3)}, {T1(3)}, {T1(3), .nograd = 1}, {T1(3), .fill = KC_POSITIVE, .nograd = 1}}
static const kc_case batchnorm_cases[] = {
    {CASE("batchnorm_inference", "BatchNormalization", 5, 1), .in = {{T4(2, 3, 4, 4)}, {T1(3)}, {T1(3)}, {T1(3)},
     {T1(3), .fill = KC_POSITIVE}}, .out = {{T4(2, 3, 4, 4)}}},
    {CASE("batchnorm_training", "BatchNormalization", 5, 1), BN_IN(T4(2, 3, 4, 4)), .out = {{T4(2, 3, 4, 4)}},
     .training = 1},
    {CASE("batchnorm_training_2d", "BatchNormalization", 5, 1), BN_IN(T2(6, 3)), .out = {{T2(6, 3)}},
     .training = 1, .attrs = {ATTR_F("epsilon", 1e-3f)}, .nattrs = 1},
    {CASE("batchnorm_training_running", "BatchNormalization", 5, 3), BN_IN(T3(4, 3, 5)),
     .out = {{T3(4, 3, 5)}, {T1(3)}, {T1(3)}}, .training = 1, .skip_grad = 1,
     .attrs = {ATTR_F("momentum", 0.8f)}, .nattrs = 1},
};

typedef double (*ref_fn)(const kc_case *c);

static void check_forward(const kc_case *cases, int n, ref_fn ref, const char *what)
{
    for (int i = 0; i < n; i++) {
        double d = ref(&cases[i]);
        printf("%-40s forward vs %s max |diff| %.3g\n", cases[i].name, what, d);
        assert_true(d >= 0 && d < 1e-5);
    }
}

static void test_conv(void **state)
{
    (void)state;
    check_forward(conv_cases, NCASES(conv_cases), mr_conv_maxdiff, "direct convolution");
    run_cases(conv_cases, NCASES(conv_cases));
}

static void test_pool(void **state)
{
    (void)state;
    for (int i = 0; i < 256; i++) distinct[i] = (float)((i * 97) % 256) * 0.05f - 6.f;
    check_forward(pool_cases, NCASES(pool_cases), mr_pool_maxdiff, "naive windows");
    run_cases(pool_cases, NCASES(pool_cases));
}

static void test_batchnorm(void **state)
{
    (void)state;
    check_forward(batchnorm_cases, NCASES(batchnorm_cases), mr_batchnorm_maxdiff, "closed form");
    run_cases(batchnorm_cases, NCASES(batchnorm_cases));
}

static const float ratio_03[1] = {0.3f};
static const float eq_b[4] = {0.5f, -0.7f, 9.f, -1.9f};

static const kc_case select_cases[] = {
    {CASE("where_bcast", "Where", 3, 1), .in = {{T3(2, 1, 4), .dtype = PP_DTYPE_BOOL, .fill = KC_BOOLS}, {T3(2, 3, 4)},
     {T1(4)}}, .out = {{T3(2, 3, 4)}}},
    {CASE("where_scalar_x", "Where", 3, 1), .in = {{T2(3, 4), .dtype = PP_DTYPE_BOOL, .fill = KC_BOOLS}, {T0},
     {T2(3, 4)}}, .out = {{T2(3, 4)}}},
    {CASE("dropout_train", "Dropout", 2, 2), .in = {{T2(40, 50)}, {T0, .fill = KC_DATA, .data = ratio_03, .nograd = 1}},
     .out = {{T2(40, 50)}, {T2(40, 50), .dtype = PP_DTYPE_BOOL}}, .training = 1},
    {CASE("dropout_inference", "Dropout", 1, 2), .in = {{T2(4, 5)}},
     .out = {{T2(4, 5)}, {T2(4, 5), .dtype = PP_DTYPE_BOOL}}},
    {CASE("cast_f32_f32", "Cast", 1, 1), .in = {{T2(3, 4)}}, .out = {{T2(3, 4)}},
     .attrs = {ATTR_I("to", PP_DTYPE_F32)}, .nattrs = 1},
};

/* Forward of Equal, Where, Cast, Dropout against element-by-element expectations. */
static double select_maxdiff(const kc_case *c)
{
    pp_tensor in[KC_MAX_IO], out[KC_MAX_IO];
    double worst = -1;
    if (mr_forward(c, in, out) != PP_OK) goto done;
    worst = 0;
    int64_t idx[PP_MAX_RANK], n = pp_tensor_numel(&out[0]);
    if (!strcmp(c->op, "Where")) {
        for (int64_t e = 0; e < n; e++) {
            mr_unravel(&out[0], e, idx);
            int cond = ((uint8_t *)in[0].data)[mr_bindex(&in[0], idx, out[0].rank)];
            float ref = ((float *)in[cond ? 1 : 2].data)[mr_bindex(&in[cond ? 1 : 2], idx, out[0].rank)];
            worst = fmax(worst, fabs(ref - ((float *)out[0].data)[e]));
        }
    } else if (!strcmp(c->op, "Equal")) {
        for (int64_t e = 0; e < n; e++) {
            mr_unravel(&out[0], e, idx);
            int64_t ia = mr_bindex(&in[0], idx, out[0].rank), ib = mr_bindex(&in[1], idx, out[0].rank);
            int ref = in[0].dtype == PP_DTYPE_I64 ? ((int64_t *)in[0].data)[ia] == ((int64_t *)in[1].data)[ib]
                                                  : ((float *)in[0].data)[ia] == ((float *)in[1].data)[ib];
            worst = fmax(worst, fabs((double)ref - ((uint8_t *)out[0].data)[e]));
        }
    } else if (!strcmp(c->op, "Dropout")) {
        double kept = 0, ratio = c->nin > 1 ? 0.3 : 0.0;
        for (int64_t e = 0; e < n; e++) {
            int m = ((uint8_t *)out[1].data)[e];
            kept += m;
            double ref = c->training ? m * ((float *)in[0].data)[e] / (1 - ratio) : ((float *)in[0].data)[e];
            worst = fmax(worst, fabs(ref - ((float *)out[0].data)[e]));
        }
        printf("%-40s kept fraction %.4f (expected %.2f)\n", c->name, kept / (double)n, 1 - ratio);
        if (c->training && fabs(kept / (double)n - (1 - ratio)) > 0.03) worst = 1;
        if (!c->training && kept != (double)n) worst = 1;
    } else { /* Cast: the C conversion of each element */
        for (int64_t e = 0; e < n; e++) {
            double x = in[0].dtype == PP_DTYPE_F32 ? ((float *)in[0].data)[e] : (double)((int64_t *)in[0].data)[e];
            double y = 0, ref = x;
            switch (out[0].dtype) {
            case PP_DTYPE_F32: y = ((float *)out[0].data)[e]; ref = (float)x; break;
            case PP_DTYPE_F64: y = ((double *)out[0].data)[e]; break;
            case PP_DTYPE_I64: y = (double)((int64_t *)out[0].data)[e]; ref = (double)(int64_t)x; break;
            case PP_DTYPE_I32: y = ((int32_t *)out[0].data)[e]; ref = (double)(int32_t)x; break;
            case PP_DTYPE_BOOL: y = ((uint8_t *)out[0].data)[e]; ref = x != 0; break;
            default: break;
            }
            worst = fmax(worst, fabs(y - ref));
        }
    }
done:
    mr_free(c, in, out);
    return worst;
}

static const kc_case select_forward_cases[] = {
    {CASE("equal_f32_bcast", "Equal", 2, 1), .in = {{T3(2, 3, 4), AWAY}, {T1(4), .fill = KC_DATA, .data = eq_b}},
     .out = {{T3(2, 3, 4), .dtype = PP_DTYPE_BOOL}}},
    {CASE("equal_i64_scalar", "Equal", 2, 1), .in = {{T2(5, 6), .dtype = PP_DTYPE_I64, .fill = KC_INTS, .lo = 0,
     .hi = 2}, {T0, .dtype = PP_DTYPE_I64, .fill = KC_INTS, .lo = 1, .hi = 1}},
     .out = {{T2(5, 6), .dtype = PP_DTYPE_BOOL}}},
    {CASE("cast_f32_i64", "Cast", 1, 1), .in = {{T2(3, 4)}}, .out = {{T2(3, 4), .dtype = PP_DTYPE_I64}},
     .attrs = {ATTR_I("to", PP_DTYPE_I64)}, .nattrs = 1},
    {CASE("cast_f32_bool", "Cast", 1, 1), .in = {{T2(3, 4), AWAY}}, .out = {{T2(3, 4), .dtype = PP_DTYPE_BOOL}},
     .attrs = {ATTR_I("to", PP_DTYPE_BOOL)}, .nattrs = 1},
    {CASE("cast_f32_f64", "Cast", 1, 1), .in = {{T2(3, 4)}}, .out = {{T2(3, 4), .dtype = PP_DTYPE_F64}},
     .attrs = {ATTR_I("to", PP_DTYPE_F64)}, .nattrs = 1},
    {CASE("cast_i64_f32", "Cast", 1, 1), .in = {{T2(3, 4), .dtype = PP_DTYPE_I64, .fill = KC_INTS, .lo = -1000,
     .hi = 1000}}, .out = {{T2(3, 4)}}, .attrs = {ATTR_I("to", PP_DTYPE_F32)}, .nattrs = 1},
    {CASE("cast_i64_i32", "Cast", 1, 1), .in = {{T2(3, 4), .dtype = PP_DTYPE_I64, .fill = KC_INTS, .lo = -1000,
     .hi = 1000}}, .out = {{T2(3, 4), .dtype = PP_DTYPE_I32}}, .attrs = {ATTR_I("to", PP_DTYPE_I32)}, .nattrs = 1},
};

static void test_select(void **state)
{
    (void)state;
    check_forward(select_forward_cases, NCASES(select_forward_cases), select_maxdiff, "element-wise expectation");
    check_forward(select_cases, NCASES(select_cases), select_maxdiff, "element-wise expectation");
    run_cases(select_cases, NCASES(select_cases));
}

/* Dropout masks depend on the rng key only: the same key gives the same mask, another
 * node or microbatch a different one. */
static void test_dropout_rng(void **state)
{
    (void)state;
    const kc_case *c = &select_cases[2];
    pp_error err = {0};
    pp_device *dev = NULL;
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &dev, &err), PP_OK);
    const pp_kernel *k = pp_kernel_find(PP_OP_DROPOUT, PP_DEVICE_CPU, PP_DTYPE_F32);
    pp_tensor in[2] = {kc_alloc(&c->in[0]), kc_alloc(&c->in[1])}, out[3][2];
    pp_rng_key keys[3] = {{7, 3, 1, 12, 0}, {7, 3, 1, 12, 0}, {7, 3, 2, 12, 0}};
    for (int r = 0; r < 3; r++) {
        out[r][0] = kc_alloc(&c->out[0]);
        out[r][1] = kc_alloc(&c->out[1]);
        pp_kernel_ctx ctx = {.node = "d", .op = PP_OP_DROPOUT, .op_type = "Dropout", .opset = 17, .in = in, .nin = 2, .out = out[r],
                             .nout = 2, .dev = dev, .training = 1, .rng = keys[r]};
        assert_int_equal(k->forward(&ctx, &err), PP_OK);
    }
    int64_t n = pp_tensor_numel(&in[0]);
    int same = !memcmp(out[0][1].data, out[1][1].data, (size_t)n);
    int differ = memcmp(out[0][1].data, out[2][1].data, (size_t)n) != 0;
    printf("dropout masks: same key identical %d, other microbatch differs %d\n", same, differ);
    assert_true(same && differ);
    for (int r = 0; r < 3; r++) {
        free(out[r][0].data);
        free(out[r][1].data);
    }
    free(in[0].data);
    free(in[1].data);
    pp_device_destroy(dev);
}

/* ---------------- optimizers vs torch.optim (tests/ref/optim_ref.py) ---------------- */

#define OPT_STEPS 5
#define OPT_NT 2
static const int opt_sizes[OPT_NT] = {37, 5};

typedef struct opt_config {
    const char *name;
    pp_optim_hparams h;
} opt_config;

static const opt_config opt_configs[] = {
    {"sgd", {.kind = PP_OPTIM_SGD, .lr = 0.1f, .weight_decay = 0.01f}},
    {"sgd_momentum", {.kind = PP_OPTIM_SGD, .lr = 0.1f, .momentum = 0.9f}},
    {"sgd_nesterov_wd", {.kind = PP_OPTIM_SGD, .lr = 0.1f, .momentum = 0.9f, .nesterov = 1, .weight_decay = 0.01f}},
    {"adam_wd", {.kind = PP_OPTIM_ADAM, .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                 .weight_decay = 0.01f}},
    {"adamw", {.kind = PP_OPTIM_ADAMW, .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
               .weight_decay = 0.1f}},
    {"lamb", {.kind = PP_OPTIM_LAMB, .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f,
              .weight_decay = 0.01f}},
};
#define OPT_NC ((int)(sizeof opt_configs / sizeof opt_configs[0]))

/* the same exact-in-float inputs as optim_ref.py */
static float opt_init(int t, int i) { return t == 1 ? 0.f : (float)(((i * 37) % 19 - 9) / 8.0); }
static float opt_grad(int t, int i, int step) { return (float)(((i * 53 + step * 11 + t * 7) % 23 - 11) / 16.0); }

static void test_optim_vs_torch(void **state)
{
    (void)state;
    const char *py = getenv("PY"), *src = getenv("SRC_DIR");
    if (!py || !src) {
        printf("PY and SRC_DIR must be set (ctest sets them) to run tests/ref/optim_ref.py\n");
        fail();
    }
    static double ref[OPT_NC][OPT_STEPS][OPT_NT][64];
    static int seen[OPT_NC][OPT_STEPS][OPT_NT][64];
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/ref/optim_ref.py' 2>optim_ref.stderr", py, src);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char name[64];
    int step, t, i, nlines = 0;
    double v;
    while (fscanf(f, "%63s %d %d %d %lf", name, &step, &t, &i, &v) == 5) {
        for (int c = 0; c < OPT_NC; c++)
            if (!strcmp(name, opt_configs[c].name) && step >= 1 && step <= OPT_STEPS && t >= 0 && t < OPT_NT &&
                i >= 0 && i < 64) {
                ref[c][step - 1][t][i] = v;
                seen[c][step - 1][t][i] = 1;
                nlines++;
            }
    }
    int rc = pclose(f);
    printf("optim_ref.py: %d reference values (exit status %d)\n", nlines, rc);
    assert_int_equal(rc, 0);
    pp_error err = {0};
    pp_device *dev = NULL;
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &dev, &err), PP_OK);
    for (int c = 0; c < OPT_NC; c++) {
        pp_optim_hparams h = opt_configs[c].h;
        int slots = pp_optim_state_slots(&h);
        double worst = 0;
        for (t = 0; t < OPT_NT; t++) {
            int n = opt_sizes[t];
            float p[64], g[64], st[128] = {0};
            for (i = 0; i < n; i++) p[i] = opt_init(t, i);
            for (step = 1; step <= OPT_STEPS; step++) {
                for (i = 0; i < n; i++) g[i] = opt_grad(t, i, step);
                h.step = step;
                const pp_optim_step ts = pp_optim_step_at(&h, 1.0f);   /* the cpu's device memory is the host's */
                assert_int_equal(pp_kernel_optim_update(dev, &h, &ts, p, g, slots ? st : NULL, n, &err), PP_OK);
                for (i = 0; i < n; i++) {
                    assert_true(seen[c][step - 1][t][i]);
                    double r = ref[c][step - 1][t][i];
                    double rel = fabs(p[i] - r) / fmax(fabs(r), 1e-2);
                    if (rel > worst) worst = rel;
                }
            }
        }
        printf("%-16s 5 steps vs torch max relative diff %.3g (relative to max(|ref|, 1e-2))\n",
               opt_configs[c].name, worst);
        assert_true(worst < 1e-6);
    }
    pp_device_destroy(dev);
}

/* ---------------- flat-buffer kernels ---------------- */

static void test_flat(void **state)
{
    (void)state;
    pp_error err = {0};
    pp_device *dev = NULL;
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &dev, &err), PP_OK);
    int64_t n = 10007;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    double ref = 0, got = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)kc_randn();
        y[i] = (float)i;
        ref += (double)x[i] * x[i];
    }
    assert_int_equal(pp_kernel_sumsq(dev, x, n, &got, &err), PP_OK);
    printf("sumsq %.17g vs naive %.17g\n", got, ref);
    assert_true(fabs(got - ref) <= 1e-12 * ref);
    assert_int_equal(pp_kernel_accumulate(dev, y, x, n, &err), PP_OK);
    assert_int_equal(pp_kernel_scale(dev, y, n, 0.5f, &err), PP_OK);
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(y[i] - ((float)i + x[i]) * 0.5f));
    printf("accumulate + scale max |diff| %.3g\n", worst);
    assert_true(worst == 0);
    int64_t at = 7;
    assert_int_equal(pp_kernel_find_nonfinite(dev, x, n, &at, &err), PP_OK);
    assert_int_equal(at, -1);
    x[9000] = INFINITY;
    x[9500] = NAN;
    assert_int_equal(pp_kernel_find_nonfinite(dev, x, n, &at, &err), PP_OK);
    assert_int_equal(at, 9000);
    x[9000] = 0;
    assert_int_equal(pp_kernel_find_nonfinite(dev, x, n, &at, &err), PP_OK);
    assert_int_equal(at, 9500);
    printf("find_nonfinite: -1 on finite data, 9000 (Inf) then 9500 (NaN)\n");
    free(x);
    free(y);
    pp_device_destroy(dev);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise_forward),
        cmocka_unit_test(test_elementwise_grad),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_dropout_rng),
        cmocka_unit_test(test_optim_vs_torch),
        cmocka_unit_test(test_flat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
