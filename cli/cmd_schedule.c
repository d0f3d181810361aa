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

static void usage(FILE *out)
{
    fprintf(out,
            "usage: onnxpipe schedule --pp P --microbatches M --kind gpipe|1f1b|interleaved|zb-h1|zb-v [options]\n"
            "       onnxpipe schedule --load-csv FILE [options]\n\n"
            "Generates a pipeline schedule, proves it deadlock-free, simulates one training step and\n"
            "prints the timeline (one row per rank), the bubble against its closed form, the peak\n"
            "stashed activations per rank and the critical path.\n\n"
            "options:\n"
            "  --pp P                pipeline ranks\n"
            "  --microbatches M      microbatches per step\n"
            "  --kind K              gpipe, 1f1b, interleaved (Megatron; M must be a multiple of P)\n"
            "                        zb-h1 (zero bubble: backward split into input and weight passes)\n"
            "                        or zb-v (zero bubble V: two stages per rank, r and 2P-1-r)\n"
            "  --chunks V            virtual stages per rank for interleaved (default 2; zb-v has 2)\n"
            "  --costs F,B,W[,SEND]  seconds per microbatch per virtual stage: forward, backward-input,\n"
            "                        backward-weight (a full backward costs B+W), and per message\n"
            "                        (default 1,1,1,0)\n"
            "  --allreduce S         seconds of each stage's data-parallel gradient all-reduce (default 0)\n"
            "  --optimizer S         seconds of the optimizer step (default 0)\n"
            "  --model MODEL.onnx    take per-stage costs from the partition `onnxpipe train` makes of\n"
            "                        this model (--balance, default params; see below): F = FLOPs /\n"
            "                        --gflops, B = W = F; stash and message sizes from the partition\n"
            "  --batch B             samples per microbatch (binds dim 0 of the model's inputs)\n"
            "  --recompute KIND      none (default) | selective | full, for --model: the stash keeps\n"
            "                        stage inputs and sends (selective: and MatMul/Gemm/Conv outputs), and\n"
            "                        B grows by the forward FLOPs run again (onnxpipe train --recompute)\n"
            "  --link-gbps B         link bandwidth for --model messages, GB/s (default: free links);\n"
            "                        --bandwidth B is the same\n"
            "  --latency S           seconds per message (overrides SEND of --costs)\n"
            "  --load-csv FILE       read a schedule in PyTorch's CSV form (compute-only or with\n"
            "                        SEND/RECV actions) instead of generating one\n"
            "  --csv FILE            write the schedule as CSV (with communication)\n"
            "  --csv-compute-only    write only FORWARD/BACKWARD actions to --csv (PyTorch compute_only)\n"
            "  --trace FILE          write a Perfetto / chrome://tracing JSON of the simulated step\n"
            "  --json                print the summary as JSON instead of text\n"
            "  --width N             columns of the timeline (default 160)\n"
            "with --model, the split (as `onnxpipe train` makes it with the same options):\n%s"
            "and the memory estimate per stage and rank of `onnxpipe train --batch B x M --microbatches M`\n"
            "on that partition, with its options:\n%s",
            cli_partition_options_help, cli_stage_options_help);
}

typedef struct args {
    long long pp, microbatches, chunks, batch, width;
    const char *kind, *model, *trace, *csv, *load_csv;
    double latency, allreduce, optimizer;
    double costs[4];
    int have_costs, have_latency, json, csv_compute_only, have_chunks;
    pp_train_config train;      /* the stage options (cli_stage_option) */
} args;

/* "F,B,W[,SEND]": 3 or 4 numbers >= 0. */
static int parse_costs(const char *s, double out[4])
{
    char *end;
    int n = 0;
    out[3] = 0;
    for (const char *p = s; n < 4; n++) {
        errno = 0;
        out[n] = strtod(p, &end);
        if (end == p || errno || !(out[n] >= 0) || out[n] > 1e12) break;
        if (*end == 0 && n >= 2) return 1;
        if (*end != ',') break;
        p = end + 1;
    }
    cli_usage_error("e.g. --costs 1,1,1 or --costs 2.0,1.5,1.5,0.1", "--costs expects F,B,W[,SEND] (seconds >= 0), got '%s'",
                    s);
    return 0;
}

static int takes_value(const char *o)
{
    static const char *const opts[] = {"--pp", "--microbatches", "--chunks", "--batch", "--width",
                                       "--bandwidth", "--latency", "--allreduce", "--costs",
                                       "--kind", "--model", "--trace", "--csv", "--load-csv"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (!strcmp(o, opts[i])) return 1;
    return 0;
}

/* 1: go on, 2: --help asked, 0: bad arguments (already reported). */
static int parse_args(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof *a);
    cli_train_defaults(&a->train);
    a->chunks = 1;
    a->width = 160;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) return 2;
        if (!strcmp(o, "--json")) {
            a->json = 1;
            continue;
        }
        if (!strcmp(o, "--csv-compute-only")) {
            a->csv_compute_only = 1;
            continue;
        }
        if (o[0] != '-' || o[1] != '-')
            return cli_usage_error("run 'onnxpipe schedule --help' for the options", "unexpected argument '%s'", o), 0;
        int taken = cli_stage_option(argc, argv, &i, &a->train);
        if (taken < 0) return 0;
        if (taken) continue;
        if (!takes_value(o))
            return cli_usage_error("run 'onnxpipe schedule --help' for the options", "unknown option '%s'", o), 0;
        if (i + 1 >= argc) return cli_usage_error(NULL, "%s needs a value", o), 0;
        const char *v = argv[++i];
        int ok = 1;
        if (!strcmp(o, "--pp")) ok = cli_parse_int(o, v, 1, 16384, &a->pp);
        else if (!strcmp(o, "--microbatches")) ok = cli_parse_int(o, v, 1, 1 << 20, &a->microbatches);
        else if (!strcmp(o, "--chunks")) ok = cli_parse_int(o, v, 1, 64, &a->chunks), a->have_chunks = 1;
        else if (!strcmp(o, "--batch")) ok = cli_parse_int(o, v, 1, INT64_MAX, &a->batch);
        else if (!strcmp(o, "--width")) ok = cli_parse_int(o, v, 8, 100000, &a->width);
        else if (!strcmp(o, "--bandwidth")) ok = cli_parse_double(o, v, 1e-9, 1e9, &a->train.partition.link_gbps);
        else if (!strcmp(o, "--latency")) ok = cli_parse_double(o, v, 0, 1e9, &a->latency), a->have_latency = 1;
        else if (!strcmp(o, "--allreduce")) ok = cli_parse_double(o, v, 0, 1e9, &a->allreduce);
        else if (!strcmp(o, "--optimizer")) ok = cli_parse_double(o, v, 0, 1e9, &a->optimizer);
        else if (!strcmp(o, "--costs")) ok = parse_costs(v, a->costs), a->have_costs = 1;
        else if (!strcmp(o, "--kind")) a->kind = v;
        else if (!strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--trace")) a->trace = v;
        else if (!strcmp(o, "--csv")) a->csv = v;
        else a->load_csv = v;  /* --load-csv, the last of takes_value's list */
        if (!ok) return 0;
    }
    if (a->load_csv) {
        if (a->pp || a->microbatches || a->kind || a->have_chunks)
            return cli_usage_error("drop --pp, --microbatches, --kind and --chunks",
                                   "--load-csv takes ranks, stages and microbatches from the file"), 0;
    } else if (!a->pp || !a->microbatches || !a->kind) {
        return cli_usage_error("e.g. onnxpipe schedule --pp 4 --microbatches 8 --kind 1f1b",
                               "--pp, --microbatches and --kind are required (or --load-csv FILE)"), 0;
    }
    if (a->model && a->have_costs)
        return cli_usage_error("use --gflops to scale model costs", "--costs and --model both set the stage costs"), 0;
    if (!a->model && (a->batch || a->train.partition.link_gbps > 0 || a->train.recompute != PP_RECOMPUTE_NONE))
        return cli_usage_error(NULL, "--batch, --link-gbps (--bandwidth) and --recompute apply to --model"), 0;
    if (!a->train.partition.gflops) a->train.partition.gflops = DEFAULT_GFLOPS;
    if (a->csv_compute_only && !a->csv) return cli_usage_error(NULL, "--csv-compute-only needs --csv FILE"), 0;
    return 1;
}

/* The job `onnxpipe train --batch B x M --microbatches M` would run with these options. */
static pp_train_config job(const args *a, const pp_schedule *s)
{
    pp_train_config c = a->train;
    c.microbatches = s->microbatches;
    c.batch = a->batch * c.microbatches;
    return c;
}

/* The partition that job makes (its balance, default params). */
static pp_status model_partition(const args *a, const pp_graph *g, const pp_schedule *s, pp_partition **out,
                                 pp_error *err)
{
    pp_train_config c = job(a, s);
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
    pp_train_config c = job(a, s);
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
    if (parsed == 2) usage(stdout);
    if (parsed != 1) return parsed == 2 ? 0 : 2;
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
        if (!a.have_chunks) a.chunks = pp_schedule_default_chunks(kind);
        if (pp_schedule_create(kind, (int)a.pp, (int)a.microbatches, (int)a.chunks, &s, &err) != PP_OK) {
            rc = cli_usage_error(kind == PP_SCHED_INTERLEAVED ? "interleaved needs --microbatches divisible by --pp"
                                                              : NULL,
                                 "%s", err.msg);
            goto done;
        }
    }
    pp_costs costs;
    pp_costs_unit(&costs);
    if (a.have_costs) {
        costs.uniform.forward = a.costs[0];
        costs.uniform.backward_input = a.costs[1];
        costs.uniform.backward_weight = a.costs[2];
        costs.send_latency = a.costs[3];
    }
    if (a.have_latency) costs.send_latency = a.latency;
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
