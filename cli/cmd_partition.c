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

typedef struct args {
    const char *model, *dot, *out_dir, *schedule;
    int64_t stages, batch, microbatches, chunks;
    pp_trainer_config train;    /* the split's and the stage's options, --dim */
    int json;
} args;

#define OPTS "options:"
#define A(f) PP_OPT_FIELD(args, f)

static const pp_option table[] = {
    {.type = PP_OPT_INT, .name = "--stages", .metavar = "N", A(stages), .lo = 1, .hi = 1 << 30, .group = OPTS,
     .help = "number of pipeline stages (default: number of --cut names + 1)"},
    {.type = PP_OPT_STR, .name = "--model", .metavar = "MODEL", A(model), .group = OPTS,
     .help = "the model (or give it as the first argument)"},
    {.type = PP_OPT_INT, .name = "--batch", .metavar = "B", A(batch), .lo = 1, .hi = 1LL << 40, .group = OPTS,
     .help = "samples per microbatch: binds dim 0 of symbolic graph inputs"},
    {.type = PP_OPT_DIMS, .name = "--dim", .metavar = "NAME=V", A(train.dims), PP_OPT_COUNT(args, train.ndims),
     .hi = 64, .group = OPTS, .help = "binds the symbolic dim NAME (repeatable)"},
    {.type = PP_OPT_INT, .name = "--microbatches", .metavar = "M", A(microbatches), .lo = 1, .hi = 1 << 30,
     .shown = "N", .group = OPTS, .help = "microbatches per step, for the memory estimate"},
    {.type = PP_OPT_STR, .name = "--schedule", .metavar = "KIND", A(schedule), .shown = "1f1b", .group = OPTS,
     .help = "gpipe | 1f1b | interleaved | zb-h1: the stash slots of the estimate"},
    {.type = PP_OPT_INT, .name = "--chunks", .metavar = "V", A(chunks), .lo = 1, .hi = 64, .group = OPTS,
     .help = "virtual stages per rank for interleaved (default 2): N / V ranks"},
    {.type = PP_OPT_FLAG, .name = "--json", A(json), .group = OPTS, .help = "print the partition as JSON instead of a table"},
    {.type = PP_OPT_STR, .name = "--dot", .metavar = "FILE", A(dot), .group = OPTS,
     .help = "write a Graphviz view coloured by stage (cut edges bold)"},
    {.type = PP_OPT_STR, .name = "--out-dir", .metavar = "DIR", A(out_dir), .group = OPTS,
     .help = "write DIR/stage-0.onnx ... one model per stage"},
    {.type = PP_OPT_TABLE, .sub = pp_stage_option_table, A(train)},
    {.type = PP_OPT_TABLE, .sub = pp_partition_option_table, A(train.partition)},
    {0},
};

static const char *const groups[] = {OPTS, PP_OPT_GROUPS_PREVIEW, NULL};

static const cli_options options = {
    .usage = "usage: onnxpipe partition MODEL --stages N [options]\n\n"
             "Splits MODEL into N pipeline stages, each a contiguous range of a topological order in\n"
             "which tensors only flow to later stages, so that the largest stage is as small as\n"
             "possible (exact over the orders searched); among the splits within --balance-tolerance\n"
             "of that, the one sending the fewest bytes across its cuts. Shows parameters, FLOPs,\n"
             "activations, cut tensors and memory per stage. The split's and the stage's options are\n"
             "`onnxpipe train`'s: the same options split the same way there.\n",
    .table = table,
    .groups = groups,
    .epilog = "Without --batch (or --dim for other symbolic dims) activation sizes are unknown:\n"
              "the table shows '?', the flops, time and memory balances refuse to run, and there is no\n"
              "memory estimate. The estimate is what `onnxpipe train --batch B x M --microbatches M`\n"
              "with these options would allocate per stage and rank, from the stage planner itself.\n",
    .hint = "run 'onnxpipe partition --help'",
};

/* Returns -1 to go on, else the exit code. */
static int parse(int argc, char **argv, args *a)
{
    const char *pos[2];
    int npos = 0;
    int rc = cli_options_parse(&options, a, argc, argv, pos, 2, &npos);
    if (rc >= 0) return rc;
    if (npos + (a->model != NULL) > 1)
        return cli_usage_error(NULL, "more than one model given ('%s', '%s')", a->model ? a->model : pos[0],
                               pos[npos - 1]);
    if (npos) a->model = pos[0];
    if (!a->model)
        return cli_usage_error("onnxpipe partition MODEL --stages N", "no model given");
    if (!a->stages && !a->train.partition.ncuts)
        return cli_usage_error("e.g. onnxpipe partition model.onnx --stages 4", "--stages is required");
    if (!a->stages) a->stages = a->train.partition.ncuts + 1;
    return -1;
}

/* The schedule `onnxpipe train` would run this partition with (its stash slots). */
static pp_status make_schedule(const args *a, int64_t microbatches, pp_schedule **out, pp_error *err)
{
    pp_schedule_kind kind = PP_SCHED_1F1B;
    if (a->schedule) PP_CHECK(pp_schedule_kind_parse(a->schedule, &kind, err));
    long long chunks = a->chunks ? a->chunks : kind == PP_SCHED_INTERLEAVED ? 2 : 1;
    if (a->stages % chunks)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "--stages %lld is not a multiple of --chunks %lld", (long long)a->stages,
                            chunks);
    return pp_schedule_create(kind, (int)(a->stages / chunks), (int)microbatches, (int)chunks, out, err);
}

/* The estimate as text, or the partition's JSON object with it added as "memory_estimate"
 * (null when activation sizes are unknown). */
static pp_status print_estimate(const args *a, const pp_trainer_config *job, const pp_partition *p, pp_error *err)
{
    char *pj = NULL, *ej = NULL;
    size_t pn = 0, en = 0;
    pp_schedule *sch = NULL;
    pp_trainer_config c = *job;
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
    pp_graph_options go = {.batch = a->batch, .dims = a->train.dims, .ndims = a->train.ndims,
                           .allow_unknown_dims = 1, .params = a->train.params};
    /* the job `onnxpipe train --batch B x M --microbatches M` would run: its split and stages */
    pp_trainer_config c = a->train;
    c.microbatches = a->microbatches ? a->microbatches : a->stages;
    c.batch = (a->batch ? a->batch : 1) * c.microbatches;
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
    pp_trainer_config_init(&a->train);
    int rc = parse(argc, argv, a);
    if (rc < 0) rc = run(a);
    cli_options_free(&options, a);
    free(a);
    return rc;
}
