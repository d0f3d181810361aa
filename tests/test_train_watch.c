/* The arithmetic around the training loop: the shuffle is a permutation of the samples
 * for every size, differs between epochs and seeds and depends on nothing else; epochs
 * are whole batches; evaluations fall every N steps and at the end, and the ETA counts
 * them; TFRecord's CRC32C meets the standard check value (RFC 3720: "123456789"). */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "job_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <onnxpipe/core_util.h>

static void test_shuffle_is_a_permutation(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {1, 2, 3, 5, 7, 16, 17, 100, 255, 256, 1000, 4097, 65537};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint64_t n = sizes[k];
        for (uint64_t epoch = 0; epoch < 3; epoch++) {
            char *seen = calloc(n, 1);
            uint64_t fixed = 0;
            for (uint64_t i = 0; i < n; i++) {
                uint64_t j = pp_shuffle_index(42, epoch, i, n);
                assert_true(j < n);
                assert_int_equal(seen[j], 0);
                seen[j] = 1;
                fixed += j == i;
                assert_int_equal(pp_shuffle_index(42, epoch, i, n), j);   /* a pure function */
            }
            free(seen);
            /* a random permutation has one fixed point on average */
            if (n >= 100) assert_true(fixed < 12);
        }
        printf("n = %llu: a permutation in epochs 0..2\n", (unsigned long long)n);
    }
}

static void test_shuffle_differs_by_epoch_and_seed(void **state)
{
    (void)state;
    const uint64_t n = 1000;
    int same_epoch = 0, same_seed = 0;
    for (uint64_t i = 0; i < n; i++) {
        same_epoch += pp_shuffle_index(7, 0, i, n) == pp_shuffle_index(7, 1, i, n);
        same_seed += pp_shuffle_index(7, 0, i, n) == pp_shuffle_index(8, 0, i, n);
    }
    printf("places equal between epochs 0 and 1: %d of %llu; between seeds 7 and 8: %d\n", same_epoch,
           (unsigned long long)n, same_seed);
    assert_true(same_epoch < 12 && same_seed < 12);
}

static void test_epochs_are_whole_batches(void **state)
{
    (void)state;
    pp_sampler s;
    pp_sampler_init(&s, 103, 10, 0, 0);   /* 10 steps per epoch; 3 samples wait */
    assert_int_equal(s.steps_per_epoch, 10);
    assert_int_equal(pp_sampler_epoch(&s, 10), 0);
    assert_int_equal(pp_sampler_epoch(&s, 11), 1);
    assert_int_equal(pp_sampler_sample(&s, 10, 9), 99);
    assert_int_equal(pp_sampler_sample(&s, 11, 0), 0);
    assert_int_equal(pp_sampler_sample(&s, 23, 4), 24);
    pp_sampler_init(&s, 103, 10, 1, 5);    /* shuffled: each epoch reads 100 distinct samples */
    for (int64_t e = 0; e < 3; e++) {
        char seen[103] = {0};
        for (int64_t step = e * 10 + 1; step <= e * 10 + 10; step++)
            for (int64_t k = 0; k < 10; k++) {
                int64_t j = pp_sampler_sample(&s, step, k);
                assert_true(j >= 0 && j < 103);
                assert_int_equal(seen[j], 0);
                seen[j] = 1;
            }
    }
}

static void test_eval_cadence_and_eta(void **state)
{
    (void)state;
    /* every 5 of 12 steps: after 5, 10 and 12 */
    int due[13] = {0}, n = 0;
    for (int64_t s = 1; s <= 12; s++) n += due[s] = train_eval_due(s, 12, 5);
    assert_int_equal(n, 3);
    assert_true(due[5] && due[10] && due[12]);
    assert_int_equal(train_evals_left(0, 12, 5), 3);
    assert_int_equal(train_evals_left(5, 12, 5), 2);
    assert_int_equal(train_evals_left(11, 12, 5), 1);
    assert_int_equal(train_evals_left(12, 12, 5), 0);
    assert_int_equal(train_evals_left(3, 10, 5), 2);   /* 5 and 10: the last is one of them */
    assert_int_equal(train_evals_left(3, 10, 0), 1);   /* at the end only */
    /* 4 of 10 steps took 2 s: 6 more take 3 s; two evaluations measured at 1.5 s each, 1 left */
    assert_true(fabs(train_eta(4, 10, 4, 2.0, 5, 0, 0, 3, 0) - 3.0) < 1e-12);
    assert_true(fabs(train_eta(5, 10, 5, 2.5, 5, 1, 1.5, 3, 1) - (2.5 + 1.5)) < 1e-12);
    /* before the first evaluation: a third of a step per eval batch (forward only) */
    assert_true(fabs(train_eta(4, 10, 4, 2.0, 5, 0, 0, 3, 1) - (3.0 + 2 * 0.5 * 3 / 3.0)) < 1e-12);
    /* a resumed run (from step 6) that made 2 steps in 1 s: 2 more steps and one evaluation */
    assert_true(fabs(train_eta(8, 10, 2, 1.0, 0, 0, 0, 3, 1) - (1.0 + 0.5 * 3 / 3.0)) < 1e-12);
}

static void test_crc32c_check_value(void **state)
{
    (void)state;
    uint32_t c = pp_crc32c(0, "123456789", 9);
    printf("crc32c(\"123456789\") = 0x%08x (RFC 3720: 0xe3069283)\n", c);
    assert_int_equal(c, 0xe3069283u);
    assert_int_equal(pp_tb_masked_crc("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shuffle_is_a_permutation),
        cmocka_unit_test(test_shuffle_differs_by_epoch_and_seed),
        cmocka_unit_test(test_epochs_are_whole_batches),
        cmocka_unit_test(test_eval_cadence_and_eta),
        cmocka_unit_test(test_crc32c_check_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
