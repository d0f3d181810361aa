/* RMSNormalization, InstanceNormalization, GroupNormalization, RotaryEmbedding, Attention,
 * Resize and Einsum on the cpu, through their cases in cuda_cases.h: backward against central finite
 * differences of L = sum(gY * Y), and forward against onnxruntime (tests/ref/nn_more_ort.py
 * runs the same one-node models on the inputs dumped here and compares with our outputs).
 * Prints the largest differences. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <onnxpipe/device.h>
#include <onnxpipe/kernels.h>

#include "cuda_cases.h"

static const char *const mine[] = {"RMSNormalization", "InstanceNormalization", "GroupNormalization",
                                   "RotaryEmbedding", "Attention", "Resize",
                                   "Einsum"};

static int is_mine(const op_case *k)
{
    for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++)
        if (!strcmp(k->op, mine[i])) return 1;
    return 0;
}

typedef struct run {
    const op_case *k;
    const pp_kernel *kern;
    pp_kernel_ctx c;
    pp_tensor in[CASE_MAX_IN], out[CASE_MAX_OUT], gin[CASE_MAX_IN], gout[CASE_MAX_OUT];
    void *aux;
} run;

/* forward; L = sum(gY * Y) in double */
static double forward(run *r)
{
    pp_error err = {0};
    assert_int_equal(r->kern->forward(&r->c, &err), PP_OK);
    double L = 0;
    for (int64_t e = 0; e < pp_tensor_numel(&r->out[0]); e++)
        L += (double)((float *)r->gout[0].data)[e] * ((float *)r->out[0].data)[e];
    return L;
}

/* the largest |finite difference - gradient| / (1 + |gradient|) over the inputs that carry one */
static double check_grads(run *r)
{
    const pp_op_info *info = pp_op_get(r->c.op);
    pp_error err = {0};
    forward(r);
    for (int i = 0; i < r->k->nin; i++)
        if (r->gin[i].data) memset(r->gin[i].data, 0, pp_tensor_nbytes(&r->gin[i]));
    assert_int_equal(r->kern->backward(&r->c, r->gout, r->gin, &err), PP_OK);
    double worst = 0;
    const float h = 1e-2f;
    for (int i = 0; i < r->k->nin; i++) {
        if (!r->gin[i].data || (info->nondiff >> i & 1)) continue;
        float *x = r->in[i].data;
        for (int64_t e = 0; e < pp_tensor_numel(&r->in[i]); e++) {
            const float x0 = x[e];
            x[e] = x0 + h;
            const double lp = forward(r);
            x[e] = x0 - h;
            const double lm = forward(r);
            x[e] = x0;
            const double fd = (lp - lm) / (2.0 * h), g = ((float *)r->gin[i].data)[e];
            const double d = fabs(fd - g) / (1.0 + fabs(g));
            if (!(d <= worst)) worst = d;
        }
    }
    forward(r);
    return worst;
}

static void dump_tensor(FILE *j, const char *dir, int n, const char *what, int i, const pp_tensor *t)
{
    char path[512];
    snprintf(path, sizeof path, "%s/case%d_%s%d.bin", dir, n, what, i);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(t->data, 1, pp_tensor_nbytes(t), f), pp_tensor_nbytes(t));
    fclose(f);
    fprintf(j, "{\"dtype\": %d, \"dims\": [", (int)t->dtype);
    for (int d = 0; d < t->rank; d++) fprintf(j, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
    fprintf(j, "], \"file\": \"%s\"}", path);
}

/* the case, its inputs and our output as dir/case<n>.json and raw files */
static void dump_case(const run *r, const char *dir, int n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/case%d.json", dir, n);
    FILE *j = fopen(path, "w");
    assert_non_null(j);
    fprintf(j, "{\"op\": \"%s\", \"opset\": %d, \"attrs\": [", r->k->op, r->k->opset);
    for (int a = 0; a < r->c.nattrs; a++) {
        const pp_attr *at = &r->k->attr[a];
        fprintf(j, "%s{\"name\": \"%s\", ", a ? ", " : "", at->name);
        if (at->type == PP_ATTR_INT) fprintf(j, "\"i\": %lld}", (long long)at->i);
        else if (at->type == PP_ATTR_FLOAT) fprintf(j, "\"f\": %.9g}", (double)at->f);
        else if (at->type == PP_ATTR_STRING) fprintf(j, "\"s\": \"%s\"}", at->s);
        else fail_msg("attribute %s: type not dumped", at->name);
    }
    fprintf(j, "], \"inputs\": [");
    for (int i = 0; i < r->k->nin; i++) {
        if (i) fprintf(j, ", ");
        dump_tensor(j, dir, n, "in", i, &r->in[i]);
    }
    fprintf(j, "], \"output\": ");
    dump_tensor(j, dir, n, "out", 0, &r->out[0]);
    fprintf(j, "}\n");
    fclose(j);
}

static void test_cases(void **state)
{
    (void)state;
    pp_error err = {0};
    pp_device *cpu = NULL;
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &cpu, &err), PP_OK);
    const char *bd = getenv("BUILD_DIR"), *py = getenv("PY"), *src = getenv("SRC_DIR");
    char dir[400];
    snprintf(dir, sizeof dir, "%s/test-out/nn_more", bd ? bd : ".");
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    assert_int_equal(system(cmd), 0);
    int ran = 0, bad = 0;
    for (int n = 0; n < NCASES; n++) {
        const op_case *k = &cases[n];
        if (!is_mine(k)) continue;
        assert_int_equal(case_run(k, cpu, NULL), 0);   /* as test_cuda_cover runs it */
        run r = {.k = k};
        uint64_t seed = 7;
        const pp_op op = pp_op_lookup("", k->op);
        r.kern = pp_kernel_find(op, PP_DEVICE_CPU, PP_DTYPE_F32);
        assert_non_null(r.kern);
        for (int i = 0; i < k->nin; i++) {
            r.in[i] = case_input(&k->in[i], &seed);
            r.gin[i] = case_tensor(k->in[i].dtype, k->in[i].rank, k->in[i].dims);
            if (!case_has_grad(&k->in[i])) {
                free(r.gin[i].data);
                r.gin[i].data = NULL;
            }
        }
        r.out[0] = case_tensor(k->out[0].dtype, k->out[0].rank, k->out[0].dims);
        r.gout[0] = case_tensor(k->out[0].dtype, k->out[0].rank, k->out[0].dims);
        for (int64_t e = 0; e < pp_tensor_numel(&r.gout[0]); e++) ((float *)r.gout[0].data)[e] = case_frand(&seed);
        r.c = (pp_kernel_ctx){.node = "n", .op = op, .op_type = k->op, .opset = k->opset ? k->opset : 17,
                              .attrs = k->attr, .in = r.in, .nin = k->nin, .out = r.out, .nout = k->nout,
                              .dev = cpu, .training = 1};
        while (r.c.nattrs < 4 && k->attr[r.c.nattrs].name) r.c.nattrs++;
        const size_t aux = r.kern->aux_bytes ? r.kern->aux_bytes(&r.c) : 0;
        r.aux = r.c.aux = aux ? malloc(aux) : NULL;
        const double d = check_grads(&r);
        printf("%-22s opset %d case %d: backward vs finite differences max rel diff %.2e\n", k->op, k->opset, n, d);
        bad += !(d <= 1e-3);
        dump_case(&r, dir, n);
        for (int i = 0; i < k->nin; i++) {
            free(r.in[i].data);
            free(r.gin[i].data);
        }
        free(r.out[0].data);
        free(r.gout[0].data);
        free(r.aux);
        ran++;
    }
    pp_device_destroy(cpu);
    assert_true(ran >= 10);
    assert_int_equal(bad, 0);
    if (!py || !src) {
        print_message("PY or SRC_DIR not set: the onnxruntime comparison is skipped\n");
        return;
    }
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/ref/nn_more_ort.py' '%s'", py, src, dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cases)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
