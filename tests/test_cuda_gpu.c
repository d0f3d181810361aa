/* Every cuda kernel against the cpu kernel of the same op, forward and backward, on the
 * cases of cuda_cases.h (tolerances per case: TF32 GEMMs are looser), and the fused
 * optimizer and flat ops against the cpu loops. Skipped (cmocka skip) where no GPU
 * answers, so `ctest -L gpu` on a GPU host is where it runs; test_cuda_cover checks the
 * case table's coverage and runs its cases on the cpu everywhere. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <onnxpipe/kernels.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_cases.h"

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

static pp_tensor host_tensor(int rank, const int64_t *dims, uint64_t *seed)
{
    pp_tensor t = {PP_DTYPE_F32, rank, {0}, NULL};
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    int64_t n = pp_tensor_numel(&t);
    float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = case_frand(seed);
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

/* every case of cuda_cases.h: cuda against the cpu, forward and backward */
static void test_ops(void **state)
{
    (void)state;
    if (!gpu) skip();
    int failed = 0;
    for (int i = 0; i < NCASES; i++) failed += case_run(&cases[i], cpu, gpu) != 0;
    print_message("%d of %d cases differ from the cpu beyond their tolerance or failed\n", failed, NCASES);
    assert_int_equal(failed, 0);
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
    /* 16-bit conversions give the cpu's bits; unscale scales and flags the Inf at 777 */
    const pp_dtype lp[2] = {PP_DTYPE_BF16, PP_DTYPE_F16};
    uint16_t *hc = malloc((size_t)n * 2), *gc = malloc((size_t)n * 2);
    void *d16;
    assert_int_equal(pp_device_alloc(gpu, (size_t)n * 2, &d16, &err), PP_OK);
    for (int t = 0; t < 2; t++) {
        assert_int_equal(pp_kernel_convert(cpu, hc, lp[t], g.data, PP_DTYPE_F32, n, &err), PP_OK);
        assert_int_equal(pp_kernel_convert(gpu, d16, lp[t], dg.data, PP_DTYPE_F32, n, &err), PP_OK);
        assert_int_equal(pp_device_copy_to_host(gpu, gc, d16, (size_t)n * 2, &err), PP_OK);
        gc[777] = hc[777];          /* the Inf written above on the GPU only */
        const int same = !memcmp(hc, gc, (size_t)n * 2);
        print_message("convert float32 -> %s: cuda %s the cpu's bits\n", pp_dtype_name(lp[t]), same ? "=" : "!=");
        assert_true(same);
    }
    int found = 0;
    assert_int_equal(pp_kernel_unscale(gpu, dg.data, n, 0.5f, &found, &err), PP_OK);
    assert_int_equal(found, 1);
    float v = 0;
    assert_int_equal(pp_device_copy_to_host(gpu, &v, dg.data, 4, &err), PP_OK);
    assert_true(v == ((float *)g.data)[0] * 0.5f);
    pp_device_free(gpu, d16);
    free(hc);
    free(gc);
    pp_device_free(gpu, dg.data);
    free(p.data);
    free(g.data);
    free(st.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_ops), cmocka_unit_test(test_flat)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
