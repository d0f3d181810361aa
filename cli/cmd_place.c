/* `onnxpipe place --pp P --dp D ...`: the topology-aware placement of a job, checked
 * without the hardware: rank -> host, stage, replica, cores, GPU, and the predicted
 * intra/inter-node bytes per step of both grid orders. */
#include "cli.h"

#include <onnxpipe/core_util.h>
#include <onnxpipe/partition.h>
#include <onnxpipe/placement.h>

#include <stdlib.h>
#include <string.h>

#define MAX_STAGES 4096

typedef struct args {
    int64_t pp, dp, hosts, batch, microbatches;
    const char *xml, *synthetic, *model, *params, *sends;
    int order, json, job, bind;
    pp_place_device device;
} args;

static int parse_order(const char *v, void *f, pp_error *err)
{
    int *order = f;
    if (!strcmp(v, "auto")) *order = -1;
    else if (!strcmp(v, "stage-major")) *order = PP_GRID_STAGE_MAJOR;
    else if (!strcmp(v, "replica-major")) *order = PP_GRID_REPLICA_MAJOR;
    else return !pp_error_set(err, PP_ERR_INVALID_ARG, "unknown --order '%s': use auto, stage-major or replica-major", v);
    return 1;
}

/* auto | cpu | cuda, as `onnxpipe train --device` spells them. */
static int parse_device(const char *v, void *f, pp_error *err)
{
    pp_place_device *d = f;
    if (!strcmp(v, "auto")) *d = PP_PLACE_AUTO;
    else if (!strcmp(v, "cpu")) *d = PP_PLACE_CPU;
    else if (!strcmp(v, "cuda")) *d = PP_PLACE_GPU;
    else return !pp_error_set(err, PP_ERR_INVALID_ARG, "unknown --device '%s': use auto, cpu or cuda", v);
    return 1;
}

#define OPTS "options:"
#define A(f) PP_OPT_FIELD(args, f)

static const pp_option table[] = {
    {.type = PP_OPT_INT, .name = "--pp", .metavar = "P", A(pp), .lo = 1, .hi = MAX_STAGES, .group = OPTS,
     .help = "pipeline stages"},
    {.type = PP_OPT_INT, .name = "--dp", .metavar = "D", A(dp), .lo = 1, .hi = 1 << 16, .group = OPTS,
     .help = "data-parallel replicas"},
    {.type = PP_OPT_STR, .name = "--topology", .metavar = "FILE.xml", A(xml), .group = OPTS,
     .help = "each host's hwloc XML topology (lstopo --of xml FILE.xml)"},
    {.type = PP_OPT_STR, .name = "--synthetic", .metavar = "DESC", A(synthetic), .shown = "this machine",
     .group = OPTS, .help = "each host's synthetic topology, e.g. \"node:2 package:2 core:8 pu:1\""},
    {.type = PP_OPT_INT, .name = "--hosts", .metavar = "N", A(hosts), .lo = 1, .hi = 1 << 16, .def = 1,
     .group = OPTS, .help = "hosts with that topology, ranks in equal consecutive blocks"},
    {.type = PP_OPT_STR, .name = "--param-bytes", .metavar = "B,..", A(params), .group = OPTS,
     .help = "parameter bytes per stage (one value: every stage)"},
    {.type = PP_OPT_STR, .name = "--send-bytes", .metavar = "B,..", A(sends), .shown = "0", .group = OPTS,
     .help = "activation bytes sent to the next stage per microbatch"},
    {.type = PP_OPT_STR, .name = "--model", .metavar = "MODEL.onnx", A(model), .group = OPTS,
     .help = "take both from the partition `onnxpipe train` makes by default\n(needs --batch)"},
    {.type = PP_OPT_INT, .name = "--batch", .metavar = "B", A(batch), .lo = 1, .hi = 1LL << 40, .group = OPTS,
     .help = "samples per microbatch (binds dim 0 of the model's inputs)"},
    {.type = PP_OPT_INT, .name = "--microbatches", .metavar = "M", A(microbatches), .lo = 1, .hi = 1 << 30,
     .shown = "P", .group = OPTS, .help = "microbatches per step"},
    {.type = PP_OPT_ENUM, .name = "--order", .metavar = "KIND", A(order), .parse = parse_order, .def = -1,
     .shown = "auto", .group = OPTS, .help = "auto | stage-major | replica-major"},
    {.type = PP_OPT_ENUM, .name = "--device", .metavar = "KIND", A(device), .parse = parse_device,
     .shown = "auto: GPUs when there are", .group = OPTS, .help = "auto | cpu | cuda"},
    {.type = PP_OPT_FLAG, .name = "--json", A(json), .group = OPTS, .help = "print JSON instead of the table"},
    {.type = PP_OPT_FLAG, .name = "--job", A(job), .group = OPTS,
     .help = "under mpirun: the job's real hosts (ranks sharing memory) and this\n"
             "machine's topology, as train computes it; rank 0 prints"},
    {.type = PP_OPT_FLAG, .name = "--bind", A(bind), .group = OPTS,
     .help = "with --job: bind each rank (PP_BIND=auto|none|force) and report it"},
    {0},
};

static const char *const groups[] = {OPTS, NULL};

static const cli_options options = {
    .usage = "usage: onnxpipe place --pp P --dp D [options]\n\n"
             "Shows where each rank of a pipeline x data parallel job goes: host, stage, replica,\n"
             "cores and GPU, and the bytes per step each grid order would move inside a PCIe switch,\n"
             "a package, a host and over the network. The order that keeps the heavier traffic\n"
             "(all-reduce ~2 x stage params, pipeline ~2 x activations x microbatches) closer wins.\n",
    .table = table,
    .groups = groups,
    .hint = "run 'onnxpipe place --help'",
};

/* "B,B,..." into v[n]; one value fills every stage. */
static int parse_list(const char *opt, const char *s, int n, int64_t *v)
{
    int k = 0, ok = cli_parse_int_list(opt, s, 0, INT64_MAX, n, v, &k);
    if (ok && k == 1) for (int i = 1; i < n; i++) v[i] = v[0];
    else if (ok && k != n)
        ok = !cli_usage_error("give one value per stage, or one for all", "%s has %d values for %d stages", opt, k, n);
    return ok;
}

/* Returns -1 to go on, else the exit code. */
static int parse(int argc, char **argv, args *a)
{
    pp_options_defaults(table, a);
    int rc = cli_options_parse(&options, a, argc, argv, NULL, 0, NULL);
    if (rc >= 0) return rc;
    if (!a->pp || !a->dp) return cli_usage_error("e.g. onnxpipe place --pp 4 --dp 2 --param-bytes 4000000", "--pp and --dp are required");
    if (a->xml && a->synthetic) return cli_usage_error(NULL, "give --topology or --synthetic, not both");
    if (a->model && (a->params || a->sends))
        return cli_usage_error("--model measures the stages itself", "give --model or --param-bytes/--send-bytes, not both");
    if (!a->model && !a->params)
        return cli_usage_error("give --param-bytes B,... or --model MODEL.onnx --batch B", "no stage sizes given");
    if (a->model && !a->batch)
        return cli_usage_error("activation sizes need the microbatch size", "--model needs --batch B");
    if (a->job && (a->xml || a->synthetic || a->hosts != 1))
        return cli_usage_error("--job reads this machine and the job's hosts", "--job takes no --topology, --synthetic or --hosts");
    if (a->bind && !a->job) return cli_usage_error("run under mpirun with --job --bind", "--bind needs --job");
    if (!a->microbatches) a->microbatches = a->pp;
    return -1;
}

/* Per-stage bytes from the partition train makes with its default split (params balance,
 * tolerance 0.02, orders searched). */
static pp_status model_bytes(const args *a, int64_t *params, int64_t *sends, pp_error *err)
{
    pp_graph_options go = {.batch = a->batch};
    pp_trainer_config c;
    pp_trainer_config_init(&c);
    c.microbatches = a->microbatches;
    c.batch = a->batch * a->microbatches;
    pp_graph *g = NULL;
    pp_partition *part = NULL;
    pp_status st = PP_OK;
    PP_CHECK_GOTO(pp_graph_load(a->model, &go, &g, err), st, done);
    PP_CHECK_GOTO(pp_train_partition(&c, g, (int)a->pp, PP_DEVICE_CPU, &part, NULL, err), st, done);
    for (int s = 0; s < part->nstages; s++) {
        params[s] = part->stages[s].param_bytes;
        sends[s] = part->stages[s].send_bytes;
        if (sends[s] < 0) {
            st = pp_error_set(err, PP_ERR_SHAPE, "'%s' stage %d: activation size unknown; bind symbolic dims "
                              "other than the batch", a->model, s);
            goto done;
        }
    }
done:
    pp_partition_destroy(part);
    pp_graph_destroy(g);
    return st;
}

/* Each rank binds itself and reports, in rank order. */
static int bind_and_report(pp_comm *world, const pp_placement *pl, pp_topology *here)
{
    static const char *kinds[] = {"bound", "already bound", "not bound"};
    pp_bind_result res;
    pp_error err = {0};
    int rc = 0;
    if (pp_placement_bind(pl, pp_comm_rank(world), here, &res, &err) != PP_OK) rc = cli_fail(&err);
    for (int r = 0; r < pp_comm_size(world); r++) {
        if (r == pp_comm_rank(world) && !rc)
            printf("rank %d (%s, local %d): %s, cores %s: %s\n", r, pl->host_names[pl->ranks[r].host],
                   pl->ranks[r].local, kinds[res.kind], res.cpus, res.note);
        fflush(stdout);
        if (pp_comm_barrier(world, &err) != PP_OK) return cli_fail(&err);
    }
    return rc;
}

static int run(const args *a)
{
    int P = (int)a->pp;
    int64_t *params = calloc((size_t)P, sizeof *params), *sends = calloc((size_t)P, sizeof *sends);
    pp_topology **topo = calloc((size_t)a->hosts, sizeof *topo);
    pp_topology *t = NULL;
    pp_placement *pl = NULL;
    pp_comm *world = NULL;
    pp_error err = {0};
    int rc = 0;
    if (!params || !sends || !topo) {
        rc = cli_usage_error(NULL, "out of memory");
        goto done;
    }
    if (a->params && (!parse_list("--param-bytes", a->params, P, params) ||
                      (a->sends && !parse_list("--send-bytes", a->sends, P, sends)))) {
        rc = 2;
        goto done;
    }
    if ((a->model && model_bytes(a, params, sends, &err) != PP_OK) ||
        pp_topology_load(a->xml, a->synthetic, &t, &err) != PP_OK) {
        rc = cli_fail(&err);
        goto done;
    }
    for (int h = 0; h < a->hosts; h++) topo[h] = t;
    pp_placement_input in = {.pp = P, .dp = (int)a->dp, .param_bytes = params, .send_bytes = sends,
                             .microbatches = a->microbatches, .nhosts = (int)a->hosts, .topology = topo,
                             .order = a->order, .device = a->device};
    if (a->job ? pp_comm_mpi_world(&world, &err) != PP_OK || pp_placement_plan_job(world, &in, t, &pl, &err) != PP_OK
               : pp_placement_plan(&in, &pl, &err) != PP_OK) {
        rc = cli_fail(&err);
        goto done;
    }
    if (world && pp_comm_rank(world) != 0) {
        /* rank 0 prints the plan */
    } else if (a->json) {
        pp_json j;
        pp_json_init(&j, stdout, 1);
        pp_placement_write_json(pl, &j);
        pp_json_finish(&j);
    } else {
        pp_placement_print(pl, stdout);
    }
    if (pl->oversubscribed && a->json) fprintf(stderr, "onnxpipe: warning: oversubscribed: %s\n", pl->warning);
    if (a->bind) rc = bind_and_report(world, pl, t);
done:
    pp_placement_destroy(pl);
    pp_topology_destroy(t);
    if (world) {
        pp_comm_destroy(world);
        pp_comm_mpi_finalize();
    }
    free(topo);
    free(params);
    free(sends);
    return rc;
}

int cmd_place(int argc, char **argv)
{
    args a = {0};
    int rc = parse(argc, argv, &a);
    return rc < 0 ? run(&a) : rc;
}
