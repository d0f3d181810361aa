/* cuBLAS and cuBLASLt are loaded by the first CUDA device, not at process start
 * (kernels/cuda/cublas_api.h): this process, linked like the onnxpipe command, has neither
 * library mapped until pp_cublas_load; the load resolves every function of the table from the
 * toolkit's real libraries, and a call through it reaches the library (cublasGetStatusString
 * needs no GPU: its text for CUBLAS_STATUS_NOT_INITIALIZED). CUDA builds only; runs without a GPU. Prints the resident memory the load adds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "cublas_api.h"

/* 1 if a file whose name contains name is mapped into this process */
static int mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    assert_non_null(f);
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

static void loads_on_first_use(void **state)
{
    (void)state;
    assert_false(mapped("libcublas"));
    long before = rss_kib();
    pp_error err = {0};
    assert_int_equal(pp_cublas_load(&err), PP_OK);
    assert_true(mapped("/libcublasLt.so."));
    assert_true(mapped("/libcublas.so."));
    print_message("cuBLAS + cuBLASLt loaded: resident memory %ld -> %ld KiB\n", before, rss_kib());
    const pp_cublas_api *cb = pp_cublas();
    int n = 0;
#define PP_CHECK_RESOLVED(f)                                          \
    assert_non_null(cb->f);                                           \
    n++;
#define PP_CHECK_RESOLVED_TYPED(f, type) PP_CHECK_RESOLVED(f)
    PP_CUBLAS_FUNCS(PP_CHECK_RESOLVED, PP_CHECK_RESOLVED_TYPED)
    PP_CUBLASLT_FUNCS(PP_CHECK_RESOLVED)
#undef PP_CHECK_RESOLVED_TYPED
#undef PP_CHECK_RESOLVED
    print_message("%d functions resolved\n", n);
    assert_int_equal(n, 23);
    assert_string_equal(cb->cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED), "the library was not initialized");
    /* once per process: the second call finds the same table */
    assert_int_equal(pp_cublas_load(&err), PP_OK);
    assert_ptr_equal(pp_cublas(), cb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(loads_on_first_use)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
