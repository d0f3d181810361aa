/* Tied parameters: a parameter read by several ops (the example GPT's embedding and LM
 * head) gets the sum of their gradients, added in one fixed order, ascending reading node
 * id, whatever stages and ranks hold them, so that every pipeline layout sums the same
 * floats the same way (pp=1 included: its stage keeps one gradient per use too). */
#include "driver_internal.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/kernels.h>

static int by_node(const void *a, const void *b)
{
    const tied_use *x = a, *y = b;
    return (x->node > y->node) - (x->node < y->node);
}

/* The uses of g->value in this rank's stages into out (NULL: only counted): node,
 * gradient, and whether it is its stage's own (pp_stage_param_uses' first). Returns how
 * many, or -1 out of memory. */
static int local_uses(pp_driver *d, const tied_group *g, tied_use *out)
{
    int n = 0;
    for (int k = 0; k < g->nlocal; k++) {
        pp_stage *s = d->vs[g->local_stage[k]].s;
        int m = pp_stage_param_uses(s, g->value, NULL, 0);
        pp_stage_use *u = out ? malloc((size_t)m * sizeof *u + 1) : NULL;
        if (out && !u) return -1;
        if (u) pp_stage_param_uses(s, g->value, u, m);
        for (int j = 0; out && j < m; j++)
            out[n + j] = (tied_use){.node = u[j].node, .grad = u[j].grad, .own = j == 0};
        free(u);
        n += m;
    }
    return n;
}

/* Every use of g's value over the ranks of my replica holding it (ranks[], in group-comm
 * order), sorted by node: each rank's list is gathered over the host communicator, which
 * makes it collective over the world (g NULL: this rank holds none and adds nothing). */
static pp_status gather_uses(pp_driver *d, tied_group *g, const int *ranks, int nranks, pp_error *err)
{
    pp_comm *host = d->cfg.control ? d->cfg.control : d->grid->world;
    int mine = g ? local_uses(d, g, NULL) : 0, most = 0;
    int *counts = malloc((size_t)pp_comm_size(host) * sizeof *counts);
    if (!counts) return PP_NOMEM(err);
    pp_status st = pp_comm_allgather(host, &mine, counts, sizeof(int), err);
    for (int r = 0; st == PP_OK && r < pp_comm_size(host); r++) most = counts[r] > most ? counts[r] : most;
    free(counts);
    PP_CHECK(st);
    /* a rank's record: replica, pipeline rank, count, then node ids */
    size_t rec = (size_t)most + 3;
    int *all = malloc((size_t)pp_comm_size(host) * rec * sizeof *all), *me = calloc(rec, sizeof *me);
    tied_use *loc = calloc((size_t)mine + 1, sizeof *loc);
    if (!all || !me || !loc || (g && local_uses(d, g, loc) < 0)) {
        free(all), free(me), free(loc);
        return PP_NOMEM(err);
    }
    me[0] = d->grid->replica, me[1] = d->grid->stage, me[2] = mine;
    for (int j = 0; j < mine; j++) me[3 + j] = loc[j].node;
    st = pp_comm_allgather(host, me, all, rec * sizeof *all, err);
    for (int r = 0; st == PP_OK && r < pp_comm_size(host); r++) {
        const int *x = all + (size_t)r * rec;
        int gr = -1;
        for (int j = 0; j < nranks; j++) gr = ranks[j] == x[1] ? j : gr;
        if (!g || x[0] != d->grid->replica || gr < 0) continue;
        for (int j = 0; j < x[2]; j++) {
            tied_use *u = &g->uses[g->nuses++];
            *u = (tied_use){.node = x[3 + j], .rank = gr};
            for (int i = 0; i < mine && x[1] == d->grid->stage; i++)
                if (loc[i].node == u->node) u->grad = loc[i].grad, u->own = loc[i].own;
        }
    }
    free(all), free(me), free(loc);
    PP_CHECK(st);
    if (g) qsort(g->uses, (size_t)g->nuses, sizeof *g->uses, by_node);
    return PP_OK;
}

static pp_status add_group(pp_driver *d, int value, pp_error *err)
{
    tied_group *g = &d->tied[d->ntied];
    memset(g, 0, sizeof *g);
    g->value = value;
    g->local_stage = malloc((size_t)d->nvs * sizeof *g->local_stage + 1);
    if (!g->local_stage) return PP_NOMEM(err);
    for (int i = 0; i < d->nvs; i++) {
        if (!pp_stage_param_uses(d->vs[i].s, value, NULL, 0)) continue;
        g->local_stage[g->nlocal++] = i;
        for (int j = 0; j < pp_stage_num_params(d->vs[i].s); j++)
            if (pp_stage_param_at(d->vs[i].s, j)->value == value) g->numel = pp_stage_param_at(d->vs[i].s, j)->numel;
    }
    g->uses = calloc((size_t)d->cfg.partition->graph->nnodes + 1, sizeof *g->uses);   /* a use per node at most */
    if (!g->uses) return PP_NOMEM(err);
    d->ntied++;
    return PP_OK;
}

pp_status driver_init_tied(pp_driver *d, pp_error *err)
{
    const pp_partition *p = d->cfg.partition;
    int cap = p->ntied;
    for (int i = 0; i < d->nvs; i++) cap += pp_stage_num_params(d->vs[i].s);
    d->tied = calloc((size_t)cap + 1, sizeof *d->tied);
    if (!d->tied) return PP_NOMEM(err);
    /* held by several stages: all ranks split the world into the groups' communicators */
    for (int t = 0; t < p->ntied; t++) {
        const pp_value_stages *vs = &p->tied[t];
        int *ranks = malloc((size_t)vs->nstages * sizeof *ranks), nranks = 0, held = 0;
        if (!ranks) return PP_NOMEM(err);
        for (int k = 0; k < vs->nstages; k++) {
            int st = vs->stages[k], r = d->cfg.schedule->stage_rank[st], seen = 0;
            for (int j = 0; j < nranks; j++) seen |= ranks[j] == r;
            if (!seen) ranks[nranks++] = r;
            held |= d->local[st] >= 0;
        }
        pp_comm *comm = NULL;
        tied_group *g = NULL;
        pp_status st = nranks > 1 ? pp_grid_stage_group(d->grid, ranks, nranks, &comm, err) : PP_OK;
        if (st == PP_OK && held && (st = add_group(d, vs->value, err)) == PP_OK) {
            g = &d->tied[d->ntied - 1];
            g->comm = comm, comm = NULL;
            if (nranks > 1 && g->numel > d->tied_buf_elems) d->tied_buf_elems = g->numel;
        }
        if (st == PP_OK) st = gather_uses(d, g, ranks, nranks, err);
        pp_comm_destroy(comm);
        free(ranks);
        PP_CHECK(st);
    }
    /* read twice inside one of my stages only */
    for (int i = 0; i < d->nvs; i++)
        for (int j = 0; j < pp_stage_num_params(d->vs[i].s); j++) {
            const pp_stage_param *q = pp_stage_param_at(d->vs[i].s, j);
            int known = 0;
            for (int t = 0; t < p->ntied; t++) known |= p->tied[t].value == q->value;
            if (known || pp_stage_param_uses(d->vs[i].s, q->value, NULL, 0) < 2) continue;
            PP_CHECK(add_group(d, q->value, err));
            tied_group *g = &d->tied[d->ntied - 1];
            g->nuses = local_uses(d, g, g->uses);
            qsort(g->uses, (size_t)g->nuses, sizeof *g->uses, by_node);
        }
    if (d->tied_buf_elems)
        PP_CHECK(pp_device_alloc_as(d->cfg.dev, PP_MEM_COMM, (size_t)d->tied_buf_elems * sizeof(float), (void **)&d->tied_buf,
                                    err));
    return PP_OK;
}

void driver_free_tied(pp_driver *d)
{
    for (int t = 0; t < d->ntied; t++) {
        pp_comm_destroy(d->tied[t].comm);
        free(d->tied[t].local_stage);
        free(d->tied[t].uses);
    }
    free(d->tied);
    if (d->tied_buf) pp_device_free(d->cfg.dev, d->tied_buf);
}

static float *own_grad(pp_driver *d, int stage, int value)
{
    pp_stage_use u;
    return pp_stage_param_uses(d->vs[stage].s, value, &u, 1) ? u.grad : NULL;
}

/* The sum of g's uses, in node order: a running sum passed from rank to rank along the
 * order (each adds its uses as they come), then broadcast from the last into every copy.
 * x + y is y + x in floating point, so the rank that receives may add into its own use. */
pp_status driver_reduce_tied(pp_driver *d, tied_group *g, pp_error *err)
{
    int me = g->comm ? pp_comm_rank(g->comm) : 0;
    size_t bytes = (size_t)g->numel * sizeof(float);
    /* a later use's gradient was not in the data-parallel buckets */
    for (int i = 0; i < g->nuses && d->grid->dp > 1; i++)
        if (g->uses[i].grad && !g->uses[i].own)
            PP_CHECK(pp_comm_allreduce(d->grid->dp_comm, g->uses[i].grad, (size_t)g->numel, PP_DTYPE_F32, err));
    float *acc = NULL;
    for (int i = 0; i < g->nuses; i++) {
        const tied_use *u = &g->uses[i];
        if (u->rank != me) {
            pp_request *req = NULL;
            if (acc) PP_CHECK(pp_comm_isend(g->comm, acc, bytes, u->rank, i, &req, err));
            PP_CHECK(pp_comm_wait(g->comm, req, err));
            acc = NULL;
            continue;
        }
        if (acc) {
            PP_CHECK(pp_kernel_accumulate(d->cfg.dev, acc, u->grad, g->numel, err));
            continue;
        }
        acc = u->grad;
        if (i > 0) {   /* the running sum of the uses before it, from the rank of the last one */
            pp_request *req = NULL;
            PP_CHECK(pp_comm_irecv(g->comm, d->tied_buf, bytes, g->uses[i - 1].rank, i, &req, err));
            PP_CHECK(pp_comm_wait(g->comm, req, err));
            PP_CHECK(pp_kernel_accumulate(d->cfg.dev, acc, d->tied_buf, g->numel, err));
        }
    }
    float *sum = own_grad(d, g->local_stage[0], g->value);
    if (acc && acc != sum) PP_CHECK(pp_device_copy(d->cfg.dev, sum, acc, bytes, err));
    if (g->comm) PP_CHECK(pp_comm_broadcast(g->comm, sum, bytes, g->uses[g->nuses - 1].rank, err));
    for (int k = 1; k < g->nlocal; k++)
        PP_CHECK(pp_device_copy(d->cfg.dev, own_grad(d, g->local_stage[k], g->value), sum, bytes, err));
    return PP_OK;
}
