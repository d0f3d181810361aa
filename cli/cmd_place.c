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

static void help(FILE *out)
{
    fprintf(out,
            "usage: onnxpipe place --pp P --dp D [options]\n\n"
            "Shows where each rank of a pipeline x data parallel job goes: host, stage, replica,\n"
            "cores and GPU, and the bytes per step each grid order would move inside a PCIe switch,\n"
            "a package, a host and over the network. The order that keeps the heavier traffic\n"
            "(all-reduce ~2 x stage params, pipeline ~2 x activations x microbatches) closer wins.\n\n"
            "options:\n"
            "  --pp P, --dp D           pipeline stages and data-parallel replicas\n"
            "  --topology FILE.xml      each host's hwloc XML topology (lstopo --of xml FILE.xml)\n"
            "  --synthetic DESC         each host's synthetic topology, e.g. \"node:2 package:2 core:8 pu:1\"\n"
            "                           (default: this machine)\n"
            "  --hosts N                hosts with that topology, ranks in equal consecutive blocks (default 1)\n"
            "  --param-bytes B,...      parameter bytes per stage (one value: every stage)\n"
            "  --send-bytes B,...       activation bytes sent to the next stage per microbatch (default 0)\n"
            "  --model MODEL.onnx       take both from the partition `onnxpipe train` makes by default\n"
            "                           (needs --batch)\n"
            "  --batch B                samples per microbatch (binds dim 0 of the model's inputs)\n"
            "  --microbatches M         microbatches per step (default P)\n"
            "  --order KIND             auto (default) | stage-major | replica-major\n"
            "  --device KIND            auto (GPUs when there are) | cpu | gpu\n"
            "  --json                   print JSON instead of the table\n"
            "  --job                    under mpirun: the job's real hosts (ranks sharing memory) and this\n"
            "                           machine's topology, as train computes it; rank 0 prints\n"
            "  --bind                   with --job: bind each rank (PP_BIND=auto|none|force) and report it\n"
            "  -h, --help               show this help\n");
}

typedef struct args {
    long long pp, dp, hosts, batch, microbatches;
    const char *xml, *synthetic, *model, *params, *sends;
    int order, json, job, bind;
    pp_place_device device;
} args;

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
    a->hosts = 1;
    a->order = -1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            help(stdout);
            return 0;
        }
        int *flag = !strcmp(o, "--json") ? &a->json : !strcmp(o, "--job") ? &a->job : !strcmp(o, "--bind") ? &a->bind : NULL;
        if (flag) {
            *flag = 1;
            continue;
        }
        if (!v) return cli_usage_error("run 'onnxpipe place --help'", "option %s needs a value", o);
        int ok = 1;
        if (!strcmp(o, "--pp")) ok = cli_parse_int(o, v, 1, MAX_STAGES, &a->pp);
        else if (!strcmp(o, "--dp")) ok = cli_parse_int(o, v, 1, 1 << 16, &a->dp);
        else if (!strcmp(o, "--hosts")) ok = cli_parse_int(o, v, 1, 1 << 16, &a->hosts);
        else if (!strcmp(o, "--batch")) ok = cli_parse_int(o, v, 1, INT64_MAX, &a->batch);
        else if (!strcmp(o, "--microbatches")) ok = cli_parse_int(o, v, 1, 1 << 30, &a->microbatches);
        else if (!strcmp(o, "--topology")) a->xml = v;
        else if (!strcmp(o, "--synthetic")) a->synthetic = v;
        else if (!strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--param-bytes")) a->params = v;
        else if (!strcmp(o, "--send-bytes")) a->sends = v;
        else if (!strcmp(o, "--order")) {
            if (!strcmp(v, "auto")) a->order = -1;
            else if (!strcmp(v, "stage-major")) a->order = PP_GRID_STAGE_MAJOR;
            else if (!strcmp(v, "replica-major")) a->order = PP_GRID_REPLICA_MAJOR;
            else return cli_usage_error("choose auto, stage-major or replica-major", "unknown --order '%s'", v);
        } else if (!strcmp(o, "--device")) {
            if (!strcmp(v, "auto")) a->device = PP_PLACE_AUTO;
            else if (!strcmp(v, "cpu")) a->device = PP_PLACE_CPU;
            else if (!strcmp(v, "gpu")) a->device = PP_PLACE_GPU;
            else return cli_usage_error("choose auto, cpu or gpu", "unknown --device '%s'", v);
        } else return cli_usage_error("run 'onnxpipe place --help'", "unknown option '%s'", o);
        if (!ok) return 2;
        i++;
    }
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
    pp_trainer_config c = pp_trainer_config_default();
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
