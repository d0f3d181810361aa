/* Backward of the indexing, padding, tiling, cumulative and extra reduction ops on the cpu
 * against central finite differences of L = sum(dy * y), over their cases in the one case
 * table (tests/cuda_cases.h); forward against onnxruntime is tests/test_index_ops.sh. Also
 * checks that backward adds into the gradient it is given. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cuda_cases.h"

static const char *const ops[] = {"CumSum",    "Trilu",          "Tile",      "Pad",       "GatherElements",
                                  "GatherND",  "ScatterND",      "ScatterElements", "ReduceMax", "ReduceMin",
                                  "ReduceProd", "TopK"};

static int is_ours(const char *op)
{
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(ops[i], op)) return 1;
    return 0;
}

/* sum over outputs of dy * y after a forward call on the cpu */
static double loss(const op_case *k, case_side *s, const void *const *host_in)
{
    pp_error err = {0};
    const pp_op op = pp_op_lookup("", k->op);
    pp_kernel_ctx c = {.node = "n", .op = op, .op_type = k->op, .opset = k->opset ? k->opset : 17, .attrs = k->attr,
                       .in = s->in, .nin = k->nin, .host_in = host_in, .out = s->out, .nout = k->nout,
                       .dev = s->dev, .training = 1, .aux = s->aux};
    while (c.nattrs < 4 && k->attr[c.nattrs].name) c.nattrs++;
    assert_int_equal(s->k->forward(&c, &err), PP_OK);
    double l = 0;
    for (int o = 0; o < k->nout; o++)
        for (int64_t e = 0; s->gout[o].data && e < pp_tensor_numel(&s->out[o]); e++)
            l += case_load(PP_DTYPE_F32, s->gout[o].data, e) * case_load(PP_DTYPE_F32, s->out[o].data, e);
    return l;
}

static void check_case(const op_case *k, pp_device *cpu)
{
    assert_int_equal(case_run(k, cpu, NULL), 0);   /* as test_cuda_cover runs it */
    uint64_t seed = 7;
    case_side h = {.dev = cpu, .k = pp_kernel_find(pp_op_lookup("", k->op), PP_DEVICE_CPU, PP_DTYPE_F32)};
    assert_non_null(h.k);
    const void *host_in[CASE_MAX_IN] = {0};
    pp_tensor g0[CASE_MAX_IN];
    for (int i = 0; i < k->nin; i++) {
        h.in[i] = case_input(&k->in[i], &seed);
        if (k->in[i].fill == FILL_CONST) host_in[i] = h.in[i].data;
        in_spec gs = k->in[i];
        gs.fill = FILL_RAND;
        h.gin[i] = case_input(&gs, &seed);
        g0[i] = case_input(&gs, &seed);
        memcpy(g0[i].data, h.gin[i].data, pp_tensor_nbytes(&h.gin[i]));
        if (!case_has_grad(&k->in[i])) {
            free(h.gin[i].data);
            h.gin[i].data = NULL;
        }
    }
    for (int o = 0; o < k->nout; o++) {
        h.out[o] = case_tensor(k->out[o].dtype, k->out[o].rank, k->out[o].dims);
        h.gout[o] = case_tensor(k->out[o].dtype, k->out[o].rank, k->out[o].dims);
        if (!case_is_float(k->out[o].dtype)) {
            free(h.gout[o].data);
            h.gout[o].data = NULL;
        }
        for (int64_t e = 0; h.gout[o].data && e < pp_tensor_numel(&h.gout[o]); e++)
            case_store(PP_DTYPE_F32, h.gout[o].data, e, case_frand(&seed));
    }
    assert_int_equal(case_calls(k, &h, host_in), 0);
    double worst = 0;
    int checked = 0;
    const float eps = 1e-3f;
    for (int i = 0; i < k->nin; i++) {
        if (!h.gin[i].data) continue;
        float *x = h.in[i].data;
        const int64_t n = pp_tensor_numel(&h.in[i]), stride = n > 97 ? n / 97 : 1;
        for (int64_t e = 0; e < n; e += stride) {
            const float keep = x[e];
            x[e] = keep + eps;
            const double lp = loss(k, &h, host_in);
            x[e] = keep - eps;
            const double lm = loss(k, &h, host_in);
            x[e] = keep;
            const double fd = (lp - lm) / (2.0 * (double)eps);
            const double an = (double)((float *)h.gin[i].data)[e] - (double)((float *)g0[i].data)[e];
            const double d = fabs(fd - an) / (1.0 + fabs(an));
            if (d > worst) worst = d;
            checked++;
        }
    }
    printf("%-16s opset %2d: %3d gradient elements, max |finite diff - backward| / (1 + |backward|) = %.2e\n", k->op,
           k->opset ? k->opset : 17, checked, worst);
    assert_true(worst < 5e-3);
    for (int i = 0; i < k->nin; i++) {
        free(h.in[i].data);
        free(h.gin[i].data);
        free(g0[i].data);
    }
    for (int o = 0; o < k->nout; o++) {
        free(h.out[o].data);
        free(h.gout[o].data);
    }
    if (h.aux) pp_device_free(cpu, h.aux);
}

static void test_gradients(void **state)
{
    (void)state;
    pp_device *cpu = NULL;
    pp_error err = {0};
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &cpu, &err), PP_OK);
    int n = 0;
    for (int i = 0; i < NCASES; i++)
        if (is_ours(cases[i].op)) {
            check_case(&cases[i], cpu);
            n++;
        }
    assert_true(n >= (int)(sizeof ops / sizeof ops[0]));
    pp_device_destroy(cpu);
}

/* Backward of a reduction of each row of x [rows, 4] (axis 1, keepdims) with dy = 1 into dx = 0. */
static void reduce_rows(const char *op, const float *x, int rows, float *dx, pp_device *cpu)
{
    const pp_attr attrs[] = {{.name = "axes", .type = PP_ATTR_INTS, .n = 1, .ints = (const int64_t[]){1}}};
    float y[4], dy[4] = {1, 1, 1, 1};
    pp_tensor in = {.dtype = PP_DTYPE_F32, .rank = 2, .dims = {rows, 4}, .data = (void *)x};
    pp_tensor out = {.dtype = PP_DTYPE_F32, .rank = 2, .dims = {rows, 1}, .data = y};
    pp_tensor gy = out, gx = in;
    gy.data = dy;
    gx.data = dx;
    memset(dx, 0, (size_t)rows * 4 * sizeof *dx);
    const pp_op o = pp_op_lookup("", op);
    const pp_kernel *k = pp_kernel_find(o, PP_DEVICE_CPU, PP_DTYPE_F32);
    pp_kernel_ctx c = {.node = "n", .op = o, .op_type = op, .opset = 17, .attrs = attrs, .nattrs = 1, .in = &in,
                       .nin = 1, .out = &out, .nout = 1, .dev = cpu};
    pp_error err = {0};
    assert_int_equal(k->forward(&c, &err), PP_OK);
    assert_int_equal(k->backward(&c, &gy, &gx, &err), PP_OK);
}

/* Max / Min split dy among ties (torch.amax); Prod is exact with one zero and gives 0 with two. */
static void test_ties_and_zeros(void **state)
{
    (void)state;
    pp_device *cpu = NULL;
    pp_error err = {0};
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &cpu, &err), PP_OK);
    float dx[12];
    const float ties[] = {1, 3, 3, 2, -1, -1, 0, -1, 5, 5, 5, 5};
    const float want_max[] = {0, .5f, .5f, 0, 0, 0, 1, 0, .25f, .25f, .25f, .25f};
    const float want_min[] = {1, 0, 0, 0, 1.f / 3, 1.f / 3, 0, 1.f / 3, .25f, .25f, .25f, .25f};
    const float zeros[] = {0, 2, 3, 4, 0, 0, 3, 1, 2, 3, 4, 0.5f};
    const float want_prod[] = {24, 0, 0, 0, 0, 0, 0, 0, 6, 4, 3, 24};
    const struct { const char *op; const float *x, *want; } rows[] = {
        {"ReduceMax", ties, want_max}, {"ReduceMin", ties, want_min}, {"ReduceProd", zeros, want_prod}};
    for (int r = 0; r < 3; r++) {
        reduce_rows(rows[r].op, rows[r].x, 3, dx, cpu);
        double worst = 0;
        for (int i = 0; i < 12; i++) worst = fmax(worst, fabs(dx[i] - rows[r].want[i]));
        printf("%-10s gradient of 3 rows with ties / zeros: max |dx - expected| = %.2e\n", rows[r].op, worst);
        assert_true(worst < 1e-6);
    }
    pp_device_destroy(cpu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_gradients), cmocka_unit_test(test_ties_and_zeros)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
