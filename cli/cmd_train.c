/* `onnxpipe train`: parses the training options into a pp_train_config and runs it. */
#include "cli.h"

#include <onnxpipe/train.h>

#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: onnxpipe train --model MODEL.onnx --data DIR [options]\n\n"
            "Trains MODEL on the dataset DIR (see 'onnxpipe data').\n\n"
            "layout:\n"
            "  --device KIND          auto | cpu | cuda (default auto: a GPU when one works)\n"
            "  --pp P                 pipeline stages (default 1)\n"
            "  --dp D                 data-parallel replicas (default 1)\n"
            "  --batch B              global batch: samples per optimizer step (default 8)\n"
            "  --microbatches M       microbatches per replica and step (default 1);\n"
            "                         the microbatch is B / (D x M) samples\n"
            "  --dim NAME=V           bind a symbolic dim of the model's inputs (repeatable)\n"
            "  --schedule KIND        gpipe | 1f1b | interleaved | zb-h1 (default 1f1b)\n"
            "  --chunks V             virtual stages per rank for interleaved (default 2 there, else 1)\n"
            "  --bucket-kb N          gradient all-reduce bucket; buckets start while backward runs (default 4096)\n"
            "run it under mpirun with pp x dp ranks: mpirun -np 4 onnxpipe train --pp 2 --dp 2 ...\n"
            "training:\n"
            "  --steps N              optimizer steps (default 10)\n"
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
            "                         --steps stays the total, counted from the first run's start\n");
}

static int parse_optimizer(const char *s, pp_optim_kind *k)
{
    static const char *const names[] = {"sgd", "adam", "adamw", "lamb"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i])) {
            *k = (pp_optim_kind)i;
            return 1;
        }
    return 0;
}

#define MAX_DIMS 16

int cmd_train(int argc, char **argv)
{
    pp_dim_binding dims[MAX_DIMS];
    pp_train_config c = {
        .pp = 1, .dp = 1, .schedule = PP_SCHED_1F1B, .batch = 8, .microbatches = 1, .steps = 10, .dims = dims,
        .optim = {.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f},
        .lr = {.kind = PP_LR_CONSTANT, .lr = 1e-3f, .power = 1.0f},
        .loss = {.ignore_index = -100},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        double x;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
#define INT_OPT(name, lo, hi, field) \
    else if (!strcmp(a, name)) { if (!cli_parse_int(name, v, lo, hi, &n)) return 2; field = n; i++; }
#define NUM_OPT(name, lo, hi, field) \
    else if (!strcmp(a, name)) { if (!cli_parse_double(name, v, lo, hi, &x)) return 2; field = (float)x; i++; }
#define STR_OPT(name, field) \
    else if (!strcmp(a, name)) { if (!v) return cli_usage_error(NULL, "%s needs a value", name); field = v; i++; }
        STR_OPT("--model", c.model)
        STR_OPT("--data", c.data)
        STR_OPT("--device", c.device)
        STR_OPT("--logits", c.loss.logits)
        STR_OPT("--labels", c.loss.labels)
        STR_OPT("--losses", c.losses_out)
        STR_OPT("--export", c.export_path)
        STR_OPT("--trace", c.trace_path)
        STR_OPT("--save", c.save_dir)
        STR_OPT("--resume", c.resume)
        INT_OPT("--save-every", 1, 1LL << 40, c.save_every)
        INT_OPT("--keep", 1, 1 << 20, c.keep)
        INT_OPT("--pp", 1, 4096, c.pp)
        INT_OPT("--chunks", 1, 64, c.chunks)
        INT_OPT("--dp", 1, 1 << 20, c.dp)
        INT_OPT("--batch", 1, 1LL << 40, c.batch)
        INT_OPT("--microbatches", 1, 1 << 20, c.microbatches)
        INT_OPT("--steps", 1, 1LL << 40, c.steps)
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
        else if (!strcmp(a, "--skip-nonfinite")) c.skip_nonfinite = 1;
        else if (!strcmp(a, "--quiet")) c.quiet = 1;
        else if (!strcmp(a, "--save-sync")) c.save_sync = 1;
        else if (!strcmp(a, "--optimizer")) {
            if (!v || !parse_optimizer(v, &c.optim.kind))
                return cli_usage_error("use sgd, adam, adamw or lamb", "unknown optimizer '%s'", v ? v : "");
            i++;
        } else if (!strcmp(a, "--schedule")) {
            pp_error e = {0};
            if (!v || pp_schedule_kind_parse(v, &c.schedule, &e) != PP_OK)
                return cli_usage_error(NULL, "%s", v ? e.msg : "--schedule needs a value");
            i++;
        } else if (!strcmp(a, "--lr-schedule")) {
            if (!v || !pp_lr_parse(v, &c.lr.kind))
                return cli_usage_error("use constant, linear, cosine or poly", "unknown LR schedule '%s'", v ? v : "");
            i++;
        } else if (!strcmp(a, "--loss")) {
            if (!v || strcmp(v, "cross_entropy"))
                return cli_usage_error("the loss onnxpipe computes is cross_entropy", "unknown loss '%s'", v ? v : "");
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
    if ((c.save_every || c.keep || c.save_sync) && !c.save_dir)
        return cli_usage_error("add --save DIR", "--save-every, --keep and --save-sync need --save");
    c.lr.steps = c.steps;
    c.bucket_bytes *= 1024;
    if (!c.chunks) c.chunks = c.schedule == PP_SCHED_INTERLEAVED ? 2 : 1;
    pp_error err = {0};
    pp_train_result res;
    pp_status st = pp_train_run(&c, &res, &err);
    for (int i = 0; i < c.ndims; i++) free((char *)dims[i].name);
    if (st != PP_OK) return cli_fail_job(&err);
    if (cli_job_rank0())
        printf("trained %lld steps in %.1f s: loss %.4f -> %.4f, %.0f tokens/s\n",
               (long long)(res.steps_done ? res.steps_done - res.first_step + 1 : 0), res.seconds, res.first_loss,
               res.last_loss, res.tokens_per_s);
    cli_job_end();
    return 0;
}
