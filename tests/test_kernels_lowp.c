/* The 16-bit kernels on the cpu: bfloat16 / float16 conversions against references computed
 * here in double (every 16-bit pattern, random and edge floats), F16C against the portable
 * path bit for bit, pp_kernel_convert, and the adapter (kernels/lowp.c): each op's BF16 /
 * F16 kernel equals, bit for bit, the F32 kernel run on the 16-bit values with its outputs
 * and 16-bit gradients rounded, whether it takes its shadows from the call's work memory
 * (bfloat16 cases: then it allocates nothing) or allocates them (float16 cases). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "cpu_math.h"
#include <onnxpipe/element.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/op_info.h>

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t next64(void) { return pp_el_mix64(rng += 0x9E3779B97F4A7C15ull); }
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)(next64() >> 40) * (1.f / 16777216.f); }

/* ---------------- references in double ---------------- */

/* The value of a 16-bit pattern with `mbits` stored mantissa bits and exponent bias `bias`
 * (binary16: 10, 15; bfloat16: 7, 127), from its fields. */
static double decode(uint16_t h, int mbits, int bias)
{
    const int emax = (1 << (15 - mbits)) - 1, e = (h >> mbits) & emax, m = h & ((1 << mbits) - 1);
    const double s = h & 0x8000 ? -1 : 1;
    if (e == emax) return m ? NAN : s * INFINITY;
    if (e == 0) return s * ldexp(m, 1 - bias - mbits);
    return s * ldexp((1 << mbits) + m, e - bias - mbits);
}

/* x rounded to the nearest value of that format, ties to even (rint), overflow to Inf */
static double round_to(double x, int mbits, int bias)
{
    const double a = fabs(x), top = ldexp(2.0 - ldexp(1, -mbits - 1), (1 << (15 - mbits)) - 2 - bias);
    if (a >= top) return copysign(INFINITY, x);
    int e;
    frexp(a, &e);                       /* a = f 2^e, f in [0.5, 1) */
    e = e - 1 < 1 - bias ? 1 - bias : e - 1;
    const double ulp = ldexp(1, e - mbits);
    return copysign(rint(a / ulp) * ulp, x);
}

static int same_value(double got, double want)
{
    return (isnan(got) && isnan(want)) || (got == want && signbit(got) == signbit(want));
}

static void test_patterns_round_trip(void **state)
{
    (void)state;
    int bad = 0, nans = 0;
    for (uint32_t p = 0; p < 65536; p++) {
        const uint16_t h = (uint16_t)p;
        const float f = pp_el_f32_from_f16(h), b = pp_el_f32_from_bf16(h);
        bad += !same_value(f, decode(h, 10, 15)) + !same_value(b, decode(h, 7, 127));
        const uint16_t f2 = pp_el_f16_from_f32(f), b2 = pp_el_bf16_from_f32(b);
        nans += isnan(f) + isnan(b);
        bad += isnan(f) ? !isnan(pp_el_f32_from_f16(f2)) : f2 != h;
        bad += isnan(b) ? !isnan(pp_el_f32_from_bf16(b2)) : b2 != h;
    }
    print_message("65536 float16 and bfloat16 patterns: decoded = fields in double, back to 16 bits exactly "
                  "(%d NaN patterns stay NaN): %d wrong\n", nans, bad);
    assert_int_equal(bad, 0);
}

static void test_round_against_double(void **state)
{
    (void)state;
    const float edge[] = {0.f, -0.f, 1.f, 1.f + 0x1p-11f, 1.f + 3 * 0x1p-11f, 1.f + 0x1p-8f, 1.f + 3 * 0x1p-8f,
                          65504.f, 65519.99f, 65520.f, 65536.f, 0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 3 * 0x1p-25f,
                          0x1p-14f, 0x1.ff8p-15f, 0x1.ffcp-15f, FLT_MAX, -FLT_MAX, FLT_MIN, 0x1p-149f, 0x1.fffffep127f,
                          0x1.ff8p127f, 0x1.fep127f, INFINITY, -INFINITY, NAN, -NAN, -1.f - 0x1p-11f, 3.14159265f};
    const int nedge = (int)(sizeof edge / sizeof edge[0]), nrand = 400000;
    int bad = 0;
    for (int i = 0; i < nedge + nrand; i++) {
        float x;
        if (i < nedge) x = edge[i];
        else if (i % 2) x = pp_el_from_bits((uint32_t)next64());            /* any float */
        else x = uniform(-1.f, 1.f) * ldexpf(1.f, (int)uniform(-26.f, 17.f));  /* float16's range */
        const double f = pp_el_f32_from_f16(pp_el_f16_from_f32(x)), b = pp_el_f32_from_bf16(pp_el_bf16_from_f32(x));
        const double wf = isnan(x) ? NAN : round_to(x, 10, 15), wb = isnan(x) ? NAN : round_to(x, 7, 127);
        if (!same_value(f, wf) || !same_value(b, wb)) {
            if (bad++ < 5) print_message("x = %a: float16 %a (want %a), bfloat16 %a (want %a)\n", x, f, wf, b, wb);
        }
    }
    print_message("%d edge (ties, 65504/65520, subnormals, -0, Inf, NaN) and %d random floats rounded to float16 "
                  "and bfloat16 = nearest-even in double: %d wrong\n", nedge, nrand, bad);
    assert_int_equal(bad, 0);
}

static void test_f16c_is_portable(void **state)
{
    (void)state;
    if (!pp_cpu_has_f16c()) {
        print_message("this cpu has no F16C\n");
        skip();
    }
    static uint16_t h[65536], hh[1 << 20], hp[1 << 20];
    static float fh[65536], fp[65536], x[1 << 20];
    for (uint32_t p = 0; p < 65536; p++) h[p] = (uint16_t)p;
    pp_cpu_f32_from_f16(fh, h, 65536, 1);
    pp_cpu_f32_from_f16(fp, h, 65536, 0);
    int bad = memcmp(fh, fp, sizeof fh) != 0;
    /* a stride through every float pattern, and float16's range densely; an odd count for the tail */
    const int64_t n = (1 << 20) - 3;
    for (int64_t i = 0; i < n; i++)
        x[i] = i % 2 ? pp_el_from_bits((uint32_t)(i * 8191u)) : pp_el_from_bits(0x33000000u + (uint32_t)i * 0x3ffu);
    pp_cpu_f16_from_f32(hh, x, n, 1);
    pp_cpu_f16_from_f32(hp, x, n, 0);
    bad += memcmp(hh, hp, (size_t)n * sizeof *hh) != 0;
    print_message("F16C vs portable: 65536 float16 -> float32 and %lld float32 -> float16, %s\n", (long long)n,
                  bad ? "DIFFER" : "identical bits");
    assert_int_equal(bad, 0);
}

static pp_device *cpu;

static int setup(void **state)
{
    (void)state;
    pp_error err = {0};
    return pp_device_create(PP_DEVICE_CPU, 0, &cpu, &err) == PP_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    pp_device_destroy(cpu);
    return 0;
}

static void test_convert(void **state)
{
    (void)state;
    pp_error err = {0};
    enum { N = 1001 };
    float x[N], back[N];
    uint16_t a[N], b[N];
    for (int i = 0; i < N; i++) x[i] = uniform(-3.f, 3.f) * ldexpf(1.f, (int)uniform(-30.f, 20.f));
    int bad = 0;
    const pp_dtype lp[2] = {PP_DTYPE_BF16, PP_DTYPE_F16};
    for (int k = 0; k < 2; k++) {
        const pp_dtype t = lp[k], o = lp[1 - k];
        assert_int_equal(pp_kernel_convert(cpu, a, t, x, PP_DTYPE_F32, N, &err), PP_OK);
        assert_int_equal(pp_kernel_convert(cpu, back, PP_DTYPE_F32, a, t, N, &err), PP_OK);
        assert_int_equal(pp_kernel_convert(cpu, b, o, a, t, N, &err), PP_OK);
        for (int i = 0; i < N; i++) {
            const uint16_t want = k ? pp_el_f16_from_f32(x[i]) : pp_el_bf16_from_f32(x[i]);
            const float up = k ? pp_el_f32_from_f16(want) : pp_el_f32_from_bf16(want);
            const uint16_t other = k ? pp_el_bf16_from_f32(up) : pp_el_f16_from_f32(up);
            bad += a[i] != want || pp_el_bits(back[i]) != pp_el_bits(up) || b[i] != other;
        }
    }
    assert_int_equal(pp_kernel_convert(cpu, back, PP_DTYPE_F32, x, PP_DTYPE_F32, N, &err), PP_OK);
    bad += memcmp(back, x, sizeof x) != 0;
    print_message("pp_kernel_convert: float32 <-> bfloat16 <-> float16 and copies, %d elements each: %d wrong\n", N,
                  bad);
    assert_int_equal(bad, 0);
    assert_int_equal(pp_kernel_convert(cpu, back, PP_DTYPE_F32, x, PP_DTYPE_I32, N, &err), PP_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "int32 -> float32"));
    assert_int_equal(pp_kernel_convert(cpu, a, PP_DTYPE_BF16, x, PP_DTYPE_F32, -1, &err), PP_ERR_INVALID_ARG);
}

/* ---------------- the adapter against the F32 kernel ---------------- */

enum { LP = 100 };                  /* a spec dtype: the 16-bit dtype under test */
#define MAXT 4

typedef struct tspec {
    int dtype;                      /* LP, PP_DTYPE_F32 or an integer dtype (indices) */
    int rank;
    int64_t dims[4];
    int grad_f32;                   /* input: its gradient is an F32 buffer (a master weight's) */
} tspec;

typedef struct lcase {
    const char *op;
    int nin, nout;
    tspec in[MAXT], out[MAXT];
    pp_attr attrs[3];
    int nattrs;
} lcase;

#define S(dt, ...) {dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}, 0}
#define W(...) {LP, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}, 1}
#define AI(nm, v) {.name = nm, .type = PP_ATTR_INT, .i = v}
#define AIS(nm, arr) {.name = nm, .type = PP_ATTR_INTS, .n = (int)(sizeof(arr) / sizeof(arr[0])), .ints = arr}

static const int64_t p0213[] = {0, 2, 1, 3}, p0231[] = {0, 2, 3, 1};

static const lcase lcases[] = {
    {"MatMul", 2, 1, {S(LP, 6, 8), W(8, 5)}, {S(LP, 6, 5)}, {{0}}, 0},
    {"MatMul", 2, 1, {S(LP, 2, 3, 4, 8), S(LP, 2, 3, 8, 4)}, {S(LP, 2, 3, 4, 4)}, {{0}}, 0},   /* batched */
    {"MatMul", 2, 1, {S(LP, 2, 4, 3, 5), S(LP, 2, 4, 3, 5)}, {S(LP, 2, 3, 4, 4)},             /* attention views */
     {AIS("perm_A", p0213), AIS("perm_B", p0231)}, 2},
    {"Gemm", 3, 1, {S(LP, 7, 6), W(5, 6), {PP_DTYPE_F32, 1, {5}, 0}}, {S(LP, 7, 5)}, {AI("transB", 1)}, 1},
    {"Softmax", 1, 1, {S(LP, 3, 4, 9)}, {S(LP, 3, 4, 9)}, {{0}}, 0},
    {"LayerNormalization", 3, 3, {S(LP, 2, 3, 8), {PP_DTYPE_F32, 1, {8}, 0}, {PP_DTYPE_F32, 1, {8}, 0}},
     {S(LP, 2, 3, 8), {PP_DTYPE_F32, 3, {2, 3, 1}, 0}, {PP_DTYPE_F32, 3, {2, 3, 1}, 0}}, {{0}}, 0},
    {"Gelu", 1, 1, {S(LP, 5, 11)}, {S(LP, 5, 11)}, {{0}}, 0},
    {"Add", 2, 1, {S(LP, 4, 6), {PP_DTYPE_F32, 1, {6}, 0}}, {S(LP, 4, 6)}, {{0}}, 0},   /* a BF16 and an F32 */
    {"Add", 2, 1, {{PP_DTYPE_F32, 2, {4, 6}, 0}, {PP_DTYPE_F32, 1, {6}, 0}}, {S(LP, 4, 6)}, {{0}}, 0},
    {"Gather", 2, 1, {W(10, 6), S(PP_DTYPE_I64, 3, 4)}, {S(LP, 3, 4, 6)}, {{0}}, 0},   /* an embedding */
    {"Transpose", 1, 1, {S(LP, 2, 3, 4, 5)}, {S(LP, 2, 4, 3, 5)}, {AIS("perm", p0213)}, 1},
    {"SoftmaxCrossEntropyLoss", 2, 1, {S(LP, 6, 5), S(PP_DTYPE_I64, 6)}, {{PP_DTYPE_F32, 0, {0}, 0}}, {{0}}, 0},
};
#define NLCASES ((int)(sizeof lcases / sizeof lcases[0]))

static int is_float(int dt) { return dt == LP || dt == PP_DTYPE_F32; }

static uint16_t round16(pp_dtype lp, float x)
{
    return lp == PP_DTYPE_BF16 ? pp_el_bf16_from_f32(x) : pp_el_f16_from_f32(x);
}
static float up16(pp_dtype lp, uint16_t h)
{
    return lp == PP_DTYPE_BF16 ? pp_el_f32_from_bf16(h) : pp_el_f32_from_f16(h);
}

/* A tensor pair: `t` as the 16-bit kernel sees it (dtype lp where the spec says LP), `r` the
 * F32 kernel's (the same values, exactly, in float32). Random values when `fill`. */
typedef struct tpair {
    pp_tensor t, r;
} tpair;

static tpair make_pair(const tspec *s, int dt, pp_dtype lp, int fill, int64_t index_hi)
{
    tpair p;
    memset(&p, 0, sizeof p);
    p.t.dtype = dt == LP ? lp : (pp_dtype)dt;
    p.t.rank = s->rank;
    memcpy(p.t.dims, s->dims, sizeof s->dims);
    p.r = p.t;
    if (is_float(dt)) p.r.dtype = PP_DTYPE_F32;
    const int64_t n = pp_tensor_numel(&p.t);
    p.t.data = calloc((size_t)n + 1, pp_dtype_size(p.t.dtype));
    p.r.data = calloc((size_t)n + 1, pp_dtype_size(p.r.dtype));
    for (int64_t i = 0; fill && i < n; i++) {
        if (!is_float(dt)) {
            ((int64_t *)p.t.data)[i] = ((int64_t *)p.r.data)[i] = (int64_t)(next64() % (uint64_t)index_hi);
            continue;
        }
        float v = uniform(-2.f, 2.f);
        if (dt == LP) v = up16(lp, ((uint16_t *)p.t.data)[i] = round16(lp, v));
        else ((float *)p.t.data)[i] = v;
        ((float *)p.r.data)[i] = v;
    }
    return p;
}

static void free_pair(tpair *p)
{
    free(p->t.data);
    free(p->r.data);
}

/* differing elements of the kernel's tensor t from the reference r rounded as t's dtype */
static int64_t count_diff(const tpair *p)
{
    int64_t bad = 0, n = pp_tensor_numel(&p->t);
    for (int64_t i = 0; i < n; i++) {
        const float r = ((const float *)p->r.data)[i];
        if (p->t.dtype == PP_DTYPE_F32) bad += pp_el_bits(((const float *)p->t.data)[i]) != pp_el_bits(r);
        else bad += ((const uint16_t *)p->t.data)[i] != round16(p->t.dtype, r);
    }
    return bad;
}

static pp_kernel_ctx make_ctx(const lcase *k, pp_op op, const pp_tensor *in, pp_tensor *out)
{
    pp_kernel_ctx c = {.node = "lowp_node", .op = op, .op_type = k->op, .opset = 17, .attrs = k->attrs,
                       .nattrs = k->nattrs, .in = in, .nin = k->nin, .out = out, .nout = k->nout, .dev = cpu,
                       .training = 1};
    return c;
}

/* one case in one 16-bit dtype; returns the number of differing elements, counts compared in *n */
/* A 16-bit output is stored in 16 bits: what backward reads of it is the rounded value */
static void store_rounded(tpair *p)
{
    for (int64_t i = 0; p->t.dtype != PP_DTYPE_F32 && i < pp_tensor_numel(&p->t); i++)
        ((float *)p->r.data)[i] = up16(p->t.dtype, round16(p->t.dtype, ((float *)p->r.data)[i]));
}

static int64_t run_case(const lcase *k, pp_dtype lp, int64_t *n)
{
    pp_error err = {0};
    const pp_op op = pp_op_lookup("", k->op);
    const pp_kernel *kl = pp_kernel_find(op, PP_DEVICE_CPU, lp), *kf = pp_kernel_find(op, PP_DEVICE_CPU, PP_DTYPE_F32);
    assert_non_null(kl);
    assert_non_null(kf);
    assert_true(kl != kf);
    const int64_t index_hi = !strcmp(k->op, "Gather") ? k->in[0].dims[0] : k->in[0].dims[k->in[0].rank - 1];
    tpair in[MAXT], out[MAXT], gout[MAXT], gin[MAXT];
    pp_tensor tin[MAXT], rin[MAXT], tout[MAXT], rout[MAXT], tgo[MAXT], rgo[MAXT], tgi[MAXT], rgi[MAXT];
    for (int i = 0; i < k->nin; i++) {
        in[i] = make_pair(&k->in[i], k->in[i].dtype, lp, 1, index_hi);
        /* gradients start non-zero, so that accumulation shows; a weight's may be F32 */
        memset(&gin[i], 0, sizeof gin[i]);
        const int gdt = k->in[i].grad_f32 ? PP_DTYPE_F32 : k->in[i].dtype;
        if (is_float(k->in[i].dtype)) gin[i] = make_pair(&k->in[i], gdt, lp, 1, 1);
        tin[i] = in[i].t, rin[i] = in[i].r, tgi[i] = gin[i].t, rgi[i] = gin[i].r;
    }
    for (int o = 0; o < k->nout; o++) {
        out[o] = make_pair(&k->out[o], k->out[o].dtype, lp, 0, 1);
        gout[o] = make_pair(&k->out[o], k->out[o].dtype, lp, 1, 1);
        tout[o] = out[o].t, rout[o] = out[o].r, tgo[o] = gout[o].t, rgo[o] = gout[o].r;
    }
    pp_kernel_ctx ct = make_ctx(k, op, tin, tout), cr = make_ctx(k, op, rin, rout);
    const size_t aux = kf->aux_bytes ? kf->aux_bytes(&cr) : 0;
    assert_int_equal(kl->aux_bytes ? kl->aux_bytes(&ct) : 0, aux);
    void *aux_t = calloc(1, aux + 1), *aux_r = calloc(1, aux + 1);
    ct.aux = aux_t, cr.aux = aux_r;
    /* bfloat16: the work memory the stage would pass, as large as work_bytes says and no larger */
    const int with_work = lp == PP_DTYPE_BF16;
    const size_t wf = kl->work_bytes ? kl->work_bytes(&ct, NULL, NULL) : 0,
                 wb = kl->work_bytes && kl->backward ? kl->work_bytes(&ct, tgo, tgi) : 0;
    void *work = with_work ? malloc((wf > wb ? wf : wb) + 1) : NULL;
    pp_device_counters c0, c1;
    pp_device_get_counters(cpu, &c0);
    ct.work = work, ct.work_size = wf;
    if (kl->forward(&ct, &err) != PP_OK || kf->forward(&cr, &err) != PP_OK) fail_msg("%s forward: %s", k->op, err.msg);
    int64_t bad = 0;
    *n = 0;
    for (int o = 0; o < k->nout; o++) {
        bad += count_diff(&out[o]);
        *n += pp_tensor_numel(&tout[o]);
        store_rounded(&out[o]);
    }
    assert_true((kl->backward != NULL) == (kf->backward != NULL));
    if (kl->backward) {
        ct.work_size = wb;
        if (kl->backward(&ct, tgo, tgi, &err) != PP_OK || kf->backward(&cr, rgo, rgi, &err) != PP_OK)
            fail_msg("%s backward: %s", k->op, err.msg);
        for (int i = 0; i < k->nin; i++) {
            if (!tgi[i].data) continue;
            bad += count_diff(&gin[i]);
            *n += pp_tensor_numel(&tgi[i]);
        }
    }
    for (int i = 0; i < k->nin; i++) {
        free_pair(&in[i]);
        free_pair(&gin[i]);
    }
    for (int o = 0; o < k->nout; o++) {
        free_pair(&out[o]);
        free_pair(&gout[o]);
    }
    pp_device_get_counters(cpu, &c1);
    if (with_work && c1.allocs != c0.allocs)
        fail_msg("%s bfloat16 with work memory allocated %lld times", k->op, (long long)(c1.allocs - c0.allocs));
    free(work);
    free(aux_t);
    free(aux_r);
    return bad;
}

static void test_adapter_equals_f32_kernel(void **state)
{
    (void)state;
    int64_t total = 0, bad = 0;
    for (int lp = 0; lp < 2; lp++)
        for (int i = 0; i < NLCASES; i++) {
            int64_t n;
            const int64_t d = run_case(&lcases[i], lp ? PP_DTYPE_F16 : PP_DTYPE_BF16, &n);
            print_message("%-9s %-24s forward + backward: %5lld elements, %lld differ from the F32 kernel rounded\n",
                          lp ? "float16" : "bfloat16", lcases[i].op, (long long)n, (long long)d);
            total += n, bad += d;
        }
    print_message("adapter vs F32 kernel on the 16-bit values: %lld elements, %lld differ\n", (long long)total,
                  (long long)bad);
    assert_int_equal(bad, 0);
}

/* grad_fresh: the adapter keeps the F32 kernel's assigns-fresh, and a fresh 16-bit gradient
 * holding garbage (NaN) is assigned, not added to */
static void test_adapter_fresh_gradient(void **state)
{
    (void)state;
    pp_error err = {0};
    const pp_kernel *k = pp_kernel_find(PP_OP_SOFTMAX, PP_DEVICE_CPU, PP_DTYPE_BF16),
                    *f = pp_kernel_find(PP_OP_SOFTMAX, PP_DEVICE_CPU, PP_DTYPE_F32);
    assert_true(k->caps & PP_KCAP_ASSIGNS_FRESH);
    enum { N = 12 };
    uint16_t x[N], y[N], gy[N], gx[N];
    float xr[N], yr[N], gyr[N], gxr[N];
    for (int i = 0; i < N; i++) {
        x[i] = round16(PP_DTYPE_BF16, uniform(-2.f, 2.f)), gy[i] = round16(PP_DTYPE_BF16, uniform(-1.f, 1.f));
        xr[i] = up16(PP_DTYPE_BF16, x[i]), gyr[i] = up16(PP_DTYPE_BF16, gy[i]);
        gx[i] = 0x7fc1;                 /* a NaN */
    }
    pp_tensor tx = {PP_DTYPE_BF16, 1, {N}, x}, ty = {PP_DTYPE_BF16, 1, {N}, y}, tgy = {PP_DTYPE_BF16, 1, {N}, gy},
              tgx = {PP_DTYPE_BF16, 1, {N}, gx}, rx = {PP_DTYPE_F32, 1, {N}, xr}, ry = {PP_DTYPE_F32, 1, {N}, yr},
              rgy = {PP_DTYPE_F32, 1, {N}, gyr}, rgx = {PP_DTYPE_F32, 1, {N}, gxr};
    const lcase sm = {"Softmax", 1, 1, {{0}}, {{0}}, {{0}}, 0};
    pp_kernel_ctx ct = make_ctx(&sm, PP_OP_SOFTMAX, &tx, &ty), cr = make_ctx(&sm, PP_OP_SOFTMAX, &rx, &ry);
    ct.grad_fresh = cr.grad_fresh = 1;
    assert_int_equal(k->forward(&ct, &err), PP_OK);
    assert_int_equal(f->forward(&cr, &err), PP_OK);
    /* y is stored in 16 bits */
    for (int i = 0; i < N; i++) yr[i] = up16(PP_DTYPE_BF16, round16(PP_DTYPE_BF16, yr[i]));
    assert_int_equal(k->backward(&ct, &tgy, &tgx, &err), PP_OK);
    assert_int_equal(f->backward(&cr, &rgy, &rgx, &err), PP_OK);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += gx[i] != round16(PP_DTYPE_BF16, gxr[i]);
    print_message("Softmax bfloat16 with a fresh (NaN-filled) input gradient: %d of %d differ from F32 assigned\n",
                  bad, N);
    assert_int_equal(bad, 0);
}

/* Cast keeps its output dtype through the adapter; a 16-bit constant read on the host is refused */
static void test_adapter_cast_and_constants(void **state)
{
    (void)state;
    pp_error err = {0};
    float x[3] = {1.f / 3, -65519.f, 1e-6f};
    uint16_t y[3], xh[3];
    pp_tensor tx = {PP_DTYPE_F32, 1, {3}, x}, ty = {PP_DTYPE_F16, 1, {3}, y};
    const lcase cast = {"Cast", 1, 1, {{0}}, {{0}}, {AI("to", PP_DTYPE_F16)}, 1};
    pp_kernel_ctx c = make_ctx(&cast, PP_OP_CAST, &tx, &ty);
    assert_int_equal(pp_kernel_find(PP_OP_CAST, PP_DEVICE_CPU, PP_DTYPE_F16)->forward(&c, &err), PP_OK);
    for (int i = 0; i < 3; i++) assert_int_equal(y[i], pp_el_f16_from_f32(x[i]));
    for (int i = 0; i < 3; i++) xh[i] = pp_el_bf16_from_f32(x[i]);
    pp_tensor th = {PP_DTYPE_BF16, 1, {3}, xh}, to = {PP_DTYPE_BF16, 1, {3}, y};
    const void *host_in[1] = {xh};
    const lcase neg = {"Neg", 1, 1, {{0}}, {{0}}, {{0}}, 0};
    c = make_ctx(&neg, PP_OP_NEG, &th, &to);
    c.host_in = host_in;
    assert_int_equal(pp_kernel_find(PP_OP_NEG, PP_DEVICE_CPU, PP_DTYPE_BF16)->forward(&c, &err), PP_ERR_UNSUPPORTED);
    print_message("Cast float32 -> float16 through the adapter = pp_el_f16_from_f32; a host constant: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "lowp_node"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_patterns_round_trip),       cmocka_unit_test(test_round_against_double),
        cmocka_unit_test(test_f16c_is_portable),          cmocka_unit_test(test_convert),
        cmocka_unit_test(test_adapter_equals_f32_kernel),
        cmocka_unit_test(test_adapter_fresh_gradient),    cmocka_unit_test(test_adapter_cast_and_constants),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
