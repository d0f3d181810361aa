/* What bench_gpu_step (bench/gpu_step.c) counts: the FLOPs of one trained token, forward
 * and backward, in the two forms transformer trainers print, and MFU against a peak.
 *
 *   llm.c (train_gpt2.cu: gpt2_estimate_mfu):  6 N + 6 L C T
 *   PaLM appendix B (nanoGPT, Megatron):       6 N + 12 L C T
 *
 * N: the parameters a matrix product reads per token: every trained parameter, less the
 * token embedding table where it is not also the LM head (llm.c counts GPT-2's tied wte in
 * N, and removes Llama 3's untied one); a lookup does no FLOPs. L: layers (attention
 * blocks), C: channels (the model width), T: the sequence length. 6 N is 2 N FLOPs of the
 * forward products and 4 N of the backward; the second term is attention's two products
 * (Q K^T and P V) at 2 T C per token and layer forward, 3x with backward: 12 L C T for the
 * full T x T scores, 6 L C T for the causal half llm.c counts. MFU = FLOPs per token x
 * tokens per second / peak. */
#ifndef PP_BENCH_GPU_FLOPS_H
#define PP_BENCH_GPU_FLOPS_H

#include <stdint.h>
#include <onnxpipe/graph_ir.h>

static inline double bench_flops_llmc(double n, int64_t layers, int64_t channels, int64_t seq)
{
    return 6.0 * n + 6.0 * (double)layers * (double)channels * (double)seq;
}

static inline double bench_flops_palm(double n, int64_t layers, int64_t channels, int64_t seq)
{
    return 6.0 * n + 12.0 * (double)layers * (double)channels * (double)seq;
}

static inline double bench_mfu(double flops_per_token, double tokens_per_s, double peak_flops)
{
    return flops_per_token * tokens_per_s / peak_flops;
}

/* The parameters of the example GPT (graph/example_gpt.c: tied wte and LM head, learned
 * positions, LayerNorm with bias, fused QKV): V C + T C + L (12 C^2 + 13 C) + 2 C. */
static inline int64_t bench_gpt_params(int64_t layers, int64_t channels, int64_t vocab, int64_t seq)
{
    return vocab * channels + seq * channels + layers * (12 * channels * channels + 13 * channels) + 2 * channels;
}

static inline int64_t bench_value_numel(const pp_graph *g, int v)
{
    int64_t n = 1;
    for (int d = 0; d < g->values[v].shape.rank; d++) n *= g->values[v].shape.dims[d];
    return n;
}

/* N, L and C of a graph (see the top), and its vocabulary: L counts the Softmax nodes
 * (one per attention block); the token table is the rank-2 trained parameter a Gather
 * looks up with the most rows (positions have fewer), C its width, vocab its rows; N the
 * trained parameters less that table unless another node reads it too (a tied LM head). */
static inline void bench_model_shape(const pp_graph *g, double *n, int64_t *layers, int64_t *channels, int64_t *vocab)
{
    *n = 0, *layers = 0, *channels = 0, *vocab = 0;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].is_param) *n += (double)bench_value_numel(g, v);
    int table = -1;
    for (int i = 0; i < g->nnodes; i++) {
        const pp_node *nd = &g->nodes[i];
        if (nd->op == PP_OP_SOFTMAX) ++*layers;
        if (nd->op != PP_OP_GATHER || nd->ninputs < 1 || nd->inputs[0] < 0) continue;
        const int v = nd->inputs[0];
        const pp_value *t = &g->values[v];
        if (t->is_param && t->shape.rank == 2 && (table < 0 || t->shape.dims[0] > g->values[table].shape.dims[0]))
            table = v;
    }
    if (table < 0) return;
    *channels = g->values[table].shape.dims[1];
    *vocab = g->values[table].shape.dims[0];
    if (g->values[table].nconsumers == 1) *n -= (double)bench_value_numel(g, table);
}

#endif
