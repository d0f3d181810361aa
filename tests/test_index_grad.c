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

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_gradients)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
