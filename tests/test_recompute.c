/* Activation recomputation on one stage: the stash a stage allocates with recompute none,
 * selective and full against closed forms counted by hand for the example MLP, the
 * ordering full < selective < none on the example GPT, and gradients bitwise equal to
 * those without recompute in the orders the schedules make (a zero-bubble weight half
 * that finds the arena taken by another slot runs the forward again, and counts it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <onnxpipe/example.h>
#include <onnxpipe/stage_lib.h>
#include <onnxpipe/graph_ir.h>

#define B 4    /* samples per microbatch */
#define IN 16
#define H1 32
#define H2 24
#define C 10
#define SLOTS 3

static int64_t al(int64_t n) { return (n + 63) / 64 * 64; }   /* the stage's 64-byte alignment */

static pp_device *cpu(void)
{
    pp_device *dev = NULL;
    pp_error err = {0};
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &dev, &err), PP_OK);
    return dev;
}

static pp_graph *mlp(void)
{
    pp_mlp_config mc = pp_mlp_config_default();
    mc.in = IN;
    mc.hidden[0] = H1;
    mc.hidden[1] = H2;
    mc.nhidden = 2;
    mc.classes = C;
    mc.batch = B;
    mc.with_loss = 1;
    pp_graph *g = NULL;
    pp_error err = {0};
    assert_int_equal(pp_example_mlp(&mc, &g, &err), PP_OK);
    return g;
}

static pp_stage *make(const pp_graph *g, pp_device *dev, pp_recompute r)
{
    pp_stage_options so = {.slots = SLOTS, .microbatch = B, .global_batch = B * SLOTS, .seed = 7, .training = 1,
                           .recompute = r};
    so.optim = (pp_optim_hparams){.kind = PP_OPTIM_SGD};
    pp_stage *s = NULL;
    pp_error err = {0};
    if (pp_stage_create_range(g, 0, g->nnodes, 1, dev, &so, &s, &err) != PP_OK) fail_msg("%s", err.msg);
    return s;
}

/* The MLP x -> Gemm a1 -> Relu r1 -> Gemm a2 -> Relu r2 -> Gemm logits -> loss on one
 * stage. Backward reads x (Gemm 1), r1, r2 (the Relus' outputs and the next Gemms'
 * inputs), logits and labels (the loss). Every slot keeps, whatever the recompute:
 *   x, labels (inputs), logits (a graph output), the loss, the loss's statistics (its aux,
 *   kernels/xent.h: per sample the scores' max and log-sum-exp, and the labels' summed
 *   weight: 2 B + 1 floats), and the gradients a weight
 *   half reads after other microbatches' input halves: those of the Gemms' outputs a1,
 *   a2, logits, and the loss's seed.
 * none keeps r1 and r2 besides. full keeps nothing more: r1, r2 go to the arena, and
 * the Gemm 1, Relu 1, Gemm 2, Relu 2 run again. selective keeps a1, a2 (Gemm outputs
 * the Relus are re-run from) instead: as big as r1, r2, so here selective's stash is
 * none's (the GPT below is where it saves). */
static void mlp_closed_form(void **state)
{
    (void)state;
    pp_device *dev = cpu();
    pp_graph *g = mlp();
    const int64_t f = 4, common = al(B * IN * f) + al(B * 8) + al(B * C * f) + al(f)   /* x, labels, logits, loss */
                                  + al((2 * B + 1) * f)                                 /* the loss's aux */
                                  + al(f) + al(B * H1 * f) + al(B * H2 * f) + al(B * C * f),   /* gradients */
                  acts = al(B * H1 * f) + al(B * H2 * f);   /* r1, r2 (or a1, a2) */
    const struct {
        pp_recompute r;
        int64_t slot, arena;
    } want[] = {
        {PP_RECOMPUTE_NONE, common + acts, 0},
        {PP_RECOMPUTE_SELECTIVE, common + acts, acts},
        {PP_RECOMPUTE_FULL, common, acts},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        pp_stage *s = make(g, dev, want[i].r);
        pp_stage_bytes b;
        pp_stage_allocation(s, &b);
        printf("  mlp %-9s stash %lld = %d x %lld (closed form %d x %lld), recompute arena %lld (closed form %lld)\n",
               pp_recompute_name(want[i].r), (long long)b.stash, b.slots, (long long)(b.stash / SLOTS), SLOTS,
               (long long)want[i].slot, (long long)b.recompute, (long long)want[i].arena);
        assert_int_equal(b.slots, SLOTS);
        assert_int_equal(b.stash, SLOTS * want[i].slot);
        assert_int_equal(b.recompute, want[i].arena);
        assert_int_equal(b.total, b.params + b.grads + b.optimizer + b.stash + b.scratch + b.constants + b.recompute);
        pp_stage_destroy(s);
    }
    pp_graph_destroy(g);
    pp_device_destroy(dev);
}

/* The GPT: selective keeps the MatMul outputs only (not LayerNorm, Softmax, Gelu
 * outputs), full only the stage's inputs and outputs. */
static void gpt_order(void **state)
{
    (void)state;
    pp_device *dev = cpu();
    pp_gpt_config gc = {.layers = 2, .d_model = 32, .heads = 2, .vocab = 64, .seq = 16, .batch = B, .seed = 1,
                        .opset = 17, .with_loss = 1};
    pp_graph *g = NULL;
    pp_error err = {0};
    assert_int_equal(pp_example_gpt(&gc, &g, &err), PP_OK);
    int64_t stash[3], arena[3];
    for (int r = 0; r < 3; r++) {
        pp_stage *s = make(g, dev, (pp_recompute)r);
        pp_stage_bytes b;
        pp_stage_allocation(s, &b);
        stash[r] = b.stash;
        arena[r] = b.recompute;
        printf("  gpt %-9s stash %lld (%d slots), recompute arena %lld\n", pp_recompute_name((pp_recompute)r),
               (long long)b.stash, b.slots, (long long)b.recompute);
        pp_stage_destroy(s);
    }
    assert_true(stash[PP_RECOMPUTE_FULL] < stash[PP_RECOMPUTE_SELECTIVE]);
    assert_true(stash[PP_RECOMPUTE_SELECTIVE] < stash[PP_RECOMPUTE_NONE]);
    assert_int_equal(arena[PP_RECOMPUTE_NONE], 0);
    assert_true(arena[PP_RECOMPUTE_SELECTIVE] > 0 && arena[PP_RECOMPUTE_SELECTIVE] < arena[PP_RECOMPUTE_FULL]);
    pp_graph_destroy(g);
    pp_device_destroy(dev);
}

/* Fills the data inputs of every slot: x from a fixed formula, labels in 0..C-1. */
static void feed(pp_stage *s)
{
    for (int slot = 0; slot < SLOTS; slot++)
        for (int i = 0; i < pp_stage_num_inputs(s); i++) {
            const pp_stage_port *p = pp_stage_input(s, i);
            void *d = pp_stage_input_buffer(s, slot, i);
            int64_t n = (int64_t)(p->nbytes / 4);
            if (p->dtype == PP_DTYPE_F32)
                for (int64_t k = 0; k < n; k++) ((float *)d)[k] = (float)((k * 37 + slot * 11) % 19) / 9.f - 1.f;
            else
                for (int64_t k = 0; k < n / 2; k++) ((int64_t *)d)[k] = (k * 7 + slot) % C;
        }
}

/* The orders a stage sees: the last stage's 1F1B (each forward's backward next), GPipe
 * (all forwards, then the backwards) and zero bubble (all forwards, input halves, then
 * weight halves); gradients into the flat buffer. */
enum { ONE_F_ONE_B, GPIPE, ZERO_BUBBLE };
static const char *const order_name[] = {"1F1B", "GPipe", "input halves then weight halves"};

static void run(pp_stage *s, int order)
{
    pp_error err = {0};
    feed(s);
    assert_int_equal(pp_stage_zero_grads(s, &err), PP_OK);
    for (int slot = 0; slot < SLOTS; slot++) {
        assert_int_equal(pp_stage_forward(s, slot, 1, slot, &err), PP_OK);
        if (order == ONE_F_ONE_B) assert_int_equal(pp_stage_backward(s, slot, PP_BACKWARD_FULL, &err), PP_OK);
    }
    for (int slot = 0; order != ONE_F_ONE_B && slot < SLOTS; slot++)
        assert_int_equal(pp_stage_backward(s, slot, order == GPIPE ? PP_BACKWARD_FULL : PP_BACKWARD_INPUT, &err),
                         PP_OK);
    for (int slot = 0; order == ZERO_BUBBLE && slot < SLOTS; slot++)
        assert_int_equal(pp_stage_backward(s, slot, PP_BACKWARD_WEIGHT, &err), PP_OK);
}

static void gradients_bitwise(void **state)
{
    (void)state;
    pp_device *dev = cpu();
    pp_graph *g = mlp();
    pp_stage *ref = make(g, dev, PP_RECOMPUTE_NONE);
    size_t n = (size_t)pp_stage_param_elems(ref) * sizeof(float);
    /* re-runs: none where the arena holds the slot's forward; GPipe: every backward (the
     * arena holds the last forward, then each re-run's); zero bubble: every input half
     * and every weight half (the other slots' input halves took the arena in between) */
    const int64_t runs[] = {0, SLOTS, 2 * SLOTS}, weight_runs[] = {0, 0, SLOTS};
    for (int order = ONE_F_ONE_B; order <= ZERO_BUBBLE; order++) {
        run(ref, order);
        for (int r = PP_RECOMPUTE_SELECTIVE; r <= PP_RECOMPUTE_FULL; r++) {
            pp_stage *s = make(g, dev, (pp_recompute)r);
            run(s, order);
            pp_stage_recompute_stats st;
            pp_stage_recompute_get(s, &st);
            int same = !memcmp(pp_stage_grads(s), pp_stage_grads(ref), n);
            printf("  %s, %s: gradients %s those without recompute; %lld re-runs, %lld for weight halves\n",
                   order_name[order], pp_recompute_name((pp_recompute)r), same ? "bitwise equal to" : "DIFFER from",
                   (long long)st.runs, (long long)st.weight_reruns);
            assert_true(same);
            assert_int_equal(st.runs, runs[order]);
            assert_int_equal(st.weight_reruns, weight_runs[order]);
            pp_stage_destroy(s);
        }
    }
    pp_stage_destroy(ref);
    pp_graph_destroy(g);
    pp_device_destroy(dev);
}

static void parse_names(void **state)
{
    (void)state;
    pp_error err = {0};
    pp_recompute r;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pp_recompute_parse(pp_recompute_name((pp_recompute)i), &r, &err), PP_OK);
        assert_int_equal(r, i);
    }
    assert_int_equal(pp_recompute_parse("partial", &r, &err), PP_ERR_INVALID_ARG);
    printf("  bad value: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "'partial'"));
    assert_non_null(strstr(err.msg, "none, selective, full"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mlp_closed_form),
        cmocka_unit_test(gpt_order),
        cmocka_unit_test(gradients_bitwise),
        cmocka_unit_test(parse_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
