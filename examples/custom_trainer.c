/* A custom trainer on the public tier alone: splits the example MLP into pipeline stages
 * (pp_partition), makes a schedule for one rank per stage (pp_schedule), builds the stages
 * on the cpu (pp_stage) and, in one process, walks every rank's action list itself, the way
 * the library's driver does across processes: SEND / RECV become copies between the
 * stages' buffers, and each rank's OPTIMIZER_STEP steps AdamW. It feeds its own data (a
 * fixed teacher's labels) and writes what tests/ref/custom_trainer_ref.py trains in
 * PyTorch to compare: the initial model, the batches, the per-step losses and the trained
 * parameters. Usage: example_custom_trainer [steps] [out_dir] [schedule] [ranks] */
#include <onnxpipe/onnxpipe.h>

#include <stdlib.h>
#include <string.h>

#define BATCH 32        /* samples per optimizer step */
#define MICRO 4         /* microbatches per step */
#define MB (BATCH / MICRO)
#define MAX_STAGES 8

typedef struct job {
    int nstages;                    /* virtual stages: ranks x chunks */
    pp_stage *stage[MAX_STAGES];    /* virtual stage s runs on rank pp_schedule_stage_rank(s) */
    const pp_schedule *sched;
    const float *x;                 /* this step's batch [BATCH, in] */
    const int64_t *y;               /* [BATCH] */
    int64_t in;
    char *sent;                     /* [2][nstages][MICRO]: SEND_ACT / SEND_GRAD done */
} job;

static int fail(const char *what, const pp_error *err)
{
    fprintf(stderr, "custom_trainer: %s: %s\n", what, err->msg);
    return 1;
}

/* The port of stage s holding value id v: its input (out = 0) or output (out = 1); -1 if none. */
static int port_of(const pp_stage *s, int out, int v)
{
    int n = out ? pp_stage_num_outputs(s) : pp_stage_num_inputs(s);
    for (int i = 0; i < n; i++)
        if ((out ? pp_stage_output(s, i) : pp_stage_input(s, i))->value == v) return i;
    return -1;
}

/* The slot of a microbatch: each stage keeps one per microbatch in flight, and with
 * MICRO slots every microbatch has its own. */
static int slot_of(int mb)
{
    return mb;
}

/* Fills stage s's data inputs ("x", "labels") for microbatch mb from the step's batch. */
static void feed(job *j, pp_stage *s, int mb)
{
    for (int i = 0; i < pp_stage_num_inputs(s); i++) {
        const pp_stage_port *p = pp_stage_input(s, i);
        if (!p->is_data) continue;
        void *buf = pp_stage_input_buffer(s, slot_of(mb), i);
        if (!strcmp(p->name, "x")) memcpy(buf, j->x + (size_t)mb * MB * (size_t)j->in, p->nbytes);
        if (!strcmp(p->name, "labels")) memcpy(buf, j->y + (size_t)mb * MB, p->nbytes);
    }
}

/* Moves microbatch mb between neighbouring stages, matching ports by value id: stage
 * `from`'s output activations into stage from + 1's inputs, or (grad) stage `from`'s input
 * gradients into stage from - 1's output gradients. */
static void pass(job *j, int grad, int from, int mb)
{
    pp_stage *src = j->stage[from], *dst = j->stage[grad ? from - 1 : from + 1];
    int slot = slot_of(mb), n = grad ? pp_stage_num_outputs(dst) : pp_stage_num_inputs(dst);
    for (int i = 0; i < n; i++) {
        const pp_stage_port *p = grad ? pp_stage_output(dst, i) : pp_stage_input(dst, i);
        if (p->is_data) continue;
        int k = port_of(src, !grad, p->value);
        if (grad) memcpy(pp_stage_grad_output_buffer(dst, slot, i), pp_stage_grad_input_buffer(src, slot, k), p->nbytes);
        else memcpy(pp_stage_input_buffer(dst, slot, i), pp_stage_output_buffer(src, slot, k), p->nbytes);
    }
}

static char *sent_flag(job *j, int grad, int stage, int mb)
{
    return &j->sent[((size_t)grad * (size_t)j->nstages + (size_t)stage) * MICRO + (size_t)mb];
}

/* Whether stages a and b run on the same rank (they then exchange data without SEND/RECV). */
static int local(const job *j, int a, int b)
{
    return b >= 0 && b < j->nstages && pp_schedule_stage_rank(j->sched, a) == pp_schedule_stage_rank(j->sched, b);
}

/* Runs rank r's action a; *ran = 0 when it must wait (a RECV whose message is not there). */
static pp_status run_action(job *j, int r, const pp_action *a, int64_t step, float lr, int *ran, pp_error *err)
{
    *ran = 1;
    int st = a->stage, mb = a->microbatch, grad = a->kind == PP_ACT_SEND_GRAD || a->kind == PP_ACT_RECV_GRAD;
    pp_stage *s = st >= 0 ? j->stage[st] : NULL;
    switch (a->kind) {
    case PP_ACT_FORWARD:
        if (st > 0 && local(j, st, st - 1)) pass(j, 0, st - 1, mb);
        feed(j, s, mb);
        return pp_stage_forward(s, slot_of(mb), step, mb, err);
    case PP_ACT_BACKWARD:
    case PP_ACT_BACKWARD_INPUT:
        if (local(j, st, st + 1)) pass(j, 1, st + 1, mb);
        return pp_stage_backward(s, slot_of(mb), a->kind == PP_ACT_BACKWARD ? PP_BACKWARD_FULL : PP_BACKWARD_INPUT,
                                 err);
    case PP_ACT_BACKWARD_WEIGHT:
        return pp_stage_backward(s, slot_of(mb), PP_BACKWARD_WEIGHT, err);
    case PP_ACT_SEND_ACT:
    case PP_ACT_SEND_GRAD:   /* the data stays in the stage's slot until the receiver copies it */
        *sent_flag(j, grad, st, mb) = 1;
        return PP_OK;
    case PP_ACT_RECV_ACT:
    case PP_ACT_RECV_GRAD:
        *ran = *sent_flag(j, grad, grad ? st + 1 : st - 1, mb);
        if (*ran) pass(j, grad, grad ? st + 1 : st - 1, mb);
        return PP_OK;
    case PP_ACT_REDUCE_GRADS:   /* one replica: nothing to all-reduce */
        return PP_OK;
    case PP_ACT_OPTIMIZER_STEP: /* the rank's stages: tied uses summed, then AdamW (no clipping) */
        for (int k = 0; k < j->nstages; k++) {
            if (pp_schedule_stage_rank(j->sched, k) != r) continue;
            PP_CHECK(pp_stage_sum_uses(j->stage[k], err));
            PP_CHECK(pp_stage_step(j->stage[k], lr, 1.0f, step, err));
        }
        return PP_OK;
    default:
        return pp_error_set(err, PP_ERR_INVALID_ARG, "unknown action kind %d", a->kind);
    }
}

/* One training step: every rank walks its actions in order, a rank waiting at a RECV
 * while the others go on (the schedule is deadlock-free: pp_schedule_validate). */
static pp_status train_step(job *j, int pp, int64_t step, float lr, double *loss, pp_error *err)
{
    int cursor[MAX_STAGES] = {0}, left = pp;
    memset(j->sent, 0, (size_t)2 * (size_t)j->nstages * MICRO);
    for (int s = 0; s < j->nstages; s++) PP_CHECK(pp_stage_zero_grads(j->stage[s], err));
    while (left > 0) {
        int progress = 0;
        for (int r = 0; r < pp; r++) {
            int n = 0;
            const pp_action *acts = pp_schedule_rank_actions(j->sched, r, &n);
            while (cursor[r] < n) {
                int ran = 0;
                PP_CHECK(run_action(j, r, &acts[cursor[r]], step, lr, &ran, err));
                if (!ran) break;
                progress = 1;
                if (++cursor[r] == n) left--;
            }
        }
        if (!progress) return pp_error_set(err, PP_ERR_INTERNAL, "no rank can go on: the schedule deadlocks");
    }
    /* the loss of the step: the mean over its microbatches (equal sizes) */
    *loss = 0;
    for (int mb = 0; mb < MICRO; mb++) *loss += pp_stage_loss(j->stage[j->nstages - 1], slot_of(mb)) / MICRO;
    return PP_OK;
}

/* x ~ U(-1, 1) from a 64-bit LCG (24 bits each), label = argmax of a fixed linear teacher. */
static void make_batch(uint64_t *state, const float *teacher, int64_t d, int64_t c, float *x, int64_t *y)
{
    for (int b = 0; b < BATCH; b++) {
        for (int64_t k = 0; k < d; k++) {
            *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
            x[b * d + k] = (float)(*state >> 40) / 16777216.0f * 2.0f - 1.0f;
        }
        int64_t best = 0;
        float best_v = -1e30f;
        for (int64_t j = 0; j < c; j++) {
            float v = 0;
            for (int64_t k = 0; k < d; k++) v += x[b * d + k] * teacher[k * c + j];
            if (v > best_v) best_v = v, best = j;
        }
        y[b] = best;
    }
}

/* The trained parameters, by name: NAME.bin of float32 in out_dir (a cpu stage's buffer is
 * host memory; pp_device_copy_to_host makes it so on any device). */
static pp_status write_params(pp_stage *s, const char *dir, pp_error *err)
{
    pp_device *dev = pp_stage_device(s);
    for (int i = 0; i < pp_stage_num_params(s); i++) {
        const pp_stage_param *p = pp_stage_param_at(s, i);
        size_t bytes = (size_t)p->numel * sizeof(float);
        float *host = malloc(bytes);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.bin", dir, p->name);
        FILE *f = host ? fopen(path, "wb") : NULL;
        pp_status st = !host ? pp_error_set(err, PP_ERR_NOMEM, "out of memory")
                       : !f  ? pp_error_set(err, PP_ERR_IO, "cannot write %s", path)
                             : pp_device_copy_to_host(dev, host, pp_stage_params(s) + p->offset, bytes, err);
        if (st == PP_OK && fwrite(host, 1, bytes, f) != bytes) st = pp_error_set(err, PP_ERR_IO, "writing %s", path);
        if (f) fclose(f);
        free(host);
        PP_CHECK(st);
    }
    return PP_OK;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 200;
    const char *dir = argc > 2 ? argv[2] : NULL;
    const char *kind_name = argc > 3 ? argv[3] : "1f1b";
    int pp = argc > 4 ? atoi(argv[4]) : 2;
    float lr = 3e-3f;
    pp_error err = {0};
    pp_schedule_kind kind;
    if (pp_schedule_kind_parse(kind_name, &kind, &err)) return fail("schedule", &err);
    int chunks = pp_schedule_default_chunks(kind), nstages = pp * chunks;   /* virtual stages */
    if (pp < 1 || nstages > MAX_STAGES) {
        fprintf(stderr, "custom_trainer: ranks x chunks must be 1..%d, got %d x %d\n", MAX_STAGES, pp, chunks);
        return 2;
    }

    /* the model, its microbatch bound as the batch dim, and its split */
    pp_mlp_config mc = pp_mlp_config_default();
    mc.batch = MB;
    mc.with_loss = 1;
    pp_graph *g = NULL;
    pp_partition *part = NULL;
    if (pp_example_mlp(&mc, &g, &err) || pp_partition_create(g, nstages, NULL, &part, &err))
        return fail("partition", &err);
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/mlp.onnx", dir);
        if (pp_graph_save(g, path, NULL, &err)) return fail("saving the model", &err);
    }
    for (int s = 0; s < pp_partition_num_stages(part); s++) {
        const int *nodes = NULL, *outs = NULL;
        int n = pp_partition_stage_nodes(part, s, &nodes), nout = pp_partition_stage_outputs(part, s, &outs);
        printf("stage %d: %d nodes, %lld parameters, sends %s\n", s, n, (long long)pp_partition_stage_params(part, s),
               nout ? pp_graph_value_name(g, outs[0]) : "nothing");
    }

    /* the schedule: pp ranks, MICRO microbatches; validated, and timed */
    pp_schedule *sched = NULL;
    pp_sim_result *sim = NULL;
    pp_costs costs = {.uniform = {.forward = 1, .backward_input = 1, .backward_weight = 1}};
    if (pp_schedule_create(kind, pp, MICRO, chunks, &sched, &err) ||
        pp_schedule_validate(sched, stderr, &err) || pp_schedule_simulate(sched, &costs, &sim, &err))
        return fail("schedule", &err);
    printf("schedule %s: %d ranks, %d virtual stages, %d microbatches, simulated bubble %.1f%% (F = B = W)\n",
           kind_name, pp, pp_schedule_num_stages(sched), MICRO, 100 * pp_sim_result_bubble(sim));
    pp_sim_result_destroy(sim);

    /* the stages, each with a slot per microbatch; the loss is the global batch's mean */
    pp_device *dev = NULL;
    job j = {.nstages = nstages, .sched = sched, .in = mc.in, .sent = calloc((size_t)2 * (size_t)nstages * MICRO, 1)};
    pp_stage_options so = pp_stage_options_default();
    so.slots = MICRO;
    so.microbatch = MB;
    so.global_batch = BATCH;
    if (pp_device_create(PP_DEVICE_CPU, 0, &dev, &err)) return fail("device", &err);
    for (int s = 0; s < nstages; s++)
        if (pp_stage_create(part, s, dev, &so, &j.stage[s], &err)) return fail("stage", &err);

    /* our own data, written for the reference when out_dir is given */
    int64_t d = mc.in, c = mc.classes;
    float *teacher = malloc((size_t)(d * c) * sizeof *teacher), *x = malloc((size_t)(BATCH * d) * sizeof *x);
    int64_t *y = malloc(BATCH * sizeof *y);
    for (int64_t k = 0; k < d * c; k++) teacher[k] = (float)((k * 7919 % 101) - 50) / 50.0f;
    FILE *data = NULL, *losses = NULL;
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/batches.bin", dir);
        data = fopen(path, "wb");
        snprintf(path, sizeof path, "%s/losses.txt", dir);
        losses = fopen(path, "w");
        if (!data || !losses) {
            fprintf(stderr, "custom_trainer: cannot write into %s\n", dir);
            return 1;
        }
    }
    uint64_t state = 42;
    j.x = x, j.y = y;
    double first = 0, last = 0;
    for (int step = 1; step <= steps; step++) {
        make_batch(&state, teacher, d, c, x, y);
        if (data) fwrite(x, sizeof *x, (size_t)(BATCH * d), data), fwrite(y, sizeof *y, BATCH, data);
        if (train_step(&j, pp, step, lr, &last, &err)) return fail("step", &err);
        if (step == 1) first = last;
        if (losses) fprintf(losses, "%d %.9g\n", step, last);
        if (step % 50 == 0 || step == 1) printf("step %4d  loss %.4f\n", step, last);
    }
    printf("loss %.4f -> %.4f\n", first, last);
    if (data) fclose(data);
    if (losses) fclose(losses);
    for (int s = 0; dir && s < nstages; s++)
        if (write_params(j.stage[s], dir, &err)) return fail("writing the parameters", &err);

    free(teacher);
    free(x);
    free(y);
    free(j.sent);
    for (int s = 0; s < nstages; s++) pp_stage_destroy(j.stage[s]);
    pp_device_destroy(dev);
    pp_schedule_destroy(sched);
    pp_partition_destroy(part);
    pp_graph_destroy(g);
    return last < first ? 0 : 1;
}
