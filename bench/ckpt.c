/* Checkpoint save throughput of the example GPT (default L=12, D=1024: a 1.8 GB checkpoint
 * with AdamW state) next to the disk's own sequential write rate measured in the same run
 * (64 MiB writes and one fsync, as the shard writer does), and the training stall per save
 * with the async writer on and off (async: the save call, plus the wait of the next
 * optimizer step for the thread's copy after a forward and backward of the model ran
 * meanwhile). One JSON line per figure.
 * Usage: bench_ckpt [--layers L] [--d-model D] [--dir DIR] [--reps R] */
#include "bench_util.h"

#include <onnxpipe/ckpt_lib.h>
#include <onnxpipe/example.h>
#include <onnxpipe/stage_lib.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what, const pp_error *err)
{
    printf("{\"bench\": \"ckpt\", \"error\": \"%s: %s\"}\n", what, err ? err->msg : "");
    exit(1);
}

/* The yardstick: n bytes in 64 MiB writes, then fsync; GB/s. */
static double disk_rate(const char *dir, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/disk-rate.bin", dir);
    size_t chunk = (size_t)64 << 20;
    char *buf = malloc(chunk);
    if (!buf) die("disk rate", NULL);
    for (size_t i = 0; i < chunk; i++) buf[i] = (char)(i * 131u);
    double t0 = pp_now();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die("cannot create the disk-rate file", NULL);
    for (size_t done = 0; done < n;) {
        size_t k = n - done < chunk ? n - done : chunk;
        ssize_t w = write(fd, buf, k);
        if (w <= 0) die("disk rate write", NULL);
        done += (size_t)w;
    }
    fsync(fd);
    close(fd);
    double s = pp_now() - t0;
    unlink(path);
    free(buf);
    return (double)n / s / 1e9;
}

int main(int argc, char **argv)
{
    int64_t layers = 12, d = 1024;
    int reps = 3;
    const char *dir = "bench-ckpt";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--layers")) layers = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--d-model")) d = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    if (reps < 1 || reps > 16) reps = 3;
    pp_log_init();
    pp_error err = {0};
    pp_gpt_config gc = pp_gpt_config_default();
    gc.layers = layers, gc.d_model = d, gc.heads = d / 64 > 0 ? d / 64 : 1, gc.batch = 1, gc.with_loss = 1;
    pp_graph *g = NULL;
    pp_partition *part = NULL;
    pp_device *dev = NULL;
    pp_stage *s = NULL;
    if (pp_example_gpt(&gc, &g, &err) != PP_OK) die("example gpt", &err);
    if (pp_partition_create(g, 1, NULL, &part, &err) != PP_OK) die("partition", &err);
    if (pp_device_create(PP_DEVICE_CPU, 0, &dev, &err) != PP_OK) die("device", &err);
    pp_stage_options so = {.slots = 1, .microbatch = 1, .global_batch = 1, .training = 1,
                           .optim = {.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f}};
    if (pp_stage_create(part, 0, dev, &so, &s, &err) != PP_OK) die("stage", &err);
    /* optimizer state as it is after training: not pages of zeros */
    size_t pn = (size_t)pp_stage_param_elems(s);
    for (int k = 0; k < 2; k++) memcpy(pp_stage_optim_state(s) + k * pn, pp_stage_params(s), pn * sizeof(float));
    int index = 0;
    pp_ckpt_part cp = {.stages = &s, .stage_index = &index, .nstages = 1, .partition = part, .replicas = 1};
    pp_ckpt_meta m = {.optim = so.optim, .pp = 1, .dp = 1, .chunks = 1, .batch = 1, .microbatches = 1,
                      .schedule = "1f1b", .model_path = "example gpt"};
    /* One writer per mode for all its saves, as in a training run. A first save of each
     * (page cache and staging buffers warming up) is timed apart; then each round measures
     * the disk right before a synchronous save, then an async one, so a noisy machine moves
     * the yardstick and the save together; ratios are per round. */
    double sync_s[16], async_stall[16], async_total[16], disk[16], compute[16], ratio[16], first[2] = {0, 0};
    int64_t bytes = 0;
    pp_ckpt_writer *w[2] = {NULL, NULL};
    for (int async = 0; async <= 1; async++) {
        pp_ckpt_writer_options o = {.root = dir, .async = async, .run_id = "bench", .defer_copy = 1};
        if (pp_ckpt_writer_create(&o, &w[async], &err) != PP_OK) die("writer", &err);
    }
    for (int r = -1; r < reps; r++) {
        if (r >= 0) disk[r] = disk_rate(dir, (size_t)bytes);
        for (int async = 0; async <= 1; async++) {
            m.step = 2 * (r + 1) + async + 1;
            double t0 = pp_now(), stall = 0, tc = 0;
            if (pp_ckpt_writer_save(w[async], &cp, &m, &stall, &err) != PP_OK) die("save", &err);
            if (async) {
                /* the next step's forward and backward run while the thread copies; its
                 * optimizer step waits for the copy: that wait is stall too */
                tc = pp_now();
                if (pp_stage_forward(s, 0, 1, 0, &err) != PP_OK || pp_stage_backward(s, 0, PP_BACKWARD_FULL, &err) != PP_OK)
                    die("step", &err);
                tc = pp_now() - tc;
                stall += pp_ckpt_writer_wait_staged(w[async]);
            }
            if (pp_ckpt_writer_wait(w[async], &err) != PP_OK) die("save", &err);
            double total = pp_now() - t0;
            char path[4096];
            snprintf(path, sizeof path, "%s/step-%lld", dir, (long long)m.step);
            pp_ckpt *c = NULL;
            if (pp_ckpt_open(path, &c, &err) != PP_OK) die("open", &err);
            bytes = pp_ckpt_inspect(c)->bytes;
            pp_ckpt_close(c);
            char cmd[4200];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);   /* outside the timed part, as the yardstick's unlink */
            if (system(cmd) != 0) die("cannot remove a checkpoint", NULL);
            if (getenv("BENCH_VERBOSE"))
                fprintf(stderr, "round %d %s save: %.3f s (stall %.3f s)\n", r, async ? "async" : "sync", total, stall);
            if (r < 0) first[async] = total;
            else if (async) async_stall[r] = stall, async_total[r] = total, compute[r] = tc;
            else sync_s[r] = total, ratio[r] = (double)bytes / total / 1e9 / disk[r];
        }
    }
    for (int async = 0; async <= 1; async++) pp_ckpt_writer_destroy(w[async]);
    double *sorted[] = {sync_s, async_stall, async_total, disk, compute, ratio};
    for (int k = 0; k < 6; k++) qsort(sorted[k], (size_t)reps, sizeof(double), cmp_double);
    double med_sync = sync_s[reps / 2], med_disk = disk[reps / 2];
    printf("{\"bench\": \"ckpt\", \"figure\": \"checkpoint_bytes\", \"layers\": %lld, \"d_model\": %lld, \"bytes\": %lld, "
           "\"first_save_s\": {\"sync\": %.3f, \"async_total\": %.3f}}\n", (long long)layers, (long long)d, (long long)bytes,
           first[0], first[1]);
    printf("{\"bench\": \"ckpt\", \"figure\": \"disk_write_gbps\", \"median\": %.3f, \"min\": %.3f, \"max\": %.3f, "
           "\"reps\": %d}\n", med_disk, disk[0], disk[reps - 1], reps);
    printf("{\"bench\": \"ckpt\", \"figure\": \"save_gbps\", \"median\": %.3f, \"best\": %.3f, \"of_disk_rate_median\": %.3f, "
           "\"of_disk_rate_min\": %.3f, \"of_disk_rate_max\": %.3f, \"target\": 0.8}\n", (double)bytes / med_sync / 1e9,
           (double)bytes / sync_s[0] / 1e9, ratio[reps / 2], ratio[0], ratio[reps - 1]);
    printf("{\"bench\": \"ckpt\", \"figure\": \"stall_s\", \"sync_median\": %.4f, \"async_median\": %.4f, "
           "\"async_of_sync\": %.4f, \"target\": 0.10, \"async_write_total_s\": %.4f, \"overlapped_step_s\": %.4f}\n",
           med_sync, async_stall[reps / 2], async_stall[reps / 2] / med_sync, async_total[reps / 2], compute[reps / 2]);
    pp_stage_destroy(s);
    pp_device_destroy(dev);
    pp_partition_destroy(part);
    pp_graph_destroy(g);
    return 0;
}
