/* The planner (planner/, plan.h) on small example models: the layouts it enumerates against
 * a count made here from the rules (pp x dp <= N, dp and microbatches dividing the batch,
 * interleaved's microbatches a multiple of pp, recompute only where less of it does not
 * fit); memory feasibility (every layout returned fits, none fits in too little memory and
 * the error says what the smallest needs); its lower bound below the simulated step on every
 * layout; its top list equal to an independent pricing of each layout (the partition
 * training makes, pp_plan_stage_costs, the simulator with the links and all-reduces
 * written out here); a calibration that gives back the stage time it measured, and its
 * file read back; and bad options refused with the value named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include <onnxpipe/example.h>
#include <onnxpipe/plan.h>
#include <onnxpipe/driver_lib.h>
#include <onnxpipe/schedule_lib.h>

#include "planner_internal.h"

#define DIR "test-out/plan"
#define GPT DIR "/gpt.onnx"
#define MLP DIR "/mlp_fixed.onnx"
#define BATCH 8
#define DEVICES 4

static int setup(void **state)
{
    (void)state;
    mkdir("test-out", 0755);
    mkdir(DIR, 0755);
    pp_error err = {0};
    pp_gpt_config gc = pp_gpt_config_default();
    gc.layers = 2;
    gc.d_model = 32;
    gc.heads = 2;
    gc.vocab = 64;
    gc.seq = 16;
    gc.with_loss = 1;
    pp_graph *g = NULL;
    if (pp_example_gpt(&gc, &g, &err) != PP_OK || pp_graph_save(g, GPT, NULL, &err) != PP_OK) fail_msg("%s", err.msg);
    pp_graph_destroy(g);
    pp_mlp_config mc = pp_mlp_config_default();
    mc.batch = 2;   /* a fixed batch: the only microbatch it can run */
    mc.with_loss = 1;
    if (pp_example_mlp(&mc, &g, &err) != PP_OK || pp_graph_save(g, MLP, NULL, &err) != PP_OK) fail_msg("%s", err.msg);
    pp_graph_destroy(g);
    return 0;
}

static pp_plan_options options(void)
{
    return (pp_plan_options){
        .devices = DEVICES, .batch = BATCH, .device = PP_DEVICE_CPU,
        .cost = {.gflops = 10, .gflops_lowp = 20, .optimizer_s_per_param = 1e-9},
        .links = {.host_gbps = 1, .latency_s = 1e-5},
        .stage = {.optim = {.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f},
                  .loss = {.ignore_index = -100}, .training = 1},
    };
}

static pp_plan_result *search(const char *model, const pp_plan_options *o)
{
    pp_plan_result *r = NULL;
    pp_error err = {0};
    if (pp_plan_search(model, NULL, o, &r, &err) != PP_OK) fail_msg("%s", err.msg);
    return r;
}

/* The layouts the rules allow on N devices for batch B (each schedule kind, interleaved with 2
 * chunks; pp = 1 runs one kind), times precisions and recompute modes. */
static int64_t count_layouts(int N, int64_t B, int nprec, int nrc, int nodes)
{
    int64_t n = 0;
    for (int pp = 1; pp <= N; pp++)
        for (int dp = 1; pp * dp <= N; dp++) {
            if (B % dp) continue;
            for (int64_t m = 1; m <= B / dp; m++) {
                if ((B / dp) % m) continue;
                int kinds = pp == 1 ? 1 : 3 + (m % pp == 0 && 2 * pp <= nodes) + (2 * pp <= nodes);
                n += kinds;
            }
        }
    return n * nprec * nrc;
}

static void test_enumeration(void **state)
{
    (void)state;
    pp_plan_options o = options();
    o.top = 1000;
    pp_plan_result *r = search(GPT, &o);
    int64_t want = count_layouts(DEVICES, BATCH, 3, 3, 1000);
    printf("%lld layouts enumerated (%lld evaluated, %lld skipped: less recompute fits), rules say %lld; %lld "
           "simulated, %d returned, complete %d, %.3f s\n", (long long)(r->layouts + r->dominated),
           (long long)r->layouts, (long long)r->dominated, (long long)want, (long long)r->simulated, r->n, r->complete,
           r->seconds);
    assert_int_equal(r->layouts + r->dominated, want);
    /* everything fits in 80 GiB: recompute is never needed, so only none is evaluated */
    assert_int_equal(r->layouts, want / 3);
    assert_int_equal(r->memory_pruned, 0);
    assert_true(r->complete);
    assert_int_equal(r->tokens_per_sample, 16);
    for (int i = 0; i < r->n; i++) {
        const pp_plan_entry *e = &r->entries[i];
        assert_true(e->pp * e->dp <= DEVICES);
        assert_int_equal(e->microbatch * e->dp * e->microbatches, BATCH);
        assert_int_equal(e->recompute, PP_RECOMPUTE_NONE);
        assert_true(e->exact);
        if (i) assert_true(e->step_s >= r->entries[i - 1].step_s);
        assert_true(e->tokens_per_s > 0 && fabs(e->tokens_per_s - BATCH * 16 / e->step_s) < 1e-6 * e->tokens_per_s);
    }
    /* restricting the search: only what is asked for comes back */
    int pps[] = {2};
    int64_t ms[] = {4};
    o.pp_values = pps;
    o.npp = 1;
    o.microbatch_counts = ms;
    o.nmicrobatch_counts = 1;
    o.kinds = 1u << PP_SCHED_ZB_V | 1u << PP_SCHED_INTERLEAVED;
    pp_dtype fp32[] = {PP_DTYPE_F32};
    o.precisions = fp32;
    o.nprecisions = 1;
    pp_plan_result *r2 = search(GPT, &o);
    assert_int_equal(r2->layouts, 2 * 2);   /* dp 1 and 2 (batch 8: microbatch 2 and 1), two kinds */
    for (int i = 0; i < r2->n; i++) {
        const pp_plan_entry *e = &r2->entries[i];
        assert_int_equal(e->pp, 2);
        assert_int_equal(e->microbatches, 4);
        assert_true(e->kind == PP_SCHED_ZB_V || e->kind == PP_SCHED_INTERLEAVED);
        assert_int_equal(e->chunks, 2);
        assert_int_equal(e->precision, PP_DTYPE_F32);
    }
    pp_plan_result_destroy(r2);
    pp_plan_result_destroy(r);
}

/* A fixed batch dim: only its microbatch. */
static void test_fixed_batch(void **state)
{
    (void)state;
    pp_plan_options o = options();
    o.top = 1000;
    pp_plan_result *r = search(MLP, &o);
    assert_true(r->n > 0);
    for (int i = 0; i < r->n; i++) assert_int_equal(r->entries[i].microbatch, 2);
    assert_int_equal(r->tokens_per_sample, 0);
    printf("fixed batch 2: %d layouts returned, all with microbatch 2\n", r->n);
    pp_plan_result_destroy(r);
}

static void test_memory(void **state)
{
    (void)state;
    pp_plan_options o = options();
    o.top = 1000;
    pp_plan_result *all = search(GPT, &o);
    /* the median peak: about half the layouts must go, and recompute comes in */
    int64_t *peaks = calloc((size_t)all->n, sizeof *peaks);
    for (int i = 0; i < all->n; i++) peaks[i] = all->entries[i].peak_bytes;
    for (int i = 1; i < all->n; i++)
        for (int j = i; j > 0 && peaks[j] < peaks[j - 1]; j--) {
            int64_t t = peaks[j];
            peaks[j] = peaks[j - 1];
            peaks[j - 1] = t;
        }
    o.device_memory = (double)peaks[all->n / 2];
    pp_plan_result *half = search(GPT, &o);
    int rc_used = 0;
    for (int i = 0; i < half->n; i++) {
        assert_true(half->entries[i].exact);
        assert_true((double)half->entries[i].peak_bytes <= o.device_memory);
        for (int k = 0; k < half->entries[i].pp; k++)
            assert_true(half->entries[i].rank_bytes[k] <= half->entries[i].peak_bytes);
        rc_used |= half->entries[i].recompute != PP_RECOMPUTE_NONE;
    }
    printf("device memory %lld bytes: %d layouts returned (%d without the limit; %lld over by the model, %lld by the stage planner), "
           "recompute used: %d\n", (long long)o.device_memory, half->n, all->n, (long long)half->memory_pruned,
           (long long)half->exact_rejected, rc_used);
    assert_true(half->n > 0);
    assert_true(half->memory_pruned + half->exact_rejected > 0);
    /* too little for anything: an error that says what the smallest needs */
    o.device_memory = 1000;
    pp_plan_result *none = NULL;
    pp_error err = {0};
    assert_int_equal(pp_plan_search(GPT, NULL, &o, &none, &err), PP_ERR_INVALID_ARG);
    printf("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "fits in 1000 B per device"));
    assert_non_null(strstr(err.msg, "the smallest needs"));
    assert_null(none);
    free(peaks);
    pp_plan_result_destroy(half);
    pp_plan_result_destroy(all);
}

/* The bound against the simulation, on the same split, for every layout that fits. */
static void test_bound_below_simulation(void **state)
{
    (void)state;
    pp_plan_options o = options();
    o.devices = 8;
    o.batch = 16;
    o.links.devices_per_host = 2;   /* some boundaries and rings cross hosts */
    o.links.network_gbps = 0.1;
    plan_ctx c = {.o = &o};
    pp_error err = {0};
    assert_int_equal(plan_model_load(&c, GPT, NULL, &err), PP_OK);
    c.max_s = c.model.n;
    c.splits = calloc((size_t)c.max_s + 1, sizeof *c.splits);
    c.exact_splits = calloc((size_t)c.max_s + 1, sizeof *c.exact_splits);
    c.opt_slots = 2;
    c.opt_rate = 1e-9;
    c.host_bw = 1e9;
    c.net_bw = 1e8;
    c.lat = 1e-5;
    static const int kinds[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_INTERLEAVED, PP_SCHED_ZB_H1, PP_SCHED_ZB_V};
    int n = 0;
    double worst = 1, tight = 0;
    for (int pp = 1; pp <= 8; pp++)
        for (int dp = 1; pp * dp <= 8; dp++)
            for (int64_t m = 1; m * dp <= 16; m *= 2)
                for (int k = 0; k < 5; k++)
                    for (int rc = 0; rc < 3; rc++) {
                        int kind = kinds[k], v = kind == PP_SCHED_INTERLEAVED || kind == PP_SCHED_ZB_V ? 2 : 1;
                        if ((pp == 1 && v > 1) || (kind == PP_SCHED_INTERLEAVED && m % pp) || 16 % (dp * m)) continue;
                        plan_cand x = {.pp = pp, .dp = dp, .chunks = v, .kind = (int8_t)kind, .recompute = (int8_t)rc,
                                       .prec = (int8_t)(rc == 1 ? PP_DTYPE_BF16 : PP_DTYPE_F32), .m = m};
                        assert_int_equal(plan_evaluate(&c, &x, 0, &err), PP_OK);
                        double bound = c.ev.bound, step = 0, bubble = 0;
                        assert_int_equal(plan_simulate(&c, &x, &step, &bubble, &err), PP_OK);
                        if (bound > step * (1 + 1e-12))
                            fail_msg("pp %d dp %d m %lld %s rc %d: bound %.9g above the simulated %.9g", pp, dp,
                                     (long long)m, pp_schedule_kind_name(kind), rc, bound, step);
                        if (bound / step < worst) worst = bound / step;
                        tight += fabs(bound - step) < 1e-9 * step;
                        n++;
                    }
    printf("%d layouts (hosts of 2): bound <= simulated step on all; bound / step >= %.3f, equal on %.0f\n", n, worst,
           tight);
    assert_true(n > 300);
    plan_ctx_free(&c);
}

/* Each returned layout priced again from the public pieces: training's partition,
 * pp_plan_stage_costs, the links and all-reduces written out, the simulator. */
static void test_top_list_repriced(void **state)
{
    (void)state;
    pp_plan_options o = options();
    o.top = 40;
    pp_plan_result *r = search(GPT, &o);
    pp_error err = {0};
    double worst = 0;
    for (int i = 0; i < r->n; i++) {
        const pp_plan_entry *e = &r->entries[i];
        pp_graph_options go = {.batch = e->microbatch};
        pp_graph *g = NULL;
        pp_schedule *s = NULL;
        pp_partition *p = NULL;
        assert_int_equal(pp_graph_load(GPT, &go, &g, &err), PP_OK);
        assert_int_equal(pp_schedule_create(e->kind, e->pp, (int)e->microbatches, e->chunks, &s, &err), PP_OK);
        pp_partition_options po = {.microbatches = 1};
        assert_int_equal(pp_partition_create(g, s->num_stages, &po, &p, &err), PP_OK);
        pp_stage_cost *sc = calloc((size_t)s->num_stages, sizeof *sc);
        assert_int_equal(pp_plan_stage_costs(p, &o.cost, e->microbatch, e->precision, e->recompute, sc, &err), PP_OK);
        double params[64] = {0}, opt = 0;
        for (int st = 0; st < s->num_stages; st++) {
            int rk = s->stage_rank[st];
            params[rk] += (double)p->stages[st].params;
            if (st + 1 < s->num_stages && s->stage_rank[st + 1] != rk)
                sc[st].send_time = o.links.latency_s + sc[st].send_bytes / (o.links.host_gbps * 1e9);
            sc[st].send_bytes = 0;
            if (e->dp > 1)
                sc[st].allreduce = 2.0 * (e->dp - 1) / e->dp * (double)p->stages[st].param_bytes /
                                       (o.links.host_gbps * 1e9) + 2.0 * (e->dp - 1) * o.links.latency_s;
        }
        for (int rk = 0; rk < e->pp; rk++)
            if (params[rk] * o.cost.optimizer_s_per_param > opt) opt = params[rk] * o.cost.optimizer_s_per_param;
        pp_costs pc = {.stage = sc, .num_stages = s->num_stages, .optimizer = opt};
        pp_sim_result *sim = NULL;
        assert_int_equal(pp_schedule_simulate(s, &pc, &sim, &err), PP_OK);
        double d = fabs(sim->makespan - e->step_s) / e->step_s;
        if (d > worst) worst = d;
        if (d > 1e-9)
            fail_msg("#%d pp %d dp %d %s m %lld %s %s: planner %.9g s, repriced %.9g s", i + 1, e->pp, e->dp,
                     pp_schedule_kind_name(e->kind), (long long)e->microbatches, pp_precision_name(e->precision),
                     pp_recompute_name(e->recompute), e->step_s, sim->makespan);
        pp_sim_result_destroy(sim);
        free(sc);
        pp_partition_destroy(p);
        pp_schedule_destroy(s);
        pp_graph_destroy(g);
    }
    printf("%d layouts repriced from training's partition and pp_plan_stage_costs: max relative difference %.2g\n",
           r->n, worst);
    pp_plan_result_destroy(r);
}

/* A calibration predicts, at a point it timed, the stage time it measured. */
static void test_calibration(void **state)
{
    (void)state;
    pp_error err = {0};
    pp_calibrate_options co = {.max_microbatch = 2, .device = PP_DEVICE_CPU, .reps = 1,
                               .optim = {.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f},
                               .loss = {.ignore_index = -100}};
    pp_calibration *c = NULL, *back = NULL;
    assert_int_equal(pp_calibrate(GPT, &co, &c, &err), PP_OK);
    assert_true(pp_calibration_has_precision(c, PP_DTYPE_F32));
    assert_false(pp_calibration_has_precision(c, PP_DTYPE_BF16));
    assert_int_equal(c->npoints, 2);
    assert_int_equal(pp_calibration_save(c, DIR "/cal.json", &err), PP_OK);
    assert_int_equal(pp_calibration_load(DIR "/cal.json", &back, &err), PP_OK);
    assert_int_equal(back->npoints, 2);
    assert_true(pp_calibration_model_hash(back) == pp_calibration_model_hash(c));
    pp_graph_options go = {.batch = 2};
    pp_graph *g = NULL;
    pp_partition *p = NULL;
    assert_int_equal(pp_graph_load(GPT, &go, &g, &err), PP_OK);
    assert_int_equal(pp_partition_create(g, 1, NULL, &p, &err), PP_OK);
    const calib_point *pt = &back->points[1];
    assert_int_equal(pt->microbatch, 2);
    double f = 0, b = 0;
    for (int k = 0; k < pt->nops; k++) f += pt->ops[k].forward_s, b += pt->ops[k].backward_s;
    pp_cost_model cm = {.calibration = back};
    pp_stage_cost sc;
    assert_int_equal(pp_plan_stage_costs(p, &cm, 2, PP_DTYPE_F32, PP_RECOMPUTE_NONE, &sc, &err), PP_OK);
    printf("calibrated microbatch 2: forward %.3f ms, backward %.3f ms measured; predicted %.3f ms, %.3f ms\n", 1e3 * f,
           1e3 * b, 1e3 * sc.forward, 1e3 * (sc.backward_input + sc.backward_weight));
    assert_true(fabs(sc.forward - f) <= 1e-9 * f);
    assert_true(fabs(sc.backward_input + sc.backward_weight - b) <= 1e-9 * b);
    /* between the points: between the two times scaled to that size */
    pp_stage_cost mid;
    assert_int_equal(pp_plan_stage_costs(p, &cm, 2, PP_DTYPE_BF16, PP_RECOMPUTE_FULL, &mid, &err), PP_OK);
    assert_true(mid.backward_input > sc.backward_input);   /* the forward runs again */
    pp_partition_destroy(p);
    pp_graph_destroy(g);
    /* a damaged file is refused naming the field */
    FILE *f2 = fopen(DIR "/bad.json", "w");
    fprintf(f2, "{\"format\": \"onnxpipe-calibration\", \"version\": 1, \"model\": \"m\", \"model_hash\": \"0\", "
                "\"memcpy_gbps\": 5, \"optimizer_s_per_param\": 1e-9, \"points\": [{\"precision\": \"fp32\", "
                "\"microbatch\": 1, \"ops\": [{\"op\": \"MatMul\", \"calls\": 1, \"flops\": 10, \"bytes\": 4, "
                "\"forward_s\": -1, \"backward_s\": 1}]}]}");
    fclose(f2);
    pp_calibration *bad = NULL;
    assert_int_equal(pp_calibration_load(DIR "/bad.json", &bad, &err), PP_ERR_PARSE);
    printf("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "points[0].ops[0].forward_s"));
    f2 = fopen(DIR "/bad.json", "w");
    fprintf(f2, "{\"format\": \"onnxpipe-calibration\", \"version\": 2}");
    fclose(f2);
    assert_int_equal(pp_calibration_load(DIR "/bad.json", &bad, &err), PP_ERR_PARSE);
    printf("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "version 2"));
    pp_calibration_destroy(back);
    pp_calibration_destroy(c);
}

static void test_bad_options(void **state)
{
    (void)state;
    static const struct {
        const char *what, *want;
    } cases[] = {{"devices 0", "devices 0 out of range"},   {"batch 0", "batch 0"},
                 {"pp 5000", "pp 5000 out of range"},       {"chunks 1", "chunks 1 out of range"},
                 {"dp 9", "dp 9 out of range"},             {"no layout", "no layout to search"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_plan_options o = options();
        int bad_pp[] = {5000}, bad_dp[] = {9}, chunks[] = {1}, dp3[] = {3};
        if (i == 0) o.devices = 0;
        if (i == 1) o.batch = 0;
        if (i == 2) o.pp_values = bad_pp, o.npp = 1;
        if (i == 3) o.kinds = 1u << PP_SCHED_INTERLEAVED, o.chunks = chunks, o.nchunks = 1;
        if (i == 4) o.dp_values = bad_dp, o.ndp = 1;
        if (i == 5) o.dp_values = dp3, o.ndp = 1;   /* 3 does not divide the batch 8 */
        pp_plan_result *r = NULL;
        pp_error err = {0};
        assert_int_equal(pp_plan_search(GPT, NULL, &o, &r, &err), PP_ERR_INVALID_ARG);
        printf("%s: %s\n", cases[i].what, err.msg);
        assert_non_null(strstr(err.msg, cases[i].want));
        assert_null(r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enumeration),        cmocka_unit_test(test_fixed_batch),
        cmocka_unit_test(test_memory),             cmocka_unit_test(test_bound_below_simulation),
        cmocka_unit_test(test_top_list_repriced),  cmocka_unit_test(test_calibration),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
