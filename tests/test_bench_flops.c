/* The FLOP and MFU formulas of bench_gpu_step (bench/gpu_flops.h) against closed forms:
 * GPT-2 small's parameter count (124,475,904 with the vocabulary padded to 50304, as
 * llm.c pads it, and as the first H200 run's stage counted), its FLOPs per token in llm.c's
 * 6N + 6LCT and PaLM's 6N + 12LCT forms, the MFU of a given rate, the old bench line's
 * figures (2.818e13 FLOPs a step of 32 x 1024 tokens), and what the bench reads off a graph:
 * N, L, C and the vocabulary of the example GPT (its LM head tied to the token table, so the
 * table counts) and of a model whose head is its own matrix (the table does not count). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>

#include <cmocka.h>

#include <onnxpipe/example.h>
#include <onnxpipe/graph_ir.h>

#include "gpu_flops.h"

static void gpt2_small(void **state)
{
    (void)state;
    const int64_t L = 12, C = 768, V = 50304, T = 1024;
    /* per layer: 2 LayerNorms (2C each), QKV C x 3C + 3C, projection C^2 + C, MLP C x 4C + 4C and 4C x C + C */
    const int64_t layer = 2 * 2 * C + (3 * C * C + 3 * C) + (C * C + C) + (4 * C * C + 4 * C) + (4 * C * C + C);
    const int64_t n = V * C + T * C + L * layer + 2 * C;
    printf("GPT-2 small: %lld per layer, %lld in all (bench_gpt_params: %lld)\n", (long long)layer, (long long)n,
           (long long)bench_gpt_params(L, C, V, T));
    assert_int_equal(n, 124475904);
    assert_int_equal(bench_gpt_params(L, C, V, T), 124475904);
    const double f6 = bench_flops_llmc((double)n, L, C, T), f12 = bench_flops_palm((double)n, L, C, T);
    printf("FLOPs per token: 6N + 6LCT = %.0f, 6N + 12LCT = %.0f\n", f6, f12);
    assert_true(f6 == 803478528.0);     /* 746,855,424 + 56,623,104 */
    assert_true(f12 == 860101632.0);    /* 746,855,424 + 113,246,208 */
    /* the first H200 run's lines: flops_per_step 2.818e13 (batch 32, the PaLM form), MFU 0.0918 of TF32's 494.7 */
    assert_true(fabs(f12 * 32 * 1024 - 2.818e13) < 0.0005e13);
    assert_true(fabs(bench_mfu(f12, 52781, 494.7e12) - 0.0918) < 0.00005);
    /* 468,000 tokens/s (the C/CUDA trainer issue 40 quotes) is 38% of the bf16 peak in llm.c's form */
    const double m = bench_mfu(f6, 468000, 989.5e12);
    printf("468,000 tokens/s of GPT-2 small: MFU %.4f (llm.c's form) of 989.5 TFLOP/s\n", m);
    assert_true(fabs(m - 803478528.0 * 468000 / 989.5e12) < 1e-12 && m > 0.38 && m < 0.381);
}

static void read_off_graphs(void **state)
{
    (void)state;
    pp_error err = {0};
    pp_graph *g = NULL;
    pp_gpt_config gc = {.layers = 3, .d_model = 32, .heads = 2, .vocab = 96, .seq = 16, .batch = 2, .seed = 1,
                        .with_loss = 1};
    assert_int_equal(pp_example_gpt(&gc, &g, &err), PP_OK);
    double n;
    int64_t L, C, V;
    bench_model_shape(g, &n, &L, &C, &V);
    printf("example GPT (3 layers, C 32, vocab 96, T 16): N %.0f (trained %lld, closed form %lld), L %lld, C %lld, "
           "vocab %lld\n", n, (long long)pp_graph_num_params(g), (long long)bench_gpt_params(3, 32, 96, 16), (long long)L,
           (long long)C, (long long)V);
    assert_true(n == (double)pp_graph_num_params(g) && n == (double)bench_gpt_params(3, 32, 96, 16));
    assert_int_equal(L, 3);
    assert_int_equal(C, 32);
    assert_int_equal(V, 96);
    pp_graph_destroy(g);

    /* ids -> Gather(E [V, C]) -> MatMul(head [C, V]) -> logits: the table is only looked up */
    enum { B = 2, S = 4, CH = 8, VOC = 10 };
    static float e[VOC * CH], h[CH * VOC];
    const int64_t ed[2] = {VOC, CH}, hd[2] = {CH, VOC}, idd[2] = {B, S};
    pp_shape es = pp_shape_make(2, ed), hs = pp_shape_make(2, hd), is = pp_shape_make(2, idd);
    int node;
    assert_int_equal(pp_graph_create("untied", 17, &g, &err), PP_OK);
    assert_int_equal(pp_graph_add_input(g, "ids", PP_DTYPE_I64, &is, &err), PP_OK);
    assert_int_equal(pp_graph_add_initializer(g, "embed", PP_DTYPE_F32, &es, e, sizeof e, 0, &err), PP_OK);
    assert_int_equal(pp_graph_add_initializer(g, "head", PP_DTYPE_F32, &hs, h, sizeof h, 0, &err), PP_OK);
    assert_int_equal(pp_graph_add_node(g, "Gather", "", "lookup", (const char *[]){"embed", "ids"}, 2,
                                       (const char *[]){"x"}, 1, &node, &err), PP_OK);
    assert_int_equal(pp_graph_add_node(g, "MatMul", "", "lm_head", (const char *[]){"x", "head"}, 2,
                                       (const char *[]){"logits"}, 1, &node, &err), PP_OK);
    assert_int_equal(pp_graph_add_output(g, "logits", PP_DTYPE_F32, NULL, &err), PP_OK);
    if (pp_graph_finalize(g, NULL, &err) != PP_OK) fail_msg("%s", err.msg);
    bench_model_shape(g, &n, &L, &C, &V);
    printf("an untied head: trained %lld, N %.0f (the %d x %d table not counted), C %lld, vocab %lld\n",
           (long long)pp_graph_num_params(g), n, VOC, CH, (long long)C, (long long)V);
    assert_int_equal(pp_graph_num_params(g), 2 * VOC * CH);
    assert_true(n == VOC * CH);
    assert_int_equal(C, CH);
    assert_int_equal(V, VOC);
    assert_int_equal(L, 0);
    pp_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(gpt2_small), cmocka_unit_test(read_off_graphs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
