/* The gradients of ReduceMax / ReduceMin / ReduceProd where finite differences cannot look
 * (test_op_cases skips kinks): Max and Min split dy equally among tied elements (torch.amax),
 * Prod gives the product of the others with one zero and 0 with two. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/device.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/op_info.h>

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
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_ties_and_zeros)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
