/* A custom trainer on the onnxpipe library: builds the example MLP in memory, feeds its
 * own data (a fixed teacher's labels) to one stage on the cpu, and trains it with AdamW,
 * printing the loss. Usage: example_custom_trainer [steps] */
#include <onnxpipe/onnxpipe.h>

#include <stdlib.h>
#include <string.h>

#define BATCH 32

static int fail(const pp_error *err)
{
    fprintf(stderr, "custom_trainer: %s\n", err->msg);
    return 1;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 200;
    pp_error err = {0};
    pp_mlp_config mc = pp_mlp_config_default();
    mc.batch = BATCH;
    mc.with_loss = 1;
    pp_graph *g = NULL;
    pp_partition *part = NULL;
    pp_device *dev = NULL;
    pp_stage *stage = NULL;
    if (pp_example_mlp(&mc, &g, &err) || pp_partition_create(g, 1, NULL, &part, &err) ||
        pp_device_create(PP_DEVICE_CPU, 0, &dev, &err))
        return fail(&err);
    pp_stage_options so = {.slots = 1, .microbatch = BATCH, .global_batch = BATCH, .training = 1,
                           .optim = {.kind = PP_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f}};
    if (pp_stage_create(part, 0, dev, &so, &stage, &err)) return fail(&err);

    /* our own data: x ~ U(-1, 1), label = argmax of a fixed linear teacher */
    int in = -1, lab = -1;
    for (int i = 0; i < pp_stage_num_inputs(stage); i++) {
        if (!strcmp(pp_stage_input(stage, i)->name, "x")) in = i;
        if (!strcmp(pp_stage_input(stage, i)->name, "labels")) lab = i;
    }
    int d = (int)mc.in, c = (int)mc.classes;
    float *teacher = malloc((size_t)d * (size_t)c * sizeof *teacher);
    for (int k = 0; k < d * c; k++) teacher[k] = (float)((k * 7919 % 101) - 50) / 50.0f;
    double first = 0, last = 0;
    for (int step = 1; step <= steps; step++) {
        float *x = pp_stage_input_buffer(stage, 0, in);
        int64_t *y = pp_stage_input_buffer(stage, 0, lab);
        for (int b = 0; b < BATCH; b++) {
            int best = 0;
            float best_v = -1e30f;
            for (int k = 0; k < d; k++) x[b * d + k] = (float)rand() / (float)RAND_MAX * 2 - 1;
            for (int j = 0; j < c; j++) {
                float v = 0;
                for (int k = 0; k < d; k++) v += x[b * d + k] * teacher[k * c + j];
                if (v > best_v) best_v = v, best = j;
            }
            y[b] = best;
        }
        if (pp_stage_zero_grads(stage, &err) || pp_stage_forward(stage, 0, step, 0, &err) ||
            pp_stage_backward(stage, 0, PP_BACKWARD_FULL, &err) ||
            pp_stage_sum_uses(stage, &err) ||   /* a weight read by several nodes: their gradients added */
            pp_stage_step(stage, 3e-3f, 1.0f, step, &err))
            return fail(&err);
        last = pp_stage_loss(stage, 0);
        if (step == 1) first = last;
        if (step % 50 == 0 || step == 1) printf("step %4d  loss %.4f\n", step, last);
    }
    printf("loss %.4f -> %.4f\n", first, last);
    free(teacher);
    pp_stage_destroy(stage);
    pp_device_destroy(dev);
    pp_partition_destroy(part);
    pp_graph_destroy(g);
    return last < first ? 0 : 1;
}
