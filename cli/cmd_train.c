/* `onnxpipe train`: parses the training options into a pp_train_config and runs it. */
#include "cli.h"

#include <onnxpipe/train.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: onnxpipe train --model MODEL.onnx --data DATA [options]\n\n"
            "Trains MODEL on DATA, read in place: a dataset directory (see 'onnxpipe data'), a directory\n"
            "of NAME.npy files (one per model input) or one .npy file, a token stream (.bin: raw uint16\n"
            "tokens as nanoGPT writes them, or llm.c's), or a Megatron-LM indexed dataset (PREFIX of\n"
            "PREFIX.bin and PREFIX.idx). A stream's samples are windows of --seq tokens (input_ids),\n"
            "and their labels the next tokens (named as --labels, default labels).\n"
            "  --seq T                tokens per sample of a token stream or indexed dataset\n"
            "  --token-dtype D        a raw .bin stream's tokens: uint16 (default) or uint32\n"
            "  --pack                 pack the documents (a stream's split after each --eos token, or the\n"
            "                         indexed dataset's) into samples of --seq tokens, longest first; labels\n"
            "                         stop at each document's end, position_ids restart, and a model input\n"
            "                         named *mask* of [batch, .., T, T] gets each document's causal mask\n"
            "  --pad                  one document per sample instead, padded to --seq (cut where longer)\n"
            "  --eos ID               the token that ends a document in a stream (--pack, --pad)\n"
            "  --seq-buckets A,B,..   with --pad or --pack: each sample in the shortest of these lengths\n"
            "                         that holds it (the last is --seq); a global batch has one length\n\n"
            "layout:\n"
            "  --device KIND          auto | cpu | cuda (default auto: a GPU when one works)\n"
            "  --pp P                 pipeline stages (default 1)\n"
            "  --dp D                 data-parallel replicas (default 1)\n"
            "  --batch B              global batch: samples per optimizer step (default 8)\n"
            "  --microbatches M       microbatches per replica and step (default 1);\n"
            "                         the microbatch is B / (D x M) samples\n"
            "  --dim NAME=V           bind a symbolic dim of the model's inputs (repeatable; the --data\n"
            "                         arrays bind the rest: an input's array gives its per-sample shape)\n"
            "  --schedule KIND        gpipe | 1f1b | interleaved | zb-h1 | zb-v (default 1f1b)\n"
            "  --chunks V             virtual stages per rank for interleaved (default 2 there and for\n"
            "                         zb-v, which takes only 2; else 1)\n"
            "  --bucket-kb N          gradient all-reduce bucket; buckets start while backward runs (default 4096)\n"
            "run it under mpirun with pp x dp ranks: mpirun -np 4 onnxpipe train --pp 2 --dp 2 ...\n"
            "the split into stages (preview it with `onnxpipe partition MODEL --stages P` and the same options):\n"
            "%s"
            "training:\n"
            "  --steps N              optimizer steps (default 10)\n"
            "  --epochs E             instead of --steps: E passes over the data (samples / batch steps each)\n"
            "  --shuffle              a seeded permutation of the samples per epoch (--seed), the same for\n"
            "                         every layout\n"
            "  --optimizer NAME       sgd | adam | adamw | lamb (default adamw)\n"
            "  --lr X                 peak learning rate (default 1e-3)\n"
            "  --lr-schedule NAME     constant | linear | cosine | poly (default constant)\n"
            "  --warmup N             linear warmup steps (default 0)\n"
            "  --min-lr X             learning rate at the last step (default 0)\n"
            "  --momentum X           sgd momentum (default 0)   --nesterov\n"
            "  --beta1 X --beta2 X --eps X   Adam-family moments (0.9, 0.999, 1e-8)\n"
            "  --weight-decay X       (default 0; decoupled for adamw and lamb)\n"
            "  --clip-norm X          clip the global gradient norm to X (default off)\n"
            "  --skip-nonfinite       skip steps whose gradients hold NaN/Inf instead of failing\n"
            "  --recompute KIND       none (default) | selective | full: stash only each stage's inputs\n"
            "                         (selective: and MatMul/Gemm/Conv outputs) and run the rest of the\n"
            "                         forward again before backward; same losses and weights, bit for bit\n"
            "memory:\n"
            "  --precision P          fp32 | bf16 | fp16 (default fp32): 16-bit activations and matrix-product\n"
            "                         operands, fp32 master weights, gradients and optimizer state\n"
            "  --reduce-dtype D       fp32 | bf16 (default fp32): the data-parallel gradient all-reduce; bf16\n"
            "                         sends half the bytes, each partial sum rounded to bfloat16\n"
            "  --loss-scale X         fp16: a fixed loss scale (default: dynamic, from 65536)\n"
            "  --loss-scale-window N  fp16 dynamic: clean steps before the scale doubles (default 2000); an\n"
            "                         overflow on any rank skips the step everywhere and halves it\n"
            "  --seed S               seed for dropout (default 0)\n"
            "loss (when the model does not end in SoftmaxCrossEntropyLoss):\n"
            "  --loss cross_entropy --logits NAME --labels NAME\n"
            "output:\n"
            "  --losses FILE          write 'step loss' lines\n"
            "  --export FILE          write the trained model as ONNX at the end\n"
            "  --trace FILE           write the last step as executed (Perfetto / chrome://tracing JSON)\n"
            "  --quiet                no progress lines\n"
            "checkpoints (onnxpipe ckpt --help):\n"
            "  --save DIR             save checkpoints to DIR/step-N (at the end, and every --save-every)\n"
            "  --save-every N         save every N steps (default: only at the end)\n"
            "  --keep K               keep the newest K checkpoints (default: all)\n"
            "  --save-sync            write before training goes on (default: a thread writes while it trains)\n"
            "  --resume auto|PATH     go on from the newest checkpoint in --save that verifies (none: start\n"
            "                         from scratch), or from PATH; any pp, dp, schedule and microbatches;\n"
            "                         --steps stays the total, counted from the first run's start\n"
            "  --save-on-signal LIST  signals that preempt the job (default SIGTERM with --save; none: off):\n"
            "                         every rank finishes its step, saves it, and the job exits with status\n"
            "                         %d; under mpirun use SIGUSR1, which mpirun forwards (SIGTERM to\n"
            "                         mpirun kills the ranks a second later)\n"
            "  --lock-wait S          DIR is another live job's: wait up to S seconds for it to end, then\n"
            "                         fail naming it (default 60)\n"
            "evaluation:\n"
            "  --eval-data DIR        a dataset evaluated forward-only through the same pipeline\n"
            "  --eval-every N         after every N steps and after the last (default: after the last only)\n"
            "  --eval-batches K       global batches per evaluation (default: all of the eval data)\n"
            "logs and profiles:\n"
            "  --logdir DIR           TensorBoard event files (rank 0): train/, eval/, pipeline/, memory/ scalars\n"
            "  --metrics FILE         the same values as JSON lines, one object per step\n"
            "  --log-every N          gather per-rank figures (wait, memory, bubble) every N steps (default 10)\n"
            "  --straggler-warn F     name a rank whose busy time per step (its step less the time it waits\n"
            "                         for peers), its median over 10 steps, exceeds F x the median of its\n"
            "                         pipeline peers' (the other stages of its replica; at pp 1 the other\n"
            "                         replicas): in the progress line, --metrics and --logdir (default off)\n"
            "  --log-histograms N     weight and gradient histograms every N steps (with --logdir)\n"
            "  --profile-steps A:B    profile steps A..B: every op's forward/backward, messages and reductions\n"
            "  --profile FILE         ... as Perfetto / chrome://tracing JSON, plus a per-op table on stdout\n",
            cli_partition_options_help, CLI_EXIT_PREEMPTED);
}

/* --save-on-signal SIGTERM,USR1,... (names with or without SIG) or none, into a mask. */
static int parse_signals(const char *v, uint64_t *mask)
{
    *mask = 0;
    if (v && !strcmp(v, "none")) return 1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v ? v : "");
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const char *name = strncmp(tok, "SIG", 3) ? tok : tok + 3;
        int sig = 0;
        for (int s = 1; s < 64 && !sig; s++)
            if (sigabbrev_np(s) && !strcmp(sigabbrev_np(s), name)) sig = s;
        if (!sig || sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE ||
            sig == SIGILL || sig == SIGCHLD || sig == SIGPIPE) {
            cli_usage_error("example: --save-on-signal SIGTERM,SIGUSR1",
                            "--save-on-signal: '%s' is not a signal a job can be preempted with", tok);
            return 0;
        }
        *mask |= 1ull << sig;
    }
    if (!*mask) cli_usage_error("example: --save-on-signal SIGUSR1", "--save-on-signal needs a signal or none");
    return *mask != 0;
}

#define MAX_DIMS 16
#define MAX_BUCKETS 32

/* --profile-steps A:B (or A: one step) with 1 <= A <= B. */
static int parse_range(const char *v, int64_t *first, int64_t *last)
{
    char *end;
    long long a = v ? strtoll(v, &end, 10) : 0, b = a;
    if (v && *end == ':') b = strtoll(end + 1, &end, 10);
    if (!v || *end || a < 1 || b < a) {
        cli_usage_error("example: --profile-steps 5:7 (steps 5, 6 and 7)",
                        "--profile-steps expects A:B with 1 <= A <= B, got '%s'", v ? v : "");
        return 0;
    }
    *first = a, *last = b;
    return 1;
}

/* "onnxpipe train ..." as typed, for the TensorBoard summary (caller frees). */
static char *join_args(int argc, char **argv)
{
    size_t n = sizeof "onnxpipe";
    for (int i = 0; i < argc; i++) n += strlen(argv[i]) + 3;
    char *s = malloc(n), *o = s;
    if (!s) return NULL;
    o += sprintf(o, "onnxpipe");
    for (int i = 0; i < argc; i++) o += sprintf(o, strchr(argv[i], ' ') ? " '%s'" : " %s", argv[i]);
    return s;
}

int cmd_train(int argc, char **argv)
{
    pp_dim_binding dims[MAX_DIMS];
    int64_t buckets[MAX_BUCKETS];
    pp_train_config c;
    cli_train_defaults(&c);
    c.dims = dims;
    int signals_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        double x;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        int taken = cli_stage_option(argc, argv, &i, &c);
        if (taken < 0) return 2;
        if (taken) continue;
#define INT_OPT(name, lo, hi, field) \
    else if (!strcmp(a, name)) { if (!cli_parse_int(name, v, lo, hi, &n)) return 2; field = n; i++; }
#define NUM_OPT(name, lo, hi, field) \
    else if (!strcmp(a, name)) { if (!cli_parse_double(name, v, lo, hi, &x)) return 2; field = (float)x; i++; }
#define STR_OPT(name, field) \
    else if (!strcmp(a, name)) { if (!v) return cli_usage_error(NULL, "%s needs a value", name); field = v; i++; }
        STR_OPT("--model", c.model)
        STR_OPT("--data", c.data)
        STR_OPT("--losses", c.losses_out)
        STR_OPT("--export", c.export_path)
        STR_OPT("--trace", c.trace_path)
        STR_OPT("--save", c.save_dir)
        STR_OPT("--resume", c.resume)
        INT_OPT("--save-every", 1, 1LL << 40, c.save_every)
        INT_OPT("--keep", 1, 1 << 20, c.keep)
        STR_OPT("--eval-data", c.eval_data)
        STR_OPT("--logdir", c.logdir)
        STR_OPT("--metrics", c.metrics_out)
        STR_OPT("--profile", c.profile_out)
        INT_OPT("--epochs", 1, 1LL << 30, c.epochs)
        INT_OPT("--eval-every", 1, 1LL << 40, c.eval_every)
        INT_OPT("--eval-batches", 1, 1LL << 40, c.eval_batches)
        INT_OPT("--log-every", 1, 1LL << 40, c.log_every)
        INT_OPT("--log-histograms", 1, 1LL << 40, c.log_histograms)
        else if (!strcmp(a, "--straggler-warn")) {
            if (!cli_parse_double(a, v, 1, 1e6, &x)) return 2;
            c.straggler_warn = x;
            i++;
        }
        INT_OPT("--pp", 1, 4096, c.pp)
        INT_OPT("--chunks", 1, 64, c.chunks)
        INT_OPT("--dp", 1, 1 << 20, c.dp)
        INT_OPT("--batch", 1, 1LL << 40, c.batch)
        INT_OPT("--microbatches", 1, 1 << 20, c.microbatches)
        INT_OPT("--steps", 1, 1LL << 40, c.steps)
        INT_OPT("--seq", 1, 1LL << 30, c.seq)
        INT_OPT("--eos", 0, 1LL << 40, c.eos)
        else if (!strcmp(a, "--pack")) c.docs = PP_DOCS_PACK;
        else if (!strcmp(a, "--pad")) c.docs = PP_DOCS_PAD;
        else if (!strcmp(a, "--seq-buckets")) {
            if (!cli_parse_int_list(a, v, 1, 1LL << 30, MAX_BUCKETS, buckets, &c.nbuckets)) return 2;
            c.buckets = buckets;
            i++;
        }
        INT_OPT("--warmup", 0, 1LL << 40, c.lr.warmup)
        INT_OPT("--bucket-kb", 1, 1LL << 30, c.bucket_bytes)
        INT_OPT("--seed", 0, 1LL << 62, c.seed)
        NUM_OPT("--lr", 0, 1e3, c.lr.lr)
        NUM_OPT("--min-lr", 0, 1e3, c.lr.min_lr)
        NUM_OPT("--momentum", 0, 1, c.optim.momentum)
        NUM_OPT("--beta1", 0, 1, c.optim.beta1)
        NUM_OPT("--beta2", 0, 1, c.optim.beta2)
        NUM_OPT("--eps", 0, 1, c.optim.eps)
        NUM_OPT("--weight-decay", 0, 1e3, c.optim.weight_decay)
        NUM_OPT("--clip-norm", 0, 1e12, c.clip_norm)
        else if (!strcmp(a, "--nesterov")) c.optim.nesterov = 1;
        NUM_OPT("--loss-scale", 1e-30, 1e30, c.loss_scale)
        INT_OPT("--loss-scale-window", 1, 1LL << 40, c.loss_scale_window)
        else if (!strcmp(a, "--skip-nonfinite")) c.skip_nonfinite = 1;
        else if (!strcmp(a, "--quiet")) c.quiet = 1;
        else if (!strcmp(a, "--save-sync")) c.save_sync = 1;
        else if (!strcmp(a, "--token-dtype")) {
            if (!cli_parse_token_dtype(v, &c.token_dtype)) return 2;
            i++;
        }
        else if (!strcmp(a, "--save-on-signal")) {
            if (!parse_signals(v, &c.save_signals)) return 2;
            signals_given = 1;
            i++;
        }
        else if (!strcmp(a, "--lock-wait")) {
            if (!cli_parse_double(a, v, 0, 1e7, &c.lock_wait_s)) return 2;
            i++;
        }
        else if (!strcmp(a, "--shuffle")) c.shuffle = 1;
        else if (!strcmp(a, "--profile-steps")) {
            if (!parse_range(v, &c.profile_first, &c.profile_last)) return 2;
            i++;
        }
        else if (!strcmp(a, "--schedule")) {
            pp_error e = {0};
            if (!v || pp_schedule_kind_parse(v, &c.schedule, &e) != PP_OK)
                return cli_usage_error(NULL, "%s", v ? e.msg : "--schedule needs a value");
            i++;
        } else if (!strcmp(a, "--lr-schedule")) {
            if (!v || !pp_lr_parse(v, &c.lr.kind))
                return cli_usage_error("use constant, linear, cosine or poly", "unknown LR schedule '%s'", v ? v : "");
            i++;
        } else if (!strcmp(a, "--dim")) {
            const char *eq = v ? strchr(v, '=') : NULL;
            if (!eq || eq == v) return cli_usage_error("example: --dim T=128", "--dim expects NAME=VALUE");
            if (c.ndims == MAX_DIMS) return cli_usage_error(NULL, "at most %d --dim options", MAX_DIMS);
            if (!cli_parse_int("--dim", eq + 1, 1, 1LL << 40, &n)) return 2;
            dims[c.ndims].name = strndup(v, (size_t)(eq - v));
            dims[c.ndims++].value = n;
            i++;
        } else
            return cli_usage_error("run 'onnxpipe train --help'", "unknown option '%s'", a);
    }
    if (!c.model) return cli_usage_error("run 'onnxpipe train --help'", "--model is required");
    if (!c.data) return cli_usage_error("make one with 'onnxpipe data text FILE -o DIR'", "--data is required");
    if (c.eos >= 0 && !c.docs) return cli_usage_error("add --pack or --pad", "--eos ends the documents of --pack and --pad");
    if (c.nbuckets && !c.docs)
        return cli_usage_error("add --pad (or --pack)", "--seq-buckets sorts documents by length: it needs --pad or --pack");
    if (c.nbuckets && !c.seq) c.seq = buckets[c.nbuckets - 1];
    if ((c.save_every || c.keep || c.save_sync || c.save_signals) && !c.save_dir)
        return cli_usage_error("add --save DIR", "--save-every, --keep, --save-sync and --save-on-signal need --save");
    if (c.save_dir && !signals_given) c.save_signals = 1ull << SIGTERM;
    c.lr.steps = c.steps;
    c.bucket_bytes *= 1024;
    if (!c.chunks) c.chunks = pp_schedule_default_chunks(c.schedule);
    if ((c.profile_first > 0) != (c.profile_out != NULL))
        return cli_usage_error("example: --profile-steps 5:7 --profile prof.json",
                               "--profile-steps and --profile go together");
    char *cmdline = join_args(argc, argv);
    c.command_line = cmdline;
    pp_error err = {0};
    pp_train_result res;
    pp_status st = pp_train_run(&c, &res, &err);
    for (int i = 0; i < c.ndims; i++) free((char *)dims[i].name);
    free(cmdline);
    if (st != PP_OK) return cli_fail_job(&err);
    if (cli_job_rank0() && res.preempted)
        printf("preempted after step %lld: exit status %d; go on with --resume auto\n", (long long)res.steps_done,
               CLI_EXIT_PREEMPTED);
    else if (cli_job_rank0() && res.steps_done) {
        long long n = res.steps_done - res.first_step + 1;
        printf("trained %lld step%s in %.1f s: loss %.4f -> %.4f, %.0f %s", n, n == 1 ? "" : "s", res.seconds,
               res.first_loss, res.last_loss, res.tokens_per_s, res.counts_tokens ? "tokens/s" : "samples/s");
        if (res.evals)
            printf(", eval loss %.4f (%d evaluations, %.1f s)", res.eval_loss, res.evals, res.eval_seconds);
        printf("\n");
    }
    cli_job_end();
    return res.preempted ? CLI_EXIT_PREEMPTED : 0;
}
