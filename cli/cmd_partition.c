/* `onnxpipe partition MODEL --stages N ...`: loads a model, splits it into pipeline
 * stages and shows the split (table, JSON or Graphviz) with the memory estimate of
 * training it (cli/estimate.c), optionally writing one ONNX file per stage. */
#include "cli.h"

#include <onnxpipe/core_util.h>
#include <onnxpipe/partition.h>
#include <onnxpipe/report_json.h>
#include <onnxpipe/schedule_lib.h>
#include <onnxpipe/driver_lib.h>

#include <stdlib.h>
#include <string.h>

#define MAX_DIMS 32
#define MAX_CUTS 4096

static void help(FILE *out)
{
    fprintf(out,
            "usage: onnxpipe partition MODEL --stages N [options]\n\n"
            "Splits MODEL into N pipeline stages, each a contiguous range of a topological order in\n"
            "which tensors only flow to later stages, so that the largest stage is as small as\n"
            "possible (exact over the orders searched); among the splits within --balance-tolerance\n"
            "of that, the one sending the fewest bytes across its cuts. Shows parameters, FLOPs,\n"
            "activations, cut tensors and memory per stage.\n\n"
            "options:\n"
            "  --stages N            number of pipeline stages (default: number of --cut names + 1)\n"
            "  --batch B             samples per microbatch: binds dim 0 of symbolic graph inputs\n"
            "  --dim NAME=V          binds the symbolic dim NAME (repeatable)\n"
            "  --microbatches M      microbatches per step, for the memory estimate (default N)\n"
            "  --schedule KIND       gpipe | 1f1b (default) | interleaved | zb-h1: the stash slots of the estimate\n"
            "  --chunks V            virtual stages per rank for interleaved (default 2): N / V ranks\n"
            "  --recompute KIND      none (default) | selective | full: the memory estimate's stash keeps\n"
            "                        only stage inputs and sends (selective: and MatMul/Gemm/Conv outputs)\n"
            "                        plus one recompute arena per stage (onnxpipe train --recompute)\n"
            "  --cut NAME[,NAME...]  manual boundaries after these nodes / after the nodes producing\n"
            "                        these tensors, in topological order (overrides --balance)\n"
            "  --json                print the partition as JSON instead of a table\n"
            "  --dot FILE            write a Graphviz view coloured by stage (cut edges bold)\n"
            "  --out-dir DIR         write DIR/stage-0.onnx ... one model per stage\n"
            "  -h, --help            show this help\n"
            "the split (the same options choose it in `onnxpipe train` and `schedule --model`):\n%s"
            "the options of `onnxpipe train` that shape a stage, for the memory estimate:\n%s\n"
            "Without --batch (or --dim for other symbolic dims) activation sizes are unknown:\n"
            "the table shows '?', the flops, time and memory balances refuse to run, and there is no\n"
            "memory estimate. The estimate is what `onnxpipe train --batch B x M --microbatches M`\n"
            "with these options would allocate per stage and rank, from the stage planner itself.\n",
            cli_partition_options_help, cli_stage_options_help);
}

typedef struct args {
    const char *model, *dot, *out_dir, *schedule;
    long long stages, batch, microbatches, chunks;
    pp_train_config train;      /* the stage options (cli_stage_option) */
    int json;
    pp_dim_binding dims[MAX_DIMS];
    int ndims;
    char *cutbuf[MAX_CUTS / 8];
    int ncutbuf;
    const char *cuts[MAX_CUTS];
    int ncuts, have_cuts;
} args;

/* Splits a comma-separated list into a->cuts (the string is copied and kept). */
static int add_cuts(args *a, const char *list)
{
    if (a->ncutbuf == (int)(sizeof a->cutbuf / sizeof a->cutbuf[0]))
        return !cli_usage_error(NULL, "too many --cut options");
    char *s = pp_strdup(list);
    if (!s) return !cli_usage_error(NULL, "out of memory");
    a->cutbuf[a->ncutbuf++] = s;
    a->have_cuts = 1;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        if (a->ncuts == MAX_CUTS) return !cli_usage_error(NULL, "more than %d --cut names", MAX_CUTS);
        a->cuts[a->ncuts++] = tok;
    }
    if (!a->ncuts) return !cli_usage_error("give node or tensor names: --cut NAME[,NAME...]", "--cut is empty");
    return 1;
}

static int add_dim(args *a, char *spec)
{
    char *eq = strchr(spec, '=');
    if (!eq || eq == spec)
        return !cli_usage_error("write --dim NAME=VALUE, e.g. --dim seq=128", "bad --dim '%s'", spec);
    if (a->ndims == MAX_DIMS) return !cli_usage_error(NULL, "more than %d --dim options", MAX_DIMS);
    long long v;
    if (!cli_parse_int("--dim", eq + 1, 1, INT64_MAX, &v)) return 0;
    *eq = '\0';
    a->dims[a->ndims++] = (pp_dim_binding){spec, v};
    return 1;
}

/* Returns -1 to go on, else the exit code. */
static int parse(int argc, char **argv, args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            help(stdout);
            return 0;
        }
        if (!strcmp(o, "--json")) {
            a->json = 1;
            continue;
        }
        if (o[0] == '-' && o[1] == '-' && !v)
            return cli_usage_error("run 'onnxpipe partition --help'", "option %s needs a value", o);
        int taken = cli_stage_option(argc, argv, &i, &a->train);
        if (taken < 0) return 2;
        if (taken) continue;
        int ok = 1;
        if (!strcmp(o, "--stages")) ok = cli_parse_int(o, v, 1, 1 << 30, &a->stages);
        else if (!strcmp(o, "--model")) {
            if (a->model) return cli_usage_error(NULL, "more than one model given ('%s', '%s')", a->model, v);
            a->model = v;
        } else if (!strcmp(o, "--schedule")) a->schedule = v;
        else if (!strcmp(o, "--chunks")) ok = cli_parse_int(o, v, 1, 64, &a->chunks);
        else if (!strcmp(o, "--batch")) ok = cli_parse_int(o, v, 1, INT64_MAX, &a->batch);
        else if (!strcmp(o, "--microbatches")) ok = cli_parse_int(o, v, 1, 1 << 30, &a->microbatches);
        else if (!strcmp(o, "--cut")) ok = add_cuts(a, v);
        else if (!strcmp(o, "--dim")) ok = add_dim(a, argv[i + 1]);
        else if (!strcmp(o, "--dot")) a->dot = v;
        else if (!strcmp(o, "--out-dir")) a->out_dir = v;
        else if (o[0] == '-' && o[1])
            return cli_usage_error("run 'onnxpipe partition --help'", "unknown option '%s'", o);
        else {
            if (a->model) return cli_usage_error(NULL, "more than one model given ('%s', '%s')", a->model, o);
            a->model = o;
            continue;
        }
        if (!ok) return 2;
        i++;
    }
    if (!a->model)
        return cli_usage_error("onnxpipe partition MODEL --stages N", "no model given");
    if (!a->stages && !a->have_cuts)
        return cli_usage_error("e.g. onnxpipe partition model.onnx --stages 4", "--stages is required");
    if (!a->stages) a->stages = a->ncuts + 1;
    return -1;
}

/* The schedule `onnxpipe train` would run this partition with (its stash slots). */
static pp_status make_schedule(const args *a, int64_t microbatches, pp_schedule **out, pp_error *err)
{
    pp_schedule_kind kind = PP_SCHED_1F1B;
    if (a->schedule) PP_CHECK(pp_schedule_kind_parse(a->schedule, &kind, err));
    long long chunks = a->chunks ? a->chunks : kind == PP_SCHED_INTERLEAVED ? 2 : 1;
    if (a->stages % chunks)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "--stages %lld is not a multiple of --chunks %lld", a->stages,
                            chunks);
    return pp_schedule_create(kind, (int)(a->stages / chunks), (int)microbatches, (int)chunks, out, err);
}

/* The estimate as text, or the partition's JSON object with it added as "memory_estimate"
 * (null when activation sizes are unknown). */
static pp_status print_estimate(const args *a, const pp_train_config *job, const pp_partition *p, pp_error *err)
{
    char *pj = NULL, *ej = NULL;
    size_t pn = 0, en = 0;
    pp_schedule *sch = NULL;
    pp_train_config c = *job;
    pp_status st = PP_OK;
    if (p->shapes_known) PP_CHECK_GOTO(make_schedule(a, p->microbatches, &sch, err), st, done);
    if (!a->json) {
        if (sch) st = cli_memory_estimate(sch, p, &c, NULL, stdout, err);
        goto done;
    }
    FILE *pf = open_memstream(&pj, &pn), *ef = pf ? open_memstream(&ej, &en) : NULL;
    if (!ef) {
        if (pf) fclose(pf);
        st = PP_NOMEM(err);
        goto done;
    }
    pp_json j;
    pp_json_init(&j, pf, 1);
    pp_partition_write_json(p, &j);
    fclose(pf);
    pp_json_init(&j, ef, 0);
    if (sch) st = cli_memory_estimate(sch, p, &c, &j, NULL, err);
    else pp_json_null(&j, NULL);
    fclose(ef);
    if (st == PP_OK && !cli_print_json_with(stdout, pj, "memory_estimate", ej))
        st = pp_error_set(err, PP_ERR_INTERNAL, "the partition's JSON is not an object");
done:
    free(pj);
    free(ej);
    pp_schedule_destroy(sch);
    return st;
}

static int run(const args *a)
{
    pp_graph_options go = {.batch = a->batch, .dims = a->dims, .ndims = a->ndims, .allow_unknown_dims = 1,
                           .params = a->train.params};
    /* the job `onnxpipe train --batch B x M --microbatches M` would run: its split and stages */
    pp_train_config c = a->train;
    c.microbatches = a->microbatches ? a->microbatches : a->stages;
    c.batch = (a->batch ? a->batch : 1) * c.microbatches;
    c.partition.cuts = a->have_cuts ? a->cuts : NULL;
    c.partition.ncuts = a->ncuts;
    pp_graph *g = NULL;
    pp_partition *p = NULL;
    pp_error err = {0}, why = {0}, dev_why = {0};
    pp_device_kind kind = PP_DEVICE_CPU;
    int rc = 0;
    if (pp_graph_load(a->model, &go, &g, &err) != PP_OK || pp_device_choose(c.device, 0, &kind, &dev_why, &err) != PP_OK ||
        pp_train_partition(&c, g, (int)a->stages, kind, &p, &why, &err) != PP_OK ||
        (a->dot && pp_partition_write_dot(p, a->dot, &err) != PP_OK) ||
        (a->out_dir && pp_partition_save_stages(p, a->out_dir, &err) != PP_OK)) {
        rc = cli_fail(&err);
        goto done;
    }
    if (p->balance == PP_BALANCE_MEMORY && !p->memory->planned)
        fprintf(stderr, "onnxpipe: note: the memory balance uses the partitioner's coarse estimate: the stage "
                        "planner could not plan the job (%s)\n", why.msg);
    if (!a->json) pp_partition_print(p, stdout);
    if (print_estimate(a, &c, p, &err) != PP_OK) {
        rc = cli_fail(&err);
        goto done;
    }
    if (!a->json) {
        if (!p->shapes_known)
            printf("\nnote: some activation sizes are unknown (?): bind the batch with --batch B and other "
                   "symbolic dims with --dim NAME=V (the memory estimate needs them)\n");
        if (a->dot) printf("\nwrote %s (dot -Tsvg %s -o partition.svg)\n", a->dot, a->dot);
        if (a->out_dir) printf("wrote %s/stage-0.onnx .. stage-%d.onnx\n", a->out_dir, p->nstages - 1);
    }
done:
    pp_partition_destroy(p);
    pp_graph_destroy(g);
    return rc;
}

int cmd_partition(int argc, char **argv)
{
    args *a = calloc(1, sizeof *a);
    if (!a) return cli_usage_error(NULL, "out of memory");
    cli_train_defaults(&a->train);
    int rc = parse(argc, argv, a);
    if (rc < 0) rc = run(a);
    for (int i = 0; i < a->ncutbuf; i++) free(a->cutbuf[i]);
    free(a);
    return rc;
}
