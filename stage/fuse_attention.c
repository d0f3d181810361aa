/* Attention as the exporters write it, Q K^T (a MatMul), times a scale (Mul or Div by a constant),
 * plus a mask (Add), Softmax over the keys, then P V (a MatMul, the probabilities maybe through a
 * Cast or Dropout 0 that became views), becomes one Attention op (opset 23) where the stage's
 * options and the device's kernel say so (pp_stage_options.fused_attention). A pass of stage_fuse
 * (fuse.c). */
#include "stage_fuse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/op_info.h>

/* Every permutation of 4 dims, for the attributes this file makes (perm_K is a composition). */
static const int64_t perms4[24][4] = {
    {0, 1, 2, 3}, {0, 1, 3, 2}, {0, 2, 1, 3}, {0, 2, 3, 1}, {0, 3, 1, 2}, {0, 3, 2, 1}, {1, 0, 2, 3}, {1, 0, 3, 2},
    {1, 2, 0, 3}, {1, 2, 3, 0}, {1, 3, 0, 2}, {1, 3, 2, 0}, {2, 0, 1, 3}, {2, 0, 3, 1}, {2, 1, 0, 3}, {2, 1, 3, 0},
    {2, 3, 0, 1}, {2, 3, 1, 0}, {3, 0, 1, 2}, {3, 0, 2, 1}, {3, 1, 0, 2}, {3, 1, 2, 0}, {3, 2, 0, 1}, {3, 2, 1, 0}};

static const int64_t *perm4(const int64_t p[4])
{
    for (int i = 0; i < 24; i++)
        if (!memcmp(perms4[i], p, sizeof perms4[i])) return perms4[i];
    return NULL;
}

/* One attention chain: the ops that go, the op that becomes Attention, its tensors. */
typedef struct attn_match {
    int gone[14], ngone;
    int unrepeated;             /* K and V read without HF's repeat_kv (its Expands gone) */
    int last;                   /* the chain's last op (P V or the output's Transpose) */
    int t[4];                   /* Q, K, V as stored, Y */
    const int64_t *perm[4];     /* perm_Q / _K / _V / _Y (op_args_nn.c), NULL: the tensor is [B, H, S, D] */
    int mask;                   /* additive float mask, or -1 */
    int causal;
    float scale;
} attn_match;

/* The explicit rank-4 perm of Transpose op o (that keeps the last dim last, with last), else NULL. */
static const int64_t *head_perm(const stage_op *o, int last)
{
    if (o->op != PP_OP_TRANSPOSE || o->nin != 1 || o->nout != 1 || o->in[0] < 0 || o->out[0] < 0) return NULL;
    const pp_attr *a = pp_attr_find(o->attrs, o->nattrs, "perm");
    return a && a->type == PP_ATTR_INTS && a->n == 4 && (!last || a->ints[3] == 3) ? perm4(a->ints) : NULL;
}

/* Operand t of MatMul op mm: when a Transpose of the heads (head_perm, keeping the last dim
 * last with `last`) makes it for mm alone, its input and perm, that Transpose going; else t. */
static int fold_operand(const pp_stage *s, const int *op_of_node, const char *gone, int mm, int t, int last,
                        attn_match *m, const int64_t **perm)
{
    const int p = stage_producer(s, op_of_node, gone, t);
    *perm = p >= 0 ? head_perm(&s->ops[p], last) : NULL;
    if (!*perm || stage_only_reader(s, op_of_node, t, PP_OP_MATMUL) != mm) {
        *perm = NULL;
        return t;
    }
    m->gone[m->ngone++] = p;
    return s->ops[p].in[0];
}

/* HF's repeat_kv, K or V [B, Hkv, S, D] -> Unsqueeze(2) -> Expand [B, Hkv, rep, S, D] -> Reshape
 * [B, Hkv rep, S, D], both reshapes views by now: when t is that Reshape, read for the product
 * alone, the Expand goes and the Attention takes the kv heads themselves (grouped-query: the
 * kernels sum the gradients of the query heads sharing one, as the Expand's backward did);
 * else t. */
static int unrepeat(const pp_stage *s, const int *op_of_node, const char *gone, int t, attn_match *m)
{
    const int e = stage_base(s, t), ex = stage_producer(s, op_of_node, gone, e);
    if (e == t || ex < 0 || s->ops[ex].op != PP_OP_EXPAND || s->ops[ex].in[0] < 0 || s->t[e].value < 0) return t;
    const pp_value *ve = &s->g->values[s->t[e].value], *vt = &s->g->values[s->t[t].value];
    const int x = s->ops[ex].in[0], k = stage_base(s, x);
    const tslot *te = &s->t[e], *tx = &s->t[x], *tk = &s->t[k], *tt = &s->t[t];
    if (ve->nconsumers != 1 || ve->is_output || vt->nconsumers != 1 || vt->is_output || te->rank != 5 ||
        tx->rank != 5 || tx->dims[2] != 1 || tk->rank != 4 || tt->rank != 4 || tk->dtype != PP_DTYPE_F32)
        return t;
    const int64_t want[5] = {tk->dims[0], tk->dims[1], te->dims[2], tk->dims[2], tk->dims[3]};
    for (int d = 0; d < 5; d++)
        if (te->dims[d] != want[d] || (d != 2 && tx->dims[d] != want[d])) return t;
    if (tt->dims[0] != want[0] || tt->dims[1] != want[1] * want[2] || tt->dims[2] != want[3] || tt->dims[3] != want[4])
        return t;
    m->gone[m->ngone++] = ex;
    m->unrepeated++;
    return k;
}

/* Whether float tslot b broadcasts (numpy) onto the scores [B, H, Sq, Skv]. */
static int fits_scores(const tslot *b, const tslot *sc)
{
    if (b->dtype != PP_DTYPE_F32 || b->rank < 1 || b->rank > 4) return 0;
    for (int d = 1; d <= b->rank; d++)
        if (b->dims[b->rank - d] != 1 && b->dims[b->rank - d] != sc->dims[4 - d]) return 0;
    return 1;
}

/* The Attention op's mask carries no gradient: a mask that a trained parameter reaches (through
 * the producers of its value, walked back) keeps the chain. */
static int mask_is_data(const pp_stage *s, int t)
{
    const pp_graph *g = s->g;
    char *seen = calloc((size_t)g->nvalues + 1, 1);
    int *todo = malloc(((size_t)g->nvalues + 1) * sizeof *todo), n = 0, found = 0;
    if (!seen || !todo || s->t[t].value < 0) found = 1;   /* out of memory: keep the chain */
    else seen[todo[n++] = s->t[t].value] = 1;
    while (n && !found) {
        const int v = todo[--n], node = g->values[v].producer;
        found = g->values[v].is_param;
        for (int i = 0; node >= 0 && i < g->nodes[node].ninputs; i++) {
            const int u = g->nodes[node].inputs[i];
            if (u >= 0 && !seen[u]) seen[todo[n++] = u] = 1;
        }
    }
    free(seen);
    free(todo);
    return !found;
}

/* Whether constant causal mask t [.., T, T] is 0 on and below its diagonal: causal alone. */
static int causal_only(const pp_stage *s, int t, int64_t T)
{
    const float *v = stage_const_matrix(s, t, T, T);
    for (int64_t i = 0; v && i < T; i++)
        for (int64_t j = 0; j <= i; j++)
            if (v[i * T + j] != 0.f) return 0;
    return v != NULL;
}

/* If op o is the scores' MatMul of an attention chain (a cpu MatMul may have taken its scale
 * and mask already: fuse_epilogue.c's MatMul alpha and bias), fills m; else returns 0. */
static int match(const pp_stage *s, const int *op_of_node, const char *gone, int o, attn_match *m)
{
    const stage_op *mm = &s->ops[o];
    memset(m, 0, sizeof *m);
    m->mask = -1;
    m->scale = 1.f;
    if (mm->op != PP_OP_MATMUL || mm->nattrs || mm->nout != 1 || mm->out[0] < 0 || mm->nin < 2 || mm->in[0] < 0 ||
        mm->in[1] < 0 || mm->in[0] == mm->in[1] || s->t[mm->out[0]].rank != 4)
        return 0;
    const tslot *sc = &s->t[mm->out[0]];
    int cur = mm->out[0];
    m->gone[m->ngone++] = o;
    const int has_scale = mm->nin == 4 && mm->in[3] >= 0;
    if (has_scale && !stage_scalar_const(s, mm->in[3], &m->scale)) return 0;
    if (mm->nin >= 3 && mm->in[2] >= 0) {
        if (!fits_scores(&s->t[mm->in[2]], sc)) return 0;
        m->mask = mm->in[2];
    }
    int r = has_scale || m->mask >= 0 ? -1 : stage_only_reader(s, op_of_node, cur, PP_OP_MUL);
    if (r < 0 && !has_scale && m->mask < 0) r = stage_only_reader(s, op_of_node, cur, PP_OP_DIV);
    float f;
    if (r >= 0 && stage_scalar_const(s, stage_other_input(&s->ops[r], cur), &f) && s->ops[r].out[0] >= 0 &&
        (s->ops[r].op == PP_OP_MUL || (s->ops[r].in[0] == cur && f != 0.f))) {
        m->scale = s->ops[r].op == PP_OP_MUL ? f : 1.f / f;
        m->gone[m->ngone++] = r;
        cur = s->ops[r].out[0];
    }
    if (m->mask < 0 && (r = stage_only_reader(s, op_of_node, cur, PP_OP_ADD)) >= 0 && s->ops[r].out[0] >= 0) {
        const int b = stage_other_input(&s->ops[r], cur);
        if (b < 0 || b == cur || !fits_scores(&s->t[b], sc)) return 0;
        m->mask = b;
        m->gone[m->ngone++] = r;
        cur = s->ops[r].out[0];
    }
    const int sm = stage_only_reader(s, op_of_node, cur, PP_OP_SOFTMAX);
    int64_t axis;
    if (sm < 0 || s->ops[sm].out[0] < 0 || s->ops[sm].nattrs > 1 ||
        pp_attr_int(s->ops[sm].attrs, s->ops[sm].nattrs, "axis", s->g->opset >= 13 ? -1 : 1, &axis, NULL, NULL) ||
        (axis != -1 && axis != 3))
        return 0;
    m->gone[m->ngone++] = sm;
    const int p = s->ops[sm].out[0], pv = stage_only_reader_via_views(s, gone, p, PP_OP_MATMUL);
    if (pv < 0 || s->ops[pv].nattrs || s->ops[pv].nin != 2 || s->ops[pv].out[0] < 0 ||
        stage_base(s, s->ops[pv].in[0]) != p || stage_base(s, s->ops[pv].in[1]) == p)
        return 0;
    m->t[0] = fold_operand(s, op_of_node, gone, o, mm->in[0], 1, m, &m->perm[0]);
    /* K^T = Transpose(k, p): K's dim j is k's dim p[j] with K^T's last two dims swapped back */
    const int64_t *pt;
    m->t[1] = fold_operand(s, op_of_node, gone, o, mm->in[1], 0, m, &pt);
    if (!pt) return 0;   /* a K^T stored as such reads K with a strided head dim */
    m->perm[1] = perm4((const int64_t[4]){pt[0], pt[1], pt[3], pt[2]});
    if (!m->perm[1] || m->perm[1][3] != 3) return 0;
    if (m->perm[1] == perms4[0]) m->perm[1] = NULL;
    m->t[2] = fold_operand(s, op_of_node, gone, pv, s->ops[pv].in[1], 1, m, &m->perm[2]);
    for (int i = 1; i < 3; i++)
        if (!m->perm[i]) m->t[i] = unrepeat(s, op_of_node, gone, m->t[i], m);
    m->last = pv;
    m->t[3] = s->ops[pv].out[0];
    const int ty = stage_only_reader(s, op_of_node, m->t[3], PP_OP_TRANSPOSE);
    if (ty >= 0 && (m->perm[3] = head_perm(&s->ops[ty], 1))) {
        m->gone[m->ngone++] = pv;
        m->last = ty;
        m->t[3] = s->ops[ty].out[0];
    }
    for (int i = 0; i < 4; i++)
        if (s->t[m->t[i]].rank != 4 || s->t[m->t[i]].dtype != PP_DTYPE_F32) return 0;
    if (m->mask >= 0 && !mask_is_data(s, m->mask)) return 0;
    const int64_t T = sc->dims[3];
    m->causal = m->mask >= 0 && sc->dims[2] == T && stage_causal_mask(s, m->mask, T);
    if (m->causal && causal_only(s, m->mask, T)) m->mask = -1;
    return 1;
}

/* The attributes of m's Attention op, into attrs (6 at most); returns how many. */
static int attrs_of(const attn_match *m, pp_attr *attrs)
{
    static const char *const names[4] = {"perm_Q", "perm_K", "perm_V", "perm_Y"};
    int n = 0;
    attrs[n++] = (pp_attr){.name = "scale", .type = PP_ATTR_FLOAT, .f = m->scale};
    if (m->causal) attrs[n++] = (pp_attr){.name = "is_causal", .type = PP_ATTR_INT, .i = 1};
    for (int i = 0; i < 4; i++)
        if (m->perm[i]) attrs[n++] = (pp_attr){.name = names[i], .type = PP_ATTR_INTS, .n = 4, .ints = m->perm[i]};
    return n;
}

/* Whether kernel k takes m's Attention call (pp_kernel.prepare) with 16-bit tensors under lp;
 * else the reason in *err. */
static pp_status check_kernel(pp_stage *s, const pp_kernel *k, const attn_match *m, pp_dtype lp, pp_error *err)
{
    if (!k->prepare) return PP_OK;
    pp_attr attrs[6];
    pp_tensor in[4], out;
    const int ts[5] = {m->t[0], m->t[1], m->t[2], m->mask, m->t[3]};
    for (int i = 0; i < 5; i++) {
        pp_tensor *x = i < 4 ? &in[i] : &out;
        memset(x, 0, sizeof *x);
        if (ts[i] < 0) continue;
        const tslot *t = &s->t[ts[i]];
        x->dtype = i == 3 ? t->dtype : lp;
        x->rank = t->rank;
        memcpy(x->dims, t->dims, sizeof x->dims);
        x->data = (void *)&s->t[ts[i]];   /* a placeholder: prepare reads no data */
    }
    pp_kernel_ctx c = {.node = s->ops[m->last].name, .op = PP_OP_ATTENTION, .op_type = "Attention",
                       .opset = s->g->opset, .attrs = attrs, .nattrs = attrs_of(m, attrs), .in = in,
                       .nin = m->mask >= 0 ? 4 : 3, .out = &out, .nout = 1, .dev = s->dev, .training = s->opt.training};
    return k->prepare(&c, err);
}

/* m's last op becomes the Attention op (run by k), the others go. Its inputs are all defined
 * before it: Q, K and the mask before the scores' MatMul, V before P V. */
static pp_status rewrite(pp_stage *s, const pp_kernel *k, const attn_match *m, char *gone, pp_error *err)
{
    stage_op *op = &s->ops[m->last];
    int *in = realloc(op->in, 4 * sizeof *in);
    if (in) op->in = in;
    const void **host_in = realloc(op->host_in, 4 * sizeof *host_in);
    if (host_in) op->host_in = host_in;
    if (!in || !host_in) return pp_error_set(err, PP_ERR_NOMEM, "out of memory fusing attention");
    pp_log(PP_LOG_DEBUG, "stage: fused attention '%s' .. '%s'%s into one Attention", s->ops[m->gone[0]].name,
           op->name, m->unrepeated ? " (grouped-query heads: repeat_kv's Expands dropped)" : "");
    const int q = m->t[0];
    stage_op_become(op, PP_OP_ATTENTION, k);
    pp_attr attrs[6];
    const int n = attrs_of(m, attrs);
    for (int i = 0; i < n; i++) stage_fold_attr(op, attrs[i]);
    op->nin = m->mask >= 0 ? 4 : 3;
    for (int i = 0; i < 4; i++) {
        op->in[i] = i < 3 ? m->t[i] : m->mask;
        op->host_in[i] = NULL;
    }
    if (m->mask >= 0 && s->t[m->mask].value >= 0) {
        const pp_const_tensor *c = pp_graph_const(s->g, s->t[m->mask].value);
        op->host_in[3] = c ? c->data : NULL;
    }
    op->out[0] = m->t[3];
    for (int i = 0; i < m->ngone; i++) {
        stage_op *g = &s->ops[m->gone[i]];
        if (g == op) continue;
        s->t[g->out[0]].view_of = q;   /* unused from now on */
        gone[m->gone[i]] = 1;
    }
    return PP_OK;
}

pp_status stage_fuse_attention(fuse_ctx *f, pp_error *err)
{
    pp_stage *s = f->s;
    const int *op_of_node = f->op_of_node;
    char *gone = f->gone;
    const pp_fused_attention when = s->opt.fused_attention;
    const pp_dtype lp = s->opt.precision == PP_DTYPE_BF16 || s->opt.precision == PP_DTYPE_F16 ? s->opt.precision
                                                                                             : PP_DTYPE_F32;
    const pp_device_kind kind = pp_device_get_kind(s->dev);
    const pp_kernel *k = pp_kernel_find(PP_OP_ATTENTION, kind, PP_DTYPE_F32), *run = pp_kernel_find(PP_OP_ATTENTION, kind, lp);
    if (when == PP_FUSED_ATTENTION_OFF || !k || !run ||
        (when == PP_FUSED_ATTENTION_AUTO && !(run->caps & PP_KCAP_ATTENTION_FUSED)))
        return PP_OK;
    int fused = 0, refused = 0;
    for (int o = 0; o < s->nops; o++) {
        attn_match m;
        if (gone[o] || !match(s, op_of_node, gone, o, &m)) continue;
        pp_error why = {0};
        if (check_kernel(s, run, &m, lp, &why) != PP_OK) {
            pp_log(refused++ ? PP_LOG_DEBUG : PP_LOG_INFO, "stage: attention '%s' .. '%s' stays unfused: %s",
                   s->ops[o].name, s->ops[m.last].name, why.msg);
            continue;
        }
        PP_CHECK(rewrite(s, k, &m, gone, err));
        fused++;
    }
    if (fused || refused)
        pp_log(PP_LOG_INFO, "stage: %d attention blocks fused into Attention ops (%s kernel, %s), %d left unfused",
               fused, pp_device_kind_name(kind), pp_dtype_name(lp), refused);
    return PP_OK;
}
