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
        /* clipped (gradients x 0.5) and, on the gpu, read from device memory as a graph would */
        const pp_optim_step ts = pp_optim_step_at(&h, 0.5f);
        void *dts;
        assert_int_equal(pp_device_alloc(gpu, sizeof ts, &dts, &err), PP_OK);
        assert_int_equal(pp_device_copy_from_host(gpu, dts, &ts, sizeof ts, &err), PP_OK);
        assert_int_equal(pp_kernel_optim_update(cpu, &h, &ts, hp, g.data, hs, n, &err), PP_OK);
        assert_int_equal(pp_kernel_optim_update(gpu, &h, dts, dp.data, dg.data, ds.data, n, &err), PP_OK);
        pp_device_free(gpu, dts);
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
    /* 16-bit conversions give the cpu's bits */
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
    /* the step's sums on the device: two losses (the second NaN) into acc, and the decision
     * from two squares (t 1: one is Inf, so the step is skipped), as the cpu's */
    enum { ACC = 0, TERMS = 3, NONE = 5, NDOUBLE = 6 };
    double h[NDOUBLE] = {0}, back_acc[3];
    const float loss[2] = {2.5f, NAN}, weight = 0.25f;
    void *dd, *dstep;
    assert_int_equal(pp_device_alloc(gpu, NDOUBLE * sizeof(double) + 3 * sizeof(float), &dd, &err), PP_OK);
    assert_int_equal(pp_device_alloc(gpu, sizeof(pp_optim_step), &dstep, &err), PP_OK);
    double *gd = dd;
    float *gl = (float *)(gd + NDOUBLE);
    assert_int_equal(pp_device_memset(gpu, dd, 0, NDOUBLE * sizeof(double), &err), PP_OK);
    assert_int_equal(pp_device_copy_from_host(gpu, gl, loss, sizeof loss, &err), PP_OK);
    assert_int_equal(pp_device_copy_from_host(gpu, gl + 2, &weight, sizeof weight, &err), PP_OK);
    for (int m = 0; m < 2; m++) {
        assert_int_equal(pp_kernel_loss_add(cpu, h + ACC, &loss[m], &weight, 3 + m, &err), PP_OK);
        assert_int_equal(pp_kernel_loss_add(gpu, gd + ACC, gl + m, gl + 2, 3 + m, &err), PP_OK);
    }
    assert_int_equal(pp_device_copy_to_host(gpu, back_acc, gd + ACC, sizeof back_acc, &err), PP_OK);
    print_message("loss_add: cpu %g, %g bad (first %g); cuda %g, %g bad (first %g)\n", h[0], h[1], h[2], back_acc[0],
                  back_acc[1], back_acc[2]);
    assert_true(isnan(back_acc[0]) && back_acc[1] == 1 && back_acc[2] == 4 && h[1] == 1 && h[2] == 4);
    for (int t = 0; t < 2; t++) {
        pp_optim_step hs = {0}, gs = {0};
        assert_int_equal(pp_kernel_sumsq(cpu, g.data, n, &h[TERMS], &err), PP_OK);
        h[TERMS + 1] = t ? INFINITY : 1.0;
        assert_int_equal(pp_device_copy_from_host(gpu, gd + TERMS, h + TERMS, 2 * sizeof(double), &err), PP_OK);
        assert_int_equal(pp_kernel_optim_decide(cpu, h + TERMS, 2, h + NONE, 1.0f, &hs, &err), PP_OK);
        assert_int_equal(pp_kernel_optim_decide(gpu, gd + TERMS, 2, gd + NONE, 1.0f, dstep, &err), PP_OK);
        assert_int_equal(pp_device_copy_to_host(gpu, &gs, dstep, sizeof gs, &err), PP_OK);
        print_message("optim_decide (%s): cpu scale %.9g skip %d, cuda scale %.9g skip %d\n",
                      t ? "an Inf square" : "finite", hs.grad_scale, hs.skip, gs.grad_scale, gs.skip);
        assert_true(hs.grad_scale == gs.grad_scale && hs.skip == gs.skip && hs.skip == t);
    }
    pp_device_free(gpu, dstep);
    pp_device_free(gpu, dd);
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
