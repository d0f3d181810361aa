/* Causal attention on the cpu MatMul kernel's causal triangle (causal_Y, causal_A:
 * kernels/cpu/matmul.c, marked by stage/fuse.c): scores = s Q K^T + mask, Softmax, ctx =
 * P V, and the backward of all three, against the same attention in double by loops (the
 * closed forms dP = dC V^T, dV = P^T dC, dS = P (dP - rowsum(P dP)), dQ = s dS K,
 * dK = s dS^T Q), and against the kernels without the marks. Both MatMul forms run: plain
 * batched operands, and the example GPT's heads folded in as perms ([B, T, H, D] in
 * memory). T = 100 cuts the triangle into blocks of SMAT_BLOCK (16) and a last of 4;
 * T = 64 into four; T = 24 is below the blocking (2 SMAT_BLOCK rows). Fresh gradients are pre-filled with NaN: the causal dP
 * must come back finite, 0 in the blocks the kernel skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/kernels.h>

#include "smat.h"   /* SMAT_BLOCK */

#define NB 2   /* batch */
#define NH 2   /* heads */
#define DH 8   /* per head */

static uint64_t rng = 88172645463325252ull;
static float randn(void)
{
    double u = 0;
    for (int i = 0; i < 12; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        u += (double)(rng >> 11) / 9007199254740992.0;
    }
    return (float)(u - 6.0);
}

typedef struct attn {
    int T, folded;
    float *q, *k, *v, *mask, scale, *dc;            /* inputs, in the layout the MatMuls read */
    float *s, *p, *c, *dp, *dv, *ds, *dq, *dk;       /* results of the kernels */
} attn;

/* Element (b, h, i, d) of a [B, H, T, D] tensor stored as [B, H, T, D] or, folded, [B, T, H, D]. */
static size_t at(const attn *a, int b, int h, int i, int d)
{
    return a->folded ? (((size_t)b * a->T + i) * NH + h) * DH + d : (((size_t)b * NH + h) * a->T + i) * DH + d;
}
/* K^T's (b, h, d, j): plain K^T is stored [B, H, D, T]; folded, K itself [B, T, H, D] */
static size_t at_kt(const attn *a, int b, int h, int d, int j)
{
    return a->folded ? at(a, b, h, j, d) : (((size_t)b * NH + h) * DH + d) * a->T + j;
}
static size_t at_tt(const attn *a, int b, int h, int i, int j) { return (((size_t)b * NH + h) * a->T + i) * a->T + j; }

static pp_tensor tensor(float *p, int rank, const int64_t *dims)
{
    pp_tensor t = {.dtype = PP_DTYPE_F32, .rank = rank, .data = p};
    for (int d = 0; d < rank; d++) t.dims[d] = dims[d];
    return t;
}

static float *alloc(size_t n, float fill)
{
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = fill;
    return p;
}

/* Runs the three kernels forward and backward; causal: with the marks. */
static void run(attn *a, int causal, pp_device *dev)
{
    const int T = a->T;
    const size_t nt = (size_t)NB * NH * T * T, nd = (size_t)NB * NH * T * DH;
    const int64_t bhtd[4] = {NB, NH, T, DH}, btHd[4] = {NB, T, NH, DH}, bhdt[4] = {NB, NH, DH, T};
    const int64_t bhtt[4] = {NB, NH, T, T}, tt[2] = {T, T}, one[1] = {1};
    pp_attr pq[3] = {{.name = "perm_A", .type = PP_ATTR_INTS, .n = 4, .ints = (const int64_t[]){0, 2, 1, 3}},
                     {.name = "perm_B", .type = PP_ATTR_INTS, .n = 4, .ints = (const int64_t[]){0, 2, 3, 1}},
                     {.name = "causal_Y", .type = PP_ATTR_INT, .i = 1}};
    pp_attr pv[3] = {{.name = "perm_B", .type = PP_ATTR_INTS, .n = 4, .ints = (const int64_t[]){0, 2, 1, 3}},
                     {.name = "perm_Y", .type = PP_ATTR_INTS, .n = 4, .ints = (const int64_t[]){0, 2, 1, 3}},
                     {.name = "causal_A", .type = PP_ATTR_INT, .i = 1}};
    const int nq = (a->folded ? 2 : 0) + causal, nv = (a->folded ? 2 : 0) + causal;
    const pp_attr *aq = a->folded ? pq : pq + 2, *av = a->folded ? pv : pv + 2;
    const pp_kernel *mm = pp_kernel_find(PP_OP_MATMUL, PP_DEVICE_CPU, PP_DTYPE_F32);
    const pp_kernel *sm = pp_kernel_find(PP_OP_SOFTMAX, PP_DEVICE_CPU, PP_DTYPE_F32);
    assert_non_null(mm);
    assert_non_null(sm);
    assert_true(mm->caps & PP_KCAP_MATMUL_CAUSAL);
    const int64_t *qd = a->folded ? btHd : bhtd;
    pp_tensor sin[4] = {tensor(a->q, 4, qd), tensor(a->k, 4, a->folded ? btHd : bhdt), tensor(a->mask, 2, tt),
                        tensor(&a->scale, 1, one)};
    pp_tensor sout = tensor(a->s, 4, bhtt), pout = tensor(a->p, 4, bhtt), cout = tensor(a->c, 4, qd);
    pp_tensor cin[2] = {pout, tensor(a->v, 4, qd)};
    pp_kernel_ctx cs = {.node = "scores", .op = PP_OP_MATMUL, .op_type = "MatMul", .opset = 17, .attrs = aq,
                        .nattrs = nq, .in = sin, .nin = 4, .out = &sout, .nout = 1, .dev = dev};
    pp_kernel_ctx cp = {.node = "probs", .op = PP_OP_SOFTMAX, .op_type = "Softmax", .opset = 17, .in = &sout,
                        .nin = 1, .out = &pout, .nout = 1, .dev = dev};
    pp_kernel_ctx cc = {.node = "ctx", .op = PP_OP_MATMUL, .op_type = "MatMul", .opset = 17, .attrs = av,
                        .nattrs = nv, .in = cin, .nin = 2, .out = &cout, .nout = 1, .dev = dev};
    pp_error err = {0};
    assert_int_equal(mm->forward(&cs, &err), PP_OK);
    assert_int_equal(sm->forward(&cp, &err), PP_OK);
    assert_int_equal(mm->forward(&cc, &err), PP_OK);
    /* backward, every gradient fresh and pre-filled with NaN */
    for (size_t i = 0; i < nt; i++) a->dp[i] = a->ds[i] = NAN;
    for (size_t i = 0; i < nd; i++) a->dv[i] = a->dq[i] = a->dk[i] = NAN;
    pp_tensor gc = tensor(a->dc, 4, qd), gpv[2] = {tensor(a->dp, 4, bhtt), tensor(a->dv, 4, qd)};
    cc.grad_fresh = 3;
    assert_int_equal(mm->backward(&cc, &gc, gpv, &err), PP_OK);
    pp_tensor gs = tensor(a->ds, 4, bhtt);
    cp.grad_fresh = 1;
    assert_int_equal(sm->backward(&cp, &gpv[0], &gs, &err), PP_OK);
    pp_tensor gqk[4] = {tensor(a->dq, 4, qd), tensor(a->dk, 4, a->folded ? btHd : bhdt), {0}, {0}};   /* no mask, scale grads */
    cs.grad_fresh = 3;
    assert_int_equal(mm->backward(&cs, &gs, gqk, &err), PP_OK);
}

/* max |x - ref| / (1 + |ref|) over n (ref in double); NaN counts as infinite */
static double rel(const float *x, const double *ref, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - ref[i]) / (1 + fabs(ref[i]));
        if (!(d <= w)) w = isnan(d) ? INFINITY : d;
    }
    return w;
}

static void check(int T, int folded, pp_device *dev)
{
    const size_t nt = (size_t)NB * NH * T * T, nd = (size_t)NB * NH * T * DH;
    attn a = {.T = T, .folded = folded, .scale = 1.f / sqrtf((float)DH)};
    a.q = alloc(nd, 0), a.k = alloc(nd, 0), a.v = alloc(nd, 0), a.dc = alloc(nd, 0), a.mask = alloc((size_t)T * T, 0);
    for (size_t i = 0; i < nd; i++) a.q[i] = randn(), a.k[i] = randn(), a.v[i] = randn(), a.dc[i] = randn();
    for (int i = 0; i < T; i++)
        for (int j = i + 1; j < T; j++) a.mask[i * T + j] = -1e9f;
    /* the reference in double, in logical [B, H, T, *] order */
    double *S = calloc(nt, sizeof *S), *P = calloc(nt, sizeof *P), *DP = calloc(nt, sizeof *DP);
    double *DS = calloc(nt, sizeof *DS), *C = calloc(nd, sizeof *C), *DV = calloc(nd, sizeof *DV);
    double *DQ = calloc(nd, sizeof *DQ), *DK = calloc(nd, sizeof *DK);
    assert_true(S && P && DP && DS && C && DV && DQ && DK);
    for (int b = 0; b < NB; b++)
        for (int h = 0; h < NH; h++) {
            for (int i = 0; i < T; i++) {
                double mx = -INFINITY, sum = 0, pd = 0;
                for (int j = 0; j < T; j++) {
                    double s = 0;
                    for (int d = 0; d < DH; d++) s += (double)a.q[at(&a, b, h, i, d)] * a.k[at_kt(&a, b, h, d, j)];
                    S[at_tt(&a, b, h, i, j)] = s * a.scale + a.mask[i * T + j];
                    if (S[at_tt(&a, b, h, i, j)] > mx) mx = S[at_tt(&a, b, h, i, j)];
                }
                for (int j = 0; j < T; j++) sum += P[at_tt(&a, b, h, i, j)] = exp(S[at_tt(&a, b, h, i, j)] - mx);
                for (int j = 0; j < T; j++) P[at_tt(&a, b, h, i, j)] /= sum;
                for (int j = 0; j < T; j++) {
                    double dp = 0;
                    for (int d = 0; d < DH; d++) dp += (double)a.dc[at(&a, b, h, i, d)] * a.v[at(&a, b, h, j, d)];
                    DP[at_tt(&a, b, h, i, j)] = dp;
                    pd += P[at_tt(&a, b, h, i, j)] * dp;
                }
                for (int j = 0; j < T; j++)
                    DS[at_tt(&a, b, h, i, j)] = P[at_tt(&a, b, h, i, j)] * (DP[at_tt(&a, b, h, i, j)] - pd);
                for (int d = 0; d < DH; d++)
                    for (int j = 0; j < T; j++) C[at(&a, b, h, i, d)] += P[at_tt(&a, b, h, i, j)] * a.v[at(&a, b, h, j, d)];
            }
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++)
                    for (int d = 0; d < DH; d++) {
                        double p = P[at_tt(&a, b, h, i, j)], ds = DS[at_tt(&a, b, h, i, j)] * a.scale;
                        DV[at(&a, b, h, j, d)] += p * a.dc[at(&a, b, h, i, d)];
                        DQ[at(&a, b, h, i, d)] += ds * a.k[at_kt(&a, b, h, d, j)];
                        DK[at_kt(&a, b, h, d, j)] += ds * a.q[at(&a, b, h, i, d)];
                    }
        }
    /* the lower triangle of the scores (above it the mask dominates; the kernel may skip it) */
    double *SL = calloc(nt, sizeof *SL);
    assert_non_null(SL);
    attn r[2] = {a, a};
    for (int m = 0; m < 2; m++) {
        r[m].s = alloc(nt, 0), r[m].p = alloc(nt, 0), r[m].c = alloc(nd, 0), r[m].dp = alloc(nt, 0);
        r[m].dv = alloc(nd, 0), r[m].ds = alloc(nt, 0), r[m].dq = alloc(nd, 0), r[m].dk = alloc(nd, 0);
        run(&r[m], m, dev);
    }
    double vs_full = 0;
    for (int m = 0; m < 2; m++) {
        float *sl = alloc(nt, 0);
        for (size_t e = 0; e < nt; e++) {
            int i = (int)(e / T % T), j = (int)(e % T);
            sl[e] = j <= i ? r[m].s[e] : 0.f;
            SL[e] = j <= i ? S[e] : 0.;
        }
        const double d[7] = {rel(sl, SL, nt), rel(r[m].p, P, nt), rel(r[m].c, C, nd), rel(r[m].dv, DV, nd),
                             rel(r[m].ds, DS, nt), rel(r[m].dq, DQ, nd), rel(r[m].dk, DK, nd)};
        printf("T=%3d %-7s %-7s vs double: scores %.2g probs %.2g ctx %.2g dV %.2g dS %.2g dQ %.2g dK %.2g\n", T,
               folded ? "heads" : "plain", m ? "causal" : "full", d[0], d[1], d[2], d[3], d[4], d[5], d[6]);
        for (int k = 0; k < 7; k++) assert_true(d[k] < 2e-5);
        free(sl);
    }
    /* the marked kernels against the unmarked: probabilities and every gradient */
    const float *x[6] = {r[1].p, r[1].c, r[1].dv, r[1].ds, r[1].dq, r[1].dk};
    const float *y[6] = {r[0].p, r[0].c, r[0].dv, r[0].ds, r[0].dq, r[0].dk};
    const size_t n[6] = {nt, nd, nd, nt, nd, nd};
    for (int k = 0; k < 6; k++)
        for (size_t e = 0; e < n[k]; e++) {
            double d = fabs((double)x[k][e] - y[k][e]) / (1 + fabs((double)y[k][e]));
            if (!(d <= vs_full)) vs_full = isnan(d) ? INFINITY : d;
        }
    /* the causal dP: finite everywhere (not the NaN it was filled with), and 0 where the
     * kernel skipped a block above the diagonal (the full product's dP is not) */
    int nonfinite = 0, skipped = 0;
    for (size_t e = 0; e < nt; e++) {
        nonfinite += !isfinite(r[1].dp[e]);
        skipped += (int)(e % T) > (int)(e / T % T) && r[1].dp[e] == 0.f && r[0].dp[e] != 0.f;
    }
    printf("T=%3d %-7s causal vs full: max rel diff %.2g; causal dP: %d non-finite, %d of %d above the diagonal "
           "skipped\n", T, folded ? "heads" : "plain", vs_full, nonfinite, skipped, NB * NH * T * (T - 1) / 2);
    assert_true(vs_full < 1e-5);
    assert_int_equal(nonfinite, 0);
    assert_true(T < 2 * SMAT_BLOCK ? skipped == 0 : skipped > NB * NH * T * (T - 1) / 4);
    for (int m = 0; m < 2; m++) {
        free(r[m].s), free(r[m].p), free(r[m].c), free(r[m].dp);
        free(r[m].dv), free(r[m].ds), free(r[m].dq), free(r[m].dk);
    }
    free(SL), free(S), free(P), free(DP), free(DS), free(C), free(DV), free(DQ), free(DK);
    free(a.q), free(a.k), free(a.v), free(a.dc), free(a.mask);
}

static void test_causal(void **state)
{
    (void)state;
    pp_device *dev = NULL;
    pp_error err = {0};
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &dev, &err), PP_OK);
    const int Ts[3] = {100, 64, 24};
    for (int t = 0; t < 3; t++)
        for (int folded = 0; folded < 2; folded++) check(Ts[t], folded, dev);
    pp_device_destroy(dev);
}

/* A mark on a product that is not square is refused, naming the node. */
static void test_causal_refused(void **state)
{
    (void)state;
    pp_device *dev = NULL;
    pp_error err = {0};
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &dev, &err), PP_OK);
    float x[6] = {0}, y[6] = {0}, z[4] = {0};
    const int64_t d23[2] = {2, 3}, d32[2] = {3, 2}, d22[2] = {2, 2};
    pp_tensor in[2] = {tensor(x, 2, d23), tensor(y, 2, d32)}, out = tensor(z, 2, d22);
    pp_attr ca = {.name = "causal_A", .type = PP_ATTR_INT, .i = 1};
    pp_kernel_ctx c = {.node = "pv", .op = PP_OP_MATMUL, .op_type = "MatMul", .opset = 17, .attrs = &ca,
                       .nattrs = 1, .in = in, .nin = 2, .out = &out, .nout = 1, .dev = dev};
    const pp_kernel *mm = pp_kernel_find(PP_OP_MATMUL, PP_DEVICE_CPU, PP_DTYPE_F32);
    assert_int_not_equal(mm->forward(&c, &err), PP_OK);
    printf("refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "'pv'"));
    assert_non_null(strstr(err.msg, "square"));
    pp_device_destroy(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_causal),
        cmocka_unit_test(test_causal_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
