/* Example models built in code through the graph builder: a GPT-2 style language
 * model and a small MLP classifier, with seeded weights, ready for pp_graph_save.
 * They are the models the README's main job trains. */
#ifndef ONNXPIPE_EXAMPLE_H
#define ONNXPIPE_EXAMPLE_H

#include <onnxpipe/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

/* GPT-2 style decoder. Inputs: input_ids int64 [batch, T] (and labels int64 [batch, T]
 * with with_loss). Outputs: logits float [batch, T, V] (and loss float [] with with_loss,
 * the mean cross-entropy of logits against labels).
 * Math per block (pre-LN): x += proj(attn(ln_1(x))); x += mlp.proj(gelu(mlp.fc(ln_2(x))))
 * with causal softmax attention over H heads, exact erf GELU, LayerNorm eps 1e-5;
 * then ln_f and an LM head tied to the token embedding (logits = x · wteᵀ).
 * Parameters: V·D + T·D + L·(12·D² + 13·D) + 2·D. */
typedef struct pp_gpt_config {
    int64_t layers;     /* L >= 1 */
    int64_t d_model;    /* D >= 1, divisible by heads */
    int64_t heads;      /* H >= 1 */
    int64_t vocab;      /* V >= 1 */
    int64_t seq;        /* T >= 1, the fixed context length */
    int64_t batch;      /* > 0: fixed batch dim; 0: symbolic dim "batch" */
    uint64_t seed;      /* weight RNG seed */
    int64_t opset;      /* 13..21; 0 means 17. Below 17 LayerNorm is written as
                           ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add */
    int with_loss;      /* add the labels input and the loss output */
} pp_gpt_config;

/* MLP classifier: x float [batch, in] -> (Gemm, Relu) per hidden layer -> Gemm ->
 * logits float [batch, classes]; with_loss adds labels int64 [batch] and loss float [].
 * Gemm weights are [out, in] with transB = 1, like torch.nn.Linear. */
#define PP_MLP_MAX_HIDDEN 16
typedef struct pp_mlp_config {
    int64_t in;                         /* input features >= 1 */
    int64_t hidden[PP_MLP_MAX_HIDDEN];  /* hidden widths, each >= 1 */
    int nhidden;                        /* 0..PP_MLP_MAX_HIDDEN */
    int64_t classes;                    /* >= 1 */
    int64_t batch;                      /* > 0: fixed; 0: symbolic dim "batch" */
    uint64_t seed;
    int64_t opset;                      /* 13..21; 0 means 17 */
    int with_loss;
} pp_mlp_config;

/* Defaults: L=4, D=256, H=4, V=256, T=128, symbolic batch, seed 0, opset 17, no loss. Local; thread-safe. */
PP_API pp_gpt_config pp_gpt_config_default(void);
/* Defaults: in=32, hidden 64,64, classes=10, symbolic batch, seed 0, opset 17, no loss. Local; thread-safe. */
PP_API pp_mlp_config pp_mlp_config_default(void);

/* Weights are drawn from one splitmix64 stream seeded with cfg->seed, tensor after
 * tensor in the order the model defines them, each element from the next 64-bit draw(s):
 *   uniform u = (draw >> 11) * 2^-53 in [0, 1);
 *   normal  = Box-Muller sqrt(-2 ln(1 - u1)) * cos(2 pi u2), two draws per element.
 * GPT: every weight matrix and both embeddings ~ N(0, 0.02²), except the two residual
 * projections (attn.proj, mlp.proj) ~ N(0, (0.02 / sqrt(2L))²) as in GPT-2; biases 0,
 * LayerNorm weight 1 and bias 0.
 * MLP: weights ~ U(-b, b) with b = sqrt(6 / fan_in) (Kaiming uniform for ReLU), biases 0.
 * Scalar constants and the causal mask [T, T] (0 on and below the diagonal, -1e9 above)
 * are Constant nodes, never trainable; GPT MatMul weights are [in, out] (x · W + b).
 * The graph is finalized with no_fold and allow_unknown_dims (the batch dim may be
 * symbolic). The caller frees *out with pp_graph_destroy. Local. */
PP_API pp_status pp_example_gpt(const pp_gpt_config *cfg, pp_graph **out, pp_error *err);
PP_API pp_status pp_example_mlp(const pp_mlp_config *cfg, pp_graph **out, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
