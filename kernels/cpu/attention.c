/* Attention (opset 23) on the cpu, per (batch, query head): scores = scale Q K^T (smat.h's
 * products) plus the mask and the causal triangle, softmax by rows (element_nn.h), Y = P V.
 * Forward keeps P [B, Hq, Sq, Skv] in aux; backward runs the softmax chain back to Q, K, V
 * (a kv head shared by several query heads sums their gradients). Under is_causal with
 * Sq = Skv every product skips the triangle the mask zeroes (smat.h's causal forms, as the
 * unfused MatMuls of stage/fuse_causal.c's marks do). Layout: op_args_nn.c. */
#include "cpu_math.h"
#include <onnxpipe/element_nn.h>
#include "nn_util.h"
#include "op_args_nn.h"
#include "smat.h"

#include <math.h>
#include <stdlib.h>

/* head h of tensor t (0 Q, 1 K, 2 V, 3 Y) of batch b as a [S, D] matrix */
static smat head(const pp_attn_args *a, int t, const float *p, int64_t b, int64_t h)
{
    return (smat){(float *)p + b * a->st[t][0] + h * a->st[t][1], 0, (int)a->st[t][2]};
}

/* The triangle of a square causal block that the products may skip. */
static smat_tri tri(const pp_attn_args *a, smat_tri t)
{
    return a->causal && a->sq == a->skv ? t : SMAT_FULL;
}

/* row i of the scores of (b, h) into probabilities, in place: the mask and the causal
 * triangle, then softmax; a row with no key left is all zeros */
static void softmax_row(const pp_attn_args *a, const void *mask, int64_t b, int64_t h, int64_t i, float *s)
{
    const int64_t mo = b * a->mst[0] + h * a->mst[1] + i * a->mst[2];
    for (int64_t j = 0; j < a->skv; j++) {
        const int64_t m = mo + j * a->mst[3];
        if ((a->causal && j > i) || (a->mask == 1 && !((const uint8_t *)mask)[m])) s[j] = -INFINITY;
        else if (a->mask == 2) s[j] += ((const float *)mask)[m];
    }
    const float mx = nn_row_max(s, a->skv, 1);
    if (mx == -INFINITY) {
        for (int64_t j = 0; j < a->skv; j++) s[j] = 0.0f;
        return;
    }
    for (int64_t j = 0; j < a->skv; j++) s[j] = pp_softmax_exp(s[j], mx);
    const float inv = 1.0f / nn_row_sum(s, a->skv, 1);
    for (int64_t j = 0; j < a->skv; j++) s[j] *= inv;
}

PP_AUX(pp_cpu_attention_aux)
{
    return pp_args_attention_aux(c);
}

PP_FWD(pp_cpu_attention_forward)
{
    pp_attn_args a;
    PP_CHECK(pp_args_attention(c, &a, err));
    const float *q = c->in[0].data, *k = c->in[1].data, *v = c->in[2].data;
    const void *mask = a.mask ? c->in[3].data : NULL;
    const int64_t rep = a.hq / a.hkv;
    float *y = c->out[0].data;
    for (int64_t b = 0; b < a.b; b++)
        for (int64_t h = 0; h < a.hq; h++) {
            float *p = (float *)c->aux + (b * a.hq + h) * a.sq * a.skv;
            const smat P = {p, 0, (int)a.skv};
            smat_gemm(tri(&a, SMAT_TRI_Z_LOWER), (int)a.sq, (int)a.skv, (int)a.dk, a.scale, head(&a, 0, q, b, h),
                      smat_t(head(&a, 1, k, b, h / rep)), 0.0f, P);
            for (int64_t i = 0; i < a.sq; i++) softmax_row(&a, mask, b, h, i, p + i * a.skv);
            smat_gemm(tri(&a, SMAT_TRI_X_LOWER), (int)a.sq, (int)a.dv, (int)a.skv, 1.0f, P, head(&a, 2, v, b, h / rep),
                      0.0f, head(&a, 3, y, b, h));
        }
    return PP_OK;
}

PP_BWD(pp_cpu_attention_backward)
{
    pp_attn_args a;
    PP_CHECK(pp_args_attention(c, &a, err));
    const float *q = c->in[0].data, *k = c->in[1].data, *v = c->in[2].data, *dy = grad_out[0].data;
    float *dq = grad_in[0].data, *dk = grad_in[1].data, *dv = grad_in[2].data;
    if (!dy || (!dq && !dk && !dv)) return PP_OK;
    const int64_t rep = a.hq / a.hkv;
    float *ds = malloc((size_t)(a.sq * a.skv) * sizeof(float) + 1);
    if (!ds) return pp_args_fail(c, PP_ERR_NOMEM, err, "no memory for %lld x %lld scores", (long long)a.sq,
                                 (long long)a.skv);
    const smat DS = {ds, 0, (int)a.skv};
    for (int64_t b = 0; b < a.b; b++)
        for (int64_t h = 0; h < a.hq; h++) {
            float *p = (float *)c->aux + (b * a.hq + h) * a.sq * a.skv;
            const smat P = {p, 0, (int)a.skv}, dY = head(&a, 3, dy, b, h);
            if (dv)
                smat_gemm(tri(&a, SMAT_TRI_X_UPPER), (int)a.skv, (int)a.dv, (int)a.sq, 1.0f, smat_t(P), dY, 1.0f,
                          head(&a, 2, dv, b, h / rep));
            if (!dq && !dk) continue;
            /* dP = dY V^T, then dS = P (dP - rowdot(P, dP)) */
            smat_gemm(tri(&a, SMAT_TRI_Z_LOWER), (int)a.sq, (int)a.skv, (int)a.dv, 1.0f, dY,
                      smat_t(head(&a, 2, v, b, h / rep)), 0.0f, DS);
            for (int64_t i = 0; i < a.sq; i++) {
                float *pr = p + i * a.skv, *dr = ds + i * a.skv;
                const float dot = nn_row_dot(pr, dr, a.skv, 1);
                for (int64_t j = 0; j < a.skv; j++) dr[j] = pp_softmax_grad(pr[j], dr[j], dot);
            }
            if (dq)
                smat_gemm(tri(&a, SMAT_TRI_X_LOWER), (int)a.sq, (int)a.dk, (int)a.skv, a.scale, DS,
                          head(&a, 1, k, b, h / rep), 1.0f, head(&a, 0, dq, b, h));
            if (dk)
                smat_gemm(tri(&a, SMAT_TRI_X_UPPER), (int)a.skv, (int)a.dk, (int)a.sq, a.scale, smat_t(DS),
                          head(&a, 0, q, b, h), 1.0f, head(&a, 1, dk, b, h / rep));
        }
    free(ds);
    return PP_OK;
}
