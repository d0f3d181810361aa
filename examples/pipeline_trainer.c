/* A custom trainer on the high-level API (trainer.h): the example GPT, pipeline x data
 * parallel, learns a synthetic task it generates itself (each label is its token + 1),
 * logs its own metrics, then saves a checkpoint, trains on, reloads it and checks that the
 * reloaded model evaluates and steps exactly as it did before. Exits non-zero otherwise.
 * Usage: mpirun -np 4 example_pipeline_trainer [steps] [checkpoint dir] */
#include <onnxpipe/onnxpipe.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { VOCAB = 32, SEQ = 16, PP = 2, DP = 2, BATCH = 16, MICROBATCHES = 2 };

/* The token at position pos of sample `sample` of global batch `key`: a hash, so every
 * layout (and each replica, from its offset) reads the same global batch. */
static int64_t token(int64_t key, int64_t sample, int64_t pos)
{
    uint64_t z = (uint64_t)key * 0x9e3779b97f4a7c15u + (uint64_t)sample * 0xbf58476d1ce4e5b9u + (uint64_t)pos;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return (int64_t)((z ^ (z >> 31)) % VOCAB);
}

/* The first stage is asked for input_ids, the last for labels; eval batches use keys of
 * their own, so they are never trained on. */
static pp_status feed(void *user, const pp_trainer_feed *f, pp_error *err)
{
    (void)user;
    int64_t key = f->training ? f->step : -f->step;
    for (int i = 0; i < f->ninputs; i++) {
        const pp_trainer_input *in = &f->inputs[i];
        int labels = !strcmp(in->name, "labels");
        if (!labels && strcmp(in->name, "input_ids"))
            return pp_error_set(err, PP_ERR_INVALID_ARG, "no data for graph input '%s'", in->name);
        int64_t *v = in->data;
        for (int64_t b = 0; b < f->samples; b++)
            for (int64_t p = 0; p < SEQ; p++)
                v[b * SEQ + p] = (token(key, f->offset + b, p) + labels) % VOCAB;
    }
    return PP_OK;
}

static int fail(const pp_error *err)
{
    int rank, size;
    pp_comm_mpi_world_rank(&rank, &size);
    fprintf(stderr, "pipeline_trainer: [rank %d] %s\n", rank, err->msg);
    pp_comm_mpi_abort_world(1);   /* a peer may be waiting on this rank: end the job */
    return 1;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 40;
    const char *dir = argc > 2 ? argv[2] : "pipeline_trainer_ckpt";
    pp_error err = {0};
    pp_gpt_config gc = pp_gpt_config_default();
    gc.layers = 1, gc.d_model = 32, gc.heads = 2, gc.vocab = VOCAB, gc.seq = SEQ, gc.with_loss = 1;
    gc.batch = BATCH / (DP * MICROBATCHES);     /* the microbatch: a graph in memory has fixed dims */
    pp_graph *g = NULL;
    if (pp_example_gpt(&gc, &g, &err)) return fail(&err);

    /* the options as `onnxpipe train` reads them: the same names, parser and bounds */
    char text[5][24];
    snprintf(text[0], sizeof text[0], "%d", PP);
    snprintf(text[1], sizeof text[1], "%d", DP);
    snprintf(text[2], sizeof text[2], "%d", BATCH);
    snprintf(text[3], sizeof text[3], "%d", MICROBATCHES);
    snprintf(text[4], sizeof text[4], "%d", steps + 5);
    const char *const options[][2] = {
        {"--pp", text[0]}, {"--dp", text[1]}, {"--batch", text[2]}, {"--microbatches", text[3]},
        {"--steps", text[4]}, {"--device", "cpu"}, {"--lr", "0.01"}, {"--lr-schedule", "cosine"},
        {"--warmup", "5"}, {"--clip-norm", "1"}, {"--quiet", "1"},
    };
    pp_trainer_config *cfg = pp_trainer_config_default();
    if (!cfg) return fail(&err);
    pp_trainer_config_set_graph(cfg, g);
    for (size_t i = 0; i < sizeof options / sizeof *options; i++)
        if (pp_trainer_config_set(cfg, options[i][0], options[i][1], &err)) return fail(&err);
    pp_trainer *t = NULL;
    if (pp_trainer_create(cfg, NULL, &t, &err)) return fail(&err);
    int rank0 = pp_trainer_rank(t) == 0;

    pp_trainer_stats st;
    pp_trainer_eval_stats ev;
    double first = 0, t0 = pp_now();
    for (int s = 1; s <= steps; s++) {
        if (pp_trainer_step(t, feed, NULL, &st, &err)) return fail(&err);
        if (s == 1) first = st.loss;
        if (rank0 && (s == 1 || s % 10 == 0))
            printf("step %3lld  loss %.4f  grad_norm %.3f  lr %.2e  %.0f tokens/s\n", (long long)st.step, st.loss,
                   st.grad_norm, (double)st.lr, (double)s * BATCH * SEQ / (pp_now() - t0));
    }
    if (pp_trainer_eval(t, feed, NULL, &ev, &err)) return fail(&err);
    double eval_before = ev.loss, last = st.loss;
    if (rank0) printf("eval loss %.6f over %lld samples\n", ev.loss, (long long)ev.samples);

    /* save, train on (the parameters move), reload: the reloaded trainer evaluates and
     * takes its next step exactly as the saved one did */
    if (pp_trainer_save(t, dir, &err)) return fail(&err);
    double next_before = 0;
    for (int s = 0; s < 5; s++) {
        if (pp_trainer_step(t, feed, NULL, &st, &err)) return fail(&err);
        if (s == 0) next_before = st.loss;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/step-%d", dir, steps);
    if (pp_trainer_load(t, path, &err) || pp_trainer_eval(t, feed, NULL, &ev, &err) ||
        pp_trainer_step(t, feed, NULL, &st, &err))
        return fail(&err);
    snprintf(path, sizeof path, "%s/trained.onnx", dir);
    if (pp_trainer_export(t, path, &err)) return fail(&err);

    int falls = last < first * 0.7, same = ev.loss == eval_before && st.loss == next_before;
    if (rank0) {
        printf("loss %.4f -> %.4f: %s\n", first, last, falls ? "falls" : "does NOT fall");
        printf("reloaded step %d: eval loss %.9g (saved %.9g), next step loss %.9g (saved %.9g): %s\n", steps, ev.loss,
               eval_before, st.loss, next_before, same ? "identical" : "DIFFERENT");
    }
    pp_trainer_destroy(t);
    pp_trainer_config_destroy(cfg);
    pp_graph_destroy(g);
    pp_comm_mpi_finalize();
    return falls && same ? 0 : 1;
}
