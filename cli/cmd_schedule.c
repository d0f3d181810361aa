/* `onnxpipe schedule --pp P --microbatches M --kind K ...`: generates (or loads), validates
 * and simulates a pipeline schedule and shows its timeline, bubble and peak activations,
 * optionally with per-stage costs taken from the partition of a model and the memory
 * estimate of training it (cli/estimate.c). */
#include "cli.h"

#include <onnxpipe/core_util.h>
#include <onnxpipe/graph.h>
#include <onnxpipe/partition.h>
#include <onnxpipe/plan.h>
#include <onnxpipe/schedule.h>
#include <onnxpipe/driver_lib.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Assumed machine throughput when costs come from a model (--gflops overrides; the time
 * balance's default too). */
#define DEFAULT_GFLOPS 100.0

/* --costs F,B,W[,SEND]: the seconds, and that they were given. */
typedef struct costs_arg {
    double v[4];
    int given;
} costs_arg;

typedef struct args {
    int64_t pp, microbatches, chunks, batch, width;
    const char *kind, *model, *trace, *csv, *load_csv;
    double latency, allreduce, optimizer;   /* latency < 0: not given */
    costs_arg costs;
    int json, csv_compute_only;
    pp_trainer_config train;    /* with --model: the split's and the stage's options */
} args;

/* "F,B,W[,SEND]": 3 or 4 numbers >= 0. */
static int parse_costs(const char *s, void *field, pp_error *err)
{
    costs_arg *c = field;
    char *end;
    c->v[3] = 0;
    for (int n = 0; n < 4; n++) {
        errno = 0;
        c->v[n] = strtod(s, &end);
        if (end == s || errno || !(c->v[n] >= 0) || c->v[n] > 1e12) break;
        if (*end == 0 && n >= 2) return c->given = 1;
        if (*end != ',') break;
        s = end + 1;
    }
    pp_error_set(err, PP_ERR_INVALID_ARG, "--costs expects F,B,W[,SEND] (seconds >= 0, e.g. 2.0,1.5,1.5,0.1)");
    return 0;
}

#define OPTS "options:"
#define A(f) PP_OPT_FIELD(args, f)

static const pp_option table[] = {
    {.type = PP_OPT_INT, .name = "--pp", .metavar = "P", A(pp), .lo = 1, .hi = 16384, .group = OPTS,
     .help = "pipeline ranks"},
    {.type = PP_OPT_INT, .name = "--microbatches", .metavar = "M", A(microbatches), .lo = 1, .hi = 1 << 20,
     .group = OPTS, .help = "microbatches per step"},
    {.type = PP_OPT_STR, .name = "--kind", .metavar = "K", A(kind), .group = OPTS,
     .help = "gpipe, 1f1b, interleaved (Megatron; M must be a multiple of P)\n"
             "zb-h1 (zero bubble: backward split into input and weight passes)\n"
             "or zb-v (zero bubble V: two stages per rank, r and 2P-1-r)"},
    {.type = PP_OPT_INT, .name = "--chunks", .metavar = "V", A(chunks), .lo = 1, .hi = 64, .group = OPTS,
     .help = "virtual stages per rank for interleaved (default 2; zb-v has 2)"},
    {.type = PP_OPT_CUSTOM, .name = "--costs", .metavar = "F,B,W[,SEND]", A(costs), .parse = parse_costs,
     .shown = "1,1,1,0", .group = OPTS,
     .help = "seconds per microbatch per virtual stage: forward, backward-input,\n"
             "backward-weight (a full backward costs B+W), and per message"},
    {.type = PP_OPT_REAL, .name = "--allreduce", .metavar = "S", A(allreduce), .lo = 0, .hi = 1e9, .group = OPTS,
     .help = "seconds of each stage's data-parallel gradient all-reduce"},
    {.type = PP_OPT_REAL, .name = "--optimizer-time", .metavar = "S", A(optimizer), .lo = 0, .hi = 1e9,
     .group = OPTS, .help = "seconds of the optimizer step"},
    {.type = PP_OPT_REAL, .name = "--latency", .metavar = "S", A(latency), .lo = 0, .hi = 1e9, .def = -1,
     .shown = "SEND of --costs", .group = OPTS, .help = "seconds per message"},
    {.type = PP_OPT_STR, .name = "--model", .metavar = "MODEL.onnx", A(model), .group = OPTS,
     .help = "take per-stage costs from the partition `onnxpipe train` makes of\n"
             "this model (--balance, default params; see below): F = FLOPs /\n"
             "--gflops, B = W = F; stash and message sizes from the partition; messages\n"
             "at --link-gbps"},
    {.type = PP_OPT_INT, .name = "--batch", .metavar = "B", A(batch), .lo = 1, .hi = 1LL << 40, .group = OPTS,
     .help = "samples per microbatch (binds dim 0 of the model's inputs)"},
    {.type = PP_OPT_STR, .name = "--load-csv", .metavar = "FILE", A(load_csv), .group = OPTS,
     .help = "read a schedule in PyTorch's CSV form (compute-only or with\n"
             "SEND/RECV actions) instead of generating one"},
    {.type = PP_OPT_STR, .name = "--csv", .metavar = "FILE", A(csv), .group = OPTS,
     .help = "write the schedule as CSV (with communication)"},
    {.type = PP_OPT_FLAG, .name = "--csv-compute-only", A(csv_compute_only), .group = OPTS,
     .help = "write only FORWARD/BACKWARD actions to --csv (PyTorch compute_only)"},
    {.type = PP_OPT_STR, .name = "--trace", .metavar = "FILE", A(trace), .group = OPTS,
     .help = "write a Perfetto / chrome://tracing JSON of the simulated step"},
    {.type = PP_OPT_FLAG, .name = "--json", A(json), .group = OPTS, .help = "print the summary as JSON instead of text"},
    {.type = PP_OPT_INT, .name = "--width", .metavar = "N", A(width), .lo = 8, .hi = 100000, .def = 160,
     .group = OPTS, .help = "columns of the timeline"},
    {.type = PP_OPT_TABLE, .sub = pp_stage_option_table, A(train)},
    {.type = PP_OPT_TABLE, .sub = pp_partition_option_table, A(train.partition)},
    {0},
};

static const char *const groups[] = {OPTS, PP_OPT_GROUPS_PREVIEW, NULL};

static const cli_options options = {
    .usage = "usage: onnxpipe schedule --pp P --microbatches M --kind gpipe|1f1b|interleaved|zb-h1|zb-v [options]\n"
             "       onnxpipe schedule --load-csv FILE [options]\n\n"
             "Generates a pipeline schedule, proves it deadlock-free, simulates one training step and\n"
             "prints the timeline (one row per rank), the bubble against its closed form, the peak\n"
             "stashed activations per rank and the critical path. With --model, the split and the\n"
             "memory estimate per stage and rank are those of `onnxpipe train --batch B x M\n"
             "--microbatches M` on that model, with the options below.\n",
    .table = table,
    .groups = groups,
    .hint = "run 'onnxpipe schedule --help' for the options",
};

/* -1: go on; else the exit code. */
static int parse_args(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof *a);
    pp_options_defaults(table, a);
    pp_trainer_config_init(&a->train);
    int rc = cli_options_parse(&options, a, argc, argv, NULL, 0, NULL);
    if (rc >= 0) return rc;
    if (a->load_csv) {
        if (a->pp || a->microbatches || a->kind || a->chunks)
            return cli_usage_error("drop --pp, --microbatches, --kind and --chunks",
                                   "--load-csv takes ranks, stages and microbatches from the file");
    } else if (!a->pp || !a->microbatches || !a->kind) {
        return cli_usage_error("e.g. onnxpipe schedule --pp 4 --microbatches 8 --kind 1f1b",
                               "--pp, --microbatches and --kind are required (or --load-csv FILE)");
    }
    if (a->model && a->costs.given)
        return cli_usage_error("use --gflops to scale model costs", "--costs and --model both set the stage costs");
    if (!a->model && (a->batch || a->train.partition.link_gbps > 0 || a->train.recompute != PP_RECOMPUTE_NONE))
        return cli_usage_error(NULL, "--batch, --link-gbps and --recompute apply to --model");
    if (!a->train.partition.gflops) a->train.partition.gflops = DEFAULT_GFLOPS;
    if (a->csv_compute_only && !a->csv) return cli_usage_error(NULL, "--csv-compute-only needs --csv FILE");
    return -1;
}

/* The job `onnxpipe train --batch B x M --microbatches M` would run with these options. */
static pp_trainer_config job(const args *a, const pp_schedule *s)
{
    pp_trainer_config c = a->train;
    c.microbatches = s->microbatches;
    c.batch = a->batch * c.microbatches;
    return c;
}

/* The partition that job makes (its balance, default params). */
static pp_status model_partition(const args *a, const pp_graph *g, const pp_schedule *s, pp_partition **out,
                                 pp_error *err)
{
    pp_trainer_config c = job(a, s);
    pp_device_kind kind = PP_DEVICE_CPU;
    pp_error why = {0};
    PP_CHECK(pp_device_choose(c.device, 0, &kind, &why, err));
    return pp_train_partition(&c, g, s->num_stages, kind, out, NULL, err);
}

/* Per-stage costs from the partition, priced by the planner's cost model at --gflops
 * (pp_plan_stage_costs, as train's plan line and `onnxpipe plan` price them). */
static pp_status model_costs(const args *a, const pp_partition *part, const pp_schedule *s, pp_stage_cost **out,
                             pp_error *err)
{
    pp_stage_cost *c = pp_calloc((size_t)s->num_stages, sizeof *c);
    if (!c) return PP_NOMEM(err);
    pp_cost_model cm = {.gflops = a->train.partition.gflops};
    pp_status st = pp_plan_stage_costs(part, &cm, a->batch > 0 ? a->batch : 1, a->train.precision,
                                       a->train.recompute, c, err);
    if (st != PP_OK) {
        free(c);
        return st;
    }
    *out = c;
    return PP_OK;
}

/* The memory estimate on that partition: text on stdout, or into ej as JSON. */
static pp_status model_memory(const args *a, const pp_partition *part, const pp_schedule *s, FILE *ej, pp_error *err)
{
    pp_trainer_config c = job(a, s);
    pp_json j;
    pp_json_init(&j, ej, 0);
    return cli_memory_estimate(s, part, &c, ej ? &j : NULL, stdout, err);
}

/* Opens path for writing, runs the writer, closes; errors name the file. */
static int write_file(const char *path, const char *what, pp_status (*fn)(const void *, FILE *, pp_error *),
                      const void *ctx)
{
    pp_error err = {0};
    FILE *f = fopen(path, "w");
    if (!f) {
        pp_error_set(&err, PP_ERR_IO, "cannot write %s '%s': %s", what, path, strerror(errno));
        return cli_fail(&err);
    }
    pp_status st = fn(ctx, f, &err);
    if (fclose(f) != 0 && st == PP_OK) st = pp_error_set(&err, PP_ERR_IO, "closing '%s': %s", path, strerror(errno));
    if (st != PP_OK) {
        pp_error_prefix(&err, "%s '%s': ", what, path);
        return cli_fail(&err);
    }
    return 0;
}

typedef struct out_ctx {
    const pp_schedule *s;
    const pp_sim_result *r;
    int compute_only;
} out_ctx;

static pp_status csv_writer(const void *p, FILE *f, pp_error *err)
{
    const out_ctx *c = p;
    return pp_schedule_write_csv(c->s, f, c->compute_only, err);
}

static pp_status trace_writer(const void *p, FILE *f, pp_error *err)
{
    const out_ctx *c = p;
    return pp_schedule_write_trace(c->s, c->r, f, err);
}

static pp_status load(const char *path, pp_schedule **s, pp_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f) return pp_error_set(err, PP_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    pp_status st = pp_schedule_read_csv(f, path, s, err);
    fclose(f);
    return st;
}

int cmd_schedule(int argc, char **argv)
{
    args a;
    int parsed = parse_args(argc, argv, &a);
    if (parsed >= 0) return parsed;
    pp_error err = {0};
    pp_schedule *s = NULL;
    pp_sim_result *r = NULL;
    pp_stage_cost *stage = NULL;
    pp_graph *g = NULL;
    pp_partition *part = NULL;
    char *sj = NULL, *ej = NULL;
    size_t sn = 0, en = 0;
    int rc = 1;
    if (a.load_csv) {
        if (load(a.load_csv, &s, &err) != PP_OK) goto fail;
        if (pp_schedule_validate(s, stderr, &err) != PP_OK) {
            pp_error_prefix(&err, "'%s' is not a valid schedule: ", a.load_csv);
            goto fail;
        }
    } else {
        pp_schedule_kind kind;
        if (pp_schedule_kind_parse(a.kind, &kind, &err) != PP_OK) {
            rc = cli_usage_error("--kind is one of gpipe, 1f1b, interleaved, zb-h1, zb-v", "%s", err.msg);
            goto done;
        }
        if (!a.chunks) a.chunks = pp_schedule_default_chunks(kind);
        if (pp_schedule_create(kind, (int)a.pp, (int)a.microbatches, (int)a.chunks, &s, &err) != PP_OK) {
            rc = cli_usage_error(kind == PP_SCHED_INTERLEAVED ? "interleaved needs --microbatches divisible by --pp"
                                                              : NULL,
                                 "%s", err.msg);
            goto done;
        }
    }
    pp_costs costs;
    pp_costs_unit(&costs);
    if (a.costs.given) {
        costs.uniform.forward = a.costs.v[0];
        costs.uniform.backward_input = a.costs.v[1];
        costs.uniform.backward_weight = a.costs.v[2];
        costs.send_latency = a.costs.v[3];
    }
    if (a.latency >= 0) costs.send_latency = a.latency;
    costs.allreduce = a.allreduce;
    costs.optimizer = a.optimizer;
    if (a.model) {
        pp_graph_options go = {.batch = a.batch, .params = a.train.params};
        if (pp_graph_load(a.model, &go, &g, &err) != PP_OK || model_partition(&a, g, s, &part, &err) != PP_OK ||
            model_costs(&a, part, s, &stage, &err) != PP_OK)
            goto fail;
        costs.stage = stage;
        costs.num_stages = s->num_stages;
        costs.uniform = stage[0];
        costs.bandwidth = a.train.partition.link_gbps * 1e9;
    }
    if (pp_schedule_simulate(s, &costs, &r, &err) != PP_OK) goto fail;
    if (a.json && !g) {
        pp_sim_result_write_json(s, &costs, r, stdout, 1);
    } else if (a.json) {
        /* the summary's object with "memory_estimate" added */
        FILE *sf = open_memstream(&sj, &sn), *ef = sf ? open_memstream(&ej, &en) : NULL;
        if (!ef) {
            if (sf) fclose(sf);
            PP_NOMEM(&err);
            goto fail;
        }
        pp_sim_result_write_json(s, &costs, r, sf, 1);
        fclose(sf);
        pp_status st = model_memory(&a, part, s, ef, &err);
        fclose(ef);
        if (st != PP_OK) goto fail;
        cli_print_json_with(stdout, sj, "memory_estimate", ej);
    } else {
        printf("schedule %s: pp %d, microbatches %d, %d virtual stage(s) per rank; %ld actions, deadlock-free\n\n",
               pp_schedule_kind_name(s->kind), s->pp, s->microbatches, s->chunks, pp_schedule_action_count(s));
        pp_schedule_print_timeline(s, r, stdout, (int)a.width);
        putchar('\n');
        pp_sim_result_print_summary(s, &costs, r, stdout);
        if (part && model_memory(&a, part, s, NULL, &err) != PP_OK) goto fail;
    }
    out_ctx ctx = {s, r, a.csv_compute_only};
    if (a.csv && (rc = write_file(a.csv, "schedule CSV", csv_writer, &ctx)) != 0) goto done;
    if (a.trace && (rc = write_file(a.trace, "trace", trace_writer, &ctx)) != 0) goto done;
    rc = 0;
    goto done;
fail:
    rc = cli_fail(&err);
done:
    free(sj);
    free(ej);
    free(stage);
    pp_partition_destroy(part);
    pp_graph_destroy(g);
    pp_sim_result_destroy(r);
    pp_schedule_destroy(s);
    return rc;
}
