/* What watching a run costs: the example GPT trained on one rank with and without
 * --logdir + --metrics (TensorBoard events and JSON lines every step, per-rank figures
 * every 10), and with --profile-steps set to steps outside the run (profiling off) or
 * over all of it (on). Configurations alternate over rounds; one JSON line per figure
 * with the median step time by the wall clock and by this process's CPU time (on a shared
 * machine the wall clock also counts other processes; the CPU time of a run includes its
 * setup, the same for every configuration), plus the logging call itself timed alone.
 * Targets: logging < 1% of the step; profiling off costs nothing.
 * Usage: bench_watch [rounds] [steps]. */
#include "bench_util.h"

#include "job_internal.h"

#include <onnxpipe/example.h>

#include <fcntl.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void die(const pp_error *err)
{
    printf("{\"bench\": \"watch\", \"error\": \"%s\"}\n", err->msg);
    exit(1);
}

static double load_avg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f && fscanf(f, "%lf", &l) != 1) l = -1;
    if (f) fclose(f);
    return l;
}

enum { BASE, LOGGING, PROF_OFF, PROF_ON, NCONF };
static const char *const conf_name[NCONF] = {"base", "logging", "profile_off", "profile_on"};

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    int64_t steps = argc > 2 ? atoll(argv[2]) : 40;
    char dir[] = "/tmp/bench_watch_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char model[512], data[512], logdir[512], metrics[512], prof[512];
    snprintf(model, sizeof model, "%s/gpt.onnx", dir);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(logdir, sizeof logdir, "%s/tb", dir);
    snprintf(metrics, sizeof metrics, "%s/m.jsonl", dir);
    snprintf(prof, sizeof prof, "%s/prof.json", dir);
    pp_error err = {0};
    pp_gpt_config gc = pp_gpt_config_default();
    gc.layers = 2, gc.d_model = 128, gc.heads = 4, gc.seq = 64;
    pp_graph *g;
    if (pp_example_gpt(&gc, &g, &err) || pp_graph_save(g, model, NULL, &err)) die(&err);
    pp_graph_destroy(g);
    if (pp_dataset_write_text("/usr/share/common-licenses/GPL-3", data, gc.seq, &err)) die(&err);
    pp_train_config base = pp_train_config_default();
    base.data = data;
    pp_trainer_config *job = &base.trainer;
    job->model = model, job->device = "cpu", job->steps = steps, job->quiet = 1;
    job->loss.logits = "logits", job->loss.labels = "labels";
    pp_train_config conf[NCONF];
    for (int c = 0; c < NCONF; c++) conf[c] = base;
    conf[LOGGING].logdir = logdir, conf[LOGGING].metrics_out = metrics;
    conf[PROF_OFF].profile_first = steps + 1, conf[PROF_OFF].profile_last = steps + 1;
    conf[PROF_OFF].profile_out = prof;
    conf[PROF_ON].profile_first = 1, conf[PROF_ON].profile_last = steps, conf[PROF_ON].profile_out = prof;
    double *step_s = calloc((size_t)NCONF * (size_t)rounds, sizeof *step_s);
    double *cpu_s = calloc((size_t)NCONF * (size_t)rounds, sizeof *cpu_s);
    int null_fd = open("/dev/null", O_WRONLY), saved = dup(STDOUT_FILENO);
    for (int k = 0; k < rounds; k++)
        for (int c = 0; c < NCONF; c++) {
            pp_train_result res;
            fflush(stdout);
            dup2(null_fd, STDOUT_FILENO);   /* the profile table and memory lines */
            double c0 = cpu_now();
            pp_status st = pp_train_run(&conf[c], &res, &err);
            cpu_s[c * rounds + k] = (cpu_now() - c0) / (double)steps;
            fflush(stdout);
            dup2(saved, STDOUT_FILENO);
            if (st) die(&err);
            step_s[c * rounds + k] = res.seconds / (double)res.steps_done;
        }
    double med[NCONF], lo[NCONF], hi[NCONF], cpu[NCONF];
    for (int c = 0; c < NCONF; c++) {
        double *v = step_s + c * rounds;
        med[c] = median(v, rounds);
        lo[c] = v[0], hi[c] = v[rounds - 1];
        cpu[c] = median(cpu_s + c * rounds, rounds);
    }
    /* the logging call alone: one TensorBoard event and one JSON line per step, the
     * per-rank gather every 10 (one rank here) */
    pp_comm *world;
    if (pp_comm_mpi_world(&world, &err)) die(&err);
    train_log *log;
    if (train_log_open(&conf[LOGGING], world, 1000000, 1, &log, &err)) die(&err);
    int calls = 20000;
    double t0 = pp_now();
    for (int i = 1; i <= calls; i++) {
        train_step_log sl = {.step = i, .loss = 2.5, .lr = 1e-3, .grad_norm = 1.0, .throughput = 5000,
                             .step_s = 0.01, .compute_s = 0.009, .wait_s = 0.001, .stage_bytes = 1 << 20};
        if (train_log_step(log, &sl, NULL, &err)) die(&err);
    }
    double per_call = (pp_now() - t0) / calls;
    train_log_close(log, NULL);
    pp_comm_destroy(world);
    for (int c = 1; c < NCONF; c++)
        printf("{\"bench\": \"watch_%s\", \"model\": \"gpt L=%d d=%d T=%d B=8\", \"rounds\": %d, \"steps\": %lld, "
               "\"step_ms\": %.3f, \"step_ms_min\": %.3f, \"step_ms_max\": %.3f, \"base_step_ms\": %.3f, "
               "\"base_step_ms_min\": %.3f, \"base_step_ms_max\": %.3f, \"overhead\": %.4f, \"cpu_step_ms\": %.3f, "
               "\"base_cpu_step_ms\": %.3f, \"overhead_cpu\": %.4f, \"target\": %s, \"load\": %.2f}\n",
               conf_name[c], (int)gc.layers, (int)gc.d_model, (int)gc.seq, rounds, (long long)steps, 1e3 * med[c],
               1e3 * lo[c], 1e3 * hi[c], 1e3 * med[BASE], 1e3 * lo[BASE], 1e3 * hi[BASE], med[c] / med[BASE] - 1,
               1e3 * cpu[c], 1e3 * cpu[BASE], cpu[c] / cpu[BASE] - 1,
               c == LOGGING ? "0.01" : c == PROF_OFF ? "0" : "null", load_avg());
    printf("{\"bench\": \"watch_log_call\", \"us_per_step\": %.2f, \"share_of_base_step\": %.5f, \"target\": 0.01, "
           "\"load\": %.2f}\n", 1e6 * per_call, per_call / med[BASE], load_avg());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    pp_comm_mpi_finalize();
    return 0;
}
