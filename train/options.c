/* The trainer's option tables (internal/onnxpipe/options.h): the partition's, the stage's
 * (what shapes a stage and its memory: `onnxpipe train` and the previews) and the trainer's
 * (pp_trainer_config: its defaults, its setter, its agreement hash); the job's own are
 * job_options.c's. An option is added here, once: its parser, --help line, default and
 * place in the ranks' agreement check all come from its row. */
#include <onnxpipe/options.h>
#include <onnxpipe/stage_lib.h>
#include <onnxpipe/trainer_lib.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parsers of the enums and of the options with a shape of their own ---- */

static int parse_balance(const char *v, void *f, pp_error *err)
{
    return pp_balance_parse(v, f) || pp_option_bad(err, "unknown --balance '%s': use params, flops, memory, time or uniform", v);
}

static int parse_order(const char *v, void *f, pp_error *err)
{
    return pp_order_mode_parse(v, f) || pp_option_bad(err, "unknown --order '%s': use search or graph", v);
}

static int parse_optimizer(const char *v, void *f, pp_error *err)
{
    return pp_optim_kind_parse(v, f) || pp_option_bad(err, "unknown --optimizer '%s': use sgd, adam, adamw or lamb", v);
}

static int parse_precision(const char *v, void *f, pp_error *err)
{
    return pp_precision_parse(v, f) || pp_option_bad(err, "unknown --precision '%s': use fp32, bf16 or fp16", v);
}

static int parse_reduce_dtype(const char *v, void *f, pp_error *err)
{
    pp_dtype t;
    if (!pp_precision_parse(v, &t) || t == PP_DTYPE_F16)
        return pp_option_bad(err, "unknown --reduce-dtype '%s': use fp32 or bf16", v);
    *(pp_dtype *)f = t;
    return 1;
}

static int parse_recompute(const char *v, void *f, pp_error *err)
{
    return pp_recompute_parse(v, f, err) == PP_OK || pp_option_bad(err, "unknown --recompute '%s': use none, selective or full", v);
}

static int parse_fused_attention(const char *v, void *f, pp_error *err)
{
    static const char *const names[] = {"auto", "on", "off"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(v, names[i])) {
            *(pp_fused_attention *)f = (pp_fused_attention)i;
            return 1;
        }
    return pp_option_bad(err, "unknown --fused-attention '%s': use auto, on or off", v);
}

static int parse_schedule(const char *v, void *f, pp_error *err)
{
    return pp_schedule_kind_parse(v, f, err) == PP_OK;
}

static int parse_lr_schedule(const char *v, void *f, pp_error *err)
{
    return pp_lr_parse(v, f) || pp_option_bad(err, "unknown --lr-schedule '%s': use constant, linear, cosine or poly", v);
}

static int parse_loss(const char *v, void *f, pp_error *err)
{
    (void)f;
    return !strcmp(v, "cross_entropy") || pp_option_bad(err, "unknown --loss '%s': the loss onnxpipe computes is cross_entropy", v);
}

/* ---- the tables ----------------------------------------------------------- */

#define PO(f) PP_OPT_FIELD(pp_partition_options, f)

const pp_option pp_partition_option_table[] = {
    {.type = PP_OPT_ENUM, .name = "--balance", .metavar = "KIND", PO(balance), .parse = parse_balance,
     .shown = "params", .agree = 1, .group = PP_OPT_GROUP_SPLIT,
     .help = "what the split equalizes: params | flops | uniform (node count)\n"
             "| memory (bytes a stage allocates: the stage planner's model, with the\n"
             "driver's 1F1B stash slots, min(P-s, M), one more after stage 0) | time\n"
             "(3 x forward FLOPs / --gflops + --op-overhead per node + its sends /\n"
             "--link-gbps)"},
    {.type = PP_OPT_REAL, .name = "--balance-tolerance", .metavar = "F", PO(tolerance), .lo = 0, .hi = 10,
     .def = 0.02, .agree = 1, .group = PP_OPT_GROUP_SPLIT,
     .help = "among the splits whose largest stage is within F of the optimum, the one\n"
             "sending the fewest bytes across cuts (0: optimal splits only)"},
    {.type = PP_OPT_ENUM, .name = "--order", .metavar = "KIND", PO(order), .parse = parse_order, .shown = "search",
     .agree = 1, .group = PP_OPT_GROUP_SPLIT,
     .help = "search: every order in which tensors flow forward, nodes that\n"
             "read no activation kept with their first reader | graph: the file's order"},
    {.type = PP_OPT_REAL, .name = "--gflops", .metavar = "G", PO(gflops), .lo = 1e-6, .hi = 1e12, .shown = "100",
     .agree = 1, .group = PP_OPT_GROUP_SPLIT,
     .help = "compute throughput per stage, GFLOP/s: the time balance's\n"
             "(and schedule --model's stage costs)"},
    {.type = PP_OPT_REAL, .name = "--link-gbps", .metavar = "B", PO(link_gbps), .lo = 1e-9, .hi = 1e9,
     .shown = "free", .agree = 1, .group = PP_OPT_GROUP_SPLIT,
     .help = "time balance: bandwidth between neighbouring stages, GB/s"},
    {.type = PP_OPT_REAL, .name = "--op-overhead", .metavar = "S", PO(op_overhead), .lo = 0, .hi = 1e3, .agree = 1,
     .group = PP_OPT_GROUP_SPLIT,
     .help = "time balance: seconds per node and microbatch on top of its FLOPs\n"
             "(the cpu backend's forward + backward calls cost about 1e-6,\n"
             "a GPU's kernel launches more)"},
    {.type = PP_OPT_NAMES, .name = "--cut", .metavar = "NAME,..", PO(cuts), PP_OPT_COUNT(pp_partition_options, ncuts),
     .hi = 4096, .agree = 1, .group = PP_OPT_GROUP_SPLIT,
     .help = "split right after these nodes (or the nodes making these tensors),\n"
             "in graph order, instead of balancing: stages - 1 names"},
    {0},
};

#define TC(f) PP_OPT_FIELD(pp_trainer_config, f)

const pp_option pp_stage_option_table[] = {
    {.type = PP_OPT_STR, .name = "--device", .metavar = "KIND", TC(device), .def_str = "auto", .agree = 1,
     .group = PP_OPT_GROUP_STAGE, .help = "auto | cpu | cuda (auto: a GPU when every rank has one)"},
    {.type = PP_OPT_ENUM, .name = "--optimizer", .metavar = "NAME", TC(optim.kind), .parse = parse_optimizer,
     .def = PP_OPTIM_ADAMW, .shown = "adamw", .agree = 1, .group = PP_OPT_GROUP_STAGE,
     .help = "sgd | adam | adamw | lamb: the update and its state per parameter"},
    {.type = PP_OPT_ENUM, .name = "--precision", .metavar = "P", TC(precision), .parse = parse_precision,
     .shown = "fp32", .agree = 1, .group = PP_OPT_GROUP_STAGE,
     .help = "fp32 | bf16 | fp16: 16-bit activations and matrix-product operands,\n"
             "fp32 master weights, gradients and optimizer state"},
    {.type = PP_OPT_ENUM, .name = "--reduce-dtype", .metavar = "D", TC(reduce_dtype), .parse = parse_reduce_dtype,
     .shown = "fp32", .agree = 1, .group = PP_OPT_GROUP_STAGE,
     .help = "fp32 | bf16: the data-parallel gradient all-reduce; bf16 sends half\n"
             "the bytes, each partial sum rounded to bfloat16"},
    {.type = PP_OPT_ENUM, .name = "--recompute", .metavar = "KIND", TC(recompute), .parse = parse_recompute,
     .shown = "none", .agree = 1, .group = PP_OPT_GROUP_STAGE,
     .help = "none | selective | full: stash only each stage's inputs (selective: and\n"
             "MatMul/Gemm/Conv outputs) and run the rest of the forward again before\n"
             "backward; same losses and weights, bit for bit"},
    {.type = PP_OPT_ENUM, .name = "--fused-attention", .metavar = "WHEN", TC(fused_attention),
     .parse = parse_fused_attention, .shown = "auto", .agree = 1, .group = PP_OPT_GROUP_STAGE,
     .help = "auto | on | off: each attention (Q K^T, scale, mask, Softmax, P V) as\n"
             "one Attention op; auto: where the device's kernel is fused (cuDNN's\n"
             "flash attention under bf16/fp16 on cuda), on: the cpu's too"},
    {.type = PP_OPT_CUSTOM, .name = "--loss", .metavar = "cross_entropy", .parse = parse_loss, .group = PP_OPT_GROUP_STAGE,
     .help = "the loss, when the model does not end in SoftmaxCrossEntropyLoss:\n"
             "of --logits against --labels"},
    {.type = PP_OPT_STR, .name = "--logits", .metavar = "NAME", TC(loss.logits), .agree = 1, .group = PP_OPT_GROUP_STAGE,
     .help = "the value holding the logits [..., C]"},
    {.type = PP_OPT_STR, .name = "--labels", .metavar = "NAME", TC(loss.labels), .agree = 1, .group = PP_OPT_GROUP_STAGE,
     .help = "the graph input holding the int64 labels"},
    {.type = PP_OPT_INT, .name = NULL, TC(loss.ignore_index), .def = -100, .agree = 1},
    {.type = PP_OPT_STR, .name = "--trainable", .metavar = "GLOB,..", TC(params.trainable), .agree = 1,
     .group = PP_OPT_GROUP_PARAMS,
     .help = "train these initializers too (names, or the PyTorch names of the export\n"
             "recipe's metadata)"},
    {.type = PP_OPT_STR, .name = "--frozen", .metavar = "GLOB,..", TC(params.frozen), .agree = 1, .group = PP_OPT_GROUP_PARAMS,
     .help = "never train these: no gradient, no optimizer state (fine-tuning)"},
    {.type = PP_OPT_STR, .name = "--untie", .metavar = "GLOB,..", TC(params.untie), .agree = 1, .group = PP_OPT_GROUP_PARAMS,
     .help = "give each node reading these its own copy (an exporter's merge), or train\n"
             "a tied copy (an initializer that is another's transpose) apart"},
    {.type = PP_OPT_STR, .name = "--tie", .metavar = "GLOB,..", TC(params.tie), .agree = 1, .group = PP_OPT_GROUP_PARAMS,
     .help = "keep these one parameter although they look like an exporter's merge"},
    {0},
};


const pp_option pp_trainer_option_table[] = {
    {.type = PP_OPT_STR, .name = "--model", .metavar = "MODEL.onnx", TC(model), .group = PP_OPT_GROUP_LAYOUT,
     .help = "the model to train"},
    {.type = PP_OPT_INT, .name = "--pp", .metavar = "P", TC(pp), .lo = 1, .hi = 4096, .def = 1, .agree = 1,
     .group = PP_OPT_GROUP_LAYOUT, .help = "pipeline stages"},
    {.type = PP_OPT_INT, .name = "--dp", .metavar = "D", TC(dp), .lo = 1, .hi = 1 << 20, .def = 1, .agree = 1,
     .group = PP_OPT_GROUP_LAYOUT, .help = "data-parallel replicas"},
    {.type = PP_OPT_INT, .name = "--batch", .metavar = "B", TC(batch), .lo = 1, .hi = 1LL << 40, .def = 8,
     .agree = 1, .group = PP_OPT_GROUP_LAYOUT, .help = "global batch: samples per optimizer step"},
    {.type = PP_OPT_INT, .name = "--microbatches", .metavar = "M", TC(microbatches), .lo = 1, .hi = 1 << 20,
     .def = 1, .agree = 1, .group = PP_OPT_GROUP_LAYOUT,
     .help = "microbatches per replica and step; the microbatch is B / (D x M) samples"},
    {.type = PP_OPT_DIMS, .name = "--dim", .metavar = "NAME=V", TC(dims), PP_OPT_COUNT(pp_trainer_config, ndims),
     .lo = 1, .hi = 64, .agree = 1, .group = PP_OPT_GROUP_LAYOUT,
     .help = "bind a symbolic dim of the model's inputs (repeatable; a dataset's\n"
             "arrays bind the rest: an input's array gives its per-sample shape)"},
    {.type = PP_OPT_ENUM, .name = "--schedule", .metavar = "KIND", TC(schedule), .parse = parse_schedule,
     .def = PP_SCHED_1F1B, .shown = "1f1b", .agree = 1, .group = PP_OPT_GROUP_LAYOUT,
     .help = "gpipe | 1f1b | interleaved | zb-h1 | zb-v"},
    {.type = PP_OPT_INT, .name = "--chunks", .metavar = "V", TC(chunks), .lo = 1, .hi = 64, .agree = 1,
     .group = PP_OPT_GROUP_LAYOUT, .help = "virtual stages per rank (default 2 for interleaved and zb-v, which takes\n"
                              "only 2; else 1)"},
    {.type = PP_OPT_INT, .name = "--bucket-kb", .metavar = "N", TC(bucket_bytes), .lo = 1, .hi = 1LL << 30,
     .scale = 1024, .shown = "4096", .agree = 1, .group = PP_OPT_GROUP_LAYOUT,
     .help = "gradient all-reduce bucket; buckets start while backward runs"},
    {.type = PP_OPT_STR, .name = NULL, TC(bucket_dim), .agree = 1},
    {.type = PP_OPT_INTS, .name = NULL, TC(buckets), PP_OPT_COUNT(pp_trainer_config, nbuckets), .agree = 1},
    {.type = PP_OPT_TABLE, .sub = pp_stage_option_table, .offset = 0, .agree = 1},
    {.type = PP_OPT_TABLE, .sub = pp_partition_option_table, TC(partition), .agree = 1},
    {.type = PP_OPT_INT, .name = "--steps", .metavar = "N", TC(steps), .lo = 1, .hi = 1LL << 40, .def = 10,
     .agree = 1, .group = PP_OPT_GROUP_TRAINING, .help = "optimizer steps"},
    {.type = PP_OPT_REAL, .name = "--lr", .metavar = "X", TC(lr.lr), .lo = 0, .hi = 1e3, .def = 1e-3, .agree = 1,
     .group = PP_OPT_GROUP_TRAINING, .help = "peak learning rate"},
    {.type = PP_OPT_ENUM, .name = "--lr-schedule", .metavar = "NAME", TC(lr.kind), .parse = parse_lr_schedule,
     .shown = "constant", .agree = 1, .group = PP_OPT_GROUP_TRAINING, .help = "constant | linear | cosine | poly"},
    {.type = PP_OPT_INT, .name = "--warmup", .metavar = "N", TC(lr.warmup), .lo = 0, .hi = 1LL << 40, .agree = 1,
     .group = PP_OPT_GROUP_TRAINING, .help = "linear warmup steps"},
    {.type = PP_OPT_REAL, .name = "--min-lr", .metavar = "X", TC(lr.min_lr), .lo = 0, .hi = 1e3, .agree = 1,
     .group = PP_OPT_GROUP_TRAINING, .help = "learning rate at the last step"},
    {.type = PP_OPT_REAL, .name = NULL, TC(lr.power), .def = 1, .agree = 1},
    {.type = PP_OPT_REAL, .name = "--momentum", .metavar = "X", TC(optim.momentum), .lo = 0, .hi = 1, .agree = 1,
     .group = PP_OPT_GROUP_TRAINING, .help = "sgd momentum"},
    {.type = PP_OPT_FLAG, .name = "--nesterov", TC(optim.nesterov), .agree = 1, .group = PP_OPT_GROUP_TRAINING,
     .help = "sgd: Nesterov momentum"},
    {.type = PP_OPT_REAL, .name = "--beta1", .metavar = "X", TC(optim.beta1), .lo = 0, .hi = 1, .def = 0.9,
     .agree = 1, .group = PP_OPT_GROUP_TRAINING, .help = "Adam-family first moment"},
    {.type = PP_OPT_REAL, .name = "--beta2", .metavar = "X", TC(optim.beta2), .lo = 0, .hi = 1, .def = 0.999,
     .agree = 1, .group = PP_OPT_GROUP_TRAINING, .help = "Adam-family second moment"},
    {.type = PP_OPT_REAL, .name = "--eps", .metavar = "X", TC(optim.eps), .lo = 0, .hi = 1, .def = 1e-8,
     .agree = 1, .group = PP_OPT_GROUP_TRAINING, .help = "Adam-family epsilon"},
    {.type = PP_OPT_REAL, .name = "--weight-decay", .metavar = "X", TC(optim.weight_decay), .lo = 0, .hi = 1e3,
     .agree = 1, .group = PP_OPT_GROUP_TRAINING, .help = "decoupled for adamw and lamb"},
    {.type = PP_OPT_REAL, .name = "--clip-norm", .metavar = "X", TC(clip_norm), .lo = 0, .hi = 1e12,
     .shown = "off", .agree = 1, .group = PP_OPT_GROUP_TRAINING, .help = "clip the global gradient norm to X"},
    {.type = PP_OPT_FLAG, .name = "--skip-nonfinite", TC(skip_nonfinite), .agree = 1, .group = PP_OPT_GROUP_TRAINING,
     .help = "skip steps whose gradients hold NaN/Inf instead of failing"},
    {.type = PP_OPT_INT, .name = "--seed", .metavar = "S", TC(seed), .lo = 0, .hi = 1LL << 62, .agree = 1,
     .group = PP_OPT_GROUP_TRAINING, .help = "seed for dropout"},
    {.type = PP_OPT_REAL, .name = "--loss-scale", .metavar = "X", TC(loss_scale), .lo = 1e-30, .hi = 1e30,
     .shown = "dynamic, from 65536", .agree = 1, .group = PP_OPT_GROUP_MEMORY, .help = "fp16: a fixed loss scale"},
    {.type = PP_OPT_INT, .name = "--loss-scale-window", .metavar = "N", TC(loss_scale_window), .lo = 1,
     .hi = 1LL << 40, .def = 2000, .agree = 1, .group = PP_OPT_GROUP_MEMORY,
     .help = "fp16 dynamic: clean steps before the scale doubles; an overflow on\n"
             "any rank skips the step everywhere and halves it"},
    {.type = PP_OPT_STR, .name = "--save", .metavar = "DIR", TC(save_dir), .agree = 1, .group = PP_OPT_GROUP_CKPT,
     .help = "save checkpoints to DIR/step-N (at the end, and every --save-every)"},
    {.type = PP_OPT_INT, .name = "--save-every", .metavar = "N", TC(save_every), .lo = 1, .hi = 1LL << 40,
     .shown = "only at the end", .agree = 1, .group = PP_OPT_GROUP_CKPT, .help = "save every N steps"},
    {.type = PP_OPT_INT, .name = "--keep", .metavar = "K", TC(keep), .lo = 1, .hi = 1 << 20, .shown = "all",
     .agree = 1, .group = PP_OPT_GROUP_CKPT, .help = "keep the newest K checkpoints"},
    {.type = PP_OPT_FLAG, .name = "--save-sync", TC(save_sync), .agree = 1, .group = PP_OPT_GROUP_CKPT,
     .help = "write before training goes on (default: a thread writes while it trains)"},
    {.type = PP_OPT_STR, .name = "--resume", .metavar = "auto|PATH", TC(resume), .agree = 1, .group = PP_OPT_GROUP_CKPT,
     .help = "go on from the newest checkpoint in --save that verifies (none: start\n"
             "from scratch), or from PATH; any pp, dp, schedule and microbatches;\n"
             "--steps stays the total, counted from the first run's start"},
    {.type = PP_OPT_REAL, .name = "--lock-wait", .metavar = "S", TC(lock_wait_s), .lo = 0, .hi = 1e7, .def = 60,
     .group = PP_OPT_GROUP_CKPT,
     .help = "DIR is another live job's: wait up to S seconds for it to end, then\n"
             "fail naming it"},
    {.type = PP_OPT_INT, .name = "--eval-batches", .metavar = "K", TC(eval_batches), .lo = 1, .hi = 1LL << 40,
     .shown = "all of the eval data", .agree = 1, .group = PP_OPT_GROUP_EVAL, .help = "global batches per evaluation"},
    {.type = PP_OPT_FLAG, .name = "--quiet", TC(quiet), .group = PP_OPT_GROUP_OUTPUT, .help = "no progress lines"},
    {0},
};
