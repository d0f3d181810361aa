/* Times loading and partitioning: synthetic chains and residual DAGs of 10^3..10^6
 * nodes and a 96-layer GPT, built in memory, saved to a temporary file, then
 * pp_graph_load and pp_partition_create timed separately, REPS times each (wall min and
 * max, and CPU seconds of all threads: for a large graph the loader runs a second thread
 * that prefaults its arrays and decodes value types).
 * One JSON line per case and stage count; the yardstick is a raw read of the same file.
 * Usage: bench_partition [max_nodes]. */
#include <onnxpipe/example.h>
#include <onnxpipe/partition_lib.h>
#include <onnxpipe/graph_ir.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define D 4   /* hidden width of the synthetic graphs: h is [1, D] */

static void die(const pp_error *err)
{
    fprintf(stderr, "bench_partition: %s\n", err->msg);
    exit(1);
}

/* n nodes: every third a MatMul with its own [D, D] weight, the others Relu, or
 * (dag) an Add of the previous output and the one 8 nodes back (a residual). */
static pp_graph *synthetic(int n, int dag)
{
    pp_graph *g = NULL;
    pp_error err = {0};
    int64_t hd[2] = {1, D}, wd[2] = {D, D};
    float w[D * D];
    for (int i = 0; i < D * D; i++) w[i] = (float)(i % 7) * 0.1f;
    pp_shape sh = pp_shape_make(2, hd), sw = pp_shape_make(2, wd);
    if (pp_graph_create(dag ? "dag" : "chain", 17, &g, &err) || pp_graph_add_input(g, "h-1", PP_DTYPE_F32, &sh, &err))
        die(&err);
    char in[32], out[32], wn[32], sk[32];
    for (int i = 0; i < n; i++) {
        snprintf(in, sizeof in, "h%d", i - 1);
        snprintf(out, sizeof out, "h%d", i);
        const char *ins[2] = {in, wn}, *outs[1] = {out};
        const char *op = "Relu";
        int nin = 1;
        if (i % 3 == 0) {
            snprintf(wn, sizeof wn, "w%d", i);
            if (pp_graph_add_initializer(g, wn, PP_DTYPE_F32, &sw, w, sizeof w, 1, &err)) die(&err);
            op = "MatMul";
            nin = 2;
        } else if (dag && i % 8 == 1 && i > 8) {
            snprintf(sk, sizeof sk, "h%d", i - 8);
            ins[1] = sk;
            op = "Add";
            nin = 2;
        }
        if (pp_graph_add_node(g, op, "", NULL, ins, nin, outs, 1, NULL, &err)) die(&err);
    }
    if (pp_graph_add_output(g, out, PP_DTYPE_F32, NULL, &err) || pp_graph_finalize(g, NULL, &err)) die(&err);
    return g;
}

static double read_file(const char *path, long *bytes)
{
    double t = pp_now();
    FILE *f = fopen(path, "rb");
    char buf[1 << 16];
    size_t k;
    *bytes = 0;
    while (f && (k = fread(buf, 1, sizeof buf, f)) > 0) *bytes += (long)k;
    if (f) fclose(f);
    return pp_now() - t;
}

/* CPU seconds of this process so far, all threads (the loader may use two). */
static double cpu_now(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) + 1e-6 * (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

typedef struct span {
    double min, max;
} span;

static void note(span *s, double x)
{
    if (x < s->min) s->min = x;
    if (x > s->max) s->max = x;
}

#define REPS 3        /* loads (and partitions) per case: min and max are reported */
#define MAX_STAGES 4  /* stage counts per case */

static void run_case(const char *kind, pp_graph *built, const char *path, const int *stages, int nst,
                     const pp_graph_options *opt)
{
    pp_error err = {0};
    if (pp_graph_save(built, path, NULL, &err)) die(&err);
    int nodes = built->nnodes;
    pp_graph_destroy(built);
    long bytes;
    double read_s = read_file(path, &bytes);
    span load = {1e30, 0}, load_cpu = {1e30, 0}, part[MAX_STAGES], part_cpu[MAX_STAGES];
    for (int k = 0; k < nst; k++) part[k] = part_cpu[k] = (span){1e30, 0};
    pp_partition *p[MAX_STAGES] = {NULL};
    pp_graph *g = NULL;
    for (int r = 0; r < REPS; r++) {
        pp_graph_destroy(g);
        g = NULL;
        double t0 = pp_now(), c0 = cpu_now();
        if (pp_graph_load(path, opt, &g, &err)) die(&err);
        note(&load, pp_now() - t0);
        note(&load_cpu, cpu_now() - c0);
        for (int k = 0; k < nst; k++) {
            pp_partition_destroy(p[k]);
            p[k] = NULL;
            double t1 = pp_now(), c1 = cpu_now();
            if (pp_partition_create(g, stages[k], NULL, &p[k], &err)) die(&err);
            note(&part[k], pp_now() - t1);
            note(&part_cpu[k], cpu_now() - c1);
        }
    }
    for (int k = 0; k < nst; k++) {
        printf("{\"bench\": \"partition\", \"graph\": \"%s\", \"nodes\": %d, \"file_bytes\": %ld, \"stages\": %d, "
               "\"reps\": %d, \"load_threads_max\": 2, \"read_s\": %.4f, "
               "\"load_s\": %.4f, \"load_s_max\": %.4f, \"load_cpu_s\": %.4f, \"load_cpu_s_max\": %.4f, "
               "\"partition_s\": %.4f, \"partition_s_max\": %.4f, \"partition_cpu_s\": %.4f, "
               "\"total_s\": %.4f, \"total_s_max\": %.4f, "
               "\"params\": %lld, \"bottleneck\": %lld, \"lower_bound\": %lld, \"cut_bytes\": %lld, "
               "\"tiebreak\": %s}\n",
               kind, nodes, bytes, stages[k], REPS, read_s, load.min, load.max, load_cpu.min, load_cpu.max,
               part[k].min, part[k].max, part_cpu[k].min, load.min + part[k].min, load.max + part[k].max,
               (long long)g->nparams, (long long)p[k]->bottleneck, (long long)p[k]->lower_bound,
               (long long)p[k]->cut_bytes, p[k]->tiebreak ? "true" : "false");
        fflush(stdout);
        pp_partition_destroy(p[k]);
    }
    pp_graph_destroy(g);
    unlink(path);
}

int main(int argc, char **argv)
{
    long max_nodes = argc > 1 ? atol(argv[1]) : 1000000;
    char path[] = "/tmp/bench_partition_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        return 1;
    }
    close(fd);
    const int stages[] = {4, 64};
    for (long n = 1000; n <= max_nodes; n *= 10) {
        run_case("chain", synthetic((int)n, 0), path, stages, 2, NULL);
        run_case("dag", synthetic((int)n, 1), path, stages, 2, NULL);
    }
    pp_gpt_config c = pp_gpt_config_default();
    c.layers = 96;
    c.d_model = 128;
    c.heads = 4;
    c.seq = 64;
    c.with_loss = 1;
    pp_graph *gpt = NULL;
    pp_error err = {0};
    if (pp_example_gpt(&c, &gpt, &err)) die(&err);
    const int gst[] = {4, 8, 16};
    pp_graph_options o = {.batch = 8};
    run_case("gpt96", gpt, path, gst, 3, &o);
    return 0;
}
