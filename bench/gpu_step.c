/* GPU benchmark: step time, tokens/s and MFU of one GPT stage (GPT-2-small blocks: d=768,
 * 12 heads, T=1024) run by the stage executor on the cuda device with AdamW. Knobs:
 * PP_BENCH_LAYERS (default 4), PP_BENCH_BATCH (default 8), PP_BENCH_PRECISION (fp32, the
 * default, with cuBLAS/cuDNN TF32 math; bf16: mixed precision). One JSON line per figure;
 * where no GPU answers it prints {"bench":"gpu_step","skipped":"no GPU: ..."} and exits 0.
 * MFU counts 6 N + 12 L T d FLOPs per token (PaLM appendix B) against PP_GPU_PEAK_TFLOPS
 * (default: H100/H200 SXM dense, 494.7 for TF32, 989.5 for BF16; H100 PCIe: 378, 756). */
#include <onnxpipe/example.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/stage_lib.h>

#include <stdio.h>
#include <stdlib.h>

static int fail(const pp_error *err)
{
    printf("{\"bench\":\"gpu_step\",\"error\":\"%s\"}\n", err->msg);
    return 1;
}

int main(void)
{
    pp_error err = {0};
    const char *ls = getenv("PP_BENCH_LAYERS"), *bs = getenv("PP_BENCH_BATCH"), *pk = getenv("PP_GPU_PEAK_TFLOPS");
    const char *pr = getenv("PP_BENCH_PRECISION");
    pp_dtype precision = PP_DTYPE_F32;
    if (pr && !pp_precision_parse(pr, &precision)) {
        printf("{\"bench\":\"gpu_step\",\"error\":\"PP_BENCH_PRECISION=%s: expected fp32, bf16 or fp16\"}\n", pr);
        return 1;
    }
    pp_device *dev = NULL;
    if (pp_device_create(PP_DEVICE_CUDA, 0, &dev, &err) != PP_OK) {
        printf("{\"bench\":\"gpu_step\",\"skipped\":\"no GPU: %s\"}\n", err.msg);
        return 0;
    }
    const int64_t L = ls ? atoll(ls) : 4, d = 768, H = 12, T = 1024, B = bs ? atoll(bs) : 8, V = 50304;
    const double peak = (pk ? atof(pk) : precision == PP_DTYPE_F32 ? 494.7 : 989.5) * 1e12;
    pp_gpt_config gc = {.layers = L, .d_model = d, .heads = H, .vocab = V, .seq = T, .batch = B, .seed = 1,
                        .opset = 17, .with_loss = 1};
    pp_graph *g = NULL;
    pp_stage *s = NULL;
    if (pp_example_gpt(&gc, &g, &err) != PP_OK) return fail(&err);
    pp_stage_options so = {.slots = 1, .microbatch = B, .global_batch = B, .seed = 1, .training = 1,
                           .precision = precision};
    so.optim = (pp_optim_hparams){.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                  .weight_decay = 0.1f};
    if (pp_stage_create_range(g, 0, g->nnodes, 1, dev, &so, &s, &err) != PP_OK) return fail(&err);
    /* token ids and labels: a fixed pseudo-random batch, copied once */
    for (int i = 0; i < pp_stage_num_inputs(s); i++) {
        const pp_stage_port *p = pp_stage_input(s, i);
        int64_t n = (int64_t)(p->nbytes / sizeof(int64_t)), *ids = malloc(p->nbytes);
        for (int64_t k = 0; k < n; k++) ids[k] = (k * 2654435761u + (uint64_t)i) % (uint64_t)V;
        pp_status st = pp_device_copy_from_host(dev, pp_stage_input_buffer(s, 0, i), ids, p->nbytes, &err);
        free(ids);
        if (st != PP_OK) return fail(&err);
    }
    const int warmup = 3, steps = 10;
    double t0 = 0, loss = 0;
    for (int it = 0; it < warmup + steps; it++) {
        if (it == warmup) {
            if (pp_device_synchronize(dev, &err) != PP_OK) return fail(&err);
            t0 = pp_now();
        }
        if (pp_stage_zero_grads(s, &err) != PP_OK || pp_stage_forward(s, 0, it + 1, 0, &err) != PP_OK ||
            pp_stage_backward(s, 0, PP_BACKWARD_FULL, &err) != PP_OK || pp_stage_sum_uses(s, &err) != PP_OK ||
            pp_stage_step(s, 3e-4f, 1.f, it + 1, &err) != PP_OK)
            return fail(&err);
    }
    if (pp_device_synchronize(dev, &err) != PP_OK) return fail(&err);
    const double dt = (pp_now() - t0) / steps;
    loss = pp_stage_loss(s, 0);
    const double nparams = (double)pp_stage_param_elems(s), tokens = (double)(B * T);
    const double flops = tokens * (6.0 * nparams + 12.0 * (double)(L * T * d));
    printf("{\"bench\":\"gpu_step\",\"figure\":\"step_ms\",\"value\":%.3f,\"layers\":%lld,\"d\":%lld,\"T\":%lld,"
           "\"batch\":%lld,\"precision\":\"%s\",\"params\":%lld,\"loss\":%.4f}\n", dt * 1e3, (long long)L, (long long)d,
           (long long)T, (long long)B, pp_precision_name(precision), (long long)pp_stage_param_elems(s), loss);
    printf("{\"bench\":\"gpu_step\",\"figure\":\"tokens_per_s\",\"value\":%.0f}\n", tokens / dt);
    printf("{\"bench\":\"gpu_step\",\"figure\":\"mfu\",\"value\":%.4f,\"flops_per_step\":%.4g,\"peak_flops\":%.4g}\n",
           flops / dt / peak, flops, peak);
    pp_stage_destroy(s);
    pp_graph_destroy(g);
    pp_device_destroy(dev);
    return 0;
}
