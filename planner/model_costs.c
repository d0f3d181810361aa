/* What the planner reads of a model: its nodes' FLOPs and output bytes at microbatch 1
 * and 2 (so any microbatch is a line through them), per-(microbatch, precision) prefix
 * sums of node seconds under the cost model, and per stage count S the split training
 * would make (params balance) with each stage's parameters, stash and sends. Shapes only:
 * no weight is read. */
#include "planner_internal.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>

void plan_model_free(plan_model *m)
{
    pp_graph_destroy(m->g1);
    pp_graph_destroy(m->g2);
    free(m->types);
    free(m->type_of);
    free(m->f1);
    free(m->f2);
    free(m->b1);
    free(m->b2);
    free(m->keep);
    free(m->own);
    double *arrays[] = {m->p_own, m->p_own_bytes, m->p_act1, m->p_act2, m->p_keep1, m->p_keep2, m->cut1, m->cut2};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) free(arrays[k]);
    for (int i = 0; i < m->ngin; i++) free(m->gin[i].pos);
    for (int i = 0; i < m->ntied; i++) free(m->tied[i].pos);
    free(m->gin);
    free(m->tied);
    memset(m, 0, sizeof *m);
}

static pp_status load_at(const plan_model *m, int64_t mb, pp_graph **g, pp_error *err)
{
    pp_graph_options go = m->gopt;
    go.batch = mb;
    return pp_graph_load(m->path, &go, g, err);
}

static int cmp_int(const void *a, const void *b)
{
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* The distinct sorted reader positions of value v into mu; 0 on no memory. */
static int readers(const pp_graph *g, int v, struct plan_multi *mu)
{
    const pp_value *val = &g->values[v];
    mu->pos = pp_calloc((size_t)val->nconsumers + 1, sizeof *mu->pos);
    if (!mu->pos) return 0;
    for (int k = 0; k < val->nconsumers; k++) mu->pos[k] = val->consumers[k];
    qsort(mu->pos, (size_t)val->nconsumers, sizeof *mu->pos, cmp_int);
    int n = 0;
    for (int k = 0; k < val->nconsumers; k++)
        if (!n || mu->pos[n - 1] != mu->pos[k]) mu->pos[n++] = mu->pos[k];
    mu->npos = n;
    return 1;
}

/* Bytes of value v per microbatch (0 when unknown). */
static double vbytes(const pp_graph *g, int v)
{
    const pp_value *val = &g->values[v];
    int64_t n = pp_shape_numel(&val->shape);
    return n > 0 ? (double)n * (double)pp_dtype_size(val->dtype) : 0;
}

/* Bytes crossing a cut after node i, for every i: an activation counts from its producer
 * up to its last reader (the partitioner's cut costs, relayed skips included). */
static void cut_bytes(const pp_graph *g, double *cut)
{
    int n = g->nnodes;
    for (int i = 0; i < n; i++) cut[i] = 0;
    for (int v = 0; v < g->nvalues; v++) {
        const int from = g->values[v].producer, last = pp_value_last_reader(g, v);
        if (last == from) continue;   /* not made here (-1), or read by no later node */
        double b = vbytes(g, v);
        cut[from] += b;
        cut[last] -= b;
    }
    for (int i = 1; i < n; i++) cut[i] += cut[i - 1];
}

/* Prefix sums and per-value lists the splits are read from. */
static pp_status node_arrays(plan_model *m, const pp_node_cost *c1, pp_error *err)
{
    int n = m->n;
    const pp_graph *g1 = m->g1, *g2 = m->g2;
    double **arrays[] = {&m->p_own, &m->p_own_bytes, &m->p_act1, &m->p_act2, &m->p_keep1, &m->p_keep2, &m->cut1,
                         &m->cut2};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++)
        if (!(*arrays[k] = pp_calloc((size_t)n + 1, sizeof **arrays[k]))) return PP_NOMEM(err);
    if (!(m->own = pp_calloc((size_t)n + 1, sizeof *m->own))) return PP_NOMEM(err);
    for (int i = 0; i < n; i++) {
        m->own[i] = c1[i].params;
        m->p_own[i + 1] = m->p_own[i] + (double)c1[i].params;
        m->p_own_bytes[i + 1] = m->p_own_bytes[i] + (double)c1[i].param_bytes;
        m->p_act1[i + 1] = m->p_act1[i] + m->b1[i];
        m->p_act2[i + 1] = m->p_act2[i] + m->b2[i];
        m->p_keep1[i + 1] = m->p_keep1[i] + (m->keep[i] ? m->b1[i] : 0);
        m->p_keep2[i + 1] = m->p_keep2[i] + (m->keep[i] ? m->b2[i] : 0);
    }
    cut_bytes(g1, m->cut1);
    cut_bytes(g2, m->cut2);
    m->gin = pp_calloc((size_t)g1->ninputs + 1, sizeof *m->gin);
    m->tied = pp_calloc((size_t)g1->ninits + 1, sizeof *m->tied);
    if (!m->gin || !m->tied) return PP_NOMEM(err);
    for (int k = 0; k < g1->ninputs; k++) {
        struct plan_multi *mu = &m->gin[m->ngin];
        if (!readers(g1, g1->inputs[k], mu)) return PP_NOMEM(err);
        mu->b1 = vbytes(g1, g1->inputs[k]);
        mu->b2 = vbytes(g2, g2->inputs[k]);
        m->ngin++;
    }
    for (int k = 0; k < g1->ninits; k++) {
        int v = g1->inits[k].value;
        if (!g1->values[v].is_param || g1->values[v].nconsumers < 2) continue;
        struct plan_multi *mu = &m->tied[m->ntied];
        if (!readers(g1, v, mu)) return PP_NOMEM(err);
        if (mu->npos < 2) {
            free(mu->pos);
            mu->pos = NULL;
            continue;
        }
        mu->b1 = mu->b2 = (double)g1->inits[k].t.nbytes;
        mu->numel = (double)pp_shape_numel(&g1->values[v].shape);
        m->ntied++;
    }
    return PP_OK;
}

pp_status plan_model_load(plan_ctx *c, const char *path, const pp_graph_options *gopt, pp_error *err)
{
    plan_model *m = &c->model;
    m->path = path;
    if (gopt) m->gopt = *gopt;
    PP_CHECK(load_at(m, 1, &m->g1, err));
    PP_CHECK(load_at(m, 2, &m->g2, err));
    const pp_graph *g1 = m->g1, *g2 = m->g2;
    if (g1->nnodes != g2->nnodes)
        return pp_error_set(err, PP_ERR_INTERNAL, "'%s' has %d nodes at batch 1 and %d at batch 2", path, g1->nnodes,
                            g2->nnodes);
    int n = m->n = g1->nnodes;
    pp_node_cost *c1 = pp_calloc((size_t)n + 1, sizeof *c1), *c2 = pp_calloc((size_t)n + 1, sizeof *c2);
    m->types = pp_calloc((size_t)n + 1, sizeof *m->types);
    m->type_of = pp_calloc((size_t)n + 1, sizeof *m->type_of);
    m->f1 = pp_calloc((size_t)n + 1, sizeof *m->f1);
    m->f2 = pp_calloc((size_t)n + 1, sizeof *m->f2);
    m->b1 = pp_calloc((size_t)n + 1, sizeof *m->b1);
    m->b2 = pp_calloc((size_t)n + 1, sizeof *m->b2);
    m->keep = pp_calloc((size_t)n + 1, sizeof *m->keep);
    pp_status st = c1 && c2 && m->types && m->type_of && m->f1 && m->f2 && m->b1 && m->b2 && m->keep ? PP_OK
                                                                                                     : PP_NOMEM(err);
    if (st == PP_OK) st = pp_partition_costs(g1, c1, err);
    if (st == PP_OK) st = pp_partition_costs(g2, c2, err);
    for (int i = 0; st == PP_OK && i < n; i++) {
        if (c1[i].flops < 0 || c1[i].act_bytes < 0 || c2[i].flops < 0 || c2[i].act_bytes < 0) {
            st = pp_error_set(err, PP_ERR_SHAPE, "'%s': node '%s' (%s) has a shape that is still unknown with the batch "
                              "bound; bind the other symbolic dims (--dim NAME=V, --seq T)", path, g1->nodes[i].name,
                              g1->nodes[i].op_type);
            break;
        }
        m->f1[i] = (double)c1[i].flops;
        m->f2[i] = (double)c2[i].flops;
        m->b1[i] = (double)c1[i].act_bytes;
        m->b2[i] = (double)c2[i].act_bytes;
        m->keep[i] = (pp_op_get(g1->nodes[i].op)->flags & PP_OPF_KEEP_ON_RECOMPUTE) != 0;
        int t = 0;
        while (t < m->ntypes && strcmp(m->types[t], g1->nodes[i].op_type)) t++;
        if (t == m->ntypes) m->types[m->ntypes++] = g1->nodes[i].op_type;
        m->type_of[i] = t;
    }
    if (st == PP_OK) st = node_arrays(m, c1, err);
    /* tokens: a [batch, T] integer input; a batch that did not follow the binding is fixed */
    int grew = 0;
    int64_t first_dim = 0;
    for (int k = 0; st == PP_OK && k < g1->ninputs; k++) {
        const pp_value *v1 = &g1->values[g1->inputs[k]], *v2 = &g2->values[g2->inputs[k]];
        if (v1->shape.rank >= 1 && v1->shape.dims[0] != v2->shape.dims[0]) grew = 1;
        if (v1->shape.rank >= 1 && !first_dim) first_dim = v1->shape.dims[0];
        if (!m->tokens && v1->shape.rank == 2 && (v1->dtype == PP_DTYPE_I64 || v1->dtype == PP_DTYPE_I32))
            m->tokens = v1->shape.dims[1];
    }
    if (!grew && first_dim > 0) m->fixed_batch = first_dim;
    free(c1);
    free(c2);
    return st;
}

pp_status plan_get_times(plan_ctx *c, int64_t mb, pp_dtype precision, const plan_times **out, pp_error *err)
{
    for (int i = 0; i < c->ntimes; i++)
        if (c->times[i].mb == mb && c->times[i].precision == precision) {
            *out = &c->times[i];
            return PP_OK;
        }
    const plan_model *m = &c->model;
    plan_times *grown = pp_realloc_array(c->times, (size_t)c->ntimes + 1, sizeof *grown);
    if (!grown) return PP_NOMEM(err);
    c->times = grown;
    plan_times *t = &c->times[c->ntimes];
    *t = (plan_times){.mb = mb, .precision = precision};
    type_rate *rate = pp_calloc((size_t)m->ntypes + 1, sizeof *rate);
    t->pf = pp_calloc((size_t)m->n + 1, sizeof *t->pf);
    t->pb = pp_calloc((size_t)m->n + 1, sizeof *t->pb);
    t->psel = pp_calloc((size_t)m->n + 1, sizeof *t->psel);
    pp_status st = rate && t->pf && t->pb && t->psel ? PP_OK : PP_NOMEM(err);
    int fallback = 0;
    if (st == PP_OK)
        st = plan_type_rates(&c->o->cost, m->types, m->ntypes, mb, precision, rate, &fallback, err);
    c->fallback |= fallback;
    double x = (double)(mb - 1);
    for (int i = 0; st == PP_OK && i < m->n; i++) {
        double fl = m->f1[i] + (m->f2[i] - m->f1[i]) * x, by = m->b1[i] + (m->b2[i] - m->b1[i]) * x;
        double f = plan_node_forward(&rate[m->type_of[i]], fl, by);
        t->pf[i + 1] = t->pf[i] + f;
        t->pb[i + 1] = t->pb[i] + plan_node_backward(&rate[m->type_of[i]], fl, by);
        t->psel[i + 1] = t->psel[i] + (m->keep[i] ? 0 : f);
    }
    free(rate);
    if (st != PP_OK) {
        free(t->pf);
        free(t->pb);
        free(t->psel);
        return st;
    }
    c->ntimes++;
    *out = t;
    return PP_OK;
}

static void split_free(plan_split *s)
{
    if (!s) return;
    free(s->first);
    free(s->last);
    free(s->param_bytes);
    free(s->params);
    free(s->send1);
    free(s->send2);
    for (int r = 0; r < 3; r++) free(s->stash1[r]), free(s->stash2[r]);
    free(s->arena1);
    free(s->arena2);
    free(s);
}

/* The stage of node position pos under ends[S]. */
static int stage_of(const int *ends, int S, int pos)
{
    int lo = 0, hi = S - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (ends[mid] >= pos) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* What each stage of the split ends[S] holds, stashes and sends. */
static pp_status split_from_ends(const plan_model *m, int S, const int *ends, plan_split **out, pp_error *err)
{
    plan_split *s = pp_calloc(1, sizeof *s);
    if (!s) return PP_NOMEM(err);
    s->S = S;
    double **arrays[] = {&s->param_bytes, &s->params, &s->send1, &s->send2, &s->stash1[0], &s->stash1[1],
                         &s->stash1[2], &s->stash2[0], &s->stash2[1], &s->stash2[2], &s->arena1, &s->arena2};
    int ok = (s->first = pp_calloc((size_t)S, sizeof *s->first)) && (s->last = pp_calloc((size_t)S, sizeof *s->last));
    for (size_t k = 0; ok && k < sizeof arrays / sizeof arrays[0]; k++)
        ok = (*arrays[k] = pp_calloc((size_t)S, sizeof **arrays[k])) != NULL;
    if (!ok) {
        split_free(s);
        return PP_NOMEM(err);
    }
    for (int i = 0; i < S; i++) {
        int a = i ? ends[i - 1] + 1 : 0, b = ends[i];
        s->first[i] = a;
        s->last[i] = b;
        s->params[i] = m->p_own[b + 1] - m->p_own[a];
        s->param_bytes[i] = m->p_own_bytes[b + 1] - m->p_own_bytes[a];
        s->send1[i] = i + 1 < S ? m->cut1[b] : 0;
        s->send2[i] = i + 1 < S ? m->cut2[b] : 0;
        double in1 = a ? m->cut1[a - 1] : 0, in2 = a ? m->cut2[a - 1] : 0;
        s->stash1[PP_RECOMPUTE_NONE][i] = s->arena1[i] = m->p_act1[b + 1] - m->p_act1[a];
        s->stash2[PP_RECOMPUTE_NONE][i] = s->arena2[i] = m->p_act2[b + 1] - m->p_act2[a];
        s->stash1[PP_RECOMPUTE_FULL][i] = in1 + s->send1[i];
        s->stash2[PP_RECOMPUTE_FULL][i] = in2 + s->send2[i];
    }
    /* graph inputs enter every stage that reads them; a parameter read in several stages
     * is held by each (its first reader's stage already counts it) */
    for (int k = 0; k < m->ngin; k++) {
        int prev = -1;
        for (int q = 0; q < m->gin[k].npos; q++) {
            int st = stage_of(ends, S, m->gin[k].pos[q]);
            if (st == prev) continue;
            s->stash1[PP_RECOMPUTE_FULL][st] += m->gin[k].b1;
            s->stash2[PP_RECOMPUTE_FULL][st] += m->gin[k].b2;
            prev = st;
        }
    }
    for (int k = 0; k < m->ntied; k++) {
        int prev = stage_of(ends, S, m->tied[k].pos[0]);
        for (int q = 1; q < m->tied[k].npos; q++) {
            int st = stage_of(ends, S, m->tied[k].pos[q]);
            if (st == prev) continue;
            s->params[st] += m->tied[k].numel;
            s->param_bytes[st] += m->tied[k].b1;
            prev = st;
        }
    }
    for (int i = 0; i < S; i++) {
        int a = s->first[i], b = s->last[i];
        s->stash1[PP_RECOMPUTE_SELECTIVE][i] = s->stash1[PP_RECOMPUTE_FULL][i] + m->p_keep1[b + 1] - m->p_keep1[a];
        s->stash2[PP_RECOMPUTE_SELECTIVE][i] = s->stash2[PP_RECOMPUTE_FULL][i] + m->p_keep2[b + 1] - m->p_keep2[a];
    }
    *out = s;
    return PP_OK;
}

pp_status plan_get_split(plan_ctx *c, int S, const plan_split **out, pp_error *err)
{
    if (S < 1 || S > c->max_s) return pp_error_set(err, PP_ERR_INTERNAL, "split into %d stages (1..%d)", S, c->max_s);
    plan_split **cache = c->exact_mode ? c->exact_splits : c->splits;
    if (cache[S]) {
        *out = cache[S];
        return PP_OK;
    }
    const plan_model *m = &c->model;
    int *ends = pp_calloc((size_t)S, sizeof *ends);
    int64_t *one = pp_calloc((size_t)S, sizeof *one);
    pp_partition *p = NULL;
    pp_status st = ends && one ? PP_OK : PP_NOMEM(err);
    for (int i = 0; st == PP_OK && i < S; i++) one[i] = 1;
    if (st == PP_OK && c->exact_mode) {
        /* training's own split: the same bottleneck, the fewest bytes crossing the cuts */
        pp_partition_options po = {.microbatches = 1};
        st = pp_partition_create(m->g1, S, &po, &p, err);
        for (int i = 0; st == PP_OK && i < S; i++) ends[i] = p->stages[i].last_node;
    } else if (st == PP_OK) {
        pp_linear_result r;
        st = pp_linear_partition(m->own, NULL, m->n, S, one, NULL, NULL, ends, &r, err);
    }
    if (st == PP_OK) st = split_from_ends(m, S, ends, &cache[S], err);
    if (st == PP_OK) *out = cache[S];
    pp_partition_destroy(p);
    free(ends);
    free(one);
    return st;
}

void plan_ctx_free(plan_ctx *c)
{
    for (int i = 0; i < c->ntimes; i++) {
        free(c->times[i].pf);
        free(c->times[i].pb);
        free(c->times[i].psel);
    }
    free(c->times);
    for (int S = 0; S <= c->max_s; S++) {
        if (c->splits) split_free(c->splits[S]);
        if (c->exact_splits) split_free(c->exact_splits[S]);
    }
    free(c->splits);
    free(c->exact_splits);
    plan_exact_free(c);
    plan_eval *e = &c->ev;
    free(e->stage_rank);
    double *arrays[] = {e->F, e->Bi, e->Bw, e->stash, e->arena, e->send, e->bw, e->ar, e->params, e->msg, e->busy,
                        e->mem};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) free(arrays[k]);
    plan_model_free(&c->model);
}
