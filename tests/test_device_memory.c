/* The device's memory counters (kernels/device.c) on every backend this machine can
 * open: a hand-worked case where the peak of the total is not the sum of the category
 * peaks, a random sequence of allocations and frees checked after every call against
 * a brute-force recount, reset_peak, a bad category, and four threads at once. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <onnxpipe/backend/device_backend.h>
#include <onnxpipe/device.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The devices to test: the cpu always, cuda where a GPU answers. */
static int open_devices(pp_device **dev)
{
    int n = 0;
    pp_error err = {0};
    for (int k = 0; k < PP_DEVICE_KIND_COUNT; k++)
        if (pp_device_create((pp_device_kind)k, 0, &dev[n], &err) == PP_OK) n++;
    assert_true(n >= 1);
    return n;
}

static void *alloc_as(pp_device *d, pp_mem_category c, size_t n)
{
    void *p = NULL;
    pp_error err = {0};
    assert_int_equal(pp_device_alloc_as(d, c, n, &p, &err), PP_OK);
    assert_non_null(p);
    return p;
}

static void test_total_peak_is_not_the_sum(void **state)
{
    (void)state;
    pp_device *devs[PP_DEVICE_KIND_COUNT];
    int nd = open_devices(devs);
    for (int i = 0; i < nd; i++) {
        pp_device *d = devs[i];
        pp_device_memory_stats s;
        void *a = alloc_as(d, PP_MEM_PARAMS, 1000);
        void *b = alloc_as(d, PP_MEM_STASH, 300);
        pp_device_free(d, a);                          /* params 1000 then 0 */
        void *c = alloc_as(d, PP_MEM_GRADS, 2000);     /* live: stash 300 + grads 2000 */
        void *e = NULL;
        pp_error err = {0};
        assert_int_equal(pp_device_alloc(d, 50, &e, &err), PP_OK);   /* plain alloc: scratch */
        pp_device_memory(d, &s);
        printf("%s: params peak %lld, stash %lld, grads %lld, scratch %lld; total peak %lld (sum of peaks %lld)\n",
               pp_device_kind_name(d->kind), (long long)s.peak[PP_MEM_PARAMS], (long long)s.peak[PP_MEM_STASH],
               (long long)s.peak[PP_MEM_GRADS], (long long)s.peak[PP_MEM_SCRATCH], (long long)s.peak_total,
               (long long)(s.peak[PP_MEM_PARAMS] + s.peak[PP_MEM_STASH] + s.peak[PP_MEM_GRADS] +
                           s.peak[PP_MEM_SCRATCH]));
        assert_int_equal(s.peak[PP_MEM_PARAMS], 1000);
        assert_int_equal(s.current[PP_MEM_PARAMS], 0);
        assert_int_equal(s.peak[PP_MEM_GRADS], 2000);
        assert_int_equal(s.peak[PP_MEM_STASH], 300);
        assert_int_equal(s.current[PP_MEM_SCRATCH], 50);
        assert_int_equal(s.current_total, 2350);
        assert_int_equal(s.peak_total, 2350);         /* not 1000 + 300 + 2000 + 50 */
        assert_int_equal(s.live, 3);
        pp_device_memory_reset_peak(d);
        pp_device_free(d, c);
        pp_device_memory(d, &s);
        assert_int_equal(s.peak[PP_MEM_GRADS], 2000);  /* the reset kept what was live then */
        assert_int_equal(s.peak[PP_MEM_PARAMS], 0);
        assert_int_equal(s.current_total, 350);
        pp_device_memory_reset_peak(d);
        pp_device_memory(d, &s);
        assert_int_equal(s.peak_total, 350);
        assert_int_equal(s.peak[PP_MEM_GRADS], 0);
        pp_device_free(d, b);
        pp_device_free(d, e);
        pp_device_free(d, NULL);
        pp_device_memory(d, &s);
        assert_int_equal(s.current_total, 0);
        assert_int_equal(s.live, 0);
        void *p = (void *)1;
        assert_int_equal(pp_device_alloc_as(d, PP_MEM_CATEGORY_COUNT, 8, &p, &err), PP_ERR_INVALID_ARG);
        assert_null(p);
        printf("  bad category: %s\n", err.msg);
        assert_non_null(strstr(err.msg, "memory category 7 out of range"));
        pp_device_destroy(d);
    }
}

/* xorshift64: the sequence is the same on every run */
static uint64_t next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void test_random_against_recount(void **state)
{
    (void)state;
    pp_device *devs[PP_DEVICE_KIND_COUNT];
    int nd = open_devices(devs);
    enum { LIVE = 40, CALLS = 3000 };
    for (int i = 0; i < nd; i++) {
        pp_device *d = devs[i];
        void *ptr[LIVE] = {0};
        size_t size[LIVE] = {0};
        int cat[LIVE] = {0};
        int64_t peak[PP_MEM_CATEGORY_COUNT] = {0}, peak_total = 0;
        uint64_t x = 0x9e3779b97f4a7c15ull;
        int64_t sum_of_peaks = 0;
        for (int k = 0; k < CALLS; k++) {
            int j = (int)(next(&x) % LIVE);
            if (ptr[j]) {
                pp_device_free(d, ptr[j]);
                ptr[j] = NULL;
            } else {
                size[j] = 1 + (size_t)(next(&x) % 100000);
                cat[j] = (int)(next(&x) % PP_MEM_CATEGORY_COUNT);
                ptr[j] = alloc_as(d, (pp_mem_category)cat[j], size[j]);
            }
            /* the recount: sum what is live now, by category */
            int64_t cur[PP_MEM_CATEGORY_COUNT] = {0}, total = 0, live = 0;
            for (int m = 0; m < LIVE; m++)
                if (ptr[m]) cur[cat[m]] += (int64_t)size[m], total += (int64_t)size[m], live++;
            for (int c = 0; c < PP_MEM_CATEGORY_COUNT; c++)
                if (cur[c] > peak[c]) peak[c] = cur[c];
            if (total > peak_total) peak_total = total;
            pp_device_memory_stats s;
            pp_device_memory(d, &s);
            for (int c = 0; c < PP_MEM_CATEGORY_COUNT; c++) {
                assert_int_equal(s.current[c], cur[c]);
                assert_int_equal(s.peak[c], peak[c]);
            }
            assert_int_equal(s.current_total, total);
            assert_int_equal(s.peak_total, peak_total);
            assert_int_equal(s.live, live);
        }
        for (int c = 0; c < PP_MEM_CATEGORY_COUNT; c++) sum_of_peaks += peak[c];
        printf("%s: %d calls agree with the recount after each; total peak %lld B, sum of category peaks %lld B\n",
               pp_device_kind_name(d->kind), CALLS, (long long)peak_total, (long long)sum_of_peaks);
        assert_true(peak_total < sum_of_peaks);
        for (int m = 0; m < LIVE; m++) pp_device_free(d, ptr[m]);
        pp_device_destroy(d);
    }
}

typedef struct worker {
    pp_device *d;
    int id;
} worker;

static void *hammer(void *arg)
{
    worker *w = arg;
    for (int k = 0; k < 2000; k++) {
        void *p = NULL;
        pp_error err = {0};
        if (pp_device_alloc_as(w->d, (pp_mem_category)(w->id % PP_MEM_CATEGORY_COUNT), 64 + (size_t)k % 512, &p,
                               &err) != PP_OK)
            return (void *)1;
        pp_device_free(w->d, p);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    pp_device *d = NULL;
    pp_error err = {0};
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &d, &err), PP_OK);
    void *held = alloc_as(d, PP_MEM_PARAMS, 4096);
    pthread_t th[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){d, i};
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        void *ret = NULL;
        pthread_join(th[i], &ret);
        assert_null(ret);
    }
    pp_device_memory_stats s;
    pp_device_memory(d, &s);
    printf("4 threads x 2000 alloc/free: current %lld B (the 4096 held), %lld live, total peak %lld B (<= 4096 + "
           "4 x 575)\n", (long long)s.current_total, (long long)s.live, (long long)s.peak_total);
    assert_int_equal(s.current_total, 4096);
    assert_int_equal(s.live, 1);
    assert_true(s.peak_total >= 4096 + 64 && s.peak_total <= 4096 + 4 * 575);
    for (int c = PP_MEM_GRADS; c <= PP_MEM_OPTIMIZER; c++) assert_int_equal(s.current[c], 0);
    pp_device_free(d, held);
    pp_device_destroy(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_total_peak_is_not_the_sum),
        cmocka_unit_test(test_random_against_recount),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
