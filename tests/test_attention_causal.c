/* Causal attention on the cpu kernels' causal triangle (MatMul's causal_Y, causal_A:
 * kernels/cpu/matmul.c; Softmax's causal: kernels/cpu/softmax.c; marked by stage/fuse_causal.c):
 * scores = s Q K^T + mask, Softmax, ctx = P V, and the backward of all three, against the
 * same attention in double by loops (the closed forms dP = dC V^T, dV = P^T dC,
 * dS = P (dP - rowsum(P dP)), dQ = s dS K, dK = s dS^T Q), and against the kernels without
 * the marks. Both MatMul forms run: plain batched operands, and the example GPT's heads
 * folded in as perms ([B, T, H, D] in memory). T = 100 cuts the triangle into blocks of
 * SMAT_BLOCK (16) and a last of 4; T = 64 into four; T = 24 is below the blocking (2
 * SMAT_BLOCK rows). Fresh gradients are pre-filled with NaN: the causal dP must come back
 * finite, 0 in the blocks the kernel skipped. The causal Softmax alone: bitwise the
 * unmarked one's probabilities and (as values) gradients under the mask, never reading
 * above the diagonal. The fusion: an HF-style attention graph gets the three marks and its
 * stage computes the attention in double. */
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
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/stage_lib.h>

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
    const pp_attr ps = {.name = "causal", .type = PP_ATTR_INT, .i = 1};
    const int nq = (a->folded ? 2 : 0) + causal, nv = (a->folded ? 2 : 0) + causal;
    const pp_attr *aq = a->folded ? pq : pq + 2, *av = a->folded ? pv : pv + 2;
    const pp_kernel *mm = pp_kernel_find(PP_OP_MATMUL, PP_DEVICE_CPU, PP_DTYPE_F32);
    const pp_kernel *sm = pp_kernel_find(PP_OP_SOFTMAX, PP_DEVICE_CPU, PP_DTYPE_F32);
    assert_non_null(mm);
    assert_non_null(sm);
    assert_true(mm->caps & PP_KCAP_MATMUL_CAUSAL);
    assert_true(sm->caps & PP_KCAP_SOFTMAX_CAUSAL);
    const int64_t *qd = a->folded ? btHd : bhtd;
    pp_tensor sin[4] = {tensor(a->q, 4, qd), tensor(a->k, 4, a->folded ? btHd : bhdt), tensor(a->mask, 2, tt),
                        tensor(&a->scale, 1, one)};
    pp_tensor sout = tensor(a->s, 4, bhtt), pout = tensor(a->p, 4, bhtt), cout = tensor(a->c, 4, qd);
    pp_tensor cin[2] = {pout, tensor(a->v, 4, qd)};
    pp_kernel_ctx cs = {.node = "scores", .op = PP_OP_MATMUL, .op_type = "MatMul", .opset = 17, .attrs = aq,
                        .nattrs = nq, .in = sin, .nin = 4, .out = &sout, .nout = 1, .dev = dev};
    pp_kernel_ctx cp = {.node = "probs", .op = PP_OP_SOFTMAX, .op_type = "Softmax", .opset = 17, .attrs = &ps,
                        .nattrs = causal, .in = &sout, .nin = 1, .out = &pout, .nout = 1, .dev = dev};
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
    pp_device *dev = *state;
    const int Ts[3] = {100, 64, 24};
    for (int t = 0; t < 3; t++)
        for (int folded = 0; folded < 2; folded++) check(Ts[t], folded, dev);
}

/* A mark on a product that is not square is refused, naming the node. */
static void test_causal_refused(void **state)
{
    pp_device *dev = *state;
    pp_error err = {0};
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
}

/* ---------------- the causal Softmax alone ---------------- */

/* Softmax forward, then backward into dx (fresh: assigns), over x [SB, SH, T, T]; causal:
 * with the mark. */
#define SB 2
#define SH 3
static void softmax_run(int T, int causal, float *x, float *y, const float *dy, float *dx, int fresh, pp_device *dev)
{
    const int64_t dims[4] = {SB, SH, T, T};
    const pp_attr mark = {.name = "causal", .type = PP_ATTR_INT, .i = 1};
    pp_tensor tx = tensor(x, 4, dims), ty = tensor(y, 4, dims), tdy = tensor((float *)dy, 4, dims);
    pp_tensor tdx = tensor(dx, 4, dims);
    pp_kernel_ctx c = {.node = "probs", .op = PP_OP_SOFTMAX, .op_type = "Softmax", .opset = 17, .attrs = &mark,
                       .nattrs = causal, .in = &tx, .nin = 1, .out = &ty, .nout = 1, .dev = dev,
                       .grad_fresh = (unsigned)fresh};
    const pp_kernel *sm = pp_kernel_find(PP_OP_SOFTMAX, PP_DEVICE_CPU, PP_DTYPE_F32);
    pp_error err = {0};
    assert_int_equal(sm->forward(&c, &err), PP_OK);
    assert_int_equal(sm->backward(&c, &tdy, &tdx, &err), PP_OK);
}

/* The marked Softmax against the unmarked one under the mask (each mask fill: -1e9 as the
 * example GPT's, float32's lowest as HF's, -inf) and against softmax over columns 0..r in
 * double: probabilities bitwise, gradients equal as values (the unmarked ones above the
 * diagonal are 0 * (dy - s), which may be -0), fresh and accumulating. The marked input
 * holds NaN above the diagonal and its fresh gradient starts as NaN: neither is read. */
static void check_softmax(int T, float fill, pp_device *dev)
{
    const size_t n = (size_t)SB * SH * T * T;
    float *xm = alloc(n, 0), *xc = alloc(n, 0), *ym = alloc(n, 0), *yc = alloc(n, 0), *dy = alloc(n, 0);
    float *dxm = alloc(n, 0), *dxc = alloc(n, NAN), *acc = alloc(n, 0), *accm = alloc(n, 0), *accc = alloc(n, 0);
    for (size_t e = 0; e < n; e++) {
        const int i = (int)(e / T % T), j = (int)(e % T);
        const float v = 3 * randn();
        xm[e] = j > i ? v + fill : v;
        xc[e] = j > i ? NAN : v;
        dy[e] = randn();
        accm[e] = accc[e] = acc[e] = randn();
    }
    softmax_run(T, 0, xm, ym, dy, dxm, 1, dev);
    softmax_run(T, 1, xc, yc, dy, dxc, 1, dev);
    float *yc2 = alloc(n, 0);
    softmax_run(T, 0, xm, ym, dy, accm, 0, dev);
    softmax_run(T, 1, xc, yc2, dy, accc, 0, dev);
    int diff_p = memcmp(ym, yc, n * sizeof *ym) != 0, diff_d = 0, diff_acc = 0, kept = 1;
    double vs_p = 0, vs_d = 0;
    for (size_t r = 0; r < n / T; r++) {   /* row r of the tensor is row r % T of its block */
        const int w = (int)(r % T) + 1;
        const float *x = xm + r * T, *y = yc + r * T, *g = dy + r * T;
        double mx = -INFINITY, sum = 0, dot = 0, p[256];
        for (int j = 0; j < w; j++) mx = fmax(mx, x[j]);
        for (int j = 0; j < w; j++) sum += p[j] = exp((double)x[j] - mx);
        for (int j = 0; j < w; j++) dot += (p[j] /= sum) * g[j];
        for (int j = 0; j < T; j++) {
            const size_t e = r * T + j;
            const double pj = j < w ? p[j] : 0, dj = j < w ? p[j] * (g[j] - dot) : 0;
            vs_p = fmax(vs_p, fabs(y[j] - pj) / (1 + pj));
            vs_d = fmax(vs_d, isnan(dxc[e]) ? INFINITY : fabs(dxc[e] - dj) / (1 + fabs(dj)));
            diff_d += dxc[e] != dxm[e];
            diff_acc += accc[e] != accm[e];
            kept &= j < w || accc[e] == acc[e];
        }
    }
    printf("T=%3d mask %-8.3g causal Softmax [%d,%d,%d,%d] vs unmarked: probs %s, dx %d differ (fresh), %d "
           "(accumulated); vs double: probs %.2g dx %.2g\n", T, (double)fill, SB, SH, T, T,
           diff_p ? "differ" : "bitwise equal", diff_d, diff_acc, vs_p, vs_d);
    assert_false(diff_p);
    assert_int_equal(memcmp(yc, yc2, n * sizeof *yc), 0);
    assert_int_equal(diff_d, 0);
    assert_int_equal(diff_acc, 0);
    assert_true(kept);   /* above the diagonal an accumulated gradient is left as it was (+ 0) */
    assert_true(vs_p < 1e-6 && vs_d < 1e-6);
    free(xm), free(xc), free(ym), free(yc), free(yc2), free(dy), free(dxm), free(dxc), free(acc), free(accm),
        free(accc);
}

static void test_softmax_causal(void **state)
{
    pp_device *dev = *state;
    const int Ts[4] = {256, 100, 37, 24};   /* HF Llama's; not multiples of 8 or of the 32 lanes; under 32 */
    const float fills[3] = {-1e9f, -3.4028234663852886e38f, -INFINITY};
    for (int t = 0; t < 4; t++) check_softmax(Ts[t], fills[t % 3], dev);
}

/* causal on LogSoftmax, or on a Softmax whose last two dims differ, is refused, naming the node. */
static void test_softmax_causal_refused(void **state)
{
    pp_device *dev = *state;
    pp_error err = {0};
    float x[30] = {0}, y[30] = {0};
    const int64_t d235[3] = {2, 3, 5}, d255[3] = {2, 5, 5};
    const pp_attr mark = {.name = "causal", .type = PP_ATTR_INT, .i = 1};
    const struct {
        pp_op op;
        const char *type, *why;
        const int64_t *dims;
    } cases[2] = {{PP_OP_LOG_SOFTMAX, "LogSoftmax", "Softmax's only", d255}, {PP_OP_SOFTMAX, "Softmax", "square", d235}};
    for (int k = 0; k < 2; k++) {
        pp_tensor tx = tensor(x, 3, cases[k].dims), ty = tensor(y, 3, cases[k].dims);
        pp_kernel_ctx c = {.node = "p", .op = cases[k].op, .op_type = cases[k].type, .opset = 17, .attrs = &mark,
                           .nattrs = 1, .in = &tx, .nin = 1, .out = &ty, .nout = 1, .dev = dev};
        assert_int_not_equal(pp_kernel_find(cases[k].op, PP_DEVICE_CPU, PP_DTYPE_F32)->forward(&c, &err), PP_OK);
        printf("refused: %s\n", err.msg);
        assert_non_null(strstr(err.msg, "'p'"));
        assert_non_null(strstr(err.msg, cases[k].why));
    }
}

/* ---------------- the fusion's marks ---------------- */

#define FT 37   /* past 2 SMAT_BLOCK rows, not a multiple of 8 */

static void node(pp_graph *g, const char *op, const char *in0, const char *in1, const char *out, int *id)
{
    const char *ins[2] = {in0, in1}, *outs[1] = {out};
    pp_error err = {0};
    if (pp_graph_add_node(g, op, "", out, ins, in1 ? 2 : 1, outs, 1, id, &err) != PP_OK) fail_msg("%s", err.msg);
}

/* Attention as HF's torchscript exports write it: MatMul(q, Transpose(k)), Mul by the
 * scale, Add of the causal mask [1, 1, T, T] (float32's lowest above the diagonal),
 * Softmax(axis -1), Cast to float, MatMul with v; the stage fuses the scale, mask and
 * Transpose into the scores' MatMul and marks causal_Y on it, causal on the Softmax and
 * causal_A on the second MatMul. Its forward is checked against the attention in double. */
static void test_fusion_marks(void **state)
{
    pp_graph *g = NULL;
    pp_error err = {0};
    const int64_t bhtd[4] = {NB, NH, FT, DH}, mdims[4] = {1, 1, FT, FT};
    const pp_shape sq = pp_shape_make(4, bhtd), sm = pp_shape_make(4, mdims), s0 = pp_shape_make(0, NULL);
    static float mask[FT * FT];
    const float scale = 1.f / sqrtf((float)DH);
    for (int i = 0; i < FT; i++)
        for (int j = 0; j < FT; j++) mask[i * FT + j] = j > i ? -3.4028234663852886e38f : 0.f;
    int id;
    assert_int_equal(pp_graph_create("hf_attention", 17, &g, &err), PP_OK);
    assert_int_equal(pp_graph_add_input(g, "q", PP_DTYPE_F32, &sq, &err), PP_OK);
    assert_int_equal(pp_graph_add_input(g, "k", PP_DTYPE_F32, &sq, &err), PP_OK);
    assert_int_equal(pp_graph_add_input(g, "v", PP_DTYPE_F32, &sq, &err), PP_OK);
    assert_int_equal(pp_graph_add_initializer(g, "mask", PP_DTYPE_F32, &sm, mask, sizeof mask, 1, &err), PP_OK);
    assert_int_equal(pp_graph_add_initializer(g, "scale", PP_DTYPE_F32, &s0, &scale, sizeof scale, 1, &err), PP_OK);
    node(g, "Transpose", "k", NULL, "kt", &id);
    assert_int_equal(pp_graph_set_attr_ints(g, id, "perm", (const int64_t[]){0, 1, 3, 2}, 4, &err), PP_OK);
    node(g, "MatMul", "q", "kt", "qk", NULL);
    node(g, "Mul", "qk", "scale", "scaled", NULL);
    node(g, "Add", "scaled", "mask", "scores", NULL);
    node(g, "Softmax", "scores", NULL, "probs", &id);
    assert_int_equal(pp_graph_set_attr_int(g, id, "axis", -1, &err), PP_OK);
    node(g, "Cast", "probs", NULL, "probs_f", &id);
    assert_int_equal(pp_graph_set_attr_int(g, id, "to", PP_DTYPE_F32, &err), PP_OK);
    node(g, "MatMul", "probs_f", "v", "ctx", NULL);
    assert_int_equal(pp_graph_add_output(g, "ctx", PP_DTYPE_F32, NULL, &err), PP_OK);
    if (pp_graph_finalize(g, NULL, &err) != PP_OK) fail_msg("%s", err.msg);

    pp_device *dev = *state;
    pp_stage *s = NULL;
    pp_stage_options so = {.slots = 1, .microbatch = NB, .global_batch = NB};
    if (pp_stage_create_range(g, 0, g->nnodes, 1, dev, &so, &s, &err) != PP_OK) fail_msg("%s", err.msg);
    int marks[3] = {0};   /* causal_Y, causal, causal_A */
    static const char *const names[3] = {"causal_Y", "causal", "causal_A"};
    for (int o = 0; o < pp_stage_num_ops(s); o++) {
        pp_stage_op_info info;
        pp_stage_op_describe(s, o, &info);
        printf("op %d: %-9s '%s' %s", o, info.op_type, info.name, info.shapes);
        for (int a = 0; a < info.nattrs; a++) printf(" %s", info.attrs[a].name);
        printf("\n");
        for (int k = 0; k < 3; k++) {
            int64_t v = 0;
            assert_int_equal(pp_attr_int(info.attrs, info.nattrs, names[k], 0, &v, info.name, &err), PP_OK);
            marks[k] += v == 1 && !strcmp(info.op_type, k == 1 ? "Softmax" : "MatMul");
        }
    }
    printf("marks: causal_Y on %d MatMul, causal on %d Softmax, causal_A on %d MatMul\n", marks[0], marks[1], marks[2]);
    for (int k = 0; k < 3; k++) assert_int_equal(marks[k], 1);

    attn a = {.T = FT};
    const size_t nd = (size_t)NB * NH * FT * DH;
    float *in[3];
    for (int i = 0; i < pp_stage_num_inputs(s); i++) {
        const char *nm = pp_stage_input(s, i)->name;
        float *d = pp_stage_input_buffer(s, 0, i);
        for (size_t e = 0; e < nd; e++) d[e] = randn();
        in[nm[0] == 'q' ? 0 : nm[0] == 'k' ? 1 : 2] = d;
    }
    assert_int_equal(pp_stage_forward(s, 0, 1, 0, &err), PP_OK);
    const float *ctx = pp_stage_value_buffer(s, 0, pp_graph_find_value(g, "ctx"));
    assert_non_null(ctx);
    double worst = 0;
    for (int b = 0; b < NB; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < FT; i++) {
                double sc[FT], mx = -INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) {
                    sc[j] = 0;
                    for (int d = 0; d < DH; d++) sc[j] += (double)in[0][at(&a, b, h, i, d)] * in[1][at(&a, b, h, j, d)];
                    mx = fmax(mx, sc[j] *= scale);
                }
                for (int j = 0; j <= i; j++) sum += sc[j] = exp(sc[j] - mx);
                for (int d = 0; d < DH; d++) {
                    double c = 0;
                    for (int j = 0; j <= i; j++) c += sc[j] / sum * in[2][at(&a, b, h, j, d)];
                    worst = fmax(worst, fabs(ctx[at(&a, b, h, i, d)] - c) / (1 + fabs(c)));
                }
            }
    printf("fused stage's ctx [%d,%d,%d,%d] vs causal attention in double: max rel diff %.2g\n", NB, NH, FT, DH, worst);
    assert_true(worst < 2e-6);
    pp_stage_destroy(s);
    pp_graph_destroy(g);
}

/* one cpu device for every test */
static int setup(void **state)
{
    pp_error err = {0};
    pp_device *dev = NULL;
    if (pp_device_create(PP_DEVICE_CPU, 0, &dev, &err) != PP_OK) fail_msg("%s", err.msg);
    *state = dev;
    return 0;
}

static int teardown(void **state)
{
    pp_device_destroy(*state);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_causal),
        cmocka_unit_test(test_causal_refused),
        cmocka_unit_test(test_softmax_causal),
        cmocka_unit_test(test_softmax_causal_refused),
        cmocka_unit_test(test_fusion_marks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
