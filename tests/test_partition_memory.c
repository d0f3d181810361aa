/* The memory balance's model against the stage planner's dry run: for the example GPT
 * and MLP (fp32, bf16, selective and full recompute) split by --balance memory into P
 * stages, each stage's predicted bytes (pp_partition_stage_memory, from the planner's
 * whole-graph profile, pp_stage_memory_profile) against pp_driver_estimate under 1F1B
 * (the driver's own slot counts: min(P - s, M) at stage 0 and min(P - s + 1, M) after it,
 * where the next microbatch received holds a slot too): within TOL relative. And
 * the memory balance's largest dry-run stage is no larger than the params balance's. */
#include <onnxpipe/driver_lib.h>
#include <onnxpipe/example.h>
#include <onnxpipe/partition.h>
#include <onnxpipe/schedule_lib.h>
#include <onnxpipe/stage_lib.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define TOL 0.03   /* the model's per-stage error bound (measured worst: printed) */

typedef struct mcase {
    const char *name;
    int gpt, P, M;
    int64_t batch;
    pp_recompute recompute;
    pp_dtype precision;
    double tolerance;
} mcase;

static pp_graph *build(const mcase *c)
{
    pp_graph *g = NULL;
    pp_error err = {0};
    if (c->gpt) {
        pp_gpt_config gc = pp_gpt_config_default();
        gc.layers = 8, gc.d_model = 64, gc.heads = 4, gc.vocab = 512, gc.seq = 32, gc.batch = c->batch;
        gc.with_loss = 1;
        assert_int_equal(pp_example_gpt(&gc, &g, &err), PP_OK);
    } else {
        pp_mlp_config mc = pp_mlp_config_default();
        mc.in = 64, mc.nhidden = 6, mc.classes = 10, mc.batch = c->batch, mc.with_loss = 1;
        for (int k = 0; k < 6; k++) mc.hidden[k] = 256 + 64 * k;
        assert_int_equal(pp_example_mlp(&mc, &g, &err), PP_OK);
    }
    return g;
}

/* 1F1B's slots at stage s as the driver counts them. */
static int slots_1f1b(int P, int M, int s)
{
    int k = P - s + (s > 0);
    return k < M ? k : M;
}

/* The dry run's stage totals under 1F1B into est[P]; checks its slot counts. */
static void dry_run(const pp_partition *p, const pp_stage_options *so, int P, int M, int64_t *est)
{
    pp_schedule *sch = NULL;
    pp_error err = {0};
    assert_int_equal(pp_schedule_create(PP_SCHED_1F1B, P, M, 1, &sch, &err), PP_OK);
    pp_stage_bytes *b = calloc((size_t)P, sizeof *b);
    assert_int_equal(pp_driver_estimate(sch, p, PP_DEVICE_CPU, so, PP_DTYPE_F32, b, NULL, &err), PP_OK);
    for (int s = 0; s < P; s++) {
        assert_int_equal(b[s].slots, slots_1f1b(P, M, s));
        est[s] = b[s].total;
    }
    free(b);
    pp_schedule_destroy(sch);
}

static void test_model_vs_dry_run(void **state)
{
    (void)state;
    static const mcase cases[] = {
        {"gpt fp32", 1, 4, 8, 2, PP_RECOMPUTE_NONE, 0, 0.02},
        {"gpt fp32, 8 stages", 1, 8, 8, 2, PP_RECOMPUTE_NONE, 0, 0.02},
        {"gpt fp32, M < P", 1, 4, 2, 2, PP_RECOMPUTE_NONE, 0, 0.02},
        {"gpt bf16", 1, 4, 8, 2, PP_RECOMPUTE_NONE, PP_DTYPE_BF16, 0.02},
        {"gpt selective recompute", 1, 4, 8, 2, PP_RECOMPUTE_SELECTIVE, 0, 0.02},
        {"gpt full recompute", 1, 4, 8, 2, PP_RECOMPUTE_FULL, 0, 0.02},
        {"mlp fp32", 0, 3, 6, 16, PP_RECOMPUTE_NONE, 0, 0.02},
        {"mlp bf16, 4 stages", 0, 4, 8, 16, PP_RECOMPUTE_NONE, PP_DTYPE_BF16, 0.02},
    };
    double worst = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const mcase *c = &cases[k];
        pp_graph *g = build(c);
        pp_error err = {0};
        pp_stage_options so = {.slots = 1, .microbatch = c->batch, .global_batch = c->batch * c->M,
                               .optim = {.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f},
                               .training = 1, .precision = c->precision, .recompute = c->recompute,
                               .whole_backward = 1};   /* 1F1B's backward is whole, as pp_train_partition plans */
        pp_memory_profile *prof = NULL;
        assert_int_equal(pp_stage_memory_profile(g, PP_DEVICE_CPU, &so, &prof, &err), PP_OK);
        assert_int_equal(prof->planned, 1);
        int64_t est[8], worst_est[2] = {0, 0};
        for (int pass = 0; pass < 2; pass++) {   /* memory balance, then params for comparison */
            pp_partition_options po = {.balance = pass ? PP_BALANCE_PARAMS : PP_BALANCE_MEMORY, .microbatches = c->M,
                                       .recompute = c->recompute, .tolerance = c->tolerance, .memory = prof};
            pp_partition *p = NULL;
            assert_int_equal(pp_partition_create(g, c->P, &po, &p, &err), PP_OK);
            dry_run(p, &so, c->P, c->M, est);
            double cw = 0;
            for (int s = 0; s < c->P; s++) {
                pp_stage_memory m = pp_partition_stage_memory(p, s, c->M);
                assert_int_equal(m.inflight, slots_1f1b(c->P, c->M, s));
                double rel = fabs((double)(m.total_bytes - est[s])) / (double)est[s];
                if (rel > cw) cw = rel;
                if (est[s] > worst_est[pass]) worst_est[pass] = est[s];
                if (!pass && rel > TOL)
                    fail_msg("%s: stage %d predicted %lld B, dry run %lld B (%.2f%%)", c->name, s,
                             (long long)m.total_bytes, (long long)est[s], 100 * rel);
            }
            if (!pass) {
                if (cw > worst) worst = cw;
                printf("%-26s P=%d M=%d: model vs dry run per stage within %.2f%%; largest stage %lld B", c->name,
                       c->P, c->M, 100 * cw, (long long)worst_est[0]);
            }
            pp_partition_destroy(p);
        }
        printf(" (params balance: %lld B, %+.1f%%)\n", (long long)worst_est[1],
               100.0 * (double)(worst_est[1] - worst_est[0]) / (double)worst_est[0]);
        assert_true((double)worst_est[0] <= (double)worst_est[1] * (1 + TOL));
        pp_memory_profile_destroy(prof);
        pp_graph_destroy(g);
    }
    printf("memory model against the stage planner's dry run: worst stage %.2f%% (bound %.0f%%)\n", 100 * worst,
           100 * TOL);
}

/* Without the planner's profile, the partitioner's own estimate (no fusion, no kernel data):
 * coarse, but it must still split and report every part. */
static void test_estimate_without_profile(void **state)
{
    (void)state;
    mcase c = {"gpt", 1, 4, 8, 2, PP_RECOMPUTE_NONE, 0, 0.02};
    pp_graph *g = build(&c);
    pp_error err = {0};
    pp_partition_options po = {.balance = PP_BALANCE_MEMORY, .microbatches = 8, .tolerance = 0.02};
    pp_partition *p = NULL;
    assert_int_equal(pp_partition_create(g, 4, &po, &p, &err), PP_OK);
    assert_int_equal(p->memory->planned, 0);
    pp_stage_options so = {.slots = 1, .microbatch = 2, .global_batch = 16,
                           .optim = {.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f},
                           .training = 1};
    int64_t est[4];
    dry_run(p, &so, 4, 8, est);
    double cw = 0;
    for (int s = 0; s < 4; s++) {
        pp_stage_memory m = pp_partition_stage_memory(p, s, 8);
        assert_true(m.slot_bytes > 0 && m.param_bytes > 0);
        double rel = fabs((double)(m.total_bytes - est[s])) / (double)est[s];
        if (rel > cw) cw = rel;
    }
    printf("the partitioner's own estimate (no planner): within %.1f%% of the dry run per stage\n", 100 * cw);
    pp_partition_destroy(p);
    /* a profile of another graph is refused */
    pp_memory_profile *small = NULL;
    assert_int_equal(pp_memory_profile_create(3, 4, &small, &err), PP_OK);
    po.memory = small;
    assert_int_equal(pp_partition_create(g, 4, &po, &p, &err), PP_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "memory profile is of a graph with 3 nodes"));
    pp_memory_profile_destroy(small);
    pp_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_vs_dry_run),
        cmocka_unit_test(test_estimate_without_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
