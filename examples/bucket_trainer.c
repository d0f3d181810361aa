/* A custom trainer with sequence buckets: trains a causal language model whose ONNX file
 * has a symbolic sequence dim at several lengths, step s at buckets[(s - 1) % n], fed
 * with its own tokens, and prints each step's length and loss (rank 0) and the device
 * memory the trainer allocated (each rank), then evaluates the trained model at every
 * length (eval batch 1's tokens). Run it under mpirun with pp x dp ranks.
 * usage: example_bucket_trainer MODEL DIM PP DP MICROBATCHES SCHEDULE STEPS L1,L2,...
 *        [mismatch]
 * The model reads idx int64 [batch, DIM] and gives logits [batch, DIM, vocab]; the loss
 * is the mean cross-entropy of the logits against the next tokens (labels). Token t of
 * global sample i at step s is (131 s + 17 i + 7 t + t^2 mod 5) mod vocab. mismatch: rank
 * 0 runs step 1 at the first bucket and the others at the second (an error to report). */
#include <onnxpipe/onnxpipe.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 4

typedef struct data {
    int64_t vocab;
} data;

static int64_t token(int64_t step, int64_t sample, int64_t t, int64_t vocab)
{
    return (131 * step + 17 * sample + 7 * t + (t * t) % 5) % vocab;
}

/* idx [samples, L] and labels [samples, L] (the next tokens) of this microbatch. */
static pp_status feed(void *user, const pp_trainer_feed *f, pp_error *err)
{
    const data *d = user;
    for (int k = 0; k < f->ninputs; k++) {
        const pp_trainer_input *in = &f->inputs[k];
        int next = !strcmp(in->name, "labels");
        if (!next && strcmp(in->name, "idx"))
            return pp_error_set(err, PP_ERR_INVALID_ARG, "unexpected input '%s'", in->name);
        int64_t L = in->shape.dims[1], *x = in->data;
        if (L != f->length)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "input '%s' has length %lld, the bucket %lld", in->name,
                                (long long)L, (long long)f->length);
        for (int64_t i = 0; i < f->samples; i++)
            for (int64_t t = 0; t < L; t++) x[i * L + t] = token(f->step, f->offset + i, t + next, d->vocab);
    }
    return PP_OK;
}

static int parse_buckets(const char *text, int64_t *out, int cap)
{
    int n = 0;
    for (const char *p = text; *p && n < cap; n++) {
        char *end;
        out[n] = strtoll(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 9) {
        fprintf(stderr, "usage: %s MODEL DIM PP DP MICROBATCHES SCHEDULE STEPS L1,L2,... [mismatch]\n", argv[0]);
        return 2;
    }
    pp_error err = {0};
    int64_t buckets[16];
    int nbuckets = parse_buckets(argv[8], buckets, 16);
    int64_t steps = atoll(argv[7]);
    char batch[24];
    snprintf(batch, sizeof batch, "%d", BATCH);
    /* the options as `onnxpipe train` reads them: the same names, parser and bounds */
    const char *const options[][2] = {
        {"--model", argv[1]}, {"--pp", argv[3]}, {"--dp", argv[4]}, {"--microbatches", argv[5]},
        {"--schedule", argv[6]}, {"--steps", argv[7]}, {"--batch", batch}, {"--device", "cpu"}, {"--quiet", "1"},
        {"--loss", "cross_entropy"}, {"--logits", "logits"}, {"--labels", "labels"},
    };
    pp_trainer_config *c = pp_trainer_config_default();
    pp_status st = c ? PP_OK : PP_NOMEM(&err);
    for (size_t i = 0; st == PP_OK && i < sizeof options / sizeof *options; i++)
        st = pp_trainer_config_set(c, options[i][0], options[i][1], &err);
    if (st == PP_OK) st = pp_trainer_config_set_buckets(c, argv[2], buckets, nbuckets, &err);
    int mismatch = argc > 9 && !strcmp(argv[9], "mismatch");
    if (st != PP_OK) {
        fprintf(stderr, "bucket_trainer: %s\n", err.msg);
        pp_trainer_config_destroy(c);
        return 2;
    }
    pp_trainer *t = NULL;
    data d = {0};
    st = pp_trainer_create(c, NULL, &t, &err);
    if (st == PP_OK) {
        const pp_graph *g = pp_trainer_graph(t);
        for (int i = 0; i < pp_graph_num_outputs(g); i++)
            if (!strcmp(pp_graph_value_name(g, pp_graph_output(g, i)), "logits"))
                d.vocab = pp_graph_value_shape(g, pp_graph_output(g, i))->dims[2];
        pp_device_memory_stats m;
        pp_device_memory(pp_stage_device(pp_driver_stage(pp_trainer_driver(t), 0)), &m);
        printf("rank %d memory %lld bytes (stash %lld, scratch %lld, params %lld)\n", pp_trainer_rank(t),
               (long long)m.current_total, (long long)m.current[PP_MEM_STASH], (long long)m.current[PP_MEM_SCRATCH],
               (long long)m.current[PP_MEM_PARAMS]);
    }
    for (int64_t s = 1; st == PP_OK && s <= steps; s++) {
        int b = (int)((s - 1) % nbuckets);
        if (mismatch) b = pp_trainer_rank(t) == 0 ? 0 : 1;
        pp_trainer_stats stats;
        st = pp_trainer_set_bucket(t, b, &err);
        if (st == PP_OK) st = pp_trainer_step(t, feed, &d, &stats, &err);
        if (st == PP_OK && pp_trainer_rank(t) == 0)
            printf("step %lld length %lld loss %.9g\n", (long long)s, (long long)buckets[b], stats.loss);
    }
    for (int b = 0; st == PP_OK && !mismatch && b < nbuckets; b++) {   /* the trained model at every length */
        pp_trainer_eval_stats e;
        st = pp_trainer_set_bucket(t, b, &err);
        if (st == PP_OK) st = pp_trainer_eval(t, feed, &d, &e, &err);
        if (st == PP_OK && pp_trainer_rank(t) == 0) printf("eval length %lld loss %.9g\n", (long long)buckets[b], e.loss);
    }
    if (st != PP_OK) {
        fprintf(stderr, "bucket_trainer: error: %s\n", err.msg);
        fflush(NULL);
        pp_comm_mpi_abort_world(1);   /* a peer may wait on this rank: end the job */
        return 1;
    }
    pp_trainer_destroy(t);
    pp_trainer_config_destroy(c);
    pp_comm_mpi_finalize();
    return 0;
}
