/* The host's part in a training step, counted on the cpu device through the same device
 * wrappers a GPU step goes through (kernels/device.c's counters): after the first step a
 * step reads device memory once (its sums: losses, NaN/Inf, the squares of the norm),
 * allocates nothing and never synchronises, at pp = 1 and on both ranks of pp = 2, in fp32
 * and bf16 (the 16-bit adapter takes its shadows from the work memory); a loss or a
 * gradient that is NaN or Inf is still named at the step's end (the node, the stage's
 * input, or the parameter) and leaves the parameters as they were; the optimizer's
 * decision against closed forms; the profiler's timer bookkeeping (the cpu's timers are
 * the host clock: each call's event lies inside the host's span of the call and the rows
 * sum the events); and the rules of which steps can run as one graph. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <onnxpipe/driver_lib.h>
#include <onnxpipe/example.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/stage_lib.h>

#include "thread_comm.h"

#define MB 2        /* samples per microbatch */
#define M 4         /* microbatches per step */
#define T 8         /* tokens per sample */
#define V 32        /* vocabulary */
#define STEPS 3

static pp_graph *gpt(void)
{
    pp_gpt_config gc = {.layers = 2, .d_model = 16, .heads = 2, .vocab = V, .seq = T, .batch = MB, .seed = 3,
                        .with_loss = 1};
    pp_graph *g = NULL;
    pp_error err = {0};
    if (pp_example_gpt(&gc, &g, &err) != PP_OK) fail_msg("%s", err.msg);
    return g;
}

static pp_graph *mlp(void)
{
    pp_mlp_config mc = pp_mlp_config_default();
    mc.in = 6, mc.hidden[0] = 12, mc.hidden[1] = 10, mc.nhidden = 2, mc.classes = 5, mc.batch = MB, mc.seed = 5;
    mc.with_loss = 1;
    pp_graph *g = NULL;
    pp_error err = {0};
    if (pp_example_mlp(&mc, &g, &err) != PP_OK) fail_msg("%s", err.msg);
    return g;
}

typedef struct job {
    int pp;
    pp_dtype precision;
    const pp_schedule *sched;
    const pp_partition *part;
    thread_job *comm;
    int nan_microbatch;         /* >= 0: that microbatch's float input holds a NaN */
    const char *inf_param;      /* a parameter whose first element is made +Inf before the step */
    int skip_nonfinite;
} job;

typedef struct rank_run {
    job *j;
    int rank;
    pp_status st;
    pp_error err;
    pp_step_stats stats[STEPS];
    pp_device_counters per_step[STEPS];
    int params_unchanged;       /* after a skipped step */
    char mode[160];             /* pp_driver_step_mode after the steps */
} rank_run;

/* The data inputs of microbatch mb, through the device's copy from the host, as a GPU's feed. */
static pp_status feed(void *user, pp_stage *s, int slot, int64_t step, int64_t mb, pp_error *err)
{
    const rank_run *r = user;
    for (int i = 0; i < pp_stage_num_inputs(s); i++) {
        const pp_stage_port *p = pp_stage_input(s, i);
        if (!p->is_data) continue;
        char *host = malloc(p->nbytes);
        const size_t n = p->nbytes / pp_dtype_size(p->dtype);
        for (size_t k = 0; k < n; k++) {
            const uint64_t h = (uint64_t)(step * 7919 + mb * 104729 + (int64_t)k) * 2654435761u;
            if (p->dtype == PP_DTYPE_I64) ((int64_t *)host)[k] = (int64_t)(h % (strcmp(p->name, "labels") ? V : 5));
            else ((float *)host)[k] = (float)sin(0.3 * (double)k + (double)mb);
        }
        if (p->dtype == PP_DTYPE_F32 && mb == r->j->nan_microbatch) ((float *)host)[3] = NAN;
        pp_status st = pp_device_copy_from_host(pp_stage_device(s), pp_stage_input_buffer(s, slot, i), host, p->nbytes,
                                                err);
        free(host);
        PP_CHECK(st);
    }
    return PP_OK;
}

static void poison(pp_driver *d, const char *name)
{
    for (int k = 0; k < pp_driver_num_stages(d); k++) {
        pp_stage *s = pp_driver_stage(d, k);
        for (int i = 0; i < pp_stage_num_params(s); i++)
            if (!strcmp(pp_stage_param_at(s, i)->name, name)) pp_stage_params(s)[pp_stage_param_at(s, i)->offset] = INFINITY;
    }
}

static int64_t params_checksum(pp_driver *d, float **copy)
{
    int64_t n = 0;
    for (int k = 0; k < pp_driver_num_stages(d); k++) n += pp_stage_param_elems(pp_driver_stage(d, k));
    if (!*copy) *copy = malloc((size_t)n * sizeof(float) + 1);
    for (int k = 0, at = 0; k < pp_driver_num_stages(d); k++) {
        pp_stage *s = pp_driver_stage(d, k);
        memcpy(*copy + at, pp_stage_params(s), (size_t)pp_stage_param_elems(s) * sizeof(float));
        at += (int)pp_stage_param_elems(s);
    }
    return n;
}

static void *rank_main(void *arg)
{
    rank_run *r = arg;
    job *j = r->j;
    pp_comm *world = thread_job_world(j->comm, r->rank);
    world->timeout = 30;
    pp_device *dev = NULL;
    pp_grid *grid = NULL;
    pp_driver *d = NULL;
    float *before = NULL, *after = NULL;
    r->st = pp_device_create(PP_DEVICE_CPU, 0, &dev, &r->err);
    if (r->st == PP_OK) r->st = pp_grid_create(world, j->pp, 1, PP_GRID_STAGE_MAJOR, &grid, &r->err);
    if (r->st == PP_OK) {
        pp_stage_options so = {.slots = 1, .microbatch = MB, .global_batch = M * MB, .seed = 1, .training = 1,
                               .precision = j->precision};
        so.optim = (pp_optim_hparams){.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                      .weight_decay = 0.1f};
        pp_driver_config dc = {.schedule = j->sched, .partition = j->part, .grid = grid, .dev = dev,
                               .stage_options = so, .feed = feed, .feed_user = r, .clip_norm = 1.0f,
                               .skip_nonfinite = j->skip_nonfinite};
        r->st = pp_driver_create(&dc, &d, &r->err);
    }
    for (int step = 1; r->st == PP_OK && step <= STEPS; step++) {
        pp_device_counters c0, c1;
        if (j->inf_param && step == 2) poison(d, j->inf_param);
        int64_t n = step == 2 ? params_checksum(d, &before) : 0;
        pp_device_get_counters(dev, &c0);
        r->st = pp_driver_step(d, step, 1e-3f, &r->stats[step - 1], &r->err);
        pp_device_get_counters(dev, &c1);
        r->per_step[step - 1] = (pp_device_counters){c1.allocs - c0.allocs, c1.frees - c0.frees,
                                                      c1.host_reads - c0.host_reads, c1.host_writes - c0.host_writes,
                                                      c1.syncs - c0.syncs};
        if (r->st == PP_OK && step == 2 && r->stats[1].skipped) {
            params_checksum(d, &after);
            r->params_unchanged = !memcmp(before, after, (size_t)n * sizeof(float));
        }
        if (j->inf_param && step == 2) break;
    }
    if (d) snprintf(r->mode, sizeof r->mode, "%s", pp_driver_step_mode(d));
    free(before);
    free(after);
    pp_driver_destroy(d);
    pp_grid_destroy(grid);
    pp_comm_destroy(world);
    pp_device_destroy(dev);
    return NULL;
}

static void run_job(pp_graph *g, job *j, rank_run *runs)
{
    pp_error err = {0};
    pp_schedule *sched = NULL;
    pp_partition *part = NULL;
    if (pp_schedule_create(PP_SCHED_1F1B, j->pp, M, 1, &sched, &err) != PP_OK ||
        pp_partition_create(g, sched->num_stages, NULL, &part, &err) != PP_OK)
        fail_msg("%s", err.msg);
    j->sched = sched, j->part = part, j->comm = thread_job_create(j->pp);
    pthread_t th[2];
    for (int r = 0; r < j->pp; r++) {
        runs[r] = (rank_run){.j = j, .rank = r};
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &runs[r]), 0);
    }
    for (int r = 0; r < j->pp; r++) pthread_join(th[r], NULL);
    thread_job_destroy(j->comm);
    pp_partition_destroy(part);
    pp_schedule_destroy(sched);
}

/* After step 1: one read, no allocation, no synchronisation, per step and rank; the
 * writes are the feeds', the seeds' (last stage) and each stage's optimizer scalars. */
static void count_layout(int pp, pp_dtype precision)
{
    pp_graph *g = gpt();
    job j = {.pp = pp, .precision = precision, .nan_microbatch = -1};
    rank_run runs[2];
    run_job(g, &j, runs);
    for (int r = 0; r < pp; r++) {
        if (runs[r].st != PP_OK) fail_msg("rank %d: %s", r, runs[r].err.msg);
        for (int s = 0; s < STEPS; s++) {
            const pp_device_counters *c = &runs[r].per_step[s];
            printf("  %s pp=%d rank %d step %d: loss %.6f norm %.4f; %lld host reads, %lld writes, %lld allocations, "
                   "%lld frees, %lld synchronisations\n", pp_precision_name(precision), pp, r, s + 1,
                   runs[r].stats[s].loss, runs[r].stats[s].grad_norm, (long long)c->host_reads,
                   (long long)c->host_writes, (long long)c->allocs, (long long)c->frees, (long long)c->syncs);
            assert_true(isfinite(runs[r].stats[s].loss) && runs[r].stats[s].loss > 0);
            assert_int_equal(c->host_reads, 1);
            assert_int_equal(c->syncs, 0);
            if (s == 0) continue;
            assert_int_equal(c->allocs, 0);
            assert_int_equal(c->frees, 0);
            /* rank 0 feeds token ids, the last rank labels and seeds; both write their scalars */
            const int ids = r == 0, last = r == pp - 1;
            assert_int_equal(c->host_writes, M * (ids + 2 * last) + 1);
        }
        assert_true(runs[r].stats[STEPS - 1].loss == runs[0].stats[STEPS - 1].loss);
    }
    pp_graph_destroy(g);
}

static void pp1_fp32(void **state) { (void)state, count_layout(1, PP_DTYPE_F32); }
static void pp1_bf16(void **state) { (void)state, count_layout(1, PP_DTYPE_BF16); }
static void pp2_fp32(void **state) { (void)state, count_layout(2, PP_DTYPE_F32); }

/* A NaN fed in microbatch 2 of step 1 at pp = 2: the loss's flag travels in the step's
 * sums; at the end both ranks run microbatch 2 again and stage 0 names its input. */
static void nan_loss_named(void **state)
{
    (void)state;
    pp_graph *g = mlp();
    job j = {.pp = 2, .precision = PP_DTYPE_F32, .nan_microbatch = 2};
    rank_run runs[2];
    run_job(g, &j, runs);
    for (int r = 0; r < 2; r++) printf("  NaN in microbatch 2, rank %d: %s\n", r, runs[r].err.msg);
    assert_int_equal(runs[0].st, PP_ERR_NUMERIC);
    assert_int_equal(runs[1].st, PP_ERR_NUMERIC);
    assert_non_null(strstr(runs[0].err.msg, "step 1, microbatch 2: input 'x' of the stage holds NaN or Inf"));
    assert_non_null(strstr(runs[1].err.msg, "microbatch 2: input"));
    assert_non_null(strstr(runs[1].err.msg, "it comes from the previous stage"));
    pp_graph_destroy(g);
}

/* An Inf weight in the last Gemm: the node that made the NaN/Inf is named by the rank
 * holding it; with --skip-nonfinite the step is skipped and nothing changes. */
static void inf_weight(void **state)
{
    (void)state;
    pp_graph *g = mlp();
    const char *w = NULL;
    for (int i = 0; i < g->nvalues; i++)
        if (g->values[i].is_param && g->values[i].shape.rank == 2) w = g->values[i].name;   /* the last matrix */
    job j = {.pp = 2, .precision = PP_DTYPE_F32, .nan_microbatch = -1, .inf_param = w};
    rank_run runs[2];
    run_job(g, &j, runs);
    printf("  +Inf in '%s' at step 2: rank 0: %s\n  rank 1: %s\n", w, runs[0].err.msg, runs[1].err.msg);
    assert_int_equal(runs[1].st, PP_ERR_NUMERIC);
    assert_non_null(strstr(runs[1].err.msg, "step 2, microbatch 0: node '"));
    assert_non_null(strstr(runs[1].err.msg, "(Gemm) produced NaN or Inf"));
    assert_int_equal(runs[0].st, PP_ERR_NUMERIC);
    j.skip_nonfinite = 1;
    run_job(g, &j, runs);
    for (int r = 0; r < 2; r++) {
        if (runs[r].st != PP_OK) fail_msg("rank %d: %s", r, runs[r].err.msg);
        printf("  --skip-nonfinite, rank %d: step 2 skipped %d, parameters unchanged %d, one read %lld\n", r,
               runs[r].stats[1].skipped, runs[r].params_unchanged, (long long)runs[r].per_step[1].host_reads);
        assert_true(runs[r].stats[1].skipped && runs[r].params_unchanged);
        assert_int_equal(runs[r].per_step[1].host_reads, 1);
    }
    pp_graph_destroy(g);
}

/* pp_optim_step_decide against closed forms: the norm's clipping factor, and a skip for a
 * bad loss or a norm that is not finite. */
static void optimizer_decision(void **state)
{
    (void)state;
    const struct { double sumsq, bad; float clip; float scale; int skip; } c[] = {
        {4.0, 0, 1.0f, 0.5f, 0}, {0.25, 0, 1.0f, 1.0f, 0}, {4.0, 0, 0.0f, 1.0f, 0}, {9.0, 0, 1.5f, 0.5f, 0},
        {NAN, 0, 1.0f, -1, 1}, {INFINITY, 0, 1.0f, -1, 1}, {4.0, 1, 1.0f, 0.5f, 1},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        pp_optim_step s = {0};
        pp_optim_step_decide(c[i].sumsq, c[i].bad, c[i].clip, &s);
        printf("  sumsq %g, %g bad losses, clip %g: scale %g, skip %d\n", c[i].sumsq, c[i].bad, (double)c[i].clip,
               (double)s.grad_scale, s.skip);
        assert_int_equal(s.skip, c[i].skip);
        if (c[i].scale >= 0) assert_true(s.grad_scale == c[i].scale);
    }
}

/* The profiler on the cpu's timers: every call's event lies inside the host's span of the
 * forward or backward that made it, events follow each other, and the rows sum them. An
 * event maps onto the host's clock through the anchor, read at most 20 us before it was
 * recorded (stage/profile.c): an event may seem to start up to that much early. */
static void profiler_timers(void **state)
{
    (void)state;
    pp_error err = {0};
    pp_graph *g = gpt();
    pp_device *dev = NULL;
    pp_stage *s = NULL;
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &dev, &err), PP_OK);
    pp_stage_options so = {.slots = 1, .microbatch = MB, .global_batch = MB, .seed = 1, .training = 1};
    so.optim = (pp_optim_hparams){.kind = PP_OPTIM_SGD};
    assert_int_equal(pp_stage_create_range(g, 0, g->nnodes, 1, dev, &so, &s, &err), PP_OK);
    rank_run r = {0};
    job j = {.nan_microbatch = -1};
    r.j = &j;
    assert_int_equal(pp_stage_profile_enable(s, 1, &err), PP_OK);
    assert_int_equal(pp_stage_profile_events(s, 1, &err), PP_OK);
    int total = 0;
    for (int rep = 0; rep < 2; rep++) {
        assert_int_equal(feed(&r, s, 0, 1, rep, &err), PP_OK);
        const double t0 = pp_now();
        assert_int_equal(pp_stage_forward(s, 0, 1, rep, &err), PP_OK);
        const double t1 = pp_now();
        assert_int_equal(pp_stage_backward(s, 0, PP_BACKWARD_FULL, &err), PP_OK);
        const double t2 = pp_now();
        assert_int_equal(pp_stage_profile_flush(s, &err), PP_OK);
        assert_int_equal(pp_stage_profile_flush(s, &err), PP_OK);   /* nothing new: nothing added */
        int n = 0, nf = 0, nb = 0;
        const pp_stage_op_event *e = pp_stage_profile_get_events(s, &n);
        double sum = 0, prev_end = 0;
        for (int k = total; k < n; k++) {
            const double lo = e[k].backward ? t1 : t0, hi = e[k].backward ? t2 : t1;
            assert_true(e[k].t_start >= lo - 20e-6 && e[k].t_end <= hi + 1e-6 && e[k].t_end >= e[k].t_start);
            assert_true(e[k].t_start >= prev_end - 1e-6);
            prev_end = e[k].t_end;
            sum += e[k].t_end - e[k].t_start;
            nf += e[k].backward == 0, nb += e[k].backward == 1;
        }
        int nrows = 0;
        const pp_stage_op_profile *rows = pp_stage_profile_get(s, &nrows);
        double rows_s = 0;
        int64_t calls = 0;
        for (int k = 0; k < nrows; k++) {
            rows_s += rows[k].forward_s + rows[k].backward_s;
            calls += rows[k].forward_calls + rows[k].backward_calls;
        }
        printf("  microbatch %d: %d forward and %d backward events inside the host's spans (%.3f + %.3f ms), "
               "%.3f ms in them; rows: %lld calls, %.3f ms\n", rep, nf, nb, 1e3 * (t1 - t0), 1e3 * (t2 - t1), 1e3 * sum,
               (long long)calls, 1e3 * rows_s);
        assert_int_equal(nf, pp_stage_num_ops(s));
        assert_true(nb > 0);
        assert_int_equal(calls, n);
        total = n;
        assert_true(sum <= (t2 - t0) + 1e-6);
    }
    int nrows = 0;
    const pp_stage_op_profile *rows = pp_stage_profile_get(s, &nrows);
    double rows_s = 0, events_s = 0;
    for (int k = 0; k < nrows; k++) rows_s += rows[k].forward_s + rows[k].backward_s;
    int n = 0;
    const pp_stage_op_event *e = pp_stage_profile_get_events(s, &n);
    for (int k = 0; k < n; k++) events_s += e[k].t_end - e[k].t_start;
    printf("  two microbatches: the rows' %.6f s = the events' %.6f s\n", rows_s, events_s);
    assert_true(fabs(rows_s - events_s) <= 1e-9 * (1 + events_s));
    pp_stage_destroy(s);
    pp_device_destroy(dev);
    pp_graph_destroy(g);
}

/* Which steps can be one graph: the rules in their order, on the facts that decide them;
 * a stage with Dropout while training refuses, naming the node; the cpu runs eagerly. */
static void graph_rules(void **state)
{
    (void)state;
    const pp_graph_facts ok = {.device_caps = PP_DEVICE_CAP_GRAPHS, .ranks = 1, .shapes = 0};
    assert_null(pp_graph_refusal(&ok));
    const struct { pp_graph_facts f; const char *why; } c[] = {
        {{.device_caps = PP_DEVICE_CAP_GRAPHS, .ranks = 1, .disabled = 1}, "PP_CUDA_GRAPHS=0"},
        {{.device_caps = PP_DEVICE_CAP_HOST_MEMORY, .ranks = 1}, "does not capture graphs"},
        {{.device_caps = PP_DEVICE_CAP_GRAPHS, .ranks = 2}, "several ranks"},
        {{.device_caps = PP_DEVICE_CAP_GRAPHS, .ranks = 1, .shapes = 3}, "sequence buckets"},
        {{.device_caps = PP_DEVICE_CAP_GRAPHS, .ranks = 1, .recording = 1}, "times each call on the host"},
        {{.device_caps = PP_DEVICE_CAP_GRAPHS, .ranks = 1, .loss_scaling = 1}, "fp16 loss scaling"},
        {{.device_caps = PP_DEVICE_CAP_GRAPHS, .ranks = 1, .stage_refusal = "node 'd' (Dropout) draws"}, "Dropout"},
        {{.device_caps = PP_DEVICE_CAP_GRAPHS, .ranks = 4, .loss_scaling = 1, .disabled = 1}, "PP_CUDA_GRAPHS=0"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const char *why = pp_graph_refusal(&c[i].f);
        printf("  rule %zu: %s\n", i, why ? why : "(a graph)");
        assert_non_null(why);
        assert_non_null(strstr(why, c[i].why));
    }
    printf("  a device with graphs, one rank, one shape, nothing timed, no scaler, no Dropout: a graph\n");

    /* x -> Gemm -> Dropout -> loss: the stage names its Dropout while training, not after */
    pp_error err = {0};
    pp_graph *g = NULL;
    static const float w[12] = {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f, 0.9f, 1.0f, 1.1f, 1.2f};
    static const float ratio = 0.25f;
    const int64_t xd[2] = {MB, 4}, wd[2] = {3, 4}, yd[1] = {MB};
    pp_shape xs = pp_shape_make(2, xd), ws = pp_shape_make(2, wd), ys = pp_shape_make(1, yd), rs = pp_shape_make(0, NULL);
    int node;
    assert_int_equal(pp_graph_create("dropout", 17, &g, &err), PP_OK);
    assert_int_equal(pp_graph_add_input(g, "x", PP_DTYPE_F32, &xs, &err), PP_OK);
    assert_int_equal(pp_graph_add_input(g, "labels", PP_DTYPE_I64, &ys, &err), PP_OK);
    assert_int_equal(pp_graph_add_initializer(g, "w", PP_DTYPE_F32, &ws, w, sizeof w, 0, &err), PP_OK);
    assert_int_equal(pp_graph_add_initializer(g, "ratio", PP_DTYPE_F32, &rs, &ratio, sizeof ratio, 0, &err), PP_OK);
    assert_int_equal(pp_graph_add_node(g, "Gemm", "", "fc", (const char *[]){"x", "w"}, 2, (const char *[]){"h"}, 1,
                                       &node, &err), PP_OK);
    assert_int_equal(pp_graph_set_attr_int(g, node, "transB", 1, &err), PP_OK);
    assert_int_equal(pp_graph_add_node(g, "Dropout", "", "drop", (const char *[]){"h", "ratio"}, 2,
                                       (const char *[]){"logits"}, 1, &node, &err), PP_OK);
    assert_int_equal(pp_graph_add_node(g, "SoftmaxCrossEntropyLoss", "", "xent", (const char *[]){"logits", "labels"},
                                       2, (const char *[]){"loss"}, 1, &node, &err), PP_OK);
    assert_int_equal(pp_graph_add_output(g, "loss", PP_DTYPE_F32, NULL, &err), PP_OK);
    if (pp_graph_finalize(g, NULL, &err) != PP_OK) fail_msg("%s", err.msg);
    pp_device *dev = NULL;
    pp_stage *s = NULL;
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &dev, &err), PP_OK);
    pp_stage_options so = {.slots = 1, .microbatch = MB, .global_batch = MB, .seed = 1, .training = 1};
    so.optim = (pp_optim_hparams){.kind = PP_OPTIM_SGD};
    if (pp_stage_create_range(g, 0, g->nnodes, 1, dev, &so, &s, &err) != PP_OK) fail_msg("%s", err.msg);
    char why[160] = "";
    assert_int_equal(pp_stage_graph_refusal(s, why, sizeof why), 1);
    printf("  the Dropout stage while training: %s\n", why);
    assert_non_null(strstr(why, "node 'drop' (Dropout)"));
    pp_stage_set_training(s, 0);
    assert_int_equal(pp_stage_graph_refusal(s, why, sizeof why), 0);
    pp_stage_destroy(s);
    pp_device_destroy(dev);
    pp_graph_destroy(g);

    /* the cpu's driver says why it runs eagerly */
    pp_graph *m = gpt();
    job j = {.pp = 1, .precision = PP_DTYPE_F32, .nan_microbatch = -1};
    rank_run runs[1];
    run_job(m, &j, runs);
    assert_int_equal(runs[0].st, PP_OK);
    printf("  the cpu's driver: %s\n", runs[0].mode);
    assert_string_equal(runs[0].mode, "eager: the device does not capture graphs");
    pp_graph_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pp1_fp32),          cmocka_unit_test(pp1_bf16),        cmocka_unit_test(pp2_fp32),
        cmocka_unit_test(nan_loss_named),    cmocka_unit_test(inf_weight),      cmocka_unit_test(optimizer_decision),
        cmocka_unit_test(profiler_timers),   cmocka_unit_test(graph_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
