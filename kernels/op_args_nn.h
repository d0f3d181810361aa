/* Private to kernels/: the layouts of the row normalisations (RMS, instance, group),
 * RotaryEmbedding and Attention, parsed and checked once here (kernels/op_args_nn.c, plain
 * C that the cuda files call too), so that cpu/ and cuda/ keep only compute. */
#ifndef PP_KERNELS_OP_ARGS_NN_H
#define PP_KERNELS_OP_ARGS_NN_H

#include "op_args.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X as m rows of d elements, each normalised on its own (centred on its mean when
 * center, else scaled by its root mean square), then y = xhat * scale[p] + bias[p] with
 * p = ((r % prow) * d + j) / pdiv for element j of row r: RMSNormalization prow = pdiv = 1
 * (parameters per element of the normalised dims); InstanceNormalization rows (n, c),
 * prow = C, pdiv = d (per channel); GroupNormalization rows (n, g), prow = G, pdiv = the
 * spatial size (opset 21: per channel) or d (opset 18: per group). The parameters number
 * prow * d / pdiv. SkipLayerNormalization / SkipSimplifiedLayerNormalization (the residual
 * forms, com.microsoft) are LayerNorm / RMS over the last dim of input + skip (gamma, beta
 * [D] at inputs 2, 3; epsilon 1e-12 by default): prow = pdiv = 1. */
typedef struct pp_norm_args {
    int64_t m, d, prow, pdiv;
    float eps;
    int center;
} pp_norm_args;
pp_status pp_args_norm(const pp_kernel_ctx *c, pp_norm_args *a, pp_error *err);
/* the parameter of element j of row r */
static inline PP_HD int64_t pp_norm_pidx(const pp_norm_args *a, int64_t r, int64_t j)
{
    return ((r % a->prow) * a->d + j) / a->pdiv;
}
/* aux: mean and rstd per row, 2 m floats (0 when the layout is bad: forward reports why). */
size_t pp_args_norm_aux(const pp_kernel_ctx *c);

/* RotaryEmbedding (opset 23) on X [B, H, S, D] (or [B, S, H * D] with num_heads): element
 * (b, h, s, i) of X and Y at b * sb + h * sh + s * ss + i. The first rd elements of a head
 * turn in rd / 2 pairs (i, i + rd / 2), or (2 i, 2 i + 1) when interleaved; the rest pass.
 * cos / sin rows: position_ids[b, s] into [P, rd / 2] caches, else caches [B, S, rd / 2];
 * or, with the attribute hf_caches = 1 that stage/fuse_rope.c sets on the RotaryEmbedding
 * it makes of HF's rotate_half, HF's own caches [1, .., 1, S, rd], each row cat(freqs,
 * freqs) (the fusion checked the halves equal): row s for every b, its first half read.
 * Angle k of row r at r * crow + k. */
typedef struct pp_rope_args {
    int64_t b, h, s, d, rd;
    int64_t sb, sh, ss;
    int64_t npos;           /* rows of the caches with position_ids, else 0 */
    int64_t cb;             /* cache rows per b without position_ids: s, or 0 (HF's, shared) */
    int64_t crow;           /* elements per cache row: rd / 2, or rd (HF's) */
    int interleaved;
} pp_rope_args;
/* the cache row of (b, s) without position_ids */
static inline PP_HD int64_t pp_rope_row(const pp_rope_args *a, int64_t b, int64_t s) { return b * a->cb + s; }
pp_status pp_args_rope(const pp_kernel_ctx *c, pp_rope_args *a, pp_error *err);

/* Attention (opset 23) without a past: Q [B, Hq, Sq, Dk], K [B, Hkv, Skv, Dk],
 * V [B, Hkv, Skv, Dv], Y [B, Hq, Sq, Dv] (or the 3-D [B, S, H * D] forms with q_num_heads,
 * kv_num_heads; or 4-D tensors in another order, with onnxpipe's attributes perm_Q, perm_K,
 * perm_V, perm_Y that stage/fuse_attention.c sets: the exporters' head Transposes read in
 * place); query head h reads kv head h / (Hq / Hkv). Element (b, h, s, i) of tensor t
 * (0 Q, 1 K, 2 V, 3 Y) at b * st[t][0] + h * st[t][1] + s * st[t][2] + i. The mask (bool:
 * true attends; float: added) is broadcast to [B, Hq, Sq, Skv] with element strides mst. */
typedef struct pp_attn_args {
    int64_t b, hq, hkv, sq, skv, dk, dv;
    int64_t st[4][3];
    int64_t mst[4];
    int mask;               /* 0 none, 1 bool, 2 float */
    int causal;             /* key j attends query i when j <= i */
    float scale;
} pp_attn_args;
pp_status pp_args_attention(const pp_kernel_ctx *c, pp_attn_args *a, pp_error *err);
/* aux: the probabilities [B, Hq, Sq, Skv] that backward reads (0 when the layout is bad). */
size_t pp_args_attention_aux(const pp_kernel_ctx *c);

#ifdef __cplusplus
}
#endif
#endif
