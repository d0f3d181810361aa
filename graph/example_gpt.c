/* The example GPT-2 style model (include/onnxpipe/example.h): embeddings, pre-LN
 * blocks of causal self-attention and erf-GELU MLP, final LayerNorm, LM head tied to
 * the token embedding, and optionally the mean cross-entropy loss. */
#include "example_util.h"

#include <math.h>
#include <stdlib.h>

#include <onnxpipe/core_util.h>
#include <onnxpipe/example.h>
#include <onnxpipe/graph_ir.h>

#define LN_EPS 1e-5f
#define INIT_STD 0.02
#define MAX_DIM (1ll << 24)

pp_gpt_config pp_gpt_config_default(void)
{
    return (pp_gpt_config){.layers = 4, .d_model = 256, .heads = 4, .vocab = 256, .seq = 128, .opset = 17};
}

/* y = LayerNorm(x) over the last dim D with parameters p.weight = 1, p.bias = 0 [D].
 * Opset >= 17 has the op; below it is written as PyTorch exports it. */
static pp_status add_layernorm(ex_builder *b, const char *p, const char *x, int64_t D, const char *y)
{
    const char *w = ex_name(b, "%s.weight", p), *bias = ex_name(b, "%s.bias", p);
    PP_CHECK(ex_param_fill(b, w, 1, &D, 1.0f));
    PP_CHECK(ex_param_fill(b, bias, 1, &D, 0.0f));
    if (b->g->opset >= 17) {
        PP_CHECK(ex_node(b, "LayerNormalization", p, EX_LIST(x, w, bias), EX_LIST(y)));
        PP_CHECK(pp_graph_set_attr_int(b->g, b->node, "axis", -1, b->err));
        return pp_graph_set_attr_float(b->g, b->node, "epsilon", LN_EPS, b->err);
    }
    const int64_t last[1] = {-1};
    const char *mean = ex_name(b, "%s.mean", p), *centered = ex_name(b, "%s.centered", p);
    const char *sq = ex_name(b, "%s.sq", p), *var = ex_name(b, "%s.var", p);
    const char *var_eps = ex_name(b, "%s.var_eps", p), *std = ex_name(b, "%s.std", p);
    const char *norm = ex_name(b, "%s.norm", p), *scaled = ex_name(b, "%s.scaled", p);
    PP_CHECK(ex_node(b, "ReduceMean", mean, EX_LIST(x), EX_LIST(mean)));
    PP_CHECK(pp_graph_set_attr_ints(b->g, b->node, "axes", last, 1, b->err));
    PP_CHECK(ex_node(b, "Sub", centered, EX_LIST(x, mean), EX_LIST(centered)));
    PP_CHECK(ex_node(b, "Pow", sq, EX_LIST(centered, "const.two"), EX_LIST(sq)));
    PP_CHECK(ex_node(b, "ReduceMean", var, EX_LIST(sq), EX_LIST(var)));
    PP_CHECK(pp_graph_set_attr_ints(b->g, b->node, "axes", last, 1, b->err));
    PP_CHECK(ex_node(b, "Add", var_eps, EX_LIST(var, "const.ln_eps"), EX_LIST(var_eps)));
    PP_CHECK(ex_node(b, "Sqrt", std, EX_LIST(var_eps), EX_LIST(std)));
    PP_CHECK(ex_node(b, "Div", norm, EX_LIST(centered, std), EX_LIST(norm)));
    PP_CHECK(ex_node(b, "Mul", scaled, EX_LIST(norm, w), EX_LIST(scaled)));
    return ex_node(b, "Add", p, EX_LIST(scaled, bias), EX_LIST(y));
}

/* y [.., out] = x [.., in] · p.weight [in, out] + p.bias [out]; weight ~ N(0, std²). */
static pp_status add_linear(ex_builder *b, const char *p, const char *x, int64_t in, int64_t out,
                            double std, const char *y)
{
    const int64_t wdims[2] = {in, out};
    const char *w = ex_name(b, "%s.weight", p), *bias = ex_name(b, "%s.bias", p);
    const char *mm = ex_name(b, "%s.matmul", p), *add = ex_name(b, "%s.add", p);
    PP_CHECK(ex_param_normal(b, w, 2, wdims, std));
    PP_CHECK(ex_param_fill(b, bias, 1, &out, 0.0f));
    PP_CHECK(ex_node(b, "MatMul", mm, EX_LIST(x, w), EX_LIST(mm)));
    return ex_node(b, "Add", add, EX_LIST(mm, bias), EX_LIST(y));
}

static pp_status add_transpose(ex_builder *b, const char *x, const char *y, int rank, const int64_t *perm)
{
    PP_CHECK(ex_node(b, "Transpose", y, EX_LIST(x), EX_LIST(y)));
    return pp_graph_set_attr_ints(b->g, b->node, "perm", perm, rank, b->err);
}

/* Causal self-attention of block p on x [B, T, D] -> y [B, T, D]. */
static pp_status add_attention(ex_builder *b, const pp_gpt_config *c, const char *p, const char *x,
                               const char *y)
{
    static const int64_t to_heads[4] = {0, 2, 1, 3}, to_keys_t[4] = {0, 2, 3, 1};
    const int64_t D = c->d_model;
    const char *qkv = ex_name(b, "%s.qkv", p), *qkv_out = ex_name(b, "%s.qkv.out", p);
    const char *split = ex_name(b, "%s.split", p);
    const char *q = ex_name(b, "%s.q", p), *k = ex_name(b, "%s.k", p), *v = ex_name(b, "%s.v", p);
    const char *qh = ex_name(b, "%s.q_heads", p), *kh = ex_name(b, "%s.k_heads", p);
    const char *vh = ex_name(b, "%s.v_heads", p);
    const char *qt = ex_name(b, "%s.q_t", p), *kt = ex_name(b, "%s.k_t", p), *vt = ex_name(b, "%s.v_t", p);
    const char *scores = ex_name(b, "%s.scores", p), *scaled = ex_name(b, "%s.scaled", p);
    const char *masked = ex_name(b, "%s.masked", p), *probs = ex_name(b, "%s.probs", p);
    const char *ctx = ex_name(b, "%s.ctx", p), *ctx_t = ex_name(b, "%s.ctx_t", p);
    const char *merged = ex_name(b, "%s.merged", p), *proj = ex_name(b, "%s.proj", p);

    PP_CHECK(add_linear(b, qkv, x, D, 3 * D, INIT_STD, qkv_out));            /* [B, T, 3D] */
    PP_CHECK(ex_node(b, "Split", split, EX_LIST(qkv_out, "split.qkv"), EX_LIST(q, k, v)));
    PP_CHECK(pp_graph_set_attr_int(b->g, b->node, "axis", 2, b->err));
    const char *const flat[3] = {q, k, v}, *const heads[3] = {qh, kh, vh};
    for (int i = 0; i < 3; i++)                                               /* [B, T, H, D/H] */
        PP_CHECK(ex_node(b, "Reshape", heads[i], EX_LIST(flat[i], "shape.heads"), EX_LIST(heads[i])));
    PP_CHECK(add_transpose(b, qh, qt, 4, to_heads));                         /* [B, H, T, D/H] */
    PP_CHECK(add_transpose(b, kh, kt, 4, to_keys_t));                        /* [B, H, D/H, T] */
    PP_CHECK(add_transpose(b, vh, vt, 4, to_heads));                         /* [B, H, T, D/H] */
    PP_CHECK(ex_node(b, "MatMul", scores, EX_LIST(qt, kt), EX_LIST(scores)));   /* [B, H, T, T] */
    PP_CHECK(ex_node(b, "Mul", scaled, EX_LIST(scores, "const.attn_scale"), EX_LIST(scaled)));
    PP_CHECK(ex_node(b, "Add", masked, EX_LIST(scaled, "const.causal_mask"), EX_LIST(masked)));
    PP_CHECK(ex_node(b, "Softmax", probs, EX_LIST(masked), EX_LIST(probs)));
    PP_CHECK(pp_graph_set_attr_int(b->g, b->node, "axis", -1, b->err));
    PP_CHECK(ex_node(b, "MatMul", ctx, EX_LIST(probs, vt), EX_LIST(ctx)));      /* [B, H, T, D/H] */
    PP_CHECK(add_transpose(b, ctx, ctx_t, 4, to_heads));                       /* [B, T, H, D/H] */
    PP_CHECK(ex_node(b, "Reshape", merged, EX_LIST(ctx_t, "shape.model"), EX_LIST(merged)));
    return add_linear(b, proj, merged, D, D, INIT_STD / sqrt(2.0 * (double)c->layers), y);
}

/* The MLP of block p: y = proj(gelu(fc(x))), x and y [B, T, D], hidden [B, T, 4D],
 * gelu(h) = h · (1 + erf(h / √2)) · 0.5 in PyTorch's export order. */
static pp_status add_mlp(ex_builder *b, const pp_gpt_config *c, const char *p, const char *x,
                         const char *y)
{
    const int64_t D = c->d_model;
    const char *fc = ex_name(b, "%s.fc", p), *h = ex_name(b, "%s.fc.out", p);
    const char *div = ex_name(b, "%s.gelu.div", p), *erf = ex_name(b, "%s.gelu.erf", p);
    const char *add = ex_name(b, "%s.gelu.add", p), *mul = ex_name(b, "%s.gelu.mul", p);
    const char *gelu = ex_name(b, "%s.gelu.out", p), *proj = ex_name(b, "%s.proj", p);
    PP_CHECK(add_linear(b, fc, x, D, 4 * D, INIT_STD, h));
    PP_CHECK(ex_node(b, "Div", div, EX_LIST(h, "const.sqrt2"), EX_LIST(div)));
    PP_CHECK(ex_node(b, "Erf", erf, EX_LIST(div), EX_LIST(erf)));
    PP_CHECK(ex_node(b, "Add", add, EX_LIST(erf, "const.one"), EX_LIST(add)));
    PP_CHECK(ex_node(b, "Mul", mul, EX_LIST(h, add), EX_LIST(mul)));
    PP_CHECK(ex_node(b, "Mul", gelu, EX_LIST(mul, "const.half"), EX_LIST(gelu)));
    return add_linear(b, proj, gelu, 4 * D, D, INIT_STD / sqrt(2.0 * (double)c->layers), y);
}

/* Constants shared by all blocks: scalars and the causal mask as Constant nodes,
 * reshape targets, split sizes and position ids as int64 initializers. */
static pp_status add_constants(ex_builder *b, const pp_gpt_config *c)
{
    const int64_t T = c->seq, D = c->d_model, H = c->heads;
    const float scale = (float)(1.0 / sqrt((double)(D / H)));
    const float sqrt2 = (float)M_SQRT2, one = 1.0f, half = 0.5f, two = 2.0f, eps = LN_EPS;
    PP_CHECK(ex_const_f32(b, "const.attn_scale", 0, NULL, &scale));
    PP_CHECK(ex_const_f32(b, "const.sqrt2", 0, NULL, &sqrt2));
    PP_CHECK(ex_const_f32(b, "const.one", 0, NULL, &one));
    PP_CHECK(ex_const_f32(b, "const.half", 0, NULL, &half));
    if (b->g->opset < 17) {
        PP_CHECK(ex_const_f32(b, "const.two", 0, NULL, &two));
        PP_CHECK(ex_const_f32(b, "const.ln_eps", 0, NULL, &eps));
    }
    /* mask [T, T]: 0 where key j <= query i, -1e9 above the diagonal (exp underflows to 0) */
    float *mask = pp_malloc((size_t)(T * T) * sizeof *mask);
    int64_t *pos = pp_malloc((size_t)T * sizeof *pos);
    pp_status st = PP_OK;
    if (!mask || !pos) {
        st = pp_error_set(b->err, PP_ERR_NOMEM, "out of memory for the causal mask (T = %lld)", (long long)T);
        goto done;
    }
    for (int64_t i = 0; i < T; i++) {
        pos[i] = i;
        for (int64_t j = 0; j < T; j++) mask[i * T + j] = j <= i ? 0.0f : -1e9f;
    }
    const int64_t mdims[2] = {T, T};
    PP_CHECK_GOTO(ex_const_f32(b, "const.causal_mask", 2, mdims, mask), st, done);
    PP_CHECK_GOTO(ex_const_i64(b, "pos_ids", (int)T, pos), st, done);
    PP_CHECK_GOTO(ex_const_i64(b, "split.qkv", 3, (const int64_t[]){D, D, D}), st, done);
    PP_CHECK_GOTO(ex_const_i64(b, "shape.heads", 4, (const int64_t[]){-1, T, H, D / H}), st, done);
    PP_CHECK_GOTO(ex_const_i64(b, "shape.model", 3, (const int64_t[]){-1, T, D}), st, done);
    if (c->with_loss) {
        PP_CHECK_GOTO(ex_const_i64(b, "shape.logits_2d", 2, (const int64_t[]){-1, c->vocab}), st, done);
        PP_CHECK_GOTO(ex_const_i64(b, "shape.labels_1d", 1, (const int64_t[]){-1}), st, done);
    }
done:
    free(mask);
    free(pos);
    return st;
}

static pp_status check_config(const pp_gpt_config *c, pp_error *err)
{
    const struct { const char *name; int64_t v; } dims[] = {
        {"layers", c->layers}, {"d_model", c->d_model}, {"heads", c->heads},
        {"vocab", c->vocab}, {"seq", c->seq},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].v < 1 || dims[i].v > MAX_DIM)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "%s = %lld out of range (1..%lld)",
                                dims[i].name, (long long)dims[i].v, MAX_DIM);
    if (c->d_model % c->heads)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "d_model = %lld is not divisible by heads = %lld",
                            (long long)c->d_model, (long long)c->heads);
    if (c->batch < 0 || c->batch > MAX_DIM)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "batch = %lld out of range (0 for symbolic, or 1..%lld)",
                            (long long)c->batch, MAX_DIM);
    return PP_OK;
}

static pp_status build_gpt(ex_builder *b, const void *cfg)
{
    const pp_gpt_config *c = cfg;
    const int64_t T = c->seq, D = c->d_model, V = c->vocab;
    PP_CHECK(ex_input(b, "input_ids", PP_DTYPE_I64, c->batch, 1, &T));
    if (c->with_loss) PP_CHECK(ex_input(b, "labels", PP_DTYPE_I64, c->batch, 1, &T));
    PP_CHECK(add_constants(b, c));
    PP_CHECK(ex_param_normal(b, "wte.weight", 2, (const int64_t[]){V, D}, INIT_STD));
    PP_CHECK(ex_param_normal(b, "wpe.weight", 2, (const int64_t[]){T, D}, INIT_STD));
    PP_CHECK(ex_node(b, "Gather", "wte", EX_LIST("wte.weight", "input_ids"), EX_LIST("wte.out")));
    PP_CHECK(ex_node(b, "Gather", "wpe", EX_LIST("wpe.weight", "pos_ids"), EX_LIST("wpe.out")));
    PP_CHECK(ex_node(b, "Add", "embed", EX_LIST("wte.out", "wpe.out"), EX_LIST("embed.out")));

    const char *x = "embed.out";                                             /* [B, T, D] */
    for (int64_t l = 0; l < c->layers; l++) {
        const char *ln_1 = ex_name(b, "h.%lld.ln_1", (long long)l);
        const char *ln_1_out = ex_name(b, "h.%lld.ln_1.out", (long long)l);
        const char *attn = ex_name(b, "h.%lld.attn", (long long)l);
        const char *attn_out = ex_name(b, "h.%lld.attn.out", (long long)l);
        const char *res = ex_name(b, "h.%lld.attn.residual", (long long)l);
        const char *ln_2 = ex_name(b, "h.%lld.ln_2", (long long)l);
        const char *ln_2_out = ex_name(b, "h.%lld.ln_2.out", (long long)l);
        const char *mlp = ex_name(b, "h.%lld.mlp", (long long)l);
        const char *mlp_out = ex_name(b, "h.%lld.mlp.out", (long long)l);
        const char *out = ex_name(b, "h.%lld.out", (long long)l);
        PP_CHECK(add_layernorm(b, ln_1, x, D, ln_1_out));
        PP_CHECK(add_attention(b, c, attn, ln_1_out, attn_out));
        PP_CHECK(ex_node(b, "Add", res, EX_LIST(x, attn_out), EX_LIST(res)));
        PP_CHECK(add_layernorm(b, ln_2, res, D, ln_2_out));
        PP_CHECK(add_mlp(b, c, mlp, ln_2_out, mlp_out));
        PP_CHECK(ex_node(b, "Add", out, EX_LIST(res, mlp_out), EX_LIST(out)));
        x = out;
    }
    PP_CHECK(add_layernorm(b, "ln_f", x, D, "ln_f.out"));
    /* LM head tied to the token embedding: logits = ln_f.out · wteᵀ [D, V] */
    PP_CHECK(add_transpose(b, "wte.weight", "lm_head.weight_t", 2, (const int64_t[]){1, 0}));
    PP_CHECK(ex_node(b, "MatMul", "lm_head", EX_LIST("ln_f.out", "lm_head.weight_t"), EX_LIST("logits")));
    PP_CHECK(ex_output(b, "logits", PP_DTYPE_F32, c->batch, 2, (const int64_t[]){T, V}));
    if (!c->with_loss) return PP_OK;
    PP_CHECK(ex_node(b, "Reshape", "loss.logits_2d", EX_LIST("logits", "shape.logits_2d"),
                     EX_LIST("loss.logits_2d")));                            /* [B·T, V] */
    PP_CHECK(ex_node(b, "Reshape", "loss.labels_1d", EX_LIST("labels", "shape.labels_1d"),
                     EX_LIST("loss.labels_1d")));                            /* [B·T] */
    return ex_loss(b, "loss.logits_2d", "loss.labels_1d");
}

pp_status pp_example_gpt(const pp_gpt_config *cfg, pp_graph **out, pp_error *err)
{
    *out = NULL;
    if (check_config(cfg, err) != PP_OK) return pp_error_prefix(err, "example gpt: ");
    return ex_run("gpt", cfg->opset, cfg->seed, build_gpt, cfg, out, err);
}
