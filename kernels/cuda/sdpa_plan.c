/* The tensors of cuDNN's fused attention from an Attention call's layout, what cuDNN's flash
 * kernels take, and backward's workspace (sdpa_plan.h); plain C, in every build. */
#include "sdpa_plan.h"

#include <string.h>

static pp_cu_sdpa_tensor tensor(long long d0, long long d1, long long d2, long long d3, long long s0, long long s1,
                                long long s2, long long s3)
{
    return (pp_cu_sdpa_tensor){{d0, d1, d2, d3}, {s0, s1, s2, s3}};
}

/* [d0, d1, d2, d3] packed */
static pp_cu_sdpa_tensor packed(long long d0, long long d1, long long d2, long long d3)
{
    return tensor(d0, d1, d2, d3, d1 * d2 * d3, d2 * d3, d3, 1);
}

static int cudnn_type(pp_dtype t)
{
    return t == PP_DTYPE_BF16 ? PP_CUDNN_DATA_BFLOAT16 : t == PP_DTYPE_F16 ? PP_CUDNN_DATA_HALF : PP_CUDNN_DATA_FLOAT;
}

static pp_status refuse(pp_error *err, const char *node, const char *what)
{
    return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' (Attention): cuDNN's fused attention does not take %s",
                        node ? node : "?", what);
}

pp_status pp_cu_sdpa_plan(pp_cu_sdpa *p, const pp_attn_args *a, pp_dtype io, pp_dtype mask, int backward,
                          const char *node, pp_error *err)
{
    memset(p, 0, sizeof *p);
    if (io != PP_DTYPE_BF16 && io != PP_DTYPE_F16) return refuse(err, node, "float32 (only bfloat16 and float16)");
    if (a->dk % 8 || a->dv % 8 || a->dk > 128 || a->dv > 128)
        return refuse(err, node, "head dims that are not multiples of 8 up to 128");
    if (a->sq == 1 && a->skv == 1) return refuse(err, node, "one query and one key");
    for (int t = 0; t < 4; t++)
        for (int d = 0; d < 3; d++)
            if (a->st[t][d] % 8)
                return refuse(err, node, "rows that are not 16-byte aligned (a stride not a multiple of 8 elements)");
    if (a->mask == 1) return refuse(err, node, "a bool mask (only an additive float mask)");
    if (a->mask == 2 && (!a->mst[2] || a->mst[3] != 1))
        return refuse(err, node, "a mask broadcast over the queries or keys (it needs [.., Sq, Skv])");
    p->b = a->b, p->hq = a->hq, p->hkv = a->hkv, p->sq = a->sq, p->skv = a->skv, p->dk = a->dk, p->dv = a->dv;
    p->dtype = cudnn_type(io);
    p->causal = a->causal;
    p->scale = a->scale;
    p->backward = backward;
    const int64_t(*s)[3] = a->st;
    p->t[PP_SDPA_Q] = tensor(a->b, a->hq, a->sq, a->dk, s[0][0], s[0][1], s[0][2], 1);
    p->t[PP_SDPA_K] = tensor(a->b, a->hkv, a->skv, a->dk, s[1][0], s[1][1], s[1][2], 1);
    p->t[PP_SDPA_V] = tensor(a->b, a->hkv, a->skv, a->dv, s[2][0], s[2][1], s[2][2], 1);
    p->t[PP_SDPA_KT] = tensor(a->b, a->hkv, a->dk, a->skv, s[1][0], s[1][1], 1, s[1][2]);
    p->t[PP_SDPA_VT] = tensor(a->b, a->hkv, a->dv, a->skv, s[2][0], s[2][1], 1, s[2][2]);
    p->t[PP_SDPA_O] = tensor(a->b, a->hq, a->sq, a->dv, s[3][0], s[3][1], s[3][2], 1);
    p->t[PP_SDPA_STATS] = packed(a->b, a->hq, a->sq, 1);
    if (a->mask == 2) {   /* a broadcast dim is 1 (its stride then that of a packed tensor) */
        const long long full[4] = {a->b, a->hq, a->sq, a->skv};
        long long dims[4], st[4], next = 1;
        for (int d = 3; d >= 0; d--) {
            dims[d] = a->mst[d] ? full[d] : 1;
            st[d] = a->mst[d] ? a->mst[d] : next;
            next = st[d] * dims[d];
        }
        p->t[PP_SDPA_BIAS] = tensor(dims[0], dims[1], dims[2], dims[3], st[0], st[1], st[2], st[3]);
        p->has_bias = 1;
        p->bias_dtype = cudnn_type(mask);
    }
    if (backward) {
        p->t[PP_SDPA_DO] = p->t[PP_SDPA_O];
        p->t[PP_SDPA_DQ] = p->t[PP_SDPA_Q];
        p->t[PP_SDPA_DK] = p->t[PP_SDPA_K];
        p->t[PP_SDPA_DV] = p->t[PP_SDPA_V];
        p->t[PP_SDPA_SUM] = packed(a->b, a->hq, a->sq, 1);
        p->t[PP_SDPA_DQ_ACCUM] = packed(a->b, a->hq, a->sq, a->dk);
    }
    return PP_OK;
}

size_t pp_cu_sdpa_stats_bytes(const pp_cu_sdpa *p)
{
    return (size_t)(p->b * p->hq * p->sq) * sizeof(float);
}

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

void pp_cu_sdpa_bwd_ws(const pp_cu_sdpa *p, size_t plan_bytes, unsigned temps, pp_cu_sdpa_ws *w)
{
    memset(w, 0, sizeof *w);
    const long long elems[3] = {p->b * p->hq * p->sq * p->dk, p->b * p->hkv * p->skv * p->dk,
                                p->b * p->hkv * p->skv * p->dv};
    size_t at = align256(plan_bytes);
    w->sum_at = at;
    at = align256(at + pp_cu_sdpa_stats_bytes(p));
    w->accum_at = at;
    w->accum_bytes = (size_t)elems[0] * sizeof(float);
    at = align256(at + w->accum_bytes);
    for (int i = 0; i < 3; i++)
        if (temps & (1u << i)) {
            w->tmp_at[i] = at;
            at = align256(at + (size_t)elems[i] * 2);
        }
    w->bytes = at;
}
