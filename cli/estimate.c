/* The options that shape a stage and the partition, parsed in one place for `onnxpipe
 * train` and the previews, and the previews' memory estimate (`partition`, `schedule --model`): per
 * stage and per rank what `onnxpipe train` with the same options would allocate, from
 * the stage planner itself (pp_driver_estimate). */
#include "cli.h"

#include <onnxpipe/core_util.h>
#include <onnxpipe/driver.h>
#include <onnxpipe/stage_lib.h>

#include <stdlib.h>
#include <string.h>

const char cli_stage_options_help[] =
    "  --device KIND         auto | cpu | cuda (default auto): which kernels the stages plan with\n"
    "  --optimizer NAME      sgd | adam | adamw | lamb (default adamw): its state per parameter\n"
    "  --loss cross_entropy --logits NAME --labels NAME   the loss when the model ends without one\n"
    "  --precision P         fp32 | bf16 | fp16 (default fp32): 16-bit activations halve the stash\n"
    "  --reduce-dtype D      fp32 | bf16 (default fp32): bf16 adds a 16-bit staging copy of the\n"
    "                        gradients to comm (a job with dp > 1)\n"
    "  --trainable GLOB,...  train these initializers too (names, or the PyTorch names of the export\n"
    "                        recipe's metadata; docs/exporting.md: what is trained by default)\n"
    "  --frozen GLOB,...     never train these: no gradient, no optimizer state (fine-tuning)\n"
    "  --untie GLOB,...      give each node reading these its own copy (an exporter's merge)\n"
    "  --tie GLOB,...        keep these one parameter although they look like an exporter's merge\n";

const char cli_partition_options_help[] =
    "  --balance KIND        what the split equalizes: params (default) | flops | uniform (node count)\n"
    "                        | memory (bytes a stage allocates: the stage planner's model, with the\n"
    "                        driver's 1F1B stash slots, min(P-s, M), one more after stage 0) | time\n"
    "                        (3 x forward FLOPs / --gflops + --op-overhead per node + its sends /\n"
    "                        --link-gbps)\n"
    "  --balance-tolerance F among the splits whose largest stage is within F of the optimum, the one\n"
    "                        sending the fewest bytes across cuts (default 0.02; 0: optimal splits only)\n"
    "  --order KIND          search (default): every order in which tensors flow forward, nodes that\n"
    "                        read no activation kept with their first reader | graph: the file's order\n"
    "  --gflops G            compute throughput per stage, GFLOP/s (default 100): the time balance's\n"
    "                        (and schedule --model's stage costs)\n"
    "  --link-gbps B         time balance: bandwidth between neighbouring stages, GB/s (default: free)\n"
    "  --op-overhead S       time balance: seconds per node and microbatch on top of its FLOPs\n"
    "                        (default 0; the cpu backend's forward + backward calls cost about 1e-6,\n"
    "                        a GPU's kernel launches more)\n";

void cli_train_defaults(pp_train_config *c)
{
    *c = (pp_train_config){
        .pp = 1, .dp = 1, .schedule = PP_SCHED_1F1B, .batch = 8, .microbatches = 1, .steps = 10,
        .optim = {.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f},
        .lr = {.kind = PP_LR_CONSTANT, .lr = 1e-3f, .power = 1.0f},
        .loss = {.ignore_index = -100},
        .partition = {.tolerance = 0.02}, .lock_wait_s = 60, .eos = -1,
    };
}

/* The partition's options (cli_stage_option's second half): 1 taken, 0 not one, -1 bad. */
static int partition_option(const char *o, const char *v, pp_partition_options *p)
{
    const char *const names[] = {"--balance", "--balance-tolerance", "--order", "--gflops", "--link-gbps",
                                 "--op-overhead"};
    size_t k = 0;
    while (k < sizeof names / sizeof names[0] && strcmp(o, names[k])) k++;
    if (k == sizeof names / sizeof names[0]) return 0;
    if (!v) return cli_usage_error(NULL, "%s needs a value", o), -1;
    if (k == 0 && !pp_balance_parse(v, &p->balance))
        return cli_usage_error("choose params, flops, memory, time or uniform", "unknown --balance '%s'", v), -1;
    if (k == 1 && !cli_parse_double(o, v, 0, 10, &p->tolerance)) return -1;
    if (k == 2 && !pp_order_mode_parse(v, &p->order))
        return cli_usage_error("choose search or graph", "unknown --order '%s'", v), -1;
    if (k == 3 && !cli_parse_double(o, v, 1e-6, 1e12, &p->gflops)) return -1;
    if (k == 4 && !cli_parse_double(o, v, 1e-9, 1e9, &p->link_gbps)) return -1;
    if (k == 5 && !cli_parse_double(o, v, 0, 1e3, &p->op_overhead)) return -1;
    return 1;
}

int cli_stage_option(int argc, char **argv, int *i, pp_train_config *c)
{
    const char *o = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int part = partition_option(o, v, &c->partition);
    if (part) {
        if (part > 0) (*i)++;
        return part;
    }
    const char *const names[] = {"--device", "--optimizer", "--loss",    "--logits",    "--labels", "--precision",
                                 "--recompute", "--reduce-dtype", "--trainable", "--frozen", "--untie", "--tie"};
    size_t k = 0;
    while (k < sizeof names / sizeof names[0] && strcmp(o, names[k])) k++;
    if (k == sizeof names / sizeof names[0]) return 0;
    if (!v) return cli_usage_error(NULL, "%s needs a value", o), -1;
    if (k == 0) c->device = v;
    else if (k == 1 && !pp_optim_kind_parse(v, &c->optim.kind))
        return cli_usage_error("use sgd, adam, adamw or lamb", "unknown optimizer '%s'", v), -1;
    else if (k == 2 && strcmp(v, "cross_entropy"))
        return cli_usage_error("the loss onnxpipe computes is cross_entropy", "unknown loss '%s'", v), -1;
    else if (k == 3) c->loss.logits = v;
    else if (k == 4) c->loss.labels = v;
    else if (k == 5 && !pp_precision_parse(v, &c->precision))
        return cli_usage_error("use fp32, bf16 or fp16", "unknown precision '%s'", v), -1;
    else if (k == 6 && pp_recompute_parse(v, &c->recompute, &(pp_error){0}) != PP_OK)
        return cli_usage_error(NULL, "unknown --recompute '%s': use none, selective or full", v), -1;
    else if (k == 7 && (!pp_precision_parse(v, &c->reduce_dtype) || c->reduce_dtype == PP_DTYPE_F16))
        return cli_usage_error(NULL, "unknown --reduce-dtype '%s': use fp32 or bf16", v), -1;
    else if (k == 8) c->params.trainable = v;
    else if (k == 9) c->params.frozen = v;
    else if (k == 10) c->params.untie = v;
    else if (k == 11) c->params.tie = v;
    (*i)++;
    return 1;
}

/* A rank's or stage's figures in the table's column order. */
static void row(FILE *out, const pp_stage_bytes *b, int64_t comm, int64_t total)
{
    const pp_mem_category cat[] = {PP_MEM_PARAMS, PP_MEM_GRADS, PP_MEM_OPTIMIZER, PP_MEM_STASH, PP_MEM_SCRATCH};
    int64_t v[] = {0, 0, 0, 0, 0, comm, b->constants, total};
    for (int k = 0; k < 5; k++) v[k] = pp_stage_bytes_category(b, cat[k]);
    char s[32];
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
        fprintf(out, " %10s", v[k] < 0 ? "" : pp_format_bytes((double)v[k], s, sizeof s));
    fputc('\n', out);
}

static void json_bytes(pp_json *j, const pp_stage_bytes *b)
{
    pp_json_int(j, "slots", b->slots);
    pp_json_int(j, "params_bytes", pp_stage_bytes_category(b, PP_MEM_PARAMS));
    pp_json_int(j, "grads_bytes", b->grads);
    pp_json_int(j, "optimizer_bytes", b->optimizer);
    pp_json_int(j, "stash_bytes", pp_stage_bytes_category(b, PP_MEM_STASH));
    pp_json_int(j, "scratch_bytes", b->scratch);
    pp_json_int(j, "constants_bytes", b->constants);
    pp_json_int(j, "recompute_bytes", b->recompute);   /* of stash: the recompute arena */
    pp_json_int(j, "port_max_bytes", b->port_max);     /* the largest tensor crossing a boundary */
}

static void write_json(pp_json *j, const pp_schedule *sch, const pp_train_config *c, pp_device_kind kind,
                       const pp_stage_bytes *st, const pp_driver_bytes *rk)
{
    pp_json_begin_object(j, NULL);
    pp_json_string(j, "device", pp_device_kind_name(kind));
    pp_json_string(j, "optimizer", pp_optim_kind_name(c->optim.kind));
    pp_json_int(j, "microbatch", c->batch / c->microbatches);
    pp_json_begin_array(j, "stages");
    for (int s = 0; s < sch->num_stages; s++) {
        pp_json_begin_object(j, NULL);
        pp_json_int(j, "stage", s);
        pp_json_int(j, "rank", sch->stage_rank[s]);
        json_bytes(j, &st[s]);
        pp_json_int(j, "total_bytes", st[s].total);
        pp_json_end_object(j);
    }
    pp_json_end_array(j);
    pp_json_begin_array(j, "ranks");
    for (int r = 0; r < sch->pp; r++) {
        pp_json_begin_object(j, NULL);
        pp_json_int(j, "rank", r);
        json_bytes(j, &rk[r].stages);
        pp_json_int(j, "comm_bytes", rk[r].comm);
        pp_json_int(j, "total_bytes", rk[r].total);
        pp_json_end_object(j);
    }
    pp_json_end_array(j);
    pp_json_end_object(j);
}

static void print_text(FILE *out, const pp_schedule *sch, const pp_train_config *c, pp_device_kind kind,
                       const pp_stage_bytes *st, const pp_driver_bytes *rk)
{
    fprintf(out, "\nmemory estimate per stage and rank (what `onnxpipe train` allocates on a %s device for %s "
                 "schedule %s, microbatch %lld, optimizer %s):\n%-6s %-5s %5s", pp_device_kind_name(kind),
            sch->pp > 1 ? "this" : "the", pp_schedule_kind_name(sch->kind), (long long)(c->batch / c->microbatches),
            pp_optim_kind_name(c->optim.kind), "stage", "rank", "slots");
    const char *const cols[] = {"params", "grads", "optimizer", "stash", "scratch", "comm", "constants", "total"};
    for (size_t k = 0; k < sizeof cols / sizeof cols[0]; k++) fprintf(out, " %10s", cols[k]);
    fputc('\n', out);
    for (int s = 0; s < sch->num_stages; s++) {
        fprintf(out, "%-6d %-5d %5d", s, sch->stage_rank[s], st[s].slots);
        row(out, &st[s], -1, st[s].total);
    }
    for (int r = 0; r < sch->pp; r++) {
        fprintf(out, "%-6s %-5d %5d", "all", r, rk[r].stages.slots);
        row(out, &rk[r].stages, rk[r].comm, rk[r].total);
    }
    fprintf(out, "params, grads: the flat fp32 buffers (params: and the 16-bit copy under --precision); "
                 "optimizer: its state slots per parameter; stash: the slots (microbatches in flight that the "
                 "driver gives the stage under this schedule) x what forward keeps for backward (and the "
                 "recompute arena); scratch: the forward and backward arenas and the largest kernel call's own "
                 "workspace; comm: the driver's buffers per rank; constants: non-trainable initializers. "
                 "`onnxpipe train` prints the measured peak next to it.\n");
}

pp_status cli_memory_estimate(const pp_schedule *sch, const pp_partition *part, const pp_train_config *c,
                              pp_json *json, FILE *out, pp_error *err)
{
    pp_device_kind kind;
    pp_error why = {0};
    PP_CHECK(pp_device_choose(c->device, 0, &kind, &why, err));
    pp_stage_bytes *st = calloc((size_t)sch->num_stages, sizeof *st);
    pp_driver_bytes *rk = calloc((size_t)sch->pp, sizeof *rk);
    pp_status s = st && rk ? PP_OK : PP_NOMEM(err);
    pp_stage_options so = pp_train_stage_options(c);
    if (s == PP_OK) s = pp_driver_estimate(sch, part, kind, &so, c->reduce_dtype, st, rk, err);
    if (s == PP_OK && json) write_json(json, sch, c, kind, st, rk);
    else if (s == PP_OK) print_text(out, sch, c, kind, st, rk);
    else if (s != PP_ERR_NOMEM) {
        /* the preview itself stands: say why there is no estimate (e.g. no loss named) */
        if (json) {
            pp_json_begin_object(json, NULL);
            pp_json_string(json, "error", err->msg);
            pp_json_end_object(json);
        } else {
            fprintf(out, "\nno memory estimate: %s\n", err->msg);
        }
        s = PP_OK;
    }
    free(st);
    free(rk);
    return s;
}

int cli_print_json_with(FILE *out, const char *obj, const char *key, const char *member)
{
    size_t n = strlen(obj);
    while (n && (obj[n - 1] == '\n' || obj[n - 1] == ' ')) n--;
    if (!n || obj[n - 1] != '}') return 0;
    fprintf(out, "%.*s,\n  \"%s\": %s}\n", (int)(n - 1), obj, key, member);
    return 1;
}
