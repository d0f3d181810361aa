/* What the planner reads of a model: its nodes' FLOPs and output bytes at microbatch 1
 * and 2 (so any microbatch is a line through them), per-(microbatch, precision) prefix
 * sums of node seconds under the cost model, and per stage count S the split training
 * would make (params balance) with each stage's parameters, stash and sends. Shapes only:
 * no weight is read. */
#include "planner_internal.h"

#include <stdlib.h>
#include <string.h>

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
    memset(m, 0, sizeof *m);
}

static pp_status load_at(const plan_model *m, int64_t mb, pp_graph **g, pp_error *err)
{
    pp_graph_options go = m->gopt;
    go.batch = mb;
    return pp_graph_load(m->path, &go, g, err);
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

pp_status plan_get_split(plan_ctx *c, int S, const plan_split **out, pp_error *err)
{
    if (S < 1 || S > c->max_s) return pp_error_set(err, PP_ERR_INTERNAL, "split into %d stages (1..%d)", S, c->max_s);
    if (c->splits[S]) {
        *out = c->splits[S];
        return PP_OK;
    }
    pp_partition_options po = {.microbatches = 1};
    pp_partition *p1 = NULL, *p2 = NULL;
    plan_split *s = pp_calloc(1, sizeof *s);
    pp_status st = s ? PP_OK : PP_NOMEM(err);
    if (st == PP_OK) st = pp_partition_create(c->model.g1, S, &po, &p1, err);
    if (st == PP_OK) st = pp_partition_create(c->model.g2, S, &po, &p2, err);
    if (st != PP_OK) goto done;
    s->S = S;
    double **arrays[] = {&s->param_bytes, &s->params, &s->send1, &s->send2, &s->stash1[0], &s->stash1[1],
                         &s->stash1[2], &s->stash2[0], &s->stash2[1], &s->stash2[2], &s->arena1, &s->arena2};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++)
        if (!(*arrays[k] = pp_calloc((size_t)S, sizeof **arrays[k]))) st = PP_NOMEM(err);
    s->first = pp_calloc((size_t)S, sizeof *s->first);
    s->last = pp_calloc((size_t)S, sizeof *s->last);
    if (!s->first || !s->last) st = PP_NOMEM(err);
    for (int i = 0; st == PP_OK && i < S; i++) {
        const pp_stage_info *a = &p1->stages[i], *b = &p2->stages[i];
        s->first[i] = a->first_node;
        s->last[i] = a->last_node;
        s->param_bytes[i] = (double)a->param_bytes;
        s->params[i] = (double)a->params;
        s->send1[i] = (double)(a->send_bytes > 0 ? a->send_bytes : 0);
        /* the params balance does not depend on the batch; should the tie-break among equal
         * splits differ, batch 2's numbers are still those of a split of the same balance */
        s->send2[i] = (double)(b->send_bytes > 0 ? b->send_bytes : 0);
        for (int r = 0; r < 3; r++) {
            pp_recompute_estimate e1 = pp_partition_recompute_estimate(p1, i, (pp_recompute)r),
                                  e2 = pp_partition_recompute_estimate(p2, i, (pp_recompute)r);
            s->stash1[r][i] = (double)(e1.stash_bytes > 0 ? e1.stash_bytes : 0);
            s->stash2[r][i] = (double)(e2.stash_bytes > 0 ? e2.stash_bytes : 0);
            if (r == PP_RECOMPUTE_FULL) {
                s->arena1[i] = (double)(e1.arena_bytes > 0 ? e1.arena_bytes : 0);
                s->arena2[i] = (double)(e2.arena_bytes > 0 ? e2.arena_bytes : 0);
            }
        }
    }
done:
    pp_partition_destroy(p1);
    pp_partition_destroy(p2);
    if (st != PP_OK) {
        split_free(s);
        return st;
    }
    c->splits[S] = s;
    *out = s;
    return PP_OK;
}

void plan_ctx_free(plan_ctx *c)
{
    for (int i = 0; i < c->ntimes; i++) {
        free(c->times[i].pf);
        free(c->times[i].pb);
        free(c->times[i].psel);
    }
    free(c->times);
    if (c->splits)
        for (int S = 0; S <= c->max_s; S++) split_free(c->splits[S]);
    free(c->splits);
    plan_exact_free(c);
    plan_eval *e = &c->ev;
    free(e->stage_rank);
    free(e->F);
    free(e->Bi);
    free(e->Bw);
    free(e->stash);
    free(e->arena);
    free(e->send);
    free(e->msg);
    free(e->ar);
    free(e->busy);
    free(e->mem);
    plan_model_free(&c->model);
}
