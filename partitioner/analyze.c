/* Cut analysis: from the stage of every node, the per-stage sums, the tensors that
 * cross each boundary (skips included), tied parameters, where graph inputs enter,
 * and each stage's inputs and outputs. */
#include "partition_internal.h"

#include <string.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/graph_ir.h>

typedef struct ivec {
    int *v;
    int n, cap;
} ivec;

static int push(ivec *a, int x)
{
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 8;
        int *v = pp_realloc_array(a->v, (size_t)cap, sizeof *v);
        if (!v) return 0;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 1;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Distinct stages of a value's consumers, ascending, into buf[P]; returns the count.
 * mark[P] holds a stamp per stage, distinct per call. */
static int consumer_stages(const pp_partition *p, const pp_value *val, int *mark, int stamp, int *buf)
{
    int k = 0;
    for (int c = 0; c < val->nconsumers; c++) {
        int s = p->node_stage[val->consumers[c]];
        if (mark[s] != stamp) {
            mark[s] = stamp;
            buf[k++] = s;
        }
    }
    if (k > 1) qsort(buf, (size_t)k, sizeof *buf, cmp_int);
    return k;
}

static pp_status stage_sums(pp_partition *p, const int *ends, pp_error *err)
{
    const pp_graph *g = p->graph;
    p->node_stage = malloc((size_t)g->nnodes * sizeof *p->node_stage);
    p->stages = calloc((size_t)p->nstages, sizeof *p->stages);
    p->boundaries = calloc((size_t)(p->nstages > 1 ? p->nstages - 1 : 1), sizeof *p->boundaries);
    if (!p->node_stage || !p->stages || !p->boundaries)
        return PP_NOMEM(err);
    p->shapes_known = 1;
    for (int s = 0, i = 0; s < p->nstages; s++) {
        pp_stage_info *st = &p->stages[s];
        st->first_node = i;
        st->last_node = ends[s];
        for (; i <= ends[s]; i++) {
            const pp_node_cost *c = &p->costs[p->order[i]];
            p->node_stage[p->order[i]] = s;
            st->own_params += c->params;
            st->flops = add_known(st->flops, c->flops);
            st->act_bytes = add_known(st->act_bytes, c->act_bytes);
        }
        if (st->flops < 0 || st->act_bytes < 0) p->shapes_known = 0;
    }
    return PP_OK;
}

/* Tensors produced in one stage and read in a later one, and the boundaries they cross. */
static pp_status find_cuts(pp_partition *p, const act_edge *e, int ne, pp_error *err)
{
    int P = p->nstages, cap = 0;
    ivec *bt = calloc((size_t)P, sizeof *bt);
    if (!bt) return PP_NOMEM(err);
    pp_status st = PP_OK;
    const pp_graph *g = p->graph;
    for (int k = 0; k < ne; k++) {
        /* the last stage reading it (with the order searched, not always its last reader's) */
        const pp_value *val = &g->values[e[k].value];
        int from = p->node_stage[e[k].producer], to = from;
        for (int c = 0; c < val->nconsumers; c++)
            if (p->node_stage[val->consumers[c]] > to) to = p->node_stage[val->consumers[c]];
        if (to == from) continue;
        if (p->ncuts == cap) {
            cap = cap ? 2 * cap : 16;
            pp_cut_tensor *c = pp_realloc_array(p->cuts, (size_t)cap, sizeof *c);
            if (!c) goto oom;
            p->cuts = c;
        }
        p->cuts[p->ncuts] = (pp_cut_tensor){e[k].value, from, to, e[k].bytes};
        for (int b = from; b < to; b++)
            if (!push(&bt[b], p->ncuts)) goto oom;
        p->ncuts++;
    }
    p->cut_bytes = 0;
    for (int b = 0; b + 1 < P; b++) {
        pp_boundary *bd = &p->boundaries[b];
        bd->tensors = bt[b].v;
        bd->ntensors = bt[b].n;
        bt[b].v = NULL;
        for (int k = 0; k < bd->ntensors; k++) bd->bytes = add_known(bd->bytes, p->cuts[bd->tensors[k]].bytes);
        p->stages[b].send_bytes = bd->bytes;
        p->cut_bytes = add_known(p->cut_bytes, bd->bytes);
    }
    goto done;
oom:
    st = PP_NOMEM(err);
done:
    for (int b = 0; b < P; b++) free(bt[b].v);
    free(bt);
    return st;
}

static pp_status add_value_stages(pp_value_stages **arr, int *n, int v, const int *stages, int k,
                                  int64_t bytes, pp_error *err)
{
    pp_value_stages *a = pp_realloc_array(*arr, (size_t)*n + 1, sizeof *a);
    int *copy = malloc((size_t)k * sizeof *copy);
    if (a) *arr = a;
    if (!a || !copy) {
        free(copy);
        return PP_NOMEM(err);
    }
    memcpy(copy, stages, (size_t)k * sizeof *copy);
    a[(*n)++] = (pp_value_stages){v, copy, k, bytes};
    return PP_OK;
}

/* Parameters held per stage (a tied one in each stage that reads it), tied
 * parameters, and the stages each graph input enters. */
static pp_status params_and_inputs(pp_partition *p, int *mark, int *buf, pp_error *err)
{
    const pp_graph *g = p->graph;
    ivec *held = calloc((size_t)p->nstages, sizeof *held);
    if (!held) return PP_NOMEM(err);
    pp_status st = PP_OK;
    int stamp = 0;
    for (int i = 0; i < g->ninits; i++) {
        int v = g->inits[i].value;
        const pp_value *val = &g->values[v];
        if (!val->is_param) continue;
        int k = consumer_stages(p, val, mark, ++stamp, buf);
        int64_t bytes = (int64_t)g->inits[val->init].t.nbytes;
        for (int i = 0; i < k; i++) {
            pp_stage_info *s = &p->stages[buf[i]];
            if (!push(&held[buf[i]], v)) {
                st = PP_NOMEM(err);
                goto done;
            }
            s->params += pp_shape_numel(&val->shape);
            s->param_bytes += bytes;
        }
        if (k > 1) PP_CHECK_GOTO(add_value_stages(&p->tied, &p->ntied, v, buf, k, bytes, err), st, done);
    }
    for (int i = 0; i < g->ninputs; i++) {
        int v = g->inputs[i];
        int k = consumer_stages(p, &g->values[v], mark, ++stamp, buf);
        if (k) PP_CHECK_GOTO(add_value_stages(&p->inputs, &p->ninputs, v, buf, k, value_bytes(g, v), err),
                             st, done);
    }
done:
    for (int s = 0; s < p->nstages; s++) {
        p->stages[s].params_held = held[s].v;
        p->stages[s].nparams_held = held[s].n;
    }
    free(held);
    return st;
}

/* Stage inputs: values read here that an earlier stage produced (value id order),
 * then graph inputs read here; outputs: values produced here that a later stage
 * reads, then graph outputs produced here. The values from earlier stages are the cut
 * tensors and the graph inputs are p->inputs, so only their consumers are visited, not
 * every node input. stamp[nvalues] is scratch; mark[P] and buf[P] as for consumer_stages. */
static pp_status stage_io(pp_partition *p, int *stamp, int *mark, int *buf, pp_error *err)
{
    const pp_graph *g = p->graph;
    int P = p->nstages, ok = 1, tick = 0;
    size_t np = (size_t)(P > 0 ? P : 1);
    ivec *recv = calloc(np, sizeof *recv), *ginp = calloc(np, sizeof *ginp);
    if (!recv || !ginp) ok = 0;
    for (int s = 0; s < P; s++) mark[s] = 0;
    for (int c = 0; c < p->ncuts && ok; c++) {
        int v = p->cuts[c].value;
        int k = consumer_stages(p, &g->values[v], mark, ++tick, buf);
        for (int j = 0; j < k && ok; j++)
            if (buf[j] > p->cuts[c].from_stage) ok = push(&recv[buf[j]], v);
    }
    for (int i = 0; i < p->ninputs && ok; i++)
        for (int j = 0; j < p->inputs[i].nstages && ok; j++) ok = push(&ginp[p->inputs[i].stages[j]], p->inputs[i].value);
    for (int s = 0; s < P && ok; s++) {
        pp_stage_info *st = &p->stages[s];
        ivec *in = &recv[s], outs = {0};
        for (int c = 0; c < p->ncuts && ok; c++)
            if (p->cuts[c].from_stage == s) {
                stamp[p->cuts[c].value] = -(s + 1);
                ok = push(&outs, p->cuts[c].value);
            }
        for (int k = 0; k < g->noutputs && ok; k++) {
            int v = g->outputs[k], prod = g->values[v].producer;
            if (prod >= 0 && p->node_stage[prod] == s && stamp[v] != -(s + 1)) {
                stamp[v] = -(s + 1);
                ok = push(&outs, v);
            }
        }
        if (ok) {
            if (in->n > 1) qsort(in->v, (size_t)in->n, sizeof *in->v, cmp_int);
            if (ginp[s].n > 1) qsort(ginp[s].v, (size_t)ginp[s].n, sizeof *ginp[s].v, cmp_int);
            for (int k = 0; k < ginp[s].n && ok; k++) ok = push(in, ginp[s].v[k]);
        }
        st->inputs = in->v;
        st->ninputs = in->n;
        in->v = NULL;
        st->outputs = outs.v;
        st->noutputs = outs.n;
    }
    for (int s = 0; s < P && recv && ginp; s++) {
        free(recv[s].v);
        free(ginp[s].v);
    }
    free(recv);
    free(ginp);
    return ok ? PP_OK : PP_NOMEM(err);
}

pp_status partition_analyze(pp_partition *p, const int *ends, const act_edge *edges, int nedges,
                            pp_error *err)
{
    const pp_graph *g = p->graph;
    PP_CHECK(stage_sums(p, ends, err));
    PP_CHECK(find_cuts(p, edges, nedges, err));
    int *mark = malloc((size_t)p->nstages * sizeof *mark);
    int *buf = malloc((size_t)p->nstages * sizeof *buf);
    int *stamp = calloc((size_t)g->nvalues + 1, sizeof *stamp);
    pp_status st = PP_OK;
    if (!mark || !buf || !stamp) {
        st = PP_NOMEM(err);
        goto done;
    }
    for (int s = 0; s < p->nstages; s++) mark[s] = 0;
    PP_CHECK_GOTO(params_and_inputs(p, mark, buf, err), st, done);
    PP_CHECK_GOTO(stage_io(p, stamp, mark, buf, err), st, done);
done:
    free(mark);
    free(buf);
    free(stamp);
    return st;
}
