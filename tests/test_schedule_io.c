/* Scheduler I/O: CSV round trips (with and without communication), PyTorch-style files
 * with idle cells and a V-shaped stage placement, PyTorch's spelling of REDUCE_GRADS, parse errors, the ASCII timeline
 * against a hand-drawn one, and the trace writer's exact output. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <onnxpipe/schedule_lib.h>
#include <onnxpipe/driver_lib.h>

#include <stdlib.h>
#include <string.h>

/* Runs fn into a memory stream and returns the text (caller frees). */
static char *capture_csv(const pp_schedule *s, int compute_only)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pp_error err = {0};
    assert_int_equal(pp_schedule_write_csv(s, f, compute_only, &err), PP_OK);
    fclose(f);
    return buf;
}

static pp_status read_text(const char *text, pp_schedule **s, pp_error *err)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    assert_non_null(f);
    pp_status st = pp_schedule_read_csv(f, "test.csv", s, err);
    fclose(f);
    return st;
}

static void assert_same(const pp_schedule *a, const pp_schedule *b)
{
    assert_int_equal(a->pp, b->pp);
    assert_int_equal(a->num_stages, b->num_stages);
    assert_int_equal(a->microbatches, b->microbatches);
    for (int r = 0; r < a->pp; r++) {
        assert_int_equal(a->count[r], b->count[r]);
        assert_memory_equal(a->actions[r], b->actions[r], (size_t)a->count[r] * sizeof(pp_action));
    }
}

static void test_csv_round_trip(void **state)
{
    (void)state;
    int n = 0;
    for (int kind = 0; kind < PP_SCHED_CUSTOM; kind++)
        for (int p = 1; p <= 5; p++)
            for (int m = p; m <= 2 * p + 1; m++) {
                int v = pp_schedule_default_chunks(kind);
                if (kind == PP_SCHED_INTERLEAVED && m % p) continue;
                pp_schedule *s, *back;
                pp_error err = {0};
                assert_int_equal(pp_schedule_create(kind, p, m, v, &s, &err), PP_OK);
                for (int compute_only = 0; compute_only <= 1; compute_only++) {
                    char *text = capture_csv(s, compute_only);
                    if (read_text(text, &back, &err) != PP_OK) fail_msg("%s\n%s", err.msg, text);
                    assert_int_equal(pp_schedule_validate(back, stdout, &err), PP_OK);
                    assert_same(s, back);  /* lowering a compute-only file gives the same lists */
                    pp_schedule_destroy(back);
                    free(text);
                    n++;
                }
                pp_schedule_destroy(s);
            }
    printf("%d CSV round trips identical action for action\n", n);
}

/* The gradient reduction has one name, DESIGN.md's REDUCE_GRADS: the kind's name and each
 * stage's cell in a written file ("0REDUCE_GRADS"). A file with PyTorch's spelling,
 * "0REDUCE_GRAD" (what onnxpipe wrote before too), reads as the same actions. */
static void test_reduce_grads_name(void **state)
{
    (void)state;
    pp_schedule *s, *back;
    pp_error err = {0};
    assert_string_equal(pp_action_kind_name(PP_ACT_REDUCE_GRADS), "REDUCE_GRADS");
    assert_int_equal(pp_schedule_create(PP_SCHED_1F1B, 2, 3, 1, &s, &err), PP_OK);
    char *text = capture_csv(s, 0), *old = malloc(strlen(text) + 1), *o = old;
    assert_non_null(strstr(text, "0REDUCE_GRADS") && strstr(text, "1REDUCE_GRADS"));
    for (const char *p = text; *p;)   /* drop the S of each REDUCE_GRADS */
        if (!strncmp(p, "REDUCE_GRADS", 12)) o += sprintf(o, "REDUCE_GRAD"), p += 12;
        else *o++ = *p++;
    *o = 0;
    printf("1f1b p=2 m=3 written:\n%sPyTorch's spelling:\n%s", text, old);
    assert_int_equal(read_text(old, &back, &err), PP_OK);
    assert_same(s, back);
    printf("read back: the same actions\n");
    pp_schedule_destroy(back);
    pp_schedule_destroy(s);
    free(old);
    free(text);
}

/* The step's last action has one name, DESIGN.md's OPTIMIZER_STEP: the enum, the kind's
 * name and its text form. */
static void test_optimizer_step_name(void **state)
{
    (void)state;
    char buf[32];
    pp_action opt = {PP_ACT_OPTIMIZER_STEP, -1, -1, -1};
    assert_string_equal(pp_action_kind_name(PP_ACT_OPTIMIZER_STEP), "OPTIMIZER_STEP");
    assert_string_equal(pp_action_format(&opt, buf, sizeof buf), "OPTIMIZER_STEP");
    printf("PP_ACT_OPTIMIZER_STEP: kind name and text form OPTIMIZER_STEP\n");
}

/* PyTorch writes idle steps as empty cells; quotes and spaces are tolerated. The
 * file below is GPipe for p = 2, m = 2. */
static void test_pytorch_style_file(void **state)
{
    (void)state;
    pp_schedule *s, *ref;
    pp_error err = {0};
    assert_int_equal(read_text("0F0,0F1,,,0B0,0B1\r\n, \"1F0\",1F1,1B0,1B1,\r\n", &s, &err), PP_OK);
    assert_int_equal(pp_schedule_create(PP_SCHED_GPIPE, 2, 2, 1, &ref, &err), PP_OK);
    assert_int_equal(pp_schedule_validate(s, NULL, &err), PP_OK);
    pp_costs c;
    pp_costs_unit(&c);
    pp_sim_result *r1, *r2;
    assert_int_equal(pp_schedule_simulate(s, &c, &r1, &err), PP_OK);
    assert_int_equal(pp_schedule_simulate(ref, &c, &r2, &err), PP_OK);
    printf("loaded gpipe p=2 m=2: makespan %g (generated: %g, closed form (m+p-1)(F+B+W) = 9)\n", r1->makespan,
           r2->makespan);
    assert_true(r1->makespan == 9 && r2->makespan == 9);
    pp_sim_result_destroy(r1);
    pp_sim_result_destroy(r2);
    pp_schedule_destroy(ref);
    pp_schedule_destroy(s);
}

/* A V placement (rank 0: stages 0 and 3, rank 1: stages 1 and 2): 1 -> 2 stays on rank
 * 1, so lowering adds no SEND/RECV there. */
static void test_v_placement(void **state)
{
    (void)state;
    pp_schedule *s;
    pp_error err = {0};
    const char *text = "0F0,0F1,3F0,3B0,3F1,3B1,0B0,0B1\n1F0,2F0,1F1,2F1,2B0,1B0,2B1,1B1\n";
    if (read_text(text, &s, &err) != PP_OK) fail_msg("%s", err.msg);
    assert_int_equal(pp_schedule_validate(s, stdout, &err), PP_OK);
    int msgs = 0;
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < s->count[r]; i++) {
            const pp_action *a = &s->actions[r][i];
            if (a->kind == PP_ACT_SEND_ACT) assert_true(a->stage == 0 || a->stage == 2);
            if (a->kind == PP_ACT_SEND_GRAD) assert_true(a->stage == 1 || a->stage == 3);
            msgs += a->kind >= PP_ACT_SEND_ACT && a->kind <= PP_ACT_RECV_GRAD;
        }
    printf("V placement: %d send/recv actions (2 boundaries x 2 microbatches x 2 directions x 2 sides = 16)\n", msgs);
    assert_int_equal(msgs, 16);
    pp_schedule_destroy(s);
}

static void test_parse_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text, *needle;
    } cases[] = {
        {"0F0,0X1\n", "line 1, cell 2: cannot read action '0X1'"},
        {"0F0,0UNSHARD,0B0\n", "cannot read action '0UNSHARD'"},
        {"F0,0B0\n", "cannot read action 'F0'"},
        {"0F0,0B0\n0F1,0B1\n", "stage 0 has actions on rank 0 and on rank 1"},
        {"0F0,0B0\n2F0,2B0\n", "stage 1 appears on no rank"},
        {"", "no ranks"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_schedule *s = (pp_schedule *)1;
        pp_error err = {0};
        pp_status st = read_text(cases[i].text, &s, &err);
        printf("%s\n", err.msg);
        assert_int_equal(st, PP_ERR_PARSE);
        assert_null(s);
        if (!strstr(err.msg, cases[i].needle)) fail_msg("'%s' lacks '%s'", err.msg, cases[i].needle);
    }
}

static void test_ascii_timeline(void **state)
{
    (void)state;
    pp_schedule *s;
    pp_error err = {0};
    assert_int_equal(pp_schedule_create(PP_SCHED_1F1B, 2, 3, 1, &s, &err), PP_OK);
    pp_costs c;
    pp_costs_unit(&c);
    pp_sim_result *r;
    assert_int_equal(pp_schedule_simulate(s, &c, &r, &err), PP_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pp_schedule_print_timeline(s, r, f, 160);
    fclose(f);
    /* 1F1B, p = 2, m = 3, F = 1, B = 2: rank 0 warms up with one forward. */
    const char *want = "time ->  one column = 1 s, makespan 12 s; '=' continues an action, '.' idle\n"
                       "rank   0 |F0 F1 .  .  B0 == F2 B1 == .  B2 == |\n"
                       "rank   1 |.  F0 B0 == F1 B1 == F2 B2 == .  .  |\n";
    printf("%s", buf);
    assert_string_equal(buf, want);
    free(buf);
    pp_sim_result_destroy(r);
    pp_schedule_destroy(s);
}

static void test_trace_writer(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pp_trace *t;
    pp_error err = {0};
    assert_int_equal(pp_trace_begin(f, &t, &err), PP_OK);
    pp_trace_name(t, 1, -1, "rank 1");
    pp_trace_name(t, 1, PP_TRACE_ROW_COMPUTE, "compute");
    pp_trace_event(t, 1, PP_TRACE_ROW_COMPUTE, "1F0", 0.5, 0.75);
    assert_int_equal(pp_trace_end(t, &err), PP_OK);
    fclose(f);
    const char *want =
        "{\"displayTimeUnit\":\"ms\",\"traceEvents\":["
        "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"rank 1\"}},"
        "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"compute\"}},"
        "{\"name\":\"1F0\",\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":500000,\"dur\":250000}]}\n";
    printf("%s", buf);
    assert_string_equal(buf, want);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_round_trip), cmocka_unit_test(test_pytorch_style_file),
        cmocka_unit_test(test_v_placement),    cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_ascii_timeline), cmocka_unit_test(test_trace_writer),
        cmocka_unit_test(test_reduce_grads_name),
        cmocka_unit_test(test_optimizer_step_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
