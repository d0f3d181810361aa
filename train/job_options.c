/* The training job's option tables (internal/onnxpipe/options.h): the dataset's
 * (`onnxpipe train` and `data show`) and the run's (pp_train_config: `onnxpipe train`, the
 * trainer's table nested in it), with the parsers only they use, and how the job reads its
 * datasets from them. */
#include <onnxpipe/options.h>
#include <onnxpipe/train_job.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_token_dtype(const char *v, void *f, pp_error *err)
{
    pp_dtype t = pp_dtype_parse(v);
    if (t != PP_DTYPE_U16 && t != PP_DTYPE_U32) return pp_option_bad(err, "--token-dtype: '%s' is not a token type: use uint16 or uint32", v);
    *(pp_dtype *)f = t;
    return 1;
}

/* --save-on-signal SIGTERM,USR1,... (names with or without SIG) or none, into a mask. */
static int parse_signals(const char *v, void *f, pp_error *err)
{
    uint64_t *mask = f;
    *mask = 0;
    if (!strcmp(v, "none")) return 1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const char *name = strncmp(tok, "SIG", 3) ? tok : tok + 3;
        int sig = 0;
        for (int s = 1; s < 64 && !sig; s++)
            if (sigabbrev_np(s) && !strcmp(sigabbrev_np(s), name)) sig = s;
        if (!sig || sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE ||
            sig == SIGILL || sig == SIGCHLD || sig == SIGPIPE)
            return pp_option_bad(err, "--save-on-signal: '%s' is not a signal a job can be preempted with (example: "
                       "SIGTERM,SIGUSR1)", tok);
        *mask |= 1ull << sig;
    }
    return *mask != 0 || pp_option_bad(err, "--save-on-signal needs a signal or none, got '%s'", v);
}

/* --profile-steps A:B (or A: one step) with 1 <= A <= B, into profile_first, profile_last. */
static int parse_range(const char *v, void *f, pp_error *err)
{
    char *end;
    long long a = strtoll(v, &end, 10), b = a;
    if (*end == ':') b = strtoll(end + 1, &end, 10);
    if (*end || end == v || a < 1 || b < a)
        return pp_option_bad(err, "--profile-steps expects A:B with 1 <= A <= B, got '%s' (example: 5:7, steps 5, 6 and 7)", v);
    int64_t *range = f;   /* profile_first, profile_last: adjacent int64_t fields */
    range[0] = a, range[1] = b;
    return 1;
}

#define DO(f) PP_OPT_FIELD(pp_dataset_options, f)

const pp_option pp_dataset_option_table[] = {
    {.type = PP_OPT_INT, .name = "--seq", .metavar = "T", DO(seq), .lo = 1, .hi = 1LL << 30, .group = PP_OPT_GROUP_DATA,
     .help = "tokens per sample of a token stream or indexed dataset"},
    {.type = PP_OPT_ENUM, .name = "--token-dtype", .metavar = "D", DO(token_dtype), .parse = parse_token_dtype,
     .shown = "uint16", .group = PP_OPT_GROUP_DATA, .help = "a raw .bin stream's tokens: uint16 or uint32"},
    {.type = PP_OPT_FLAG, .name = "--pack", DO(docs), .set = PP_DOCS_PACK, .group = PP_OPT_GROUP_DATA,
     .help = "pack the documents (a stream's split after each --eos token, or the\n"
             "indexed dataset's) into samples of --seq tokens, longest first; labels\n"
             "stop at each document's end, position_ids restart, and a model input\n"
             "named *mask* of [batch, .., T, T] gets each document's causal mask"},
    {.type = PP_OPT_FLAG, .name = "--pad", DO(docs), .set = PP_DOCS_PAD, .group = PP_OPT_GROUP_DATA,
     .help = "one document per sample instead, padded to --seq (cut where longer)"},
    {.type = PP_OPT_INT, .name = "--eos", .metavar = "ID", DO(eos), .lo = 0, .hi = 1LL << 40, .def = -1,
     .shown = "none", .group = PP_OPT_GROUP_DATA, .help = "the token that ends a document in a stream (--pack, --pad)"},
    {.type = PP_OPT_STR, .name = "--data-cache", .metavar = "DIR", DO(cache_dir), .shown = "beside the data",
     .group = PP_OPT_GROUP_DATA,
     .help = "where --pack and --pad cache the document index and sample plan they\n"
             "build once (default: beside the data, or HOME/.cache/onnxpipe/data\n"
             "where its folder is read-only)"},
    {0},
};

#define TN(f) PP_OPT_FIELD(pp_train_config, f)

const pp_option pp_train_option_table[] = {
    {.type = PP_OPT_STR, .name = "--data", .metavar = "DATA", TN(data), .group = PP_OPT_GROUP_DATA,
     .help = "the dataset, read in place (see above)"},
    {.type = PP_OPT_TABLE, .sub = pp_dataset_option_table, TN(dataset)},
    {.type = PP_OPT_INTS, .name = "--seq-buckets", .metavar = "A,B,..", TN(trainer.buckets),
     PP_OPT_COUNT(pp_train_config, trainer.nbuckets), .lo = 1, .hi = 32, .group = PP_OPT_GROUP_DATA,
     .help = "with --pad or --pack: each sample in the shortest of these lengths\n"
             "that holds it (the last is --seq); a global batch has one length"},
    {.type = PP_OPT_INT, .name = "--epochs", .metavar = "E", TN(epochs), .lo = 1, .hi = 1LL << 30, .agree = 1,
     .group = PP_OPT_GROUP_DATA, .help = "instead of --steps: E passes over the data (samples / batch steps each)"},
    {.type = PP_OPT_FLAG, .name = "--shuffle", TN(shuffle), .agree = 1, .group = PP_OPT_GROUP_DATA,
     .help = "a seeded permutation of the samples per epoch (--seed), the same for\n"
             "every layout"},
    /* the trainer hashes its own options (pp_trainer_create) */
    {.type = PP_OPT_TABLE, .sub = pp_trainer_option_table, TN(trainer)},
    {.type = PP_OPT_CUSTOM, .name = "--save-on-signal", .metavar = "LIST", TN(save_signals), .parse = parse_signals,
     .shown = "SIGTERM with --save; none: off", .agree = 1, .group = PP_OPT_GROUP_CKPT,
     .help = "signals that preempt the job: every rank finishes its step, saves it,\n"
             "and the job exits with status 75; under mpirun use SIGUSR1, which\n"
             "mpirun forwards (SIGTERM to mpirun kills the ranks a second later)"},
    {.type = PP_OPT_STR, .name = "--eval-data", .metavar = "DIR", TN(eval_data), .agree = 1, .group = PP_OPT_GROUP_EVAL,
     .help = "a dataset evaluated forward-only through the same pipeline"},
    {.type = PP_OPT_INT, .name = "--eval-every", .metavar = "N", TN(eval_every), .lo = 1, .hi = 1LL << 40,
     .shown = "after the last only", .agree = 1, .group = PP_OPT_GROUP_EVAL, .help = "after every N steps and after the last"},
    {.type = PP_OPT_STR, .name = "--losses", .metavar = "FILE", TN(losses_out), .group = PP_OPT_GROUP_OUTPUT,
     .help = "write 'step loss' lines"},
    {.type = PP_OPT_STR, .name = "--export", .metavar = "FILE", TN(export_path), .group = PP_OPT_GROUP_OUTPUT,
     .help = "write the trained model as ONNX at the end"},
    {.type = PP_OPT_STR, .name = "--trace", .metavar = "FILE", TN(trace_path), .agree = 1, .group = PP_OPT_GROUP_OUTPUT,
     .help = "write the last step as executed (Perfetto / chrome://tracing JSON)"},
    {.type = PP_OPT_STR, .name = "--logdir", .metavar = "DIR", TN(logdir), .agree = 1, .group = PP_OPT_GROUP_LOGS,
     .help = "TensorBoard event files (rank 0): train/, eval/, pipeline/, memory/ scalars"},
    {.type = PP_OPT_STR, .name = "--metrics", .metavar = "FILE", TN(metrics_out), .agree = 1, .group = PP_OPT_GROUP_LOGS,
     .help = "the same values as JSON lines, one object per step"},
    {.type = PP_OPT_INT, .name = "--log-every", .metavar = "N", TN(log_every), .lo = 1, .hi = 1LL << 40,
     .shown = "10", .agree = 1, .group = PP_OPT_GROUP_LOGS,
     .help = "gather per-rank figures (wait, memory, bubble) every N steps"},
    {.type = PP_OPT_REAL, .name = "--straggler-warn", .metavar = "F", TN(straggler_warn), .lo = 1, .hi = 1e6,
     .shown = "off", .agree = 1, .group = PP_OPT_GROUP_LOGS,
     .help = "name a rank whose busy time per step (its step less the time it waits\n"
             "for peers), its median over 10 steps, exceeds F x the median of its\n"
             "pipeline peers' (the other stages of its replica; at pp 1 the other\n"
             "replicas): in the progress line, --metrics and --logdir"},
    {.type = PP_OPT_INT, .name = "--log-histograms", .metavar = "N", TN(log_histograms), .lo = 1, .hi = 1LL << 40,
     .agree = 1, .group = PP_OPT_GROUP_LOGS, .help = "weight and gradient histograms every N steps (with --logdir)"},
    {.type = PP_OPT_CUSTOM, .name = "--profile-steps", .metavar = "A:B", TN(profile_first), .parse = parse_range,
     .agree = 1, .group = PP_OPT_GROUP_LOGS,
     .help = "profile steps A..B: every op's forward/backward, messages and reductions"},
    {.type = PP_OPT_INT, .name = NULL, TN(profile_last), .agree = 1},
    {.type = PP_OPT_STR, .name = "--profile", .metavar = "FILE", TN(profile_out), .agree = 1, .group = PP_OPT_GROUP_LOGS,
     .help = "... as Perfetto / chrome://tracing JSON, plus a per-op table on stdout"},
    {0},
};

pp_train_config pp_train_config_default(void)
{
    pp_train_config c = {0};
    pp_options_defaults(pp_train_option_table, &c);
    return c;
}

pp_dataset_options pp_train_dataset_options(const pp_train_config *c)
{
    pp_dataset_options o = c->dataset;
    o.labels = c->trainer.loss.labels;
    o.ignore_index = c->trainer.loss.ignore_index;
    o.buckets = c->trainer.buckets, o.nbuckets = c->trainer.nbuckets;
    return o;
}
