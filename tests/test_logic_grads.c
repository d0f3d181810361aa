/* Gradients of the comparisons, logic and more elementwise ops (op_list.h's section of that
 * name) on the cpu: every differentiable one against central finite differences away from its
 * kinks (kernel_check.h, which also checks that backward accumulates and honours fresh), and at
 * the kinks and ties against PyTorch 1.13's autograd (the values below were printed by
 * torch.abs / F.elu / F.hardswish / F.silu / F.hardsigmoid / torch.clamp / F.softplus / F.mish /
 * torch.maximum / torch.minimum / torch.fmod / F.prelu backward with a gradient of ones).
 * Forward against onnxruntime is test_logic_ops.sh's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "kernel_check.h"
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/op_info.h>

/* ---------------- finite differences, away from kinks ---------------- */

/* fractional parts in (0.1, 0.4) or (0.6, 0.9): no integer, half, clip bound (+-0.5) or +-3
 * within the step of 1e-2 */
static const float smooth[24] = {0.23f, -0.71f, 1.37f, -1.62f, 0.22f, -0.18f, 2.21f, -2.33f,
                                 0.86f, -1.14f, 0.13f, -0.64f, 1.72f, -0.27f, 0.38f, -1.36f,
                                 0.81f, -0.33f, 1.12f, -2.24f, 0.67f, -0.88f, 2.69f, -3.61f};
/* Mod's dividends and divisors (one per column): every a / b stays 0.02 away from an integer
 * when a and b move by the step, so fmod has no jump within it */
static const float smooth3[24] = {0.69f, -2.13f, 4.11f, -4.86f, 0.66f, -0.54f, 6.63f, -6.99f,
                                  2.58f, -3.42f, 0.39f, -1.92f, 5.16f, -0.81f, 1.14f, -4.08f,
                                  2.43f, -0.99f, 3.36f, -6.72f, 2.01f, -2.64f, 8.07f, -10.83f};
static const float divisors[4] = {1.35f, -1.25f, 1.3f, -1.45f};
static const float slopes[2] = {0.25f, -0.5f};
/* Max of 3's other inputs: every three values compared differ by 0.09 or more */
static const float row6[6] = {0.05f, -0.45f, 1.55f, -1.05f, 0.95f, -0.05f}, col4[4] = {0.6f, -0.95f, 1.95f, 0.3f};
static const float lo_half[1] = {-0.5f}, hi_half[1] = {0.5f};

#define T2(a, b) .rank = 2, .dims = {a, b}
#define T3(a, b, c) .rank = 3, .dims = {a, b, c}
#define T1(a) .rank = 1, .dims = {a}
#define T0 .rank = 0
#define SMOOTH .fill = KC_DATA, .data = smooth
#define U(nm, op_, ...)                                                                                               \
    {.name = nm, .op = op_, .nin = 1, .nout = 1, .in = {{T2(4, 6), SMOOTH}}, .out = {{T2(4, 6)}}, __VA_ARGS__}
#define A_F(nm, v) {.name = nm, .type = PP_ATTR_FLOAT, .f = v}

static const kc_case cases[] = {
    U("abs", "Abs"), U("sign", "Sign"), U("exp", "Exp"), U("sin", "Sin"), U("cos", "Cos"), U("floor", "Floor"),
    U("ceil", "Ceil"), U("round", "Round"), U("softplus", "Softplus"), U("mish", "Mish", .opset = 18),
    U("elu", "Elu", .attrs = {A_F("alpha", 0.7f)}, .nattrs = 1), U("hard_swish", "HardSwish"),
    U("swish", "Swish", .opset = 24), U("swish_alpha", "Swish", .opset = 24, .attrs = {A_F("alpha", 1.7f)}, .nattrs = 1),
    U("hard_sigmoid", "HardSigmoid", .attrs = {A_F("alpha", 0.3f), A_F("beta", 0.6f)}, .nattrs = 2),
    {.name = "log", .op = "Log", .nin = 1, .nout = 1, .in = {{T2(3, 5), .fill = KC_POSITIVE}}, .out = {{T2(3, 5)}}},
    {.name = "max_bcast", .op = "Max", .nin = 2, .nout = 1, .in = {{T2(4, 6), SMOOTH}, {T1(6)}}, .out = {{T2(4, 6)}}},
    {.name = "min_bcast", .op = "Min", .nin = 2, .nout = 1, .in = {{T2(6, 4), SMOOTH}, {T2(6, 1)}},
     .out = {{T2(6, 4)}}},
    {.name = "max_of_3", .op = "Max", .nin = 3, .nout = 1,
     .in = {{T2(4, 6), SMOOTH}, {T1(6), .fill = KC_DATA, .data = row6}, {T2(4, 1), .fill = KC_DATA, .data = col4}},
     .out = {{T2(4, 6)}}},
    {.name = "min_of_1", .op = "Min", .nin = 1, .nout = 1, .in = {{T2(4, 6), SMOOTH}}, .out = {{T2(4, 6)}}},
    {.name = "mod_fmod", .op = "Mod", .nin = 2, .nout = 1,
     .in = {{T2(6, 4), .fill = KC_DATA, .data = smooth3}, {T1(4), .fill = KC_DATA, .data = divisors}},
     .out = {{T2(6, 4)}}, .attrs = {{.name = "fmod", .type = PP_ATTR_INT, .i = 1}}, .nattrs = 1},
    {.name = "prelu_channels", .op = "PRelu", .nin = 2, .nout = 1,
     .in = {{T3(2, 2, 6), SMOOTH}, {T2(2, 1), .fill = KC_DATA, .data = slopes}}, .out = {{T3(2, 2, 6)}}},
    {.name = "clip_both", .op = "Clip", .nin = 3, .nout = 1,
     .in = {{T2(4, 6), SMOOTH}, {T0, .fill = KC_DATA, .data = lo_half, .nograd = 1},
            {T0, .fill = KC_DATA, .data = hi_half, .nograd = 1}},
     .out = {{T2(4, 6)}}},
    {.name = "clip_max_only", .op = "Clip", .nin = 3, .nout = 1,
     .in = {{T2(4, 6), SMOOTH}, {T0, .omitted = 1}, {T0, .fill = KC_DATA, .data = hi_half, .nograd = 1}},
     .out = {{T2(4, 6)}}},
};

static void test_gradients_match_finite_differences(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const double e = kc_check(&cases[i]);
        if (!(e >= 0 && e <= 2e-3)) {
            printf("FAILED %s: %.3g (tolerance 2e-3)\n", cases[i].name, e);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* ---------------- kinks and ties against PyTorch ---------------- */

/* Forward then backward of op on the cpu with dy = 1; the input gradients into g[k] (NULL: not
 * asked). Inputs are float32 of the given ranks / dims. */
static void grads(const char *op, const pp_attr *attrs, int nattrs, int nin, const pp_tensor *in,
                  const pp_tensor *out_shape, float *const *g)
{
    pp_error err = {0};
    pp_device *dev = NULL;
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &dev, &err), PP_OK);
    const pp_op o = pp_op_lookup("", op);
    const pp_kernel *k = pp_kernel_find(o, PP_DEVICE_CPU, PP_DTYPE_F32);
    assert_non_null(k);
    pp_tensor out = *out_shape, gy = *out_shape, gin[3];
    const int64_t n = pp_tensor_numel(&out);
    out.data = calloc((size_t)n + 1, sizeof(float));
    gy.data = calloc((size_t)n + 1, sizeof(float));
    for (int64_t i = 0; i < n; i++) ((float *)gy.data)[i] = 1.f;
    for (int i = 0; i < nin; i++) {
        gin[i] = in[i];
        gin[i].data = g[i];
        if (g[i]) memset(g[i], 0, pp_tensor_nbytes(&in[i]));
    }
    pp_kernel_ctx c = {.node = "kink", .op = o, .op_type = op, .opset = 18, .attrs = attrs, .nattrs = nattrs,
                       .in = in, .nin = nin, .out = &out, .nout = 1, .dev = dev};
    if (k->forward(&c, &err) != PP_OK || k->backward(&c, &gy, gin, &err) != PP_OK) fail_msg("%s: %s", op, err.msg);
    free(out.data);
    free(gy.data);
    pp_device_destroy(dev);
}

static pp_tensor vec(const float *v, int64_t n)
{
    pp_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = PP_DTYPE_F32;
    t.rank = 1;
    t.dims[0] = n;
    t.data = (void *)v;
    return t;
}

static int same(const char *what, const float *got, const float *want, int n)
{
    double worst = 0;
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs((double)got[i] - want[i]));
    printf("  %-28s %d gradients, max |onnxpipe - torch| = %.2g\n", what, n, worst);
    return worst <= 1e-6;
}

#define NK 8
static const float kinks[NK] = {-3.f, -1.f, -0.f, 0.f, 0.5f, 1.f, 3.f, 2.5f};

static void test_kinks_match_torch(void **state)
{
    (void)state;
    static const struct {
        const char *what, *op;
        pp_attr attrs[2];
        int nattrs;
        float want[NK];
    } unary[] = {
        {"Abs", "Abs", {{0}}, 0, {-1, -1, 0, 0, 1, 1, 1, 1}},
        {"Sign", "Sign", {{0}}, 0, {0}},
        {"Round", "Round", {{0}}, 0, {0}},
        {"Floor", "Floor", {{0}}, 0, {0}},
        {"Elu alpha 0.7", "Elu", {A_F("alpha", 0.7f)}, 1,
         {0.034851f, 0.257516f, 0.7f, 0.7f, 1, 1, 1, 1}},
        {"HardSwish", "HardSwish", {{0}}, 0, {-0.5f, 0.166667f, 0.5f, 0.5f, 0.666667f, 0.833333f, 1.5f, 1.333333f}},
        {"HardSigmoid as torch's", "HardSigmoid", {A_F("alpha", 1.f / 6.f), A_F("beta", 0.5f)}, 2,
         {0, 0.166667f, 0.166667f, 0.166667f, 0.166667f, 0.166667f, 0, 0.166667f}},
        {"Softplus", "Softplus", {{0}}, 0,
         {0.047426f, 0.268941f, 0.5f, 0.5f, 0.622459f, 0.731059f, 0.952574f, 0.924142f}},
        {"Mish", "Mish", {{0}}, 0, {-0.093393f, 0.059217f, 0.6f, 0.6f, 0.886424f, 1.049036f, 1.021107f, 1.04113f}},
        {"Swish (F.silu)", "Swish", {{0}}, 0,
         {-0.088104f, 0.072329f, 0.5f, 0.5f, 0.739961f, 0.927671f, 1.088104f, 1.099401f}},
        {"Swish alpha 1.7 (x * sigmoid(1.7 x))", "Swish", {A_F("alpha", 1.7f)}, 1,
         {-0.024658f, -0.067565f, 0.5f, 0.5f, 0.878874f, 1.067564f, 1.024658f, 1.044866f}},
    };
    int bad = 0;
    float g[NK];
    const pp_tensor x = vec(kinks, NK);
    for (size_t u = 0; u < sizeof unary / sizeof unary[0]; u++) {
        float *gp[1] = {g};
        grads(unary[u].op, unary[u].attrs, unary[u].nattrs, 1, &x, &x, gp);
        bad += !same(unary[u].what, g, unary[u].want, NK);
    }
    /* Clip to [-1, 1]: the gradient passes at both bounds (torch.clamp) */
    const float lo = -1.f, hi = 1.f, want_clip[NK] = {0, 1, 1, 1, 1, 1, 0, 0};
    pp_tensor cin[3] = {x, vec(&lo, 1), vec(&hi, 1)};
    cin[1].rank = cin[2].rank = 0;
    float *cg[3] = {g, NULL, NULL};
    grads("Clip", NULL, 0, 3, cin, &x, cg);
    bad += !same("Clip [-1, 1]", g, want_clip, NK);
    /* Max / Min: ties split the gradient equally between the two inputs */
    const float a[4] = {1, 2, -1, 0}, b[4] = {1, 1, 3, 0};
    const float max_a[4] = {0.5f, 1, 0, 0.5f}, max_b[4] = {0.5f, 0, 1, 0.5f};
    float ga[4], gb[4];
    pp_tensor ab[2] = {vec(a, 4), vec(b, 4)};
    float *gab[2] = {ga, gb};
    grads("Max", NULL, 0, 2, ab, &ab[0], gab);
    bad += !same("Max ties, a", ga, max_a, 4) + !same("Max ties, b", gb, max_b, 4);
    grads("Min", NULL, 0, 2, ab, &ab[0], gab);
    bad += !same("Min ties, a", ga, max_b, 4) + !same("Min ties, b", gb, max_a, 4);
    /* Max of 3 (ONNX's variadic form): a tie splits the gradient equally among the equal inputs */
    const float c3[4] = {1, 0, 3, -1}, max3_a[4] = {1.f / 3, 1, 0, 0.5f}, max3_b[4] = {1.f / 3, 0, 0.5f, 0.5f},
                max3_c[4] = {1.f / 3, 0, 0.5f, 0};
    float gc[4];
    pp_tensor abc[3] = {vec(a, 4), vec(b, 4), vec(c3, 4)};
    float *gabc[3] = {ga, gb, gc};
    grads("Max", NULL, 0, 3, abc, &abc[0], gabc);
    bad += !same("Max of 3 ties, a", ga, max3_a, 4) + !same("Max of 3 ties, b", gb, max3_b, 4) +
           !same("Max of 3 ties, c", gc, max3_c, 4);
    /* Mod fmod=1: d/da = 1, d/db = -trunc(a / b) */
    const float ma[5] = {5.5f, -5.5f, 5.5f, -5.5f, 3.f}, mb[5] = {2, 2, -2, -2, 1.5f};
    const float want_ma[5] = {1, 1, 1, 1, 1}, want_mb[5] = {-2, 2, 2, -2, -2};
    float gma[5], gmb[5];
    pp_tensor mab[2] = {vec(ma, 5), vec(mb, 5)};
    float *gm[2] = {gma, gmb};
    const pp_attr fmod = {.name = "fmod", .type = PP_ATTR_INT, .i = 1};
    grads("Mod", &fmod, 1, 2, mab, &mab[0], gm);
    bad += !same("Mod fmod=1, a", gma, want_ma, 5) + !same("Mod fmod=1, b", gmb, want_mb, 5);
    /* PRelu x [2, 3] with a slope per row [2, 1]: at x = 0 dx is the slope, dslope 0 */
    const float px[6] = {-2, 0, 3, -1, 0, 2}, pw[2] = {0.25f, -0.5f};
    const float want_px[6] = {0.25f, 0.25f, 1, -0.5f, -0.5f, 1}, want_pw[2] = {-2, -1};
    float gpx[6], gpw[2];
    pp_tensor pin[2] = {vec(px, 6), vec(pw, 2)};
    pin[0].rank = pin[1].rank = 2;
    pin[0].dims[0] = 2, pin[0].dims[1] = 3;
    pin[1].dims[0] = 2, pin[1].dims[1] = 1;
    float *gp2[2] = {gpx, gpw};
    grads("PRelu", NULL, 0, 2, pin, &pin[0], gp2);
    bad += !same("PRelu, x", gpx, want_px, 6) + !same("PRelu, slope", gpw, want_pw, 2);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_gradients_match_finite_differences),
                                       cmocka_unit_test(test_kinks_match_torch)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
