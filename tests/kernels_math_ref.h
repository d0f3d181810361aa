/* Independent references for tests/test_kernels_math.c: brute-force loops in double
 * (numpy broadcasting by unravelled indices, triple-loop matmul, direct convolution,
 * naive pooling) that share no code with the kernels. Header-only, one includer. */
#ifndef PP_TEST_KERNELS_MATH_REF_H
#define PP_TEST_KERNELS_MATH_REF_H

#include "kernel_check.h"
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/op_info.h>

/* Runs the case's forward on fresh random inputs; in/out are allocated (free with mr_free). */
static pp_status mr_forward(const kc_case *c, pp_tensor *in, pp_tensor *out)
{
    pp_error err = {0};
    pp_device *dev = NULL;
    void *aux = NULL;
    pp_device_create(PP_DEVICE_CPU, 0, &dev, &err);
    const pp_kernel *k = pp_kernel_find(pp_op_lookup("", c->op), PP_DEVICE_CPU, PP_DTYPE_F32);
    for (int i = 0; i < c->nin; i++) in[i] = kc_alloc(&c->in[i]);
    for (int i = 0; i < c->nout; i++) out[i] = kc_alloc(&c->out[i]);
    pp_status st = k ? kc_forward(c, dev, k, in, out, &aux, &err) : PP_ERR_UNSUPPORTED;
    if (st) printf("%s: forward failed: %s\n", c->name, err.msg);
    free(aux);
    pp_device_destroy(dev);
    return st;
}

static void mr_free(const kc_case *c, pp_tensor *in, pp_tensor *out)
{
    for (int i = 0; i < c->nin; i++) free(in[i].data);
    for (int i = 0; i < c->nout; i++) free(out[i].data);
}

/* flat index into t of the output element at multi-index idx (rank R), numpy-broadcast */
static int64_t mr_bindex(const pp_tensor *t, const int64_t *idx, int R)
{
    int64_t off = 0;
    for (int d = 0; d < t->rank; d++) {
        int od = R - t->rank + d;
        off = off * t->dims[d] + (t->dims[d] == 1 ? 0 : idx[od]);
    }
    return off;
}

static void mr_unravel(const pp_tensor *t, int64_t flat, int64_t *idx)
{
    for (int d = t->rank - 1; d >= 0; d--) {
        idx[d] = flat % t->dims[d];
        flat /= t->dims[d];
    }
}

static float mr_attr_f(const kc_case *c, const char *name, float dflt)
{
    for (int i = 0; i < c->nattrs; i++)
        if (!strcmp(c->attrs[i].name, name)) return c->attrs[i].f;
    return dflt;
}
static const char *mr_attr_s(const kc_case *c, const char *name, const char *dflt)
{
    for (int i = 0; i < c->nattrs; i++)
        if (!strcmp(c->attrs[i].name, name)) return c->attrs[i].s;
    return dflt;
}

static double mr_elementwise_value(const kc_case *c, double a, double b)
{
    const char *op = c->op;
    if (!strcmp(op, "Add")) return a + b;
    if (!strcmp(op, "Sub")) return a - b;
    if (!strcmp(op, "Mul")) return a * b;
    if (!strcmp(op, "Div")) return a / b;
    if (!strcmp(op, "Pow")) return pow(a, b);
    if (!strcmp(op, "Sqrt")) return sqrt(a);
    if (!strcmp(op, "Neg")) return -a;
    if (!strcmp(op, "Reciprocal")) return 1 / a;
    if (!strcmp(op, "Relu")) return a > 0 ? a : 0;
    if (!strcmp(op, "LeakyRelu")) return a >= 0 ? a : mr_attr_f(c, "alpha", 0.01f) * a;
    if (!strcmp(op, "Sigmoid")) return 1 / (1 + exp(-a));
    if (!strcmp(op, "Tanh")) return tanh(a);
    if (!strcmp(op, "Erf")) return erf(a);
    if (!strcmp(op, "Gelu")) {
        if (!strcmp(mr_attr_s(c, "approximate", "none"), "tanh"))
            return 0.5 * a * (1 + tanh(sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
        return 0.5 * a * (1 + erf(a / sqrt(2.0)));
    }
    if (!strcmp(op, "Identity")) return a;
    return NAN;
}

/* Max |kernel - reference| over the output of a unary or binary elementwise case. */
static double mr_elementwise_maxdiff(const kc_case *c)
{
    pp_tensor in[KC_MAX_IO], out[KC_MAX_IO];
    double worst = -1;
    if (mr_forward(c, in, out) == PP_OK) {
        worst = 0;
        int64_t idx[PP_MAX_RANK], n = pp_tensor_numel(&out[0]);
        for (int64_t e = 0; e < n; e++) {
            mr_unravel(&out[0], e, idx);
            double a = ((float *)in[0].data)[mr_bindex(&in[0], idx, out[0].rank)];
            double b = c->nin > 1 ? ((float *)in[1].data)[mr_bindex(&in[1], idx, out[0].rank)] : 0;
            double d = fabs(mr_elementwise_value(c, a, b) - ((float *)out[0].data)[e]);
            if (!(d <= worst)) worst = d;
        }
    }
    mr_free(c, in, out);
    return worst;
}

/* MatMul by triple loops: numpy promotion of 1-D operands and batch broadcasting. */
static double mr_matmul_maxdiff(const kc_case *c)
{
    pp_tensor in[KC_MAX_IO], out[KC_MAX_IO];
    double worst = -1;
    if (mr_forward(c, in, out) == PP_OK) {
        pp_tensor a = in[0], b = in[1], ab = a, bb = b, ob;
        if (a.rank == 1) { a.rank = 2; a.dims[1] = a.dims[0]; a.dims[0] = 1; }
        if (b.rank == 1) { b.rank = 2; b.dims[1] = 1; }
        int64_t M = a.dims[a.rank - 2], K = a.dims[a.rank - 1], N = b.dims[b.rank - 1];
        ab.rank = a.rank - 2; bb.rank = b.rank - 2;
        memcpy(ab.dims, a.dims, sizeof ab.dims);
        memcpy(bb.dims, b.dims, sizeof bb.dims);
        ob.rank = ab.rank > bb.rank ? ab.rank : bb.rank;
        int64_t nb = 1;
        for (int d = 0; d < ob.rank; d++) {
            int da = d - (ob.rank - ab.rank), db = d - (ob.rank - bb.rank);
            int64_t x = da >= 0 ? ab.dims[da] : 1, y = db >= 0 ? bb.dims[db] : 1;
            ob.dims[d] = x > y ? x : y;
            nb *= ob.dims[d];
        }
        worst = 0;
        const float *A = in[0].data, *B = in[1].data, *Y = out[0].data;
        for (int64_t bi = 0; bi < nb; bi++) {
            int64_t idx[PP_MAX_RANK];
            mr_unravel(&ob, bi, idx);
            int64_t ia = mr_bindex(&ab, idx, ob.rank), ib = mr_bindex(&bb, idx, ob.rank);
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double s = 0;
                    for (int64_t k = 0; k < K; k++) s += (double)A[(ia * M + i) * K + k] * B[(ib * K + k) * N + j];
                    double d = fabs(s - Y[(bi * M + i) * N + j]);
                    if (!(d <= worst)) worst = d;
                }
        }
    }
    mr_free(c, in, out);
    return worst;
}

static int64_t mr_attr_i(const kc_case *c, const char *name, int64_t dflt)
{
    for (int i = 0; i < c->nattrs; i++)
        if (!strcmp(c->attrs[i].name, name)) return c->attrs[i].i;
    return dflt;
}

/* Gemm by its definition, C broadcast by index. */
static double mr_gemm_maxdiff(const kc_case *c)
{
    pp_tensor in[KC_MAX_IO], out[KC_MAX_IO];
    double worst = -1;
    if (mr_forward(c, in, out) == PP_OK) {
        int ta = (int)mr_attr_i(c, "transA", 0), tb = (int)mr_attr_i(c, "transB", 0);
        double alpha = mr_attr_f(c, "alpha", 1), beta = mr_attr_f(c, "beta", 1);
        int64_t M = out[0].dims[0], N = out[0].dims[1], K = in[0].dims[ta ? 0 : 1];
        const float *A = in[0].data, *B = in[1].data, *Y = out[0].data;
        worst = 0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += (double)A[ta ? k * M + i : i * K + k] * B[tb ? j * K + k : k * N + j];
                s *= alpha;
                if (c->nin > 2 && !c->in[2].omitted) {
                    int64_t idx[2] = {i, j};
                    s += beta * ((float *)in[2].data)[mr_bindex(&in[2], idx, 2)];
                }
                double d = fabs(s - Y[i * N + j]);
                if (!(d <= worst)) worst = d;
            }
    }
    mr_free(c, in, out);
    return worst;
}

/* INTS attribute value k, or dflt */
static int64_t mr_attr_ints(const kc_case *c, const char *name, int k, int64_t dflt)
{
    for (int i = 0; i < c->nattrs; i++)
        if (!strcmp(c->attrs[i].name, name)) return c->attrs[i].ints[k];
    return dflt;
}

/* Geometry of an (up to 2-D) window op straight from the attributes, 1-D as H = 1. */
typedef struct mr_win {
    int64_t ih, iw, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw; /* ph/pw: begin pads */
    int64_t peh, pew;                                        /* end pads */
} mr_win;

static mr_win mr_win_make(const kc_case *c, const pp_tensor *x, const pp_tensor *y, const int64_t *k)
{
    int nsp = x->rank - 2, o = nsp == 1;
    mr_win w = {1, x->dims[x->rank - 1], 1, y->dims[y->rank - 1], 1, k[nsp - 1], 1, 1, 1, 1, 0, 0, 0, 0};
    w.sw = mr_attr_ints(c, "strides", nsp - 1, 1);
    w.dw = mr_attr_ints(c, "dilations", nsp - 1, 1);
    w.pw = mr_attr_ints(c, "pads", nsp - 1, 0);
    w.pew = mr_attr_ints(c, "pads", 2 * nsp - 1, 0);
    if (!o) {
        w.ih = x->dims[2]; w.oh = y->dims[2]; w.kh = k[0];
        w.sh = mr_attr_ints(c, "strides", 0, 1);
        w.dh = mr_attr_ints(c, "dilations", 0, 1);
        w.ph = mr_attr_ints(c, "pads", 0, 0);
        w.peh = mr_attr_ints(c, "pads", 2, 0);
    }
    if (!strcmp(mr_attr_s(c, "auto_pad", "NOTSET"), "SAME_UPPER")) {
        /* total pad so that out = ceil(in / stride); the extra one goes at the end */
        int64_t th = (w.oh - 1) * w.sh + (w.kh - 1) * w.dh + 1 - w.ih, tw = (w.ow - 1) * w.sw + (w.kw - 1) * w.dw + 1 - w.iw;
        w.ph = th > 0 ? th / 2 : 0;
        w.pw = tw > 0 ? tw / 2 : 0;
    }
    return w;
}

/* Conv by its definition: y[n][m][oh][ow] = b[m] + sum over the group's channels and taps. */
static double mr_conv_maxdiff(const kc_case *c)
{
    pp_tensor in[KC_MAX_IO], out[KC_MAX_IO];
    double worst = -1;
    if (mr_forward(c, in, out) == PP_OK) {
        const pp_tensor *x = &in[0], *wt = &in[1];
        int64_t G = mr_attr_i(c, "group", 1), N = x->dims[0], C = x->dims[1], M = wt->dims[0];
        int64_t Cg = C / G, Mg = M / G;
        mr_win w = mr_win_make(c, x, &out[0], wt->dims + 2);
        const float *X = x->data, *W = wt->data, *B = c->nin > 2 ? in[2].data : NULL, *Y = out[0].data;
        worst = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t m = 0; m < M; m++)
                for (int64_t oh = 0; oh < w.oh; oh++)
                    for (int64_t ow = 0; ow < w.ow; ow++) {
                        double s = B ? B[m] : 0;
                        int64_t g = m / Mg;
                        for (int64_t cc = 0; cc < Cg; cc++)
                            for (int64_t i = 0; i < w.kh; i++)
                                for (int64_t j = 0; j < w.kw; j++) {
                                    int64_t hh = oh * w.sh - w.ph + i * w.dh, ww = ow * w.sw - w.pw + j * w.dw;
                                    if (hh < 0 || hh >= w.ih || ww < 0 || ww >= w.iw) continue;
                                    s += (double)X[((n * C + g * Cg + cc) * w.ih + hh) * w.iw + ww] *
                                         W[((m * Cg + cc) * w.kh + i) * w.kw + j];
                                }
                        double d = fabs(s - Y[((n * M + m) * w.oh + oh) * w.ow + ow]);
                        if (!(d <= worst)) worst = d;
                    }
    }
    mr_free(c, in, out);
    return worst;
}

/* MaxPool / AveragePool / GlobalAveragePool by scanning each window. */
static double mr_pool_maxdiff(const kc_case *c)
{
    pp_tensor in[KC_MAX_IO], out[KC_MAX_IO];
    double worst = -1;
    if (mr_forward(c, in, out) == PP_OK) {
        const pp_tensor *x = &in[0];
        int gap = !strcmp(c->op, "GlobalAveragePool"), mx = !strcmp(c->op, "MaxPool");
        int nsp = x->rank - 2;
        int64_t k[2] = {mr_attr_ints(c, "kernel_shape", 0, 1), mr_attr_ints(c, "kernel_shape", nsp - 1, 1)};
        if (gap) {
            k[0] = x->dims[2];
            k[1] = x->dims[x->rank - 1];
        }
        mr_win w = mr_win_make(c, x, &out[0], nsp == 1 ? k + 1 : k);
        int incl = (int)mr_attr_i(c, "count_include_pad", 0);
        const float *X = x->data, *Y = out[0].data;
        worst = 0;
        for (int64_t pl = 0; pl < x->dims[0] * x->dims[1]; pl++)
            for (int64_t oh = 0; oh < w.oh; oh++)
                for (int64_t ow = 0; ow < w.ow; ow++) {
                    double s = 0, best = -INFINITY;
                    int64_t n = 0, npad = 0;
                    for (int64_t i = 0; i < w.kh; i++)
                        for (int64_t j = 0; j < w.kw; j++) {
                            int64_t hh = oh * w.sh - w.ph + i * w.dh, ww = ow * w.sw - w.pw + j * w.dw;
                            if (hh < 0 || hh >= w.ih || ww < 0 || ww >= w.iw) {
                                npad += hh < w.ih + w.peh && ww < w.iw + w.pew;
                                continue;
                            }
                            double v = X[(pl * w.ih + hh) * w.iw + ww];
                            s += v;
                            n++;
                            if (v > best) best = v;
                        }
                    double ref = mx ? best : s / (double)(n + (incl ? npad : 0));
                    double d = fabs(ref - Y[(pl * w.oh + oh) * w.ow + ow]);
                    if (!(d <= worst)) worst = d;
                }
    }
    mr_free(c, in, out);
    return worst;
}

/* BatchNormalization closed form; training: batch mean and biased variance, and the
 * running statistics outputs when present. */
static double mr_batchnorm_maxdiff(const kc_case *c)
{
    pp_tensor in[KC_MAX_IO], out[KC_MAX_IO];
    double worst = -1;
    if (mr_forward(c, in, out) == PP_OK) {
        const pp_tensor *x = &in[0];
        int64_t N = x->dims[0], C = x->dims[1], HW = pp_tensor_numel(x) / (N * C);
        double eps = mr_attr_f(c, "epsilon", 1e-5f), mom = mr_attr_f(c, "momentum", 0.9f);
        const float *X = x->data, *S = in[1].data, *B = in[2].data, *RM = in[3].data, *RV = in[4].data;
        worst = 0;
        for (int64_t ch = 0; ch < C; ch++) {
            double mean = RM[ch], var = RV[ch];
            if (c->training) {
                double s = 0, s2 = 0;
                for (int64_t n = 0; n < N; n++)
                    for (int64_t i = 0; i < HW; i++) s += X[(n * C + ch) * HW + i];
                mean = s / (double)(N * HW);
                for (int64_t n = 0; n < N; n++)
                    for (int64_t i = 0; i < HW; i++) s2 += pow(X[(n * C + ch) * HW + i] - mean, 2);
                var = s2 / (double)(N * HW);
                if (c->nout > 2) {
                    double d1 = fabs(RM[ch] * mom + mean * (1 - mom) - ((float *)out[1].data)[ch]);
                    double d2 = fabs(RV[ch] * mom + var * (1 - mom) - ((float *)out[2].data)[ch]);
                    worst = fmax(worst, fmax(d1, d2));
                }
            }
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < HW; i++) {
                    int64_t e = (n * C + ch) * HW + i;
                    double ref = S[ch] * (X[e] - mean) / sqrt(var + eps) + B[ch];
                    double d = fabs(ref - ((float *)out[0].data)[e]);
                    if (!(d <= worst)) worst = d;
                }
        }
    }
    mr_free(c, in, out);
    return worst;
}

#endif
