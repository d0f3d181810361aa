/* One training step of the example GPT (L=4, D=256, H=4, T=128, B=8, V=256, AdamW) on
 * one core: tokens/s, achieved model GFLOP/s, the GEMM share of the step from the stage
 * profile, and, measured in the same run, OpenBLAS sgemm GFLOP/s on one core and
 * PyTorch's step on one core (bench/torch_step.py). One JSON line per figure.
 * Usage: bench_step [steps] [--no-torch]. OpenBLAS reads OPENBLAS_NUM_THREADS when it
 * loads, so the program re-executes itself with it set to 1 when it is not. */
#include "bench_util.h"

#include <onnxpipe/example.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/partition.h>
#include <onnxpipe/stage_lib.h>
#include <onnxpipe/graph_ir.h>

#include <cblas.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define L 4
#define D 256
#define H 4
#define T 128
#define B 8
#define V 256

static void die(const pp_error *err)
{
    printf("{\"bench\": \"step\", \"error\": \"%s\"}\n", err->msg);
    exit(1);
}

/* Best GFLOP/s of C (M,N) = A' (M,K) B' (K,N) over a few repetitions, row-major,
 * beta 0; gf[0] by the wall clock, gf[1] by CPU time. */
static void sgemm_gflops(int M, int N, int K, int ta, int tb, double gf[2])
{
    float *a = malloc((size_t)M * K * sizeof *a), *b = malloc((size_t)K * N * sizeof *b);
    float *c = malloc((size_t)M * N * sizeof *c);
    if (!a || !b || !c) exit(1);
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 17) * 0.01f;
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)(i % 13) * 0.01f;
    double best[2] = {1e30, 1e30}, flops = 2.0 * M * N * K;
    int reps = (int)(4e9 / flops) + 3;
    for (int r = 0; r < reps; r++) {
        double t0 = pp_now(), c0 = cpu_now();
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.f, a,
                    ta ? M : K, b, tb ? K : N, 0.f, c, N);
        double t = pp_now() - t0, ct = cpu_now() - c0;
        if (t < best[0]) best[0] = t;
        if (ct < best[1]) best[1] = ct;
    }
    free(a);
    free(b);
    free(c);
    gf[0] = flops / best[0] * 1e-9;
    gf[1] = flops / best[1] * 1e-9;
}

/* Model FLOPs of one training step: 3 x the forward FLOPs of the matrix products
 * (forward, and backward's two products), counted by the op registry's FLOP model as
 * the partitioner and the profiler count them. For the example GPT that is, per token
 * and layer, 2·12·D² + 2·2·T·D, plus the LM head 2·D·V. */
static double model_flops(const pp_graph *g, pp_error *err)
{
    pp_node_cost *c = calloc((size_t)g->nnodes, sizeof *c);
    if (!c || pp_partition_costs(g, c, err)) die(err);
    double fwd = 0;
    for (int i = 0; i < g->nnodes; i++) {
        pp_flop_rule r = pp_op_get(g->nodes[i].op)->flop_rule;
        if (r == PP_FLOPS_MATMUL || r == PP_FLOPS_GEMM || r == PP_FLOPS_CONV) fwd += (double)c[i].flops;
    }
    free(c);
    return 3.0 * fwd;
}

typedef struct bench {
    pp_graph *g;
    pp_partition *part;
    pp_device *dev;
    pp_stage *s;
} bench;

static void setup(bench *b, pp_error *err)
{
    pp_gpt_config c = pp_gpt_config_default();
    c.layers = L, c.d_model = D, c.heads = H, c.vocab = V, c.seq = T, c.batch = B;
    if (pp_example_gpt(&c, &b->g, err)) die(err);
    if (pp_partition_create(b->g, 1, NULL, &b->part, err)) die(err);
    if (pp_device_create(PP_DEVICE_CPU, 0, &b->dev, err)) die(err);
    pp_stage_options o = {
        .slots = 1, .microbatch = B, .global_batch = B, .seed = 1, .training = 1,
        .optim = {.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f},
        .loss = {.logits = "logits", .labels = "labels", .ignore_index = -100},
    };
    if (pp_stage_create(b->part, 0, b->dev, &o, &b->s, err)) die(err);
    uint64_t x = 88172645463325252ull;   /* xorshift64: random token ids and labels */
    for (int i = 0; i < pp_stage_num_inputs(b->s); i++) {
        const pp_stage_port *p = pp_stage_input(b->s, i);
        int64_t *ids = pp_stage_input_buffer(b->s, 0, i);
        for (size_t k = 0; k < p->nbytes / sizeof *ids; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            ids[k] = (int64_t)(x % V);
        }
    }
}

/* one step; wall seconds of its parts go to parts[3]: forward, backward, optimizer +
 * zeroing the gradients; its CPU seconds to *cpu */
static void step(bench *b, int64_t n, double parts[3], double *cpu, pp_error *err)
{
    double c0 = cpu_now(), t0 = pp_now();
    if (pp_stage_forward(b->s, 0, n, 0, err)) die(err);
    double t1 = pp_now();
    if (pp_stage_backward(b->s, 0, PP_BACKWARD_FULL, err)) die(err);
    double t2 = pp_now();
    if (pp_stage_sum_uses(b->s, err) || pp_stage_step(b->s, 1e-3f, 1.f, n, err) || pp_stage_zero_grads(b->s, err))
        die(err);
    double t3 = pp_now();
    *cpu = cpu_now() - c0;
    parts[0] = t1 - t0, parts[1] = t2 - t1, parts[2] = t3 - t2;
}

/* Runs torch_step.py (next to this file) with one BLAS and one torch thread and copies
 * its JSON line to stdout; tok[0], tok[1]: its tokens/s by the wall clock and per CPU
 * second. Returns 0 when it fails. */
static int run_torch(double tok[2])
{
    char src[4096];
    snprintf(src, sizeof src, "%s", __FILE__);
    const char *py = getenv("PP_PYTHON");
    char pybuf[4200];
    if (!py) {
        snprintf(pybuf, sizeof pybuf, "%s/.cache/onnxpipe/venv/bin/python", getenv("HOME") ? getenv("HOME") : "");
        py = pybuf;
    }
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%s' '%s/torch_step.py' --layers %d --d-model %d --heads %d --vocab %d --seq %d "
             "--batch %d --blas-threads 1 --torch-threads 1 --tag step_torch 2>/dev/null", py, dirname(src), L, D, H,
             V, T, B);
    FILE *f = popen(cmd, "r");
    char line[2048];
    tok[0] = tok[1] = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "\"tokens_per_s\": "), *q = strstr(line, "\"tokens_per_s_cpu\": ");
        if (!p || !q) continue;
        tok[0] = atof(p + strlen("\"tokens_per_s\": "));
        tok[1] = atof(q + strlen("\"tokens_per_s_cpu\": "));
        fputs(line, stdout);
    }
    if (!f || pclose(f) != 0 || tok[0] <= 0) {
        printf("{\"bench\": \"step_torch\", \"error\": \"'%s' failed (set PP_PYTHON to a python with torch)\"}\n", cmd);
        return 0;
    }
    fflush(stdout);
    return 1;
}

static double loadavg(void)
{
    double l[1] = {-1};
    return getloadavg(l, 1) == 1 ? l[0] : -1;
}

int main(int argc, char **argv)
{
    const char *nt = getenv("OPENBLAS_NUM_THREADS");
    if (!nt || strcmp(nt, "1")) {
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        execv("/proc/self/exe", argv);
        fprintf(stderr, "bench_step: cannot re-execute itself; run it with OPENBLAS_NUM_THREADS=1\n");
        return 1;
    }
    int steps = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 10;
    int torch = 1;
    for (int i = 1; i < argc; i++) torch &= strcmp(argv[i], "--no-torch") != 0;
    pp_error err = {0};
    printf("{\"bench\": \"step_machine\", \"loadavg_1m\": %.2f, \"cores\": %ld, \"openblas\": \"%s\", "
           "\"openblas_core\": \"%s\"}\n", loadavg(), sysconf(_SC_NPROCESSORS_ONLN), openblas_get_config(),
           openblas_get_corename());

    /* yardstick: sgemm on one core, the shapes of the model's products (M = B·T tokens) */
    struct { const char *name; int M, N, K, ta, tb; } shapes[] = {
        {"mlp_fc 1024x1024x256", B * T, 4 * D, D, 0, 0},
        {"mlp_fc dW 256x1024x1024 (A^T)", D, 4 * D, B * T, 1, 0},
        {"mlp_fc dX 1024x256x1024 (B^T)", B * T, D, 4 * D, 0, 1},
        {"square 1024", 1024, 1024, 1024, 0, 0},
    };
    double peak[2] = {0, 0};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        double gf[2];
        sgemm_gflops(shapes[i].M, shapes[i].N, shapes[i].K, shapes[i].ta, shapes[i].tb, gf);
        for (int k = 0; k < 2; k++) peak[k] = gf[k] > peak[k] ? gf[k] : peak[k];
        printf("{\"bench\": \"step_sgemm\", \"shape\": \"%s\", \"threads\": 1, \"gflops\": %.1f, \"gflops_cpu\": %.1f}\n",
               shapes[i].name, gf[0], gf[1]);
    }
    fflush(stdout);

    bench b = {0};
    setup(&b, &err);
    double parts[3], sum[3] = {0}, cpu;
    double *tot = malloc((size_t)steps * sizeof *tot), *ctot = malloc((size_t)steps * sizeof *ctot);
    if (!tot || !ctot) return 1;
    for (int i = 1; i <= 2; i++) step(&b, i, parts, &cpu, &err);
    for (int i = 0; i < steps; i++) {
        step(&b, 3 + i, parts, &ctot[i], &err);
        tot[i] = parts[0] + parts[1] + parts[2];
        for (int k = 0; k < 3; k++) sum[k] += parts[k];
    }
    qsort(tot, (size_t)steps, sizeof *tot, cmp_double);
    qsort(ctot, (size_t)steps, sizeof *ctot, cmp_double);
    double med = tot[steps / 2], cmed = ctot[steps / 2], flops = model_flops(b.g, &err);
    double tok = (double)B * T / med, ctok = (double)B * T / cmed;
    printf("{\"bench\": \"step\", \"model\": \"gpt L=%d D=%d H=%d T=%d B=%d V=%d adamw\", \"threads\": 1, "
           "\"steps\": %d, \"step_s_median\": %.5f, \"step_s_best\": %.5f, \"step_cpu_s_median\": %.5f, "
           "\"forward_s\": %.5f, \"backward_s\": %.5f, \"optimizer_s\": %.5f, \"tokens_per_s\": %.1f, "
           "\"tokens_per_s_cpu\": %.1f, \"model_gflop_per_step\": %.3f, \"model_gflops\": %.1f, "
           "\"model_gflops_cpu\": %.1f, \"sgemm_peak_gflops\": %.1f, \"sgemm_peak_gflops_cpu\": %.1f, "
           "\"fraction_of_sgemm_peak\": %.3f, \"fraction_of_sgemm_peak_cpu\": %.3f, \"loadavg_1m\": %.2f}\n",
           L, D, H, T, B, V, steps, med, tot[0], cmed, sum[0] / steps, sum[1] / steps, sum[2] / steps, tok, ctok,
           flops * 1e-9, flops / med * 1e-9, flops / cmed * 1e-9, peak[0], peak[1], flops / med * 1e-9 / peak[0],
           flops / cmed * 1e-9 / peak[1], loadavg());
    fflush(stdout);

    /* where the time goes: per op type over a few profiled steps */
    if (pp_stage_profile_enable(b.s, 1, &err)) die(&err);
    int pst = steps < 5 ? steps : 5;
    double wall = 0;
    for (int i = 0; i < pst; i++) {
        step(&b, 100 + i, parts, &cpu, &err);
        wall += parts[0] + parts[1] + parts[2];
    }
    if (pp_stage_profile_flush(b.s, &err)) die(&err);
    int n;
    const pp_stage_op_profile *rows = pp_stage_profile_get(b.s, &n);
    double gemm_s = 0, gemm_flops = 0, kernels_s = 0;
    for (int i = 0; i < n; i++) {
        const pp_stage_op_profile *r = &rows[i];
        double t = r->forward_s + r->backward_s;
        kernels_s += t;
        if (!strcmp(r->op_type, "MatMul") || !strcmp(r->op_type, "Gemm"))
            gemm_s += t, gemm_flops += r->forward_flops + r->backward_flops;
        printf("{\"bench\": \"step_profile\", \"op\": \"%s\", \"calls_per_step\": %lld, \"forward_ms\": %.3f, "
               "\"backward_ms\": %.3f, \"share_of_step\": %.3f, \"gflops\": %.1f}\n",
               r->op_type, (long long)((r->forward_calls + r->backward_calls) / pst), r->forward_s * 1e3 / pst,
               r->backward_s * 1e3 / pst, t / wall, t > 0 ? (r->forward_flops + r->backward_flops) / t * 1e-9 : 0.0);
    }
    printf("{\"bench\": \"step_profile\", \"op\": \"(optimizer, zeroing, between kernels)\", \"ms\": %.3f, "
           "\"share_of_step\": %.3f}\n", (wall - kernels_s) * 1e3 / pst, (wall - kernels_s) / wall);
    printf("{\"bench\": \"step_gemm\", \"gemm_share_of_step\": %.3f, \"target\": 0.85, \"gemm_gflops\": %.1f, "
           "\"profiled_gemm_gflop_per_step\": %.3f, \"model_gflop_per_step\": %.3f}\n",
           gemm_s / wall, gemm_flops / gemm_s * 1e-9, gemm_flops / pst * 1e-9, flops * 1e-9);
    fflush(stdout);

    if (torch) {
        double tt[2];
        if (run_torch(tt))
            printf("{\"bench\": \"step_vs_torch\", \"onnxpipe_tokens_per_s\": %.1f, \"torch_tokens_per_s\": %.1f, "
                   "\"ratio\": %.3f, \"onnxpipe_tokens_per_s_cpu\": %.1f, \"torch_tokens_per_s_cpu\": %.1f, "
                   "\"ratio_cpu\": %.3f, \"target\": 1.1, \"loadavg_1m\": %.2f}\n",
                   tok, tt[0], tok / tt[0], ctok, tt[1], ctok / tt[1], loadavg());
    }
    free(tot);
    free(ctot);
    pp_stage_destroy(b.s);
    pp_device_destroy(b.dev);
    pp_partition_destroy(b.part);
    pp_graph_destroy(b.g);
    return 0;
}
