/* Scheduler: every generated schedule validates for all p <= 16, m <= 64, v <= 4
 * (zb-v: v = 2);
 * invalid arguments are refused with a message; hand-broken schedules (rendezvous
 * cycles, misordered, duplicated, missing or misplaced actions) are rejected. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <onnxpipe/schedule_lib.h>
#include <onnxpipe/driver_lib.h>

#include <stdlib.h>
#include <string.h>

static pp_schedule *from_csv(const char *text)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    assert_non_null(f);
    pp_schedule *s = NULL;
    pp_error err = {0};
    pp_status st = pp_schedule_read_csv(f, "inline", &s, &err);
    fclose(f);
    if (st != PP_OK) fail_msg("reading '%s': %s", text, err.msg);
    return s;
}

/* Validates s, expects status `want` and `needle` in the message; prints the grid. */
static void expect_reject(const pp_schedule *s, pp_status want, const char *needle, const char *what)
{
    pp_error err = {0};
    printf("--- %s\n", what);
    pp_status st = pp_schedule_validate(s, stdout, &err);
    printf("    -> %s: %s\n", pp_status_string(st), err.msg);
    assert_int_equal(st, want);
    if (!strstr(err.msg, needle)) fail_msg("message '%s' lacks '%s'", err.msg, needle);
}

/* Every kind, every p <= 16, m <= 64 (v <= 4 for interleaved, 2 for zb-v): generated, lowered and
 * validated by pp_schedule_create; counts checked against the action arithmetic. */
static void test_sweep_all_valid(void **state)
{
    (void)state;
    long schedules = 0, actions = 0;
    double t0 = pp_now();
    for (int kind = 0; kind < PP_SCHED_CUSTOM; kind++)
        for (int v = 1; v <= 4; v++) {
            if (kind == PP_SCHED_INTERLEAVED ? v < 2 : v != pp_schedule_default_chunks(kind)) continue;
            for (int p = 1; p <= 16; p++)
                for (int m = 1; m <= 64; m++) {
                    if (kind == PP_SCHED_INTERLEAVED && m % p) continue;
                    pp_schedule *s = NULL;
                    pp_error err = {0};
                    if (pp_schedule_create(kind, p, m, v, &s, &err) != PP_OK) fail_msg("%s", err.msg);
                    /* compute per (stage, mb): F + B, or F + I + W; two messages per
                     * boundary crossing and microbatch, counted on both sides (none
                     * when p == 1: all stages share the rank; zb-v's middle boundary,
                     * p-1 -> p, stays on rank p-1); one REDUCE_GRADS per stage, one
                     * OPTIMIZER_STEP per rank. */
                    int zb = kind == PP_SCHED_ZB_H1 || kind == PP_SCHED_ZB_V;
                    long S = (long)p * v, per = zb ? 3 : 2, cross = kind == PP_SCHED_ZB_V ? S - 2 : S - 1;
                    long want = S * m * per + (p > 1 ? 4 * cross * m : 0) + S + p;
                    for (int st = 0; st < S && kind == PP_SCHED_ZB_V; st++)  /* the V */
                        assert_int_equal(s->stage_rank[st], st < p ? st : 2 * p - 1 - st);
                    assert_int_equal(pp_schedule_action_count(s), want);
                    actions += want;
                    schedules++;
                    pp_schedule_destroy(s);
                }
        }
    printf("validated %ld schedules (%ld actions) in %.2f s\n", schedules, actions, pp_now() - t0);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    static const struct {
        int kind, p, m, v;
        const char *needle;
    } cases[] = {
        {PP_SCHED_INTERLEAVED, 4, 6, 2, "multiple of pp"},
        {PP_SCHED_INTERLEAVED, 4, 2, 2, "multiple of pp"},
        {PP_SCHED_INTERLEAVED, 4, 8, 1, "chunks"},
        {PP_SCHED_1F1B, 4, 8, 2, "chunks must be 1"},
        {PP_SCHED_GPIPE, 0, 8, 1, "pp 0"},
        {PP_SCHED_ZB_H1, 4, 0, 1, "microbatches 0"},
        {PP_SCHED_ZB_V, 4, 8, 1, "chunks must be 2"},
        {PP_SCHED_ZB_V, 4, 8, 3, "chunks must be 2"},
        {PP_SCHED_ZB_V, 0, 8, 2, "pp 0"},
        {PP_SCHED_1F1B, 4096, 4096, 1, "too large"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_schedule *s = (pp_schedule *)1;
        pp_error err = {0};
        pp_status st = pp_schedule_create(cases[i].kind, cases[i].p, cases[i].m, cases[i].v, &s, &err);
        printf("%s p=%d m=%d v=%d -> %s\n", pp_schedule_kind_name(cases[i].kind), cases[i].p, cases[i].m,
               cases[i].v, err.msg);
        assert_int_equal(st, PP_ERR_INVALID_ARG);
        assert_null(s);
        if (!strstr(err.msg, cases[i].needle)) fail_msg("'%s' lacks '%s'", err.msg, cases[i].needle);
    }
    pp_schedule_kind k;
    pp_error err = {0};
    assert_int_equal(pp_schedule_kind_parse("zb-h2", &k, &err), PP_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "gpipe"));
    assert_int_equal(pp_schedule_kind_parse("zb-h1", &k, &err), PP_OK);
    assert_int_equal(k, PP_SCHED_ZB_H1);
    assert_int_equal(pp_schedule_kind_parse("zb-v", &k, &err), PP_OK);
    assert_int_equal(k, PP_SCHED_ZB_V);
    assert_int_equal(pp_schedule_default_chunks(PP_SCHED_ZB_V), 2);
    assert_int_equal(pp_schedule_default_chunks(PP_SCHED_1F1B), 1);
}

/* Both neighbours send before they receive: fine with eager sends, a deadlock when a
 * send waits for its receive. */
static void test_rendezvous_cycle(void **state)
{
    (void)state;
    pp_schedule *s = from_csv("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                              "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n");
    expect_reject(s, PP_ERR_DEADLOCK, "deadlock", "send-send cycle between rank 0 and rank 1");
    pp_schedule_destroy(s);
    /* Same ranks, receive posted first on rank 1: valid. */
    s = from_csv("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                 "1RECV_F0,1F0,1B0,1RECV_F1,1SEND_B0,1F1,1B1,1SEND_B1\n");
    pp_error err = {0};
    assert_int_equal(pp_schedule_validate(s, stdout, &err), PP_OK);
    pp_schedule_destroy(s);
    /* Both wait to receive first. */
    s = from_csv("0F0,0RECV_B0,0SEND_F0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
    expect_reject(s, PP_ERR_DEADLOCK, "rank 0 is stuck at action 1 (0RECV_B0)", "receive-receive cycle");
    pp_schedule_destroy(s);
}

static void test_broken_order_and_counts(void **state)
{
    (void)state;
    static const struct {
        const char *csv;
        pp_status want;
        const char *needle, *what;
    } cases[] = {
        {"0B0,0F0\n", PP_ERR_INVALID_ARG, "comes too early", "backward before forward (compute-only)"},
        {"0F0,0W0,0I0\n", PP_ERR_INVALID_ARG, "comes too early", "weight pass before input pass"},
        {"0F0,0F0,0B0\n", PP_ERR_INVALID_ARG, "happens twice", "forward twice"},
        {"0F0,0B0,0F1\n", PP_ERR_INVALID_ARG, "never backwarded", "microbatch 1 never backwarded"},
        {"0F0,0I0,0B0\n", PP_ERR_INVALID_ARG, "happens twice", "B and I of the same microbatch"},
        {"0F0,0I0\n", PP_ERR_INVALID_ARG, "never backwarded (weight", "I without W"},
        {"0F0,0SEND_F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n", PP_ERR_INVALID_ARG, "happens twice",
         "a send with no receive"},
        {"0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1RECV_F0,1F0,1B0,1SEND_B0\n", PP_ERR_INVALID_ARG, "happens twice",
         "two receives for one send"},
        {"0F0,0SEND_F0,0F1,0RECV_B0,0B0,0RECV_B1,0B1\n1RECV_F0,1F0,1RECV_F1,1F1,1B0,1SEND_B0,1B1,1SEND_B1\n",
         PP_ERR_DEADLOCK, "rank 0 is stuck at action 3 (0RECV_B0)", "a receive with no send"},
        {"0F0,0RECV_B0,0B0\n1F0,1B0,1SEND_B0\n", PP_ERR_INVALID_ARG, "received by a RECV_ACT", "forward with no receive"},
        {"0F0,0SEND_F0,0REDUCE_GRADS,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0,1REDUCE_GRADS\n", PP_ERR_INVALID_ARG,
         "before the stage's last backward", "REDUCE_GRADS before the backward"},
        {"0F0,0F1,0SEND_F0,0RECV_B0,0B0,0B1\n1RECV_F0,1F0,1F1,1B0,1SEND_B0,1B1\n", PP_ERR_INVALID_ARG,
         "received by a RECV_ACT", "stage 1 forwards microbatch 1 it never received"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fmemopen((void *)cases[i].csv, strlen(cases[i].csv), "r");
        pp_schedule *s = NULL;
        pp_error err = {0};
        pp_status st = pp_schedule_read_csv(f, "broken.csv", &s, &err);
        fclose(f);
        if (st == PP_OK) {  /* with communication: rejected by the validator */
            expect_reject(s, cases[i].want, cases[i].needle, cases[i].what);
            pp_schedule_destroy(s);
            continue;
        }
        /* compute-only (one rank): rejected while lowering, by the same engine */
        printf("--- %s\n    -> rejected while lowering: %s\n", cases[i].what, err.msg);
        assert_int_equal(st, cases[i].want);
        if (!strstr(err.msg, cases[i].needle)) fail_msg("message '%s' lacks '%s'", err.msg, cases[i].needle);
    }
}

/* Fields edited in place on a valid 1f1b schedule. */
static void test_broken_fields(void **state)
{
    (void)state;
    pp_schedule *s;
    pp_error err = {0};
    assert_int_equal(pp_schedule_create(PP_SCHED_1F1B, 4, 8, 1, &s, &err), PP_OK);
    pp_action *a = &s->actions[2][3];
    pp_action keep = *a;
    a->stage = 1;
    expect_reject(s, PP_ERR_INVALID_ARG, "lives on rank 1", "stage placed on the wrong rank");
    *a = keep;
    int i = 0;
    while (s->actions[1][i].kind != PP_ACT_SEND_ACT) i++;
    s->actions[1][i].peer = 3;
    expect_reject(s, PP_ERR_INVALID_ARG, "peer is 3, expected 2", "send to the wrong peer");
    s->actions[1][i].peer = 2;
    s->count[3]--;
    expect_reject(s, PP_ERR_INVALID_ARG, "last action must be OPTIMIZER_STEP", "OPTIMIZER_STEP missing");
    s->count[3]++;
    s->actions[0][0].microbatch = 8;
    expect_reject(s, PP_ERR_INVALID_ARG, "microbatch 8 out of range", "microbatch out of range");
    s->actions[0][0].microbatch = 0;
    assert_int_equal(pp_schedule_validate(s, NULL, &err), PP_OK);
    pp_schedule_destroy(s);
}

/* A compute order that cannot run is refused when lowering, before any send exists. */
static void test_bad_compute_order(void **state)
{
    (void)state;
    const char *text = "0F0,0F1,0B1,0B0\n1F1,1F0,1B0,1B1\n2B0,2F0,2F1,2B1\n";
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    pp_schedule *s = NULL;
    pp_error err = {0};
    pp_status st = pp_schedule_read_csv(f, "order.csv", &s, &err);
    fclose(f);
    printf("%s\n", err.msg);
    assert_int_equal(st, PP_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "compute order cannot run"));
    assert_null(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_all_valid),     cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_rendezvous_cycle),    cmocka_unit_test(test_broken_order_and_counts),
        cmocka_unit_test(test_broken_fields),       cmocka_unit_test(test_bad_compute_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
