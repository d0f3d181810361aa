/* GPU benchmark: tokens/s and MFU of the training step the trainer runs (pp_trainer_step:
 * one rank, its step captured as one graph where it can be, docs/gpu.md), for each
 * precision and microbatch size, on GPT-2 small built in memory (12 layers, C 768, 12
 * heads, T 1024, vocab 50304: 124M parameters; the example GPT of graph/example_gpt.c) or
 * on a model file (an HF export, e.g. the random-init Llama that scripts/gpu-bundle.sh
 * makes: its token ids and logits, the labels added by the loss). AdamW (0.9, 0.95, wd 0.1)
 * at lr 3e-4, clipping at 1, one microbatch a step.
 *
 *   bench_gpu_step [MODEL.onnx [SIGMA]]   SIGMA: draw the model's matrices again from
 *                                         N(0, SIGMA^2) (a file carried with its matrices
 *                                         zeroed, so that it compresses)
 *
 * Knobs (environment): PP_BENCH_PRECISIONS (fp32,bf16), PP_BENCH_BATCHES (8,16,32),
 * PP_BENCH_STEPS (10 timed, after 3: the first eager, the second captured),
 * PP_BENCH_LAYERS / PP_BENCH_SEQ (GPT-2 small's 12 / 1024), PP_BENCH_DEVICE (cuda; cpu for
 * a smoke test), PP_GPU_PEAK_TFLOPS (989.5: the H100 / H200 SXM dense bfloat16 peak, the
 * yardstick of both precisions; an H100 PCIe has 756). Where no GPU answers it prints
 * {"bench":"gpu_step","skipped":"no GPU: ..."} and exits 0. One JSON line per figure
 * (step_ms, tokens_per_s, mfu in both forms of bench/gpu_flops.h), with the model,
 * precision, microbatch, how the steps ran (graph or eager, and why) and the losses; a
 * configuration that runs out of memory prints an "error" line and the others go on. */
#include "bench_util.h"
#include "gpu_flops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnxpipe/core_util.h>
#include <onnxpipe/driver_lib.h>
#include <onnxpipe/example.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/trainer_lib.h>
#include <onnxpipe/stage_lib.h>
#include <onnxpipe/trainer.h>

typedef struct bench {
    const char *model;          /* a file, or NULL: GPT-2 small in memory */
    const char *name;
    double sigma;               /* > 0: redraw the matrices */
    const char *device;
    int64_t layers, seq, vocab, steps;
    double peak;                /* FLOP/s */
} bench;

static int64_t env_int(const char *name, int64_t deflt)
{
    const char *s = getenv(name);
    return s && *s ? atoll(s) : deflt;
}

/* Token ids and labels: a fixed pseudo-random batch per step. */
static pp_status feed(void *user, const pp_trainer_feed *f, pp_error *err)
{
    (void)err;
    const bench *b = user;
    for (int i = 0; i < f->ninputs; i++) {
        const pp_trainer_input *in = &f->inputs[i];
        if (in->dtype != PP_DTYPE_I64) continue;
        int64_t *x = in->data, n = (int64_t)(in->nbytes / sizeof *x);
        for (int64_t k = 0; k < n; k++)
            x[k] = (int64_t)(((uint64_t)(f->step * 7919 + f->offset * b->seq + k + i) * 2654435761u) >> 7) % b->vocab;
    }
    return PP_OK;
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Every trained matrix (rank >= 2) drawn from N(0, sigma^2), seeded: HF's initializer_range. */
static pp_status redraw(pp_trainer *t, double sigma, pp_error *err)
{
    pp_driver *d = pp_trainer_driver(t);
    const pp_graph *g = pp_trainer_graph(t);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int k = 0; k < pp_driver_num_stages(d); k++) {
        pp_stage *s = pp_driver_stage(d, k);
        for (int i = 0; i < pp_stage_num_params(s); i++) {
            const pp_stage_param *p = pp_stage_param_at(s, i);
            if (pp_graph_value_shape(g, p->value)->rank < 2) continue;
            float *h = malloc((size_t)p->numel * sizeof *h);
            if (!h) return pp_error_set(err, PP_ERR_NOMEM, "out of memory redrawing '%s'", p->name);
            for (int64_t e = 0; e < p->numel; e++) {   /* Box-Muller */
                const double u = ((double)(xorshift(&seed) >> 11) + 0.5) / 9007199254740992.0,
                             v = (double)(xorshift(&seed) >> 11) / 9007199254740992.0;
                h[e] = (float)(sigma * sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
            }
            pp_status st = pp_device_copy_from_host(pp_stage_device(s), pp_stage_params(s) + p->offset, h,
                                                    (size_t)p->numel * sizeof *h, err);
            free(h);
            PP_CHECK(st);
        }
    }
    return PP_OK;
}

/* One line: {"bench":"gpu_step", figure fields, then the configuration's}. */
static void line(const bench *b, const char *prec, int64_t mb, const char *figure, const char *formula, double value,
                 const char *steps, const char *error)
{
    pp_json j;
    pp_json_init(&j, stdout, 0);
    pp_json_begin_object(&j, NULL);
    pp_json_string(&j, "bench", "gpu_step");
    if (figure) pp_json_string(&j, "figure", figure);
    if (formula) pp_json_string(&j, "formula", formula);
    if (figure) pp_json_double(&j, "value", value);
    pp_json_string(&j, "model", b->name);
    pp_json_string(&j, "precision", prec);
    pp_json_int(&j, "batch", mb);
    pp_json_int(&j, "T", b->seq);
    if (steps) pp_json_string(&j, "steps", steps);
    if (error) pp_json_string(&j, "error", error);
    pp_json_end_object(&j);
    pp_json_finish(&j);
    fflush(stdout);
}

/* One configuration: create, 3 warm-up steps, b->steps timed; the figures. */
static int run(const bench *b, pp_dtype precision, int64_t mb)
{
    pp_error err = {0};
    const char *prec = pp_precision_name(precision);
    pp_graph *g = NULL;
    pp_trainer *t = NULL;
    pp_trainer_config c;
    pp_trainer_config_init(&c);
    pp_dim_binding seq = {"seq", b->seq};
    c.device = b->device, c.batch = mb, c.microbatches = 1, c.precision = precision, c.quiet = 1;
    c.steps = 3 + b->steps;
    c.optim = (pp_optim_hparams){.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                 .weight_decay = 0.1f};
    c.lr = (pp_lr_schedule){.kind = PP_LR_CONSTANT, .lr = 3e-4f};
    c.clip_norm = 1.0f;
    pp_status st = PP_OK;
    if (b->model) {
        c.model = b->model, c.dims = &seq, c.ndims = 1;
        c.loss = (pp_loss_spec){.logits = "logits", .labels = "labels", .ignore_index = -100};
    } else {
        pp_gpt_config gc = {.layers = b->layers, .d_model = 768, .heads = 12, .vocab = b->vocab, .seq = b->seq,
                            .batch = mb, .seed = 1, .opset = 17, .with_loss = 1};
        st = pp_example_gpt(&gc, &g, &err);
        c.graph = g;
    }
    if (st == PP_OK) st = pp_trainer_create(&c, NULL, &t, &err);
    if (st == PP_OK && b->sigma > 0) st = redraw(t, b->sigma, &err);
    double *dt = calloc((size_t)b->steps, sizeof *dt), loss0 = 0, loss1 = 0;
    for (int64_t s = 0; st == PP_OK && s < 3 + b->steps; s++) {
        pp_trainer_stats ts;
        st = pp_trainer_step(t, feed, (void *)b, &ts, &err);
        if (s == 0) loss0 = ts.loss;
        loss1 = ts.loss;
        if (s >= 3) dt[s - 3] = ts.seconds;
    }
    if (st != PP_OK) {
        line(b, prec, mb, NULL, NULL, 0, NULL, err.msg);
    } else {
        double n;
        int64_t L, C, vocab;
        bench_model_shape(pp_trainer_graph(t), &n, &L, &C, &vocab);
        const double step_s = median(dt, (int)b->steps), tps = (double)(mb * b->seq) / step_s;
        const double f6 = bench_flops_llmc(n, L, C, b->seq), f12 = bench_flops_palm(n, L, C, b->seq);
        const char *steps = pp_driver_step_mode(pp_trainer_driver(t));
        line(b, prec, mb, "step_ms", NULL, 1e3 * step_s, steps, NULL);
        line(b, prec, mb, "tokens_per_s", NULL, tps, steps, NULL);
        line(b, prec, mb, "mfu", "6N+6LCT (llm.c)", bench_mfu(f6, tps, b->peak), steps, NULL);
        line(b, prec, mb, "mfu", "6N+12LCT (PaLM)", bench_mfu(f12, tps, b->peak), steps, NULL);
        printf("{\"bench\":\"gpu_step\",\"figure\":\"model\",\"model\":\"%s\",\"precision\":\"%s\",\"batch\":%lld,"
               "\"params_N\":%.0f,\"layers\":%lld,\"channels\":%lld,\"vocab\":%lld,\"flops_per_token_6n_6lct\":%.6g,"
               "\"flops_per_token_6n_12lct\":%.6g,\"peak_tflops\":%.1f,\"loss_first\":%.4f,\"loss_last\":%.4f}\n",
               b->name, prec, (long long)mb, n, (long long)L, (long long)C, (long long)vocab, f6, f12, b->peak * 1e-12,
               loss0, loss1);
        fflush(stdout);
    }
    free(dt);
    pp_trainer_destroy(t);
    pp_graph_destroy(g);
    return st == PP_OK;
}

int main(int argc, char **argv)
{
    bench b = {.model = argc > 1 ? argv[1] : NULL, .sigma = argc > 2 ? atof(argv[2]) : 0,
               .device = getenv("PP_BENCH_DEVICE") ? getenv("PP_BENCH_DEVICE") : "cuda",
               .layers = env_int("PP_BENCH_LAYERS", 12), .seq = env_int("PP_BENCH_SEQ", 1024), .vocab = 50304,
               .steps = env_int("PP_BENCH_STEPS", 10)};
    const char *pk = getenv("PP_GPU_PEAK_TFLOPS");
    b.peak = (pk ? atof(pk) : 989.5) * 1e12;
    if (b.steps < 1) b.steps = 1;
    pp_error err = {0};
    pp_device *dev = NULL;
    if (!strcmp(b.device, "cuda")) {
        if (pp_device_create(PP_DEVICE_CUDA, 0, &dev, &err) != PP_OK) {
            printf("{\"bench\":\"gpu_step\",\"skipped\":\"no GPU: %s\"}\n", err.msg);
            return 0;
        }
        pp_device_destroy(dev);
    }
    char name[256];
    if (b.model) {
        /* the vocabulary (ids are drawn below it) and a name: the file's, from the graph */
        pp_graph *g = NULL;
        pp_dim_binding seq = {"seq", b.seq};
        pp_graph_options go = {.batch = 1, .dims = &seq, .ndims = 1};
        if (pp_graph_load(b.model, &go, &g, &err) != PP_OK) {
            printf("{\"bench\":\"gpu_step\",\"error\":\"%s\"}\n", err.msg);
            return 1;
        }
        double n;
        int64_t L, C;
        bench_model_shape(g, &n, &L, &C, &b.vocab);
        const char *base = strrchr(b.model, '/');
        snprintf(name, sizeof name, "%s", base ? base + 1 : b.model);
        pp_graph_destroy(g);
    } else {
        snprintf(name, sizeof name, "gpt2-%lldL", (long long)b.layers);
    }
    b.name = name;
    char precs[128], batches[128];
    snprintf(precs, sizeof precs, "%s", getenv("PP_BENCH_PRECISIONS") ? getenv("PP_BENCH_PRECISIONS") : "fp32,bf16");
    snprintf(batches, sizeof batches, "%s", getenv("PP_BENCH_BATCHES") ? getenv("PP_BENCH_BATCHES") : "8,16,32");
    int ok = 1;
    char *sp = NULL;
    for (char *p = strtok_r(precs, ",", &sp); p; p = strtok_r(NULL, ",", &sp)) {
        pp_dtype precision;
        if (!pp_precision_parse(p, &precision)) {
            printf("{\"bench\":\"gpu_step\",\"error\":\"PP_BENCH_PRECISIONS: '%s' is not fp32, bf16 or fp16\"}\n", p);
            return 1;
        }
        char list[128], *sb = NULL;
        snprintf(list, sizeof list, "%s", batches);
        for (char *q = strtok_r(list, ",", &sb); q; q = strtok_r(NULL, ",", &sb)) ok &= run(&b, precision, atoll(q));
    }
    return ok ? 0 : 1;
}
