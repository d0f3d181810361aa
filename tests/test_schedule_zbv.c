/* ZB-V against PyTorch: for the (pp, microbatches) of tests/data/zbv (compute_only CSV
 * written by torch's own ScheduleZBVZeroBubble through tests/ref/zbv_torch_order.py; the
 * torch version is in tests/data/zbv/SOURCE), onnxpipe's zb-v compute order equals
 * PyTorch's rank by rank, action by action (its idle cells dropped), and the file read
 * back through pp_schedule_read_csv validates and lowers to the schedule
 * pp_schedule_create builds. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <onnxpipe/schedule_lib.h>
#include <onnxpipe/driver_lib.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The cases tests/ref/zbv_torch_order.py writes. */
static const int cases[][2] = {{1, 3}, {2, 2}, {2, 3}, {2, 8}, {3, 4}, {4, 4}, {4, 7}, {4, 8}, {4, 13}, {8, 16}};

static FILE *open_fixture(int p, int m)
{
    const char *src = getenv("SRC_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/zbv/torch_zbv_p%d_m%d.csv", src ? src : "..", p, m);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s (set SRC_DIR to the source tree)", path);
    return f;
}

/* Compares PyTorch's row (cells, empty ones idle) with onnxpipe's compute actions of one
 * rank; returns the number of actions compared. */
static int compare_row(char *line, const pp_schedule *s, int rank, int p, int m)
{
    int n, k = 0;
    const pp_action *a = pp_schedule_rank_actions(s, rank, &n);
    char ours[48];
    for (char *cell = strtok(line, ",\r\n"); cell; cell = strtok(NULL, ",\r\n")) {  /* skips empty cells */
        if (k >= n) fail_msg("p=%d m=%d rank %d: PyTorch has '%s' after onnxpipe's %d actions", p, m, rank, cell, n);
        pp_action_format(&a[k], ours, sizeof ours);
        if (strcmp(cell, ours) != 0)
            fail_msg("p=%d m=%d rank %d action %d: PyTorch '%s', onnxpipe '%s'", p, m, rank, k, cell, ours);
        k++;
    }
    if (k != n) fail_msg("p=%d m=%d rank %d: PyTorch has %d actions, onnxpipe %d", p, m, rank, k, n);
    return k;
}

static void test_torch_order(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int p = cases[c][0], m = cases[c][1], total = 0, rank = 0;
        pp_schedule *s = NULL;
        pp_error err = {0};
        if (pp_schedule_generate(PP_SCHED_ZB_V, p, m, 2, &s, &err) != PP_OK) fail_msg("%s", err.msg);
        FILE *f = open_fixture(p, m);
        char *line = NULL;
        size_t cap = 0;
        for (; getline(&line, &cap, f) >= 0; rank++) {
            if (rank >= p) fail_msg("p=%d m=%d: PyTorch's file has more than %d rows", p, m, p);
            total += compare_row(line, s, rank, p, m);
        }
        assert_int_equal(rank, p);
        assert_int_equal(total, 2 * p * m * 3);
        printf("pp %d, microbatches %2d: %4d actions in PyTorch's order\n", p, m, total);
        free(line);
        fclose(f);
        pp_schedule_destroy(s);
    }
}

/* PyTorch's file as a schedule: the V placement is read from where the stages are, the
 * compute-only rows are lowered, and the result is pp_schedule_create's zb-v. */
static void test_torch_file_loads(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int p = cases[c][0], m = cases[c][1];
        pp_schedule *ours = NULL, *theirs = NULL;
        pp_error err = {0};
        FILE *f = open_fixture(p, m);
        pp_status st = pp_schedule_read_csv(f, "torch_zbv.csv", &theirs, &err);
        fclose(f);
        if (st != PP_OK) fail_msg("p=%d m=%d: %s", p, m, err.msg);
        if (pp_schedule_validate(theirs, stdout, &err) != PP_OK) fail_msg("p=%d m=%d: %s", p, m, err.msg);
        assert_int_equal(pp_schedule_create(PP_SCHED_ZB_V, p, m, 2, &ours, &err), PP_OK);
        assert_int_equal(theirs->num_stages, 2 * p);
        assert_memory_equal(theirs->stage_rank, ours->stage_rank, (size_t)(2 * p) * sizeof(int));
        for (int r = 0; r < p; r++) {
            assert_int_equal(theirs->count[r], ours->count[r]);
            assert_memory_equal(theirs->actions[r], ours->actions[r], (size_t)ours->count[r] * sizeof(pp_action));
        }
        pp_schedule_destroy(ours);
        pp_schedule_destroy(theirs);
    }
    printf("%zu PyTorch ZB-V files load, validate and lower to onnxpipe's zb-v\n", sizeof cases / sizeof cases[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch_order),
        cmocka_unit_test(test_torch_file_loads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
