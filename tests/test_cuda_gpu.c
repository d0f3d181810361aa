/* Every cuda kernel against the cpu kernel of the same op, forward and backward, on
 * random inputs (one table; tolerances per op: TF32 GEMMs are looser). Skipped (cmocka
 * skip) where no GPU answers, so `ctest -L gpu` on a GPU host is where it runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <onnxpipe/kernels.h>
#include <stdlib.h>
#include <string.h>

typedef struct op_case {
    const char *op;
    int nin;
    int ranks[5];
    int64_t dims[5][4];
    int64_t out_dims[4];
    int out_rank;
    pp_attr attr[3];            /* up to 3 attributes, the list ending at a NULL name */
    float tol;                  /* max |cuda - cpu| / (1 + |cpu|) */
} op_case;

static pp_device *gpu, *cpu;

static int setup(void **state)
{
    (void)state;
    pp_error err = {0};
    pp_device_create(PP_DEVICE_CPU, 0, &cpu, &err);
    if (pp_device_create(PP_DEVICE_CUDA, 0, &gpu, &err) != PP_OK) gpu = NULL;
    if (!gpu) print_message("cuda device unavailable: %s\n", err.msg);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pp_device_destroy(gpu);
    pp_device_destroy(cpu);
    return 0;
}

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 16777216.f * 2.f - 1.f;
}

static pp_tensor host_tensor(int rank, const int64_t *dims, uint64_t *seed)
{
    pp_tensor t = {PP_DTYPE_F32, rank, {0}, NULL};
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    int64_t n = pp_tensor_numel(&t);
    float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = frand(seed);
    t.data = p;
    return t;
}

static pp_tensor to_gpu(const pp_tensor *h)
{
    pp_tensor d = *h;
    pp_error err = {0};
    assert_int_equal(pp_device_alloc(gpu, pp_tensor_nbytes(h) + 4, &d.data, &err), PP_OK);
    assert_int_equal(pp_device_copy_from_host(gpu, d.data, h->data, pp_tensor_nbytes(h), &err), PP_OK);
    return d;
}

static double max_rel(const float *a, const float *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));
        if (!(d <= m)) m = d;
    }
    return m;
}

/* Runs forward then backward (dy random, all input gradients asked) on both devices. */
static void run_case(const op_case *k)
{
    pp_error err = {0};
    const pp_kernel *kc = pp_kernel_find(k->op, PP_DEVICE_CPU, PP_DTYPE_F32);
    const pp_kernel *kg = pp_kernel_find(k->op, PP_DEVICE_CUDA, PP_DTYPE_F32);
    assert_non_null(kc);
    assert_non_null(kg);
    uint64_t seed = 42;
    pp_tensor hin[5], din[5], hgin[5], dgin[5];
    for (int i = 0; i < k->nin; i++) {
        hin[i] = host_tensor(k->ranks[i], k->dims[i], &seed);
        if (!strcmp(k->op, "Sqrt") || !strcmp(k->op, "Pow") || !strcmp(k->op, "Reciprocal") ||
            (!strcmp(k->op, "BatchNormalization") && i == 4)) /* positive; BatchNorm: the variance */
            for (int64_t j = 0; j < pp_tensor_numel(&hin[i]); j++) ((float *)hin[i].data)[j] = fabsf(((float *)hin[i].data)[j]) + 0.5f;
        din[i] = to_gpu(&hin[i]);
        hgin[i] = host_tensor(k->ranks[i], k->dims[i], &seed);
        dgin[i] = to_gpu(&hgin[i]);
    }
    pp_tensor hy = host_tensor(k->out_rank, k->out_dims, &seed), dy = to_gpu(&hy);
    pp_tensor hg = host_tensor(k->out_rank, k->out_dims, &seed), dg = to_gpu(&hg);
    int nattr = 0;
    while (nattr < 3 && k->attr[nattr].name) nattr++;
    pp_kernel_ctx cc = {.node = "n", .op_type = k->op, .opset = 17, .attrs = k->attr, .nattrs = nattr, .in = hin,
                        .nin = k->nin, .out = &hy, .nout = 1, .dev = cpu, .training = 1};
    pp_kernel_ctx cg = cc;
    cg.in = din;
    cg.out = &dy;
    cg.dev = gpu;
    size_t aux = kc->aux_bytes ? kc->aux_bytes(&cc) : 0, auxg = kg->aux_bytes ? kg->aux_bytes(&cg) : 0;
    cc.aux = aux ? malloc(aux) : NULL;
    if (auxg) assert_int_equal(pp_device_alloc(gpu, auxg, &cg.aux, &err), PP_OK);
    assert_int_equal(kc->forward(&cc, &err), PP_OK);
    if (kg->forward(&cg, &err) != PP_OK) fail_msg("%s", err.msg);
    const int64_t ny = pp_tensor_numel(&hy);
    float *back = malloc((size_t)ny * sizeof *back);
    assert_int_equal(pp_device_copy_to_host(gpu, back, dy.data, (size_t)ny * 4, &err), PP_OK);
    double fwd = max_rel(back, hy.data, ny), bwd = 0;
    if (kc->backward) {
        assert_int_equal(kc->backward(&cc, &hg, hgin, &err), PP_OK);
        if (kg->backward(&cg, &dg, dgin, &err) != PP_OK) fail_msg("%s", err.msg);
        for (int i = 0; i < k->nin; i++) {
            int64_t n = pp_tensor_numel(&hgin[i]);
            float *b = malloc((size_t)n * sizeof *b);
            assert_int_equal(pp_device_copy_to_host(gpu, b, dgin[i].data, (size_t)n * 4, &err), PP_OK);
            double d = max_rel(b, hgin[i].data, n);
            bwd = d > bwd ? d : bwd;
            free(b);
        }
    }
    print_message("%-22s forward max rel diff %.2e, backward %.2e (tol %.0e)\n", k->op, fwd, bwd, (double)k->tol);
    assert_true(fwd <= k->tol);
    assert_true(bwd <= k->tol);
    for (int i = 0; i < k->nin; i++) {
        free(hin[i].data);
        free(hgin[i].data);
        pp_device_free(gpu, din[i].data);
        pp_device_free(gpu, dgin[i].data);
    }
    free(hy.data);
    free(hg.data);
    free(back);
    free(cc.aux);
    pp_device_free(gpu, cg.aux);
    pp_device_free(gpu, dy.data);
    pp_device_free(gpu, dg.data);
}

static const op_case cases[] = {
    {"Add", 2, {3, 1}, {{8, 16, 32}, {32}}, {8, 16, 32}, 3, {{0}}, 1e-6f},
    {"Sub", 2, {2, 2}, {{16, 32}, {16, 32}}, {16, 32}, 2, {{0}}, 1e-6f},
    {"Mul", 2, {3, 3}, {{4, 1, 32}, {1, 8, 32}}, {4, 8, 32}, 3, {{0}}, 1e-6f},
    {"Div", 2, {2, 2}, {{16, 32}, {1, 32}}, {16, 32}, 2, {{0}}, 1e-4f},
    {"Pow", 2, {2, 1}, {{16, 32}, {1}}, {16, 32}, 2, {{0}}, 1e-5f},
    {"Sqrt", 1, {2}, {{16, 33}}, {16, 33}, 2, {{0}}, 1e-6f},
    {"Relu", 1, {2}, {{16, 33}}, {16, 33}, 2, {{0}}, 0.f},
    {"Sigmoid", 1, {2}, {{16, 33}}, {16, 33}, 2, {{0}}, 1e-6f},
    {"Tanh", 1, {2}, {{16, 33}}, {16, 33}, 2, {{0}}, 1e-6f},
    {"Erf", 1, {2}, {{16, 33}}, {16, 33}, 2, {{0}}, 1e-6f},
    {"Gelu", 1, {2}, {{16, 33}}, {16, 33}, 2, {{0}}, 1e-6f},
    {"MatMul", 2, {3, 2}, {{8, 128, 64}, {64, 96}}, {8, 128, 96}, 3, {{0}}, 2e-2f},
    {"MatMul", 2, {4, 4}, {{2, 4, 128, 64}, {2, 4, 64, 128}}, {2, 4, 128, 128}, 4, {{0}}, 2e-2f},
    {"Softmax", 1, {3}, {{4, 16, 128}}, {4, 16, 128}, 3, {{0}}, 1e-5f},
    {"LogSoftmax", 1, {2}, {{16, 1000}}, {16, 1000}, 2, {{0}}, 1e-5f},
    {"LayerNormalization", 3, {3, 1, 1}, {{4, 32, 256}, {256}, {256}}, {4, 32, 256}, 3, {{0}}, 1e-4f},
    {"Transpose", 1, {4}, {{2, 16, 4, 8}}, {8, 4, 16, 2}, 4, {{0}}, 0.f},
    {"Expand", 1, {2}, {{1, 32}}, {16, 32}, 2, {{0}}, 1e-6f},
    /* cuDNN Conv (TF32): 2-D grouped, padded, strided with bias; 1-D dilated */
    {"Conv", 3, {4, 4, 1}, {{2, 4, 9, 9}, {6, 2, 3, 3}, {6}}, {2, 6, 5, 5}, 4,
     {{.name = "group", .type = PP_ATTR_INT, .i = 2}, {.name = "pads", .type = PP_ATTR_INTS, .n = 4, .ints = (const int64_t[]){1, 1, 1, 1}},
      {.name = "strides", .type = PP_ATTR_INTS, .n = 2, .ints = (const int64_t[]){2, 2}}}, 2e-2f},
    {"Conv", 2, {3, 3}, {{2, 3, 16}, {5, 3, 3}}, {2, 5, 12}, 3,
     {{.name = "dilations", .type = PP_ATTR_INTS, .n = 1, .ints = (const int64_t[]){2}}}, 2e-2f},
    /* pooling: ceil_mode with asymmetric pads; average counting the pads */
    {"MaxPool", 1, {4}, {{2, 3, 9, 9}}, {2, 3, 5, 5}, 4,
     {{.name = "kernel_shape", .type = PP_ATTR_INTS, .n = 2, .ints = (const int64_t[]){3, 3}},
      {.name = "strides", .type = PP_ATTR_INTS, .n = 2, .ints = (const int64_t[]){2, 2}},
      {.name = "pads", .type = PP_ATTR_INTS, .n = 4, .ints = (const int64_t[]){0, 0, 1, 1}}}, 1e-6f},
    {"AveragePool", 1, {4}, {{2, 3, 8, 8}}, {2, 3, 4, 4}, 4,
     {{.name = "kernel_shape", .type = PP_ATTR_INTS, .n = 2, .ints = (const int64_t[]){3, 3}},
      {.name = "strides", .type = PP_ATTR_INTS, .n = 2, .ints = (const int64_t[]){2, 2}},
      {.name = "pads", .type = PP_ATTR_INTS, .n = 4, .ints = (const int64_t[]){1, 1, 1, 1}}}, 1e-6f},
    {"GlobalAveragePool", 1, {4}, {{2, 8, 7, 7}}, {2, 8, 1, 1}, 4, {{0}}, 1e-5f},
    /* cuDNN BatchNormalization, training statistics */
    {"BatchNormalization", 5, {4, 1, 1, 1, 1}, {{4, 8, 5, 5}, {8}, {8}, {8}, {8}}, {4, 8, 5, 5}, 4, {{0}}, 1e-4f},
};

static void test_ops(void **state)
{
    (void)state;
    if (!gpu) skip();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
}

/* fused optimizer and flat ops on the GPU against the cpu loops */
static void test_flat(void **state)
{
    (void)state;
    if (!gpu) skip();
    pp_error err = {0};
    const int64_t n = 100003;
    uint64_t seed = 7;
    pp_tensor p = host_tensor(1, (int64_t[]){n}, &seed), g = host_tensor(1, (int64_t[]){n}, &seed),
              st = host_tensor(1, (int64_t[]){2 * n}, &seed);
    for (int64_t i = 0; i < 2 * n; i++) ((float *)st.data)[i] = fabsf(((float *)st.data)[i]);
    for (int kind = PP_OPTIM_SGD; kind <= PP_OPTIM_LAMB; kind++) {
        pp_optim_hparams h = {(pp_optim_kind)kind, 1e-3f, 0.9f, 0, 0.9f, 0.999f, 1e-8f, 0.01f, 3};
        pp_tensor dp = to_gpu(&p), dg = to_gpu(&g), ds = to_gpu(&st);
        float *hp = malloc((size_t)n * 4), *hs = malloc((size_t)n * 8);
        memcpy(hp, p.data, (size_t)n * 4);
        memcpy(hs, st.data, (size_t)n * 8);
        assert_int_equal(pp_kernel_optim_update(cpu, &h, hp, g.data, hs, n, &err), PP_OK);
        assert_int_equal(pp_kernel_optim_update(gpu, &h, dp.data, dg.data, ds.data, n, &err), PP_OK);
        float *back = malloc((size_t)n * 4);
        assert_int_equal(pp_device_copy_to_host(gpu, back, dp.data, (size_t)n * 4, &err), PP_OK);
        double d = max_rel(back, hp, n);
        print_message("optimizer %d: max rel diff of parameters %.2e\n", kind, d);
        assert_true(d < 1e-5);
        free(back);
        free(hp);
        free(hs);
        pp_device_free(gpu, dp.data);
        pp_device_free(gpu, dg.data);
        pp_device_free(gpu, ds.data);
    }
    pp_tensor dg = to_gpu(&g);
    double sc = 0, sg = 0;
    assert_int_equal(pp_kernel_sumsq(cpu, g.data, n, &sc, &err), PP_OK);
    assert_int_equal(pp_kernel_sumsq(gpu, dg.data, n, &sg, &err), PP_OK);
    print_message("sumsq: cpu %.9g cuda %.9g\n", sc, sg);
    assert_true(fabs(sc - sg) <= 1e-9 * sc);
    int64_t bad = 0;
    float inf = INFINITY;
    assert_int_equal(pp_device_copy_from_host(gpu, (float *)dg.data + 777, &inf, 4, &err), PP_OK);
    assert_int_equal(pp_kernel_find_nonfinite(gpu, dg.data, n, &bad, &err), PP_OK);
    assert_int_equal(bad, 777);
    pp_device_free(gpu, dg.data);
    free(p.data);
    free(g.data);
    free(st.data);
}

/* Equal (int64, broadcast) and Cast (float32 -> int32, bfloat16) against the cpu, exactly */
static void test_dtypes(void **state)
{
    (void)state;
    if (!gpu) skip();
    pp_error err = {0};
    int64_t a[12], b[4] = {3, -1, 7, 0};
    for (int i = 0; i < 12; i++) a[i] = i % 5 - 1;
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = (float)i * 0.37f - 2.f;
    uint8_t eq_c[12] = {0}, eq_g[12];
    pp_tensor ha = {PP_DTYPE_I64, 2, {3, 4}, a}, hb = {PP_DTYPE_I64, 1, {4}, b}, he = {PP_DTYPE_BOOL, 2, {3, 4}, eq_c};
    pp_tensor da = to_gpu(&ha), db = to_gpu(&hb), de = to_gpu(&he);
    pp_tensor hin[2] = {ha, hb}, din[2] = {da, db};
    pp_kernel_ctx cc = {.node = "eq", .op_type = "Equal", .in = hin, .nin = 2, .out = &he, .nout = 1, .dev = cpu};
    pp_kernel_ctx cg = cc;
    cg.in = din;
    cg.out = &de;
    cg.dev = gpu;
    assert_int_equal(pp_kernel_find("Equal", PP_DEVICE_CPU, PP_DTYPE_F32)->forward(&cc, &err), PP_OK);
    if (pp_kernel_find("Equal", PP_DEVICE_CUDA, PP_DTYPE_F32)->forward(&cg, &err) != PP_OK) fail_msg("%s", err.msg);
    assert_int_equal(pp_device_copy_to_host(gpu, eq_g, de.data, sizeof eq_g, &err), PP_OK);
    assert_memory_equal(eq_c, eq_g, sizeof eq_g);
    const pp_dtype to[2] = {PP_DTYPE_I32, PP_DTYPE_BF16};
    for (int t = 0; t < 2; t++) {
        int32_t yc[12] = {0}, yg[12];
        pp_tensor hx = {PP_DTYPE_F32, 1, {12}, x}, hy = {to[t], 1, {12}, yc}, dx = to_gpu(&hx), dy = to_gpu(&hy);
        pp_attr at = {.name = "to", .type = PP_ATTR_INT, .i = to[t]};
        pp_kernel_ctx c1 = {.node = "cast", .op_type = "Cast", .attrs = &at, .nattrs = 1, .in = &hx, .nin = 1,
                            .out = &hy, .nout = 1, .dev = cpu};
        pp_kernel_ctx c2 = c1;
        c2.in = &dx;
        c2.out = &dy;
        c2.dev = gpu;
        assert_int_equal(pp_kernel_find("Cast", PP_DEVICE_CPU, PP_DTYPE_F32)->forward(&c1, &err), PP_OK);
        if (pp_kernel_find("Cast", PP_DEVICE_CUDA, PP_DTYPE_F32)->forward(&c2, &err) != PP_OK) fail_msg("%s", err.msg);
        assert_int_equal(pp_device_copy_to_host(gpu, yg, dy.data, pp_tensor_nbytes(&hy), &err), PP_OK);
        assert_memory_equal(yc, yg, pp_tensor_nbytes(&hy));
        pp_device_free(gpu, dx.data);
        pp_device_free(gpu, dy.data);
    }
    print_message("Equal int64 (3x4 vs 4) and Cast float32 -> int32, bfloat16: bit-identical to the cpu\n");
    pp_device_free(gpu, da.data);
    pp_device_free(gpu, db.data);
    pp_device_free(gpu, de.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_ops), cmocka_unit_test(test_flat),
                                       cmocka_unit_test(test_dtypes)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
