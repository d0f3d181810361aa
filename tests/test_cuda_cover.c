/* Runs without a GPU (and is never skipped in a CUDA build): every op of the cuda kernel
 * table has a case in cuda_cases.h, every case names a cuda op, and every case runs on
 * the cpu kernel, forward and backward with only the saved tensors, so that the GPU
 * suite (test_cuda_gpu) meets no malformed case on a GPU host. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/device.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/op_info.h>

#include "cuda_cases.h"

/* a case of op in compute dtype cd */
static int has_case(const char *op, pp_dtype cd)
{
    for (int i = 0; i < NCASES; i++)
        if (!strcmp(cases[i].op, op) && case_compute(&cases[i]) == cd) return 1;
    return 0;
}

/* the cuda backend's table, with or without a GPU */
static void test_every_cuda_op_has_a_case(void **state)
{
    (void)state;
    if (!pp_backend_get(PP_DEVICE_CUDA)) {
        print_message("no cuda backend in this build\n");
        skip();
    }
    int n = 0, missing = 0;
    for (int op = 0; op < PP_OP_COUNT; op++) {
        if (!pp_kernel_find((pp_op)op, PP_DEVICE_CUDA, PP_DTYPE_F32)) continue;
        n++;
        if (!has_case(pp_op_get((pp_op)op)->name, PP_DTYPE_F32)) {
            print_message("cuda op %s has no case in tests/cuda_cases.h\n", pp_op_get((pp_op)op)->name);
            missing++;
        }
    }
    /* the native 16-bit kernels (a filled slot of a 16-bit table; the others are the adapter) */
    const pp_backend *b = pp_backend_get(PP_DEVICE_CUDA);
    int native = 0;
    for (int t = 0; t < b->ntables; t++)
        for (int op = 0; b->tables[t].dtype != PP_DTYPE_F32 && op < PP_OP_COUNT; op++) {
            if (!b->tables[t].kernels[op].forward) continue;
            native++;
            if (!has_case(pp_op_get((pp_op)op)->name, b->tables[t].dtype)) {
                print_message("cuda %s %s has no case in tests/cuda_cases.h\n", pp_dtype_name(b->tables[t].dtype),
                              pp_op_get((pp_op)op)->name);
                missing++;
            }
        }
    int stale = 0;
    for (int i = 0; i < NCASES; i++)
        if (!pp_kernel_find(case_op(&cases[i]), PP_DEVICE_CUDA, PP_DTYPE_F32)) {
            print_message("case %d names %s, which has no cuda kernel\n", i, cases[i].op);
            stale++;
        }
    print_message("%d cuda kernels and %d native 16-bit ones, %d cases: %d without a case, %d cases without a cuda op\n",
                  n, native, NCASES, missing, stale);
    assert_int_equal(missing, 0);
    assert_int_equal(stale, 0);
}

static void test_cases_run_on_cpu(void **state)
{
    (void)state;
    pp_error err = {0};
    pp_device *cpu = NULL;
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &cpu, &err), PP_OK);
    int failed = 0;
    for (int i = 0; i < NCASES; i++) failed += case_run(&cases[i], cpu, NULL) != 0;
    print_message("%d cases ran on the cpu kernels, %d failed\n", NCASES, failed);
    pp_device_destroy(cpu);
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_cuda_op_has_a_case),
                                       cmocka_unit_test(test_cases_run_on_cpu)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
