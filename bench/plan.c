/* Planner speed: `onnxpipe plan` for a 96-layer GPT on 1,024 devices (target: under 10 s).
 * The model is the example GPT (graph/example_gpt.c) written with its weights as external
 * data, which the planner never reads (it loads shapes; the data stays mmapped and
 * untouched). Planning time depends on the node count, the devices and the batch, not on
 * the width, so the width is small enough to write the file quickly; the device memory is
 * scaled to match (a 96-layer GPT of width 4096 has 19.3 B parameters, 309 GB with Adam:
 * about 4 stages' worth of 80 GB devices, as 1.2 GB is of --memory 256 MiB here).
 * One JSON line per case: wall and CPU seconds, the search's counts and its winner.
 * Yardstick, same run: the load of the model alone, and one simulation of the winner.
 * Usage: bench_plan [--layers L] [--d-model D] [--devices N] [--batch B] [--memory MiB]
 *                   [--dir DIR] [--reps R] */
#include "bench_util.h"

#include <onnxpipe/example.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/plan.h>
#include <onnxpipe/stage_lib.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void die(const pp_error *err)
{
    fprintf(stderr, "bench_plan: %s\n", err->msg);
    exit(1);
}

static long long arg(int argc, char **argv, const char *name, long long dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return atoll(argv[i + 1]);
    return dflt;
}

static const char *sarg(int argc, char **argv, const char *name, const char *dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return argv[i + 1];
    return dflt;
}

int main(int argc, char **argv)
{
    pp_error err = {0};
    pp_gpt_config gc = pp_gpt_config_default();
    gc.layers = arg(argc, argv, "--layers", 96);
    gc.d_model = arg(argc, argv, "--d-model", 256);
    gc.heads = 8;
    gc.vocab = 50257;
    gc.seq = arg(argc, argv, "--seq", 1024);
    gc.with_loss = 1;
    int devices = (int)arg(argc, argv, "--devices", 1024), reps = (int)arg(argc, argv, "--reps", 3);
    int64_t batch = arg(argc, argv, "--batch", 1024);
    double memory = (double)arg(argc, argv, "--memory", 256) * 1048576.0;
    const char *dir = sarg(argc, argv, "--dir", "/tmp/onnxpipe-bench-plan");
    char path[4096];
    snprintf(path, sizeof path, "%s/gpt-L%lld-D%lld-T%lld.onnx", dir, (long long)gc.layers, (long long)gc.d_model,
             (long long)gc.seq);
    struct stat sb;
    if (stat(path, &sb) != 0) {   /* written once, kept for the next run */
        mkdir(dir, 0755);
        pp_graph *g = NULL;
        if (pp_example_gpt(&gc, &g, &err) != PP_OK) die(&err);
        pp_graph_save_options so = {.force_external = 1};
        if (pp_graph_save(g, path, &so, &err) != PP_OK) die(&err);
        pp_graph_destroy(g);
    }
    /* yardstick: the load alone */
    double t0 = pp_now();
    pp_graph_options go = {.batch = 1};
    pp_graph *g = NULL;
    if (pp_graph_load(path, &go, &g, &err) != PP_OK) die(&err);
    double load_s = pp_now() - t0;
    int nodes = g->nnodes;
    double params = (double)g->nparams;
    pp_graph_destroy(g);

    /* an H100-like device (fp32 50 TFLOP/s dense, bf16 400), hosts of 8 with NVLink, 25 GB/s
     * between hosts (200 Gb/s) */
    pp_plan_options o = {
        .devices = devices, .batch = batch, .device_memory = memory, .device = PP_DEVICE_CPU,
        .cost = {.gflops = 50000, .gflops_lowp = 400000},
        .links = {.host_gbps = 300, .network_gbps = 25, .latency_s = 5e-6, .devices_per_host = 8},
        .top = 5,
        .stage = {.optim = {.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f},
                  .loss = {.ignore_index = -100}, .training = 1},
    };
    double wall[16], cpu[16];
    if (reps > 16) reps = 16;
    pp_plan_result *r = NULL;
    for (int k = 0; k < reps; k++) {
        pp_plan_result_destroy(r);
        r = NULL;
        double c0 = cpu_now(), w0 = pp_now();
        if (pp_plan_search(path, NULL, &o, &r, &err) != PP_OK) die(&err);
        wall[k] = pp_now() - w0;
        cpu[k] = cpu_now() - c0;
    }
    double wmin = wall[0], wmax = wall[0];
    for (int k = 1; k < reps; k++) wmin = wall[k] < wmin ? wall[k] : wmin, wmax = wall[k] > wmax ? wall[k] : wmax;
    const pp_plan_entry *b = &r->entries[0];
    double lavg[3] = {0};
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf %lf %lf", &lavg[0], &lavg[1], &lavg[2]) != 3) lavg[0] = -1;
        fclose(la);
    }
    printf("{\"bench\": \"plan\", \"layers\": %lld, \"d_model\": %lld, \"seq\": %lld, \"nodes\": %d, \"params\": %.0f, "
           "\"devices\": %d, \"batch\": %lld, \"device_memory_mib\": %.0f, \"reps\": %d, \"plan_s_min\": %.3f, "
           "\"plan_s_max\": %.3f, \"plan_s_median\": %.3f, \"cpu_s_median\": %.3f, \"target_s\": 10, "
           "\"layouts\": %lld, \"dominated\": %lld, \"memory_pruned\": %lld, \"simulated\": %lld, \"bound_misses\": %lld, \"exact_checked\": %lld, "
           "\"exact_rejected\": %lld, \"complete\": %s, \"load_s\": %.3f, "
           "\"best\": {\"pp\": %d, \"dp\": %d, \"schedule\": \"%s\", \"chunks\": %d, \"microbatches\": %lld, "
           "\"recompute\": \"%s\", \"precision\": \"%s\", \"step_s\": %.4f, \"tokens_per_s\": %.0f, \"bubble\": %.3f}, "
           "\"loadavg\": %.2f}\n",
           (long long)gc.layers, (long long)gc.d_model, (long long)gc.seq, nodes, params, devices, (long long)batch,
           memory / 1048576.0, reps, wmin, wmax, median(wall, reps), median(cpu, reps), (long long)r->layouts,
           (long long)r->dominated, (long long)r->memory_pruned, (long long)r->simulated, (long long)r->bound_misses,
           (long long)r->exact_checked,
           (long long)r->exact_rejected, r->complete ? "true" : "false", load_s, b->pp, b->dp,
           pp_schedule_kind_name(b->kind), b->chunks, (long long)b->microbatches, pp_recompute_name(b->recompute),
           pp_precision_name(b->precision), b->step_s, b->tokens_per_s, b->bubble, lavg[0]);
    pp_plan_result_destroy(r);
    return 0;
}
