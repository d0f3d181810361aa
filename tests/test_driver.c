/* The driver on its own: one training step of the example MLP through pp_driver_step,
 * every rank a thread of this process talking through tests/thread_comm.h (an in-process
 * communicator that moves the real bytes), under gpipe, 1f1b, zb-h1 and interleaved
 * at pp = 2, zb-v at pp = 2 (four stages), and 1f1b at pp = 2 x dp = 2. The reference is
 * one pp_stage holding the whole model run here over the same microbatches in order
 * (tests/test_stage.c checks that against closed forms), then one SGD step: a pipeline's
 * loss, gradients and updated parameters are bitwise the reference's (every layout adds
 * the microbatches in the order pp = 1 does); with dp = 2 the replicas' sums meet in an
 * all-reduce, so there they agree to float rounding. The gradient norm is checked
 * against the reference's gradients summed in double. */
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
#include <onnxpipe/stage_lib.h>

#include "thread_comm.h"

#define B 2       /* samples per microbatch */
#define IN 6
#define C 5
#define M 4       /* microbatches per replica */
#define LR 0.25f
#define MAX_RANKS 4

static pp_graph *mlp(void)
{
    pp_mlp_config mc = pp_mlp_config_default();
    mc.in = IN, mc.hidden[0] = 12, mc.hidden[1] = 10, mc.nhidden = 2, mc.classes = C, mc.batch = B, mc.seed = 5;
    mc.with_loss = 1;
    pp_graph *g = NULL;
    pp_error err = {0};
    if (pp_example_mlp(&mc, &g, &err) != PP_OK) fail_msg("%s", err.msg);
    return g;
}

static pp_stage_options stage_options(int dp)
{
    pp_stage_options so = {.slots = 1, .microbatch = B, .global_batch = (int64_t)dp * M * B, .seed = 1, .training = 1};
    so.optim = (pp_optim_hparams){.kind = PP_OPTIM_SGD};
    return so;
}

/* Global microbatch gm's data into slot's data inputs (x, labels) of s. */
static void fill(pp_stage *s, int slot, int gm)
{
    for (int i = 0; i < pp_stage_num_inputs(s); i++) {
        const pp_stage_port *p = pp_stage_input(s, i);
        void *d = pp_stage_input_buffer(s, slot, i);
        if (!p->is_data) continue;
        for (int b = 0; b < B; b++)
            if (!strcmp(p->name, "labels")) ((int64_t *)d)[b] = (gm * B + b) * 2 % C;
            else for (int k = 0; k < IN; k++) ((float *)d)[b * IN + k] = (float)sin(0.5 + 0.9 * (gm * B + b) + 1.7 * k);
    }
}

/* ---- the reference: one stage, every microbatch in order, one SGD step ---------------- */

typedef struct reference {
    pp_stage *s;
    double loss, grad_norm;
} reference;

static void run_reference(const pp_graph *g, pp_device *dev, int dp, reference *r)
{
    pp_error err = {0};
    pp_stage_options so = stage_options(dp);
    if (pp_stage_create_range(g, 0, g->nnodes, 1, dev, &so, &r->s, &err) != PP_OK) fail_msg("%s", err.msg);
    assert_int_equal(pp_stage_zero_grads(r->s, &err), PP_OK);
    r->loss = 0;
    for (int gm = 0; gm < dp * M; gm++) {
        fill(r->s, 0, gm);
        assert_int_equal(pp_stage_forward(r->s, 0, 1, gm, &err), PP_OK);
        r->loss += pp_stage_loss_share(r->s, 0, pp_stage_loss(r->s, 0));
        assert_int_equal(pp_stage_backward(r->s, 0, PP_BACKWARD_FULL, &err), PP_OK);
    }
    double sq = 0;
    const float *grads = pp_stage_grads(r->s);
    for (int64_t i = 0; i < pp_stage_param_elems(r->s); i++) sq += (double)grads[i] * grads[i];
    r->grad_norm = sqrt(sq);
    assert_int_equal(pp_stage_step(r->s, LR, 1.0f, 1, &err), PP_OK);
}

/* ---- the pipeline: one thread per rank ----------------------------------------------- */

typedef struct job_spec {
    int pp, dp;
    const pp_schedule *sched;
    const pp_partition *part;
    const reference *ref;
    thread_job *comm;
    float *grads, *params;   /* like the reference's flat buffers, filled by replica 0's ranks */
    int *seen;               /* [reference params] how many ranks wrote parameter i */
} job_spec;

typedef struct rank_run {
    job_spec *job;
    int rank, replica;
    pp_status st;
    pp_error err;
    pp_step_stats stats;
} rank_run;

static pp_status feed(void *user, pp_stage *stage, int slot, int64_t step, int64_t microbatch, pp_error *err)
{
    (void)step, (void)err;
    const rank_run *r = user;
    fill(stage, slot, r->replica * M + (int)microbatch);
    return PP_OK;
}

/* Copies replica 0's gradients and parameters into the job's reference-shaped buffers. */
static void collect(rank_run *r, pp_driver *d)
{
    job_spec *j = r->job;
    const pp_stage *ref = j->ref->s;
    for (int k = 0; r->replica == 0 && k < pp_driver_num_stages(d); k++) {
        pp_stage *s = pp_driver_stage(d, k);
        for (int i = 0; i < pp_stage_num_params(s); i++) {
            const pp_stage_param *p = pp_stage_param_at(s, i);
            for (int q = 0; q < pp_stage_num_params(ref); q++) {
                const pp_stage_param *rp = pp_stage_param_at(ref, q);
                if (strcmp(rp->name, p->name)) continue;
                memcpy(j->grads + rp->offset, pp_stage_grads(s) + p->offset, (size_t)p->numel * sizeof(float));
                memcpy(j->params + rp->offset, pp_stage_params(s) + p->offset, (size_t)p->numel * sizeof(float));
                __atomic_add_fetch(&j->seen[q], 1, __ATOMIC_RELAXED);
            }
        }
    }
}

static void *rank_main(void *arg)
{
    rank_run *r = arg;
    job_spec *j = r->job;
    pp_comm *world = thread_job_world(j->comm, r->rank);
    world->timeout = 20;
    pp_device *dev = NULL;
    pp_grid *grid = NULL;
    pp_driver *d = NULL;
    r->st = pp_device_create(PP_DEVICE_CPU, 0, &dev, &r->err);
    if (r->st == PP_OK) r->st = pp_grid_create(world, j->pp, j->dp, PP_GRID_STAGE_MAJOR, &grid, &r->err);
    if (r->st == PP_OK) {
        r->replica = grid->replica;
        pp_driver_config dc = {.schedule = j->sched, .partition = j->part, .grid = grid, .dev = dev,
                               .stage_options = stage_options(j->dp), .feed = feed, .feed_user = r};
        r->st = pp_driver_create(&dc, &d, &r->err);
    }
    if (r->st == PP_OK) r->st = pp_driver_step(d, 1, LR, &r->stats, &r->err);
    if (r->st == PP_OK) collect(r, d);
    pp_driver_destroy(d);
    pp_grid_destroy(grid);
    pp_comm_destroy(world);
    pp_device_destroy(dev);
    return NULL;
}

/* The largest |a - b| / (1e-6 + |b|) over n floats; *bitwise: all equal. */
static double compare(const float *a, const float *b, int64_t n, int *bitwise)
{
    double e = 0;
    *bitwise = !memcmp(a, b, (size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - b[i]) / (1e-6 + fabs((double)b[i])));
    return e;
}

static void run_layout(pp_schedule_kind kind, int pp, int dp, int chunks)
{
    pp_error err = {0};
    pp_graph *g = mlp();
    pp_device *dev = NULL;
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &dev, &err), PP_OK);
    reference ref;
    run_reference(g, dev, dp, &ref);
    int64_t n = pp_stage_param_elems(ref.s);
    job_spec j = {.pp = pp, .dp = dp, .ref = &ref, .comm = thread_job_create(pp * dp),
                  .grads = calloc((size_t)n, sizeof(float)), .params = calloc((size_t)n, sizeof(float)),
                  .seen = calloc((size_t)pp_stage_num_params(ref.s), sizeof(int))};
    pp_schedule *sched = NULL;
    pp_partition *part = NULL;
    if (pp_schedule_create(kind, pp, M, chunks, &sched, &err) != PP_OK ||
        pp_partition_create(g, sched->num_stages, NULL, &part, &err) != PP_OK)
        fail_msg("%s", err.msg);
    j.sched = sched, j.part = part;
    /* the reference's flat buffers have alignment gaps: make them equal there */
    memcpy(j.grads, pp_stage_grads(ref.s), (size_t)n * sizeof(float));
    memcpy(j.params, pp_stage_params(ref.s), (size_t)n * sizeof(float));
    for (int q = 0; q < pp_stage_num_params(ref.s); q++) {
        const pp_stage_param *p = pp_stage_param_at(ref.s, q);
        memset(j.grads + p->offset, 0xff, (size_t)p->numel * sizeof(float));   /* NaN until a rank writes it */
        memset(j.params + p->offset, 0xff, (size_t)p->numel * sizeof(float));
    }
    rank_run runs[MAX_RANKS];
    pthread_t th[MAX_RANKS];
    for (int r = 0; r < pp * dp; r++) {
        runs[r] = (rank_run){.job = &j, .rank = r};
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &runs[r]), 0);
    }
    for (int r = 0; r < pp * dp; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < pp * dp; r++)
        if (runs[r].st != PP_OK) fail_msg("rank %d: %s", r, runs[r].err.msg);
    for (int q = 0; q < pp_stage_num_params(ref.s); q++) assert_int_equal(j.seen[q], 1);

    int grads_same, params_same;
    double grad_err = compare(j.grads, pp_stage_grads(ref.s), n, &grads_same);
    double param_err = compare(j.params, pp_stage_params(ref.s), n, &params_same);
    double loss = runs[0].stats.loss, norm = runs[0].stats.grad_norm;
    printf("  %-11s pp=%d x dp=%d, %d stages, %d microbatches per replica, %d threads: loss %.9f (one stage %.9f), "
           "grad norm %.7f (one stage, summed in double: %.7f); gradients %s (max rel err %.1e), parameters after "
           "SGD %s (%.1e)\n",
           pp_schedule_kind_name(kind), pp, dp, sched->num_stages, M, pp * dp, loss, ref.loss, norm, ref.grad_norm,
           grads_same ? "bitwise equal" : "differ", grad_err, params_same ? "bitwise equal" : "differ", param_err);
    for (int r = 1; r < pp * dp; r++) assert_true(runs[r].stats.loss == loss);
    assert_true(fabs(norm - ref.grad_norm) <= 1e-5 * ref.grad_norm);
    if (dp == 1) {
        assert_true(loss == ref.loss);
        assert_true(grads_same && params_same);
    } else {
        assert_true(fabs(loss - ref.loss) <= 1e-6 * ref.loss);
        assert_true(grad_err < 1e-4 && param_err < 1e-5);
    }
    pp_partition_destroy(part);
    pp_schedule_destroy(sched);
    thread_job_destroy(j.comm);
    free(j.grads);
    free(j.params);
    free(j.seen);
    pp_stage_destroy(ref.s);
    pp_device_destroy(dev);
    pp_graph_destroy(g);
}

static void gpipe(void **state) { (void)state, run_layout(PP_SCHED_GPIPE, 2, 1, 1); }
static void one_f_one_b(void **state) { (void)state, run_layout(PP_SCHED_1F1B, 2, 1, 1); }
static void zb_h1(void **state) { (void)state, run_layout(PP_SCHED_ZB_H1, 2, 1, 1); }
static void interleaved(void **state) { (void)state, run_layout(PP_SCHED_INTERLEAVED, 2, 1, 2); }
static void zb_v(void **state) { (void)state, run_layout(PP_SCHED_ZB_V, 2, 1, 2); }
static void data_parallel(void **state) { (void)state, run_layout(PP_SCHED_1F1B, 2, 2, 1); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpipe),       cmocka_unit_test(one_f_one_b), cmocka_unit_test(zb_h1),
        cmocka_unit_test(interleaved), cmocka_unit_test(zb_v),        cmocka_unit_test(data_parallel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
