/* Attribute parsing and layout checks of the row normalisations, RotaryEmbedding and
 * Attention, shared by the cpu and cuda kernels (see op_args_nn.h). */
#include "op_args_nn.h"

#include <math.h>
#include <string.h>

static int64_t prod(const int64_t *dims, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= dims[i];
    return p;
}

/* stash_type 1 (float32) only: every kernel here computes in fp32 */
static pp_status want_fp32_stash(const pp_kernel_ctx *c, pp_error *err)
{
    int64_t stash;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "stash_type", 1, &stash, c->node, err));
    if (stash != 1)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "stash_type %lld is not supported (only 1, float32)",
                            (long long)stash);
    return PP_OK;
}

/* SkipLayerNormalization / SkipSimplifiedLayerNormalization (com.microsoft): input + skip of
 * one shape, normalised over the last dim; gamma (and beta) [D]. The bias input (added
 * before the norm) and the mean / inv_std_var outputs are refused: what stage fusion makes
 * has none of them. */
static pp_status skip_norm_args(const pp_kernel_ctx *c, pp_norm_args *a, pp_error *err)
{
    const pp_tensor *x = &c->in[0];
    const int simple = c->op == PP_OP_SKIP_SIMPLIFIED_LAYER_NORMALIZATION, nparams = simple ? 1 : 2;
    PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "epsilon", 1e-12f, &a->eps, c->node, err));
    if (x->rank < 1 || c->nin < 3)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "expected input, skip and gamma, input of rank >= 1");
    a->d = x->dims[x->rank - 1];
    a->m = a->d ? pp_tensor_numel(x) / a->d : 0;
    a->prow = a->pdiv = 1;
    a->center = !simple;
    if (c->in[1].rank != x->rank || memcmp(c->in[1].dims, x->dims, (size_t)x->rank * sizeof x->dims[0]))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "skip must have the input's shape (a broadcast skip is not supported)");
    for (int k = 2; k < 2 + nparams && k < c->nin; k++)
        if (c->in[k].data && pp_tensor_numel(&c->in[k]) != a->d)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "input %d (%s) has %lld elements, expected %lld (the last dim)", k,
                                k == 2 ? "gamma" : "beta", (long long)pp_tensor_numel(&c->in[k]), (long long)a->d);
    if (c->nin > 2 + nparams && c->in[2 + nparams].data)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input %d (bias, added before the norm) is not supported",
                            2 + nparams);
    for (int k = 1; k < 3 && k < c->nout; k++)
        if (c->out[k].data)
            return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "output %d (%s) is not supported", k,
                                k == 1 ? "mean" : "inv_std_var");
    if (c->nout > 3 && c->out[3].data && pp_tensor_numel(&c->out[3]) != pp_tensor_numel(x))
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output 3 (input_skip_bias_sum) has %lld elements, expected %lld",
                            (long long)pp_tensor_numel(&c->out[3]), (long long)pp_tensor_numel(x));
    return PP_OK;
}

pp_status pp_args_norm(const pp_kernel_ctx *c, pp_norm_args *a, pp_error *err)
{
    const pp_tensor *x = &c->in[0];
    int64_t nparams;
    if (c->op == PP_OP_SKIP_LAYER_NORMALIZATION || c->op == PP_OP_SKIP_SIMPLIFIED_LAYER_NORMALIZATION)
        return skip_norm_args(c, a, err);
    PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "epsilon", 1e-5f, &a->eps, c->node, err));
    if (c->op == PP_OP_RMS_NORMALIZATION) {
        int64_t axis;
        int ax;
        PP_CHECK(want_fp32_stash(c, err));
        PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "axis", -1, &axis, c->node, err));
        PP_CHECK(pp_args_axis(c, axis, x->rank, &ax, err));
        a->m = prod(x->dims, 0, ax);
        a->d = prod(x->dims, ax, x->rank);
        a->prow = a->pdiv = 1;
        a->center = 0;
        nparams = a->d;
    } else {
        if (x->rank < 2)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "input X has rank %d, expected [N, C, ...]", x->rank);
        const int64_t C = x->dims[1], S = prod(x->dims, 2, x->rank);
        int64_t G = C;
        if (c->op == PP_OP_GROUP_NORMALIZATION) {
            PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "num_groups", 0, &G, c->node, err));
            if (G <= 0 || C % G)
                return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "num_groups %lld does not divide the %lld channels",
                                    (long long)G, (long long)C);
            PP_CHECK(want_fp32_stash(c, err));
        }
        a->m = x->dims[0] * G;
        a->d = C / G * S;
        a->prow = G;
        /* GroupNormalization-18 has a scale and bias per group, 21 per channel */
        a->pdiv = c->op == PP_OP_GROUP_NORMALIZATION && c->opset < 21 ? a->d : S;
        a->center = 1;
        nparams = G * a->d / a->pdiv;
    }
    for (int k = 1; k < 3 && k < c->nin; k++)
        if (c->in[k].data && pp_tensor_numel(&c->in[k]) != nparams)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "input %d (%s) has %lld elements, expected %lld", k,
                                k == 1 ? "scale" : "B", (long long)pp_tensor_numel(&c->in[k]), (long long)nparams);
    return PP_OK;
}

size_t pp_args_norm_aux(const pp_kernel_ctx *c)
{
    pp_norm_args a;
    return pp_args_norm(c, &a, NULL) == PP_OK ? 2 * (size_t)a.m * sizeof(float) : 0;
}

pp_status pp_args_rope(const pp_kernel_ctx *c, pp_rope_args *a, pp_error *err)
{
    const pp_tensor *x = &c->in[0], *cosc = &c->in[1], *sinc = &c->in[2];
    const pp_tensor *pos = c->nin > 3 && c->in[3].data ? &c->in[3] : NULL;
    int64_t interleaved, heads, rd, hf;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "interleaved", 0, &interleaved, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "hf_caches", 0, &hf, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "num_heads", 0, &heads, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "rotary_embedding_dim", 0, &rd, c->node, err));
    a->interleaved = interleaved != 0;
    a->b = x->dims[0];
    if (x->rank == 4) {
        a->h = x->dims[1], a->s = x->dims[2], a->d = x->dims[3];
        a->ss = a->d, a->sh = a->s * a->d;
    } else if (x->rank == 3) {
        if (heads <= 0 || x->dims[2] % heads)
            return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "a 3-D input needs num_heads dividing its last dim "
                                "%lld (num_heads = %lld)", (long long)x->dims[2], (long long)heads);
        a->h = heads, a->s = x->dims[1], a->d = x->dims[2] / heads;
        a->sh = a->d, a->ss = heads * a->d;
    } else {
        return pp_args_fail(c, PP_ERR_SHAPE, err, "input X has rank %d, expected [B, H, S, D] or [B, S, H * D]",
                            x->rank);
    }
    a->sb = a->h * a->s * a->d;
    a->rd = rd ? rd : a->d;
    if (a->rd > a->d || a->rd % 2)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "rotary_embedding_dim %lld must be even and at most the "
                            "head size %lld", (long long)a->rd, (long long)a->d);
    const int64_t half = a->rd / 2;
    if (!pp_dtype_is_float(cosc->dtype) || !pp_dtype_is_float(sinc->dtype))
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "cos_cache and sin_cache must be floating point (got %s, %s)",
                            pp_dtype_name(cosc->dtype), pp_dtype_name(sinc->dtype));
    if (pos) {
        if (pos->dtype != PP_DTYPE_I64 || pp_tensor_numel(pos) != a->b * a->s)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "position_ids must be int64 [B, S] = [%lld, %lld]",
                                (long long)a->b, (long long)a->s);
        if (cosc->rank != 2 || cosc->dims[1] != half)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "with position_ids the caches must be [max_positions, %lld]",
                                (long long)half);
        a->npos = cosc->dims[0];
        a->crow = half;
    } else if (hf) {
        int lead = cosc->rank >= 2 && cosc->dims[cosc->rank - 2] == a->s && cosc->dims[cosc->rank - 1] == a->rd;
        for (int i = 0; lead && i + 2 < cosc->rank; i++) lead = cosc->dims[i] == 1;
        if (!lead || a->interleaved)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "HF's caches (hf_caches) must be [1, .., 1, S, rd] = [.., %lld, "
                                "%lld], not interleaved", (long long)a->s, (long long)a->rd);
        a->npos = 0, a->cb = 0, a->crow = a->rd;
    } else {
        if (cosc->rank != 3 || cosc->dims[0] != a->b || cosc->dims[1] != a->s || cosc->dims[2] != half)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "without position_ids the caches must be [B, S, rd / 2] = "
                                "[%lld, %lld, %lld]", (long long)a->b, (long long)a->s, (long long)half);
        a->npos = 0, a->cb = a->s, a->crow = half;
    }
    if (pp_tensor_numel(sinc) != pp_tensor_numel(cosc))
        return pp_args_fail(c, PP_ERR_SHAPE, err, "sin_cache and cos_cache differ in shape");
    return PP_OK;
}

/* The strides of (b, h, s) of a 3-D [B, S, H * D] tensor. */
static void bsh_strides(const pp_tensor *t, int64_t heads, int64_t hd, int64_t *st)
{
    st[0] = t->dims[1] * t->dims[2], st[1] = hd, st[2] = heads * hd;
}

static const char *const attn_perms[4] = {"perm_Q", "perm_K", "perm_V", "perm_Y"};

/* The logical [B, H, S, D] dims and (b, h, s) strides of 4-D tensor t (0 Q, 1 K, 2 V, 3 Y).
 * Without its attribute perm_<t> the tensor is that view itself; with it (stage/fuse_attention.c
 * folds the exporters' head Transposes so) an input is stored X with logical dim j = X's dim
 * perm[j], and Y is stored as Transpose(logical, perm): its dim j is logical dim perm[j].
 * D must stay the stored last dim (unit stride). */
static pp_status bhsd_view(const pp_kernel_ctx *c, int t, const pp_tensor *x, int64_t dims[4], int64_t st[3],
                           pp_error *err)
{
    int64_t cst[4], s = 1, perm[4] = {0, 1, 2, 3};
    for (int d = 3; d >= 0; d--) cst[d] = s, s *= x->dims[d];
    const pp_attr *p = pp_attr_find(c->attrs, c->nattrs, attn_perms[t]);
    if (p) {
        unsigned seen = 0;
        for (int j = 0; p->type == PP_ATTR_INTS && p->n == 4 && j < 4; j++)
            if (p->ints[j] >= 0 && p->ints[j] < 4) seen |= 1u << p->ints[j], perm[j] = p->ints[j];
        if (p->type != PP_ATTR_INTS || p->n != 4 || seen != 15u || perm[3] != 3)
            return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "%s must be a permutation of 4 dims that keeps the "
                                "last (head) dim last", attn_perms[t]);
    }
    int64_t lst[4];
    for (int j = 0; j < 4; j++) {
        if (t < 3) dims[j] = x->dims[perm[j]], lst[j] = cst[perm[j]];
        else dims[perm[j]] = x->dims[j], lst[perm[j]] = cst[j];
    }
    for (int j = 0; j < 3; j++) st[j] = lst[j];
    return PP_OK;
}

pp_status pp_args_attention(const pp_kernel_ctx *c, pp_attn_args *a, pp_error *err)
{
    const pp_tensor *q = &c->in[0], *k = &c->in[1], *v = &c->in[2];
    const pp_tensor *mask = c->nin > 3 && c->in[3].data ? &c->in[3] : NULL;
    int64_t causal, qh, kvh, mode;
    float softcap;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "is_causal", 0, &causal, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "q_num_heads", 0, &qh, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "kv_num_heads", 0, &kvh, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "qk_matmul_output_mode", 0, &mode, c->node, err));
    PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "softcap", 0.f, &softcap, c->node, err));
    if (softcap != 0.f)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "softcap %g is not supported (only 0)", (double)softcap);
    if (mode != 0)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "qk_matmul_output_mode %lld is not supported (only 0)",
                            (long long)mode);
    if ((c->nin > 4 && c->in[4].data) || (c->nin > 5 && c->in[5].data))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "past_key / past_value (a KV cache) are not supported: "
                            "export the model without a cache for training");
    for (int o = 1; o < c->nout; o++)
        if (c->out[o].data)
            return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "output %d (present_key, present_value, "
                                "qk_matmul_output) is not supported: only Y", o);
    if (q->rank != k->rank || q->rank != v->rank || (q->rank != 4 && q->rank != 3))
        return pp_args_fail(c, PP_ERR_SHAPE, err, "Q, K, V have ranks %d, %d, %d, expected all 4 ([B, H, S, D]) "
                            "or all 3 ([B, S, H * D])", q->rank, k->rank, v->rank);
    a->b = q->dims[0];
    if (q->rank == 4) {
        int64_t d[4][4];
        const pp_tensor *x[4] = {q, k, v, &c->out[0]};
        if (c->out[0].rank != 4)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "4-D Q, K, V need a 4-D output Y (got rank %d)", c->out[0].rank);
        for (int t = 0; t < 4; t++) PP_CHECK(bhsd_view(c, t, x[t], d[t], a->st[t], err));
        a->b = d[0][0], a->hq = d[0][1], a->sq = d[0][2], a->dk = d[0][3];
        a->hkv = d[1][1], a->skv = d[1][2], a->dv = d[2][3];
        if (d[1][0] != a->b || d[2][0] != a->b || d[1][3] != a->dk || d[2][1] != a->hkv || d[2][2] != a->skv)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "K [B, Hkv, Skv, Dk] and V [B, Hkv, Skv, Dv] do not fit Q "
                                "[B, Hq, Sq, Dk] (after the %s, %s, %s of their layouts)", attn_perms[0],
                                attn_perms[1], attn_perms[2]);
        if (d[3][0] != a->b || d[3][1] != a->hq || d[3][2] != a->sq || d[3][3] != a->dv)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "output Y is not [B, Hq, Sq, Dv] (after perm_Y)");
    } else {
        if (qh <= 0 || kvh <= 0 || q->dims[2] % qh || k->dims[2] % kvh || v->dims[2] % kvh)
            return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "3-D Q, K, V need q_num_heads and kv_num_heads that "
                                "divide their last dims (%lld, %lld)", (long long)qh, (long long)kvh);
        a->hq = qh, a->sq = q->dims[1], a->dk = q->dims[2] / qh;
        a->hkv = kvh, a->skv = k->dims[1], a->dv = v->dims[2] / kvh;
        if (k->dims[2] / kvh != a->dk || v->dims[1] != a->skv)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "K and V do not fit Q (head sizes or sequence lengths)");
        bsh_strides(q, a->hq, a->dk, a->st[0]);
        bsh_strides(k, a->hkv, a->dk, a->st[1]);
        bsh_strides(v, a->hkv, a->dv, a->st[2]);
        bsh_strides(&c->out[0], a->hq, a->dv, a->st[3]);
    }
    if ((q->rank == 3 && (k->dims[0] != a->b || v->dims[0] != a->b)) || a->hkv <= 0 || a->hq % a->hkv)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "batch sizes differ, or kv heads %lld do not divide q heads %lld",
                            (long long)a->hkv, (long long)a->hq);
    if (pp_tensor_numel(&c->out[0]) != a->b * a->hq * a->sq * a->dv)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output Y has %lld elements, expected B * Hq * Sq * Dv = %lld",
                            (long long)pp_tensor_numel(&c->out[0]), (long long)(a->b * a->hq * a->sq * a->dv));
    a->causal = causal != 0;
    a->scale = 1.f / sqrtf((float)a->dk);
    const pp_attr *sa = pp_attr_find(c->attrs, c->nattrs, "scale");
    if (sa) PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "scale", 0.f, &a->scale, c->node, err));
    a->mask = 0;
    for (int d = 0; d < 4; d++) a->mst[d] = 0;
    if (mask) {
        if (mask->dtype != PP_DTYPE_BOOL && mask->dtype != PP_DTYPE_F32)
            return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "attn_mask has dtype %s, expected bool or float32",
                                pp_dtype_name(mask->dtype));
        const int64_t full[4] = {a->b, a->hq, a->sq, a->skv};
        if (mask->rank > 4 || mask->rank < 1)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "attn_mask has rank %d, expected 1 to 4", mask->rank);
        int64_t st = 1;
        for (int d = mask->rank - 1; d >= 0; d--) {
            const int fd = 4 - mask->rank + d;
            const int64_t n = mask->dims[d];
            if (n != 1 && n != full[fd])
                return pp_args_fail(c, PP_ERR_SHAPE, err, "attn_mask dim %d is %lld, which does not broadcast to "
                                    "%lld (a mask shorter than the keys is not supported)", d, (long long)n,
                                    (long long)full[fd]);
            a->mst[fd] = n == 1 ? 0 : st;
            st *= n;
        }
        a->mask = mask->dtype == PP_DTYPE_BOOL ? 1 : 2;
    }
    return PP_OK;
}

size_t pp_args_attention_aux(const pp_kernel_ctx *c)
{
    pp_attn_args a;
    return pp_args_attention(c, &a, NULL) == PP_OK ? (size_t)(a.b * a.hq * a.sq * a.skv) * sizeof(float) : 0;
}
