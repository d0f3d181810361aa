/* Building a driver: this rank's stages with as many stash slots as the schedule keeps
 * in flight, the tied-weight groups, and the buffers for gradients nobody computes. */
#include "driver_internal.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/graph_ir.h>

/* Whether the schedule runs every backward of `stage` whole (no weight half apart). */
static int whole_backward(const pp_schedule *sch, int stage)
{
    int n = 0;
    const pp_action *a = pp_schedule_rank_actions(sch, sch->stage_rank[stage], &n);
    for (int k = 0; k < n; k++)
        if (a[k].stage == stage && a[k].kind == PP_ACT_BACKWARD_WEIGHT) return 0;
    return 1;
}

/* Peak slots stage `stage` needs under its rank's action order, with the driver's
 * rules: taken at first touch (RECV_ACT, FORWARD, or the forward of a local previous
 * stage), given back once the backward is done and the input gradient has left. */
static int count_slots(const pp_schedule *sch, int stage)
{
    int m = sch->microbatches, live = 0, peak = 0, nacts = 0, rank = sch->stage_rank[stage];
    const pp_action *acts = pp_schedule_rank_actions(sch, rank, &nacts);
    char *held = calloc((size_t)m, 1), *done = calloc((size_t)m, 1), *sent = calloc((size_t)m, 1);
    if (!held || !done || !sent) {
        free(held);
        free(done);
        free(sent);
        return m;
    }
    int prev_local = stage > 0 && sch->stage_rank[stage - 1] == rank;
    for (int k = 0; k < nacts; k++) {
        const pp_action *a = &acts[k];
        int mb = a->microbatch;
        if (mb < 0) continue;   /* REDUCE_GRADS, OPTIMIZER_STEP */
        int touch = (a->stage == stage && (a->kind == PP_ACT_FORWARD || a->kind == PP_ACT_RECV_ACT)) ||
                    (prev_local && a->stage == stage - 1 && a->kind == PP_ACT_FORWARD);
        if (touch && !held[mb]) {
            held[mb] = 1;
            if (++live > peak) peak = live;
        }
        if (a->stage != stage) continue;
        if (a->kind == PP_ACT_BACKWARD || a->kind == PP_ACT_BACKWARD_WEIGHT) done[mb] = 1;
        if (a->kind == PP_ACT_SEND_GRAD) sent[mb] = 1;
        if ((a->kind == PP_ACT_BACKWARD || a->kind == PP_ACT_BACKWARD_INPUT) && prev_local) sent[mb] = 1;
        if (held[mb] && done[mb] && (stage == 0 || sent[mb])) {
            held[mb] = 0;
            live--;
        }
    }
    free(held);
    free(done);
    free(sent);
    return peak > 0 ? peak : 1;
}

/* The zeros and scratch buffers (driver_internal.h), each the largest port plus 64. */
static size_t comm_buffer_bytes(size_t port_max) { return port_max + 64; }

/* The data-parallel all-reduce's dtype: 1 when it stages the gradients in 16 bits. */
static pp_status reduce_staged(pp_dtype dt, int *staged, pp_error *err)
{
    *staged = dt == PP_DTYPE_BF16;
    if (dt == PP_DTYPE_UNDEFINED || dt == PP_DTYPE_F32 || dt == PP_DTYPE_BF16) return PP_OK;
    return pp_error_set(err, PP_ERR_INVALID_ARG, "gradient all-reduce in %s: use float32 or bfloat16 (float16 "
                        "sums of unscaled gradients lose what bfloat16 keeps)", pp_dtype_name(dt));
}

/* The staging copy of a stage's gradients for a 16-bit all-reduce. */
static size_t reduce_buf_bytes(int64_t param_elems) { return (size_t)(param_elems > 0 ? param_elems : 1) * 2; }

/* Where rank r receives a tied sum (driver_tied.c): the largest tied parameter it holds
 * with another rank. */
static int64_t tied_buf_bytes(const pp_schedule *sch, const pp_partition *part, int r)
{
    int64_t most = 0;
    for (int t = 0; t < part->ntied; t++) {
        const pp_value_stages *vs = &part->tied[t];
        int mine = 0, other = 0;
        for (int k = 0; k < vs->nstages; k++) {
            mine |= sch->stage_rank[vs->stages[k]] == r;
            other |= sch->stage_rank[vs->stages[k]] != r;
        }
        if (mine && other && vs->bytes > most) most = vs->bytes;
    }
    return most;
}

pp_status pp_driver_estimate(const pp_schedule *sch, const pp_partition *part, pp_device_kind kind,
                             const pp_stage_options *opt, pp_dtype reduce_dtype, pp_stage_bytes *stages,
                             pp_driver_bytes *ranks, pp_error *err)
{
    int staged;
    PP_CHECK(reduce_staged(reduce_dtype, &staged, err));
    if (sch->num_stages != part->nstages)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "schedule for %d stages, but the partition has %d",
                            sch->num_stages, part->nstages);
    if (ranks) memset(ranks, 0, (size_t)sch->pp * sizeof *ranks);
    pp_status st = PP_OK;
    for (int s = 0; s < sch->num_stages && st == PP_OK; s++) {
        pp_stage_options so = *opt;
        so.slots = count_slots(sch, s);
        so.whole_backward = whole_backward(sch, s);
        pp_stage_bytes b;
        st = pp_stage_estimate(part, s, kind, &so, &b, err);
        if (st != PP_OK) break;
        if (stages) stages[s] = b;
        if (!ranks) continue;
        pp_stage_bytes *r = &ranks[sch->stage_rank[s]].stages;
        r->params += b.params, r->grads += b.grads, r->optimizer += b.optimizer, r->stash += b.stash;
        r->scratch += b.scratch - b.work, r->constants += b.constants, r->total += b.total - b.work;
        r->slots += b.slots, r->param_copy += b.param_copy, r->recompute += b.recompute;
        if (b.work > r->work) r->work = b.work;   /* one kernel call at a time per rank */
        if (staged) ranks[sch->stage_rank[s]].comm += (int64_t)reduce_buf_bytes(b.params / (int64_t)sizeof(float));
        if (b.port_max > r->port_max) r->port_max = b.port_max;
    }
    for (int r = 0; ranks && st == PP_OK && r < sch->pp; r++) {
        ranks[r].stages.scratch += ranks[r].stages.work, ranks[r].stages.total += ranks[r].stages.work;
        ranks[r].comm += 2 * (int64_t)comm_buffer_bytes((size_t)ranks[r].stages.port_max) + tied_buf_bytes(sch, part, r);
        ranks[r].total = ranks[r].stages.total + ranks[r].comm;
    }
    return st;
}

/* Buckets of about cfg.bucket_bytes over the flat gradient buffer (parameters in layout
 * order), and the action after which the stage's gradients are final. */
static pp_status init_buckets(pp_driver *d, vstage *v, pp_error *err)
{
    v->last_backward = -1;
    for (int k = 0; k < d->nacts; k++)
        if (d->acts[k].stage == v->index &&
            (d->acts[k].kind == PP_ACT_BACKWARD || d->acts[k].kind == PP_ACT_BACKWARD_WEIGHT))
            v->last_backward = k;
    int n = pp_stage_num_params(v->s);
    int64_t limit = d->cfg.bucket_bytes > 0 ? d->cfg.bucket_bytes : DEFAULT_BUCKET_BYTES;
    v->buckets = calloc((size_t)n + 1, sizeof *v->buckets);
    if (!v->buckets) return pp_error_set(err, PP_ERR_NOMEM, "out of memory creating the driver");
    for (int i = 0; i < n; i++) {
        const pp_stage_param *p = pp_stage_param_at(v->s, i);
        bucket *b = v->nbuckets ? &v->buckets[v->nbuckets - 1] : NULL;
        if (!b || b->count * (int64_t)sizeof(float) >= limit) {
            b = &v->buckets[v->nbuckets++];
            b->offset = p->offset;
        }
        b->count = p->offset + p->numel - b->offset;
        if (pp_stage_param_ready(v->s, i) > b->ready) b->ready = pp_stage_param_ready(v->s, i);
    }
    return PP_OK;
}

static pp_status init_vstage(pp_driver *d, vstage *v, int stage, pp_error *err)
{
    int m = d->microbatches;
    v->index = stage;
    v->nslots = count_slots(d->cfg.schedule, stage);
    pp_stage_options so = d->cfg.stage_options;
    so.slots = v->nslots;
    so.whole_backward = whole_backward(d->cfg.schedule, stage);
    so.first_sample = (int64_t)d->grid->replica * (so.global_batch / d->grid->dp);   /* replicas split the batch in order */
    PP_CHECK(pp_stage_create(d->cfg.partition, stage, d->cfg.dev, &so, &v->s, err));
    pp_stage_set_progress_hook(v->s, driver_progress, d);
    pp_stage_seed_from(v->s, d->seeds);
    for (int i = 0; i < pp_stage_num_inputs(v->s); i++)
        if (pp_stage_input(v->s, i)->is_data) v->data_bytes += pp_stage_input(v->s, i)->nbytes;
    if (pp_stage_num_inputs(v->s) > SHAPE_PORT || pp_stage_num_outputs(v->s) > SHAPE_PORT)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "stage %d: more than %d tensors cross a boundary", stage, SHAPE_PORT);
    PP_CHECK(driver_init_shapes(d, v, &so, err));
    v->slot_of_mb = malloc((size_t)m * sizeof *v->slot_of_mb);
    v->free_slots = malloc((size_t)v->nslots * sizeof *v->free_slots);
    v->draining = malloc((size_t)v->nslots * sizeof *v->draining);
    v->bw_done = calloc((size_t)m, 1);
    v->grad_sent = calloc((size_t)m, 1);
    v->sends = calloc((size_t)v->nslots * 2 * MAX_PORTS, sizeof *v->sends);
    v->recv_act = calloc((size_t)m * MAX_PORTS, sizeof *v->recv_act);
    v->recv_grad = calloc((size_t)m * MAX_PORTS, sizeof *v->recv_grad);
    if (!v->slot_of_mb || !v->free_slots || !v->draining || !v->bw_done || !v->grad_sent || !v->sends || !v->recv_act || !v->recv_grad)
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory creating the driver");
    for (int i = 0; i < m; i++) v->slot_of_mb[i] = -1;
    PP_CHECK(init_buckets(d, v, err));
    int staged;
    PP_CHECK(reduce_staged(d->cfg.reduce_dtype, &staged, err));
    if (staged && d->grid->dp > 1)
        PP_CHECK(pp_device_alloc_as(d->cfg.dev, PP_MEM_COMM, reduce_buf_bytes(pp_stage_param_elems(v->s)),
                                    &v->reduce_buf, err));
    for (int i = 0; i < v->nslots; i++) v->free_slots[i] = v->nslots - 1 - i;
    v->nfree = v->nslots;
    return PP_OK;
}

/* The norm's terms: a place per trained parameter of the graph (value order), and the
 * stage that counts a tied one (the first holding it; -1: the only one). */
static pp_status init_norm(pp_driver *d, pp_error *err)
{
    const pp_partition *p = d->cfg.partition;
    const pp_graph *g = p->graph;
    d->norm_index = malloc((size_t)g->nvalues * sizeof *d->norm_index + 1);
    d->norm_stage = malloc((size_t)g->nvalues * sizeof *d->norm_stage + 1);
    if (!d->norm_index || !d->norm_stage) return PP_NOMEM(err);
    for (int v = 0; v < g->nvalues; v++) {
        d->norm_index[v] = g->values[v].is_param ? d->nnorm++ : -1;
        d->norm_stage[v] = -1;
    }
    for (int t = 0; t < p->ntied; t++) d->norm_stage[p->tied[t].value] = p->tied[t].stages[0];
    d->norm_sums = calloc((size_t)d->nnorm + 2 + (size_t)d->grid->dp, sizeof *d->norm_sums);
    d->stats_host = calloc((size_t)d->nnorm + ST_TERMS, sizeof *d->stats_host);
    if (!d->norm_sums || !d->stats_host) return PP_NOMEM(err);
    /* the step's sums on the device (a few bytes a parameter: counted as the driver's comm) */
    return pp_device_alloc_as(d->cfg.dev, PP_MEM_COMM, ((size_t)d->nnorm + ST_TERMS) * sizeof *d->stats,
                              (void **)&d->stats, err);
}

/* cfg.shapes: partitions of the same split, partition among them (the shape steps start at). */
static pp_status init_shape_list(pp_driver *d, pp_error *err)
{
    const pp_driver_config *c = &d->cfg;
    d->nshapes = c->shapes && c->nshapes > 0 ? c->nshapes : 0;
    d->shape = -1;
    for (int k = 0; k < d->nshapes; k++) {
        if (c->shapes[k]->nstages != c->partition->nstages)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "shape %d's partition has %d stages, the driver's %d", k,
                                c->shapes[k]->nstages, c->partition->nstages);
        if (c->shapes[k] == c->partition && d->shape < 0) d->shape = k;
    }
    if (d->nshapes && d->shape < 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "the driver's partition is not one of its %d shapes", d->nshapes);
    if (d->shape < 0) d->shape = 0;
    d->shape_hdr[0] = d->shape;
    d->shape_hdr[1] = d->grid->rank;
    return PP_OK;
}

pp_status pp_driver_create(const pp_driver_config *cfg, pp_driver **out, pp_error *err)
{
    *out = NULL;
    const pp_schedule *sch = cfg->schedule;
    if (sch->pp != cfg->grid->pp || sch->num_stages != cfg->partition->nstages)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "schedule for %d ranks and %d stages, but the grid has pp %d "
                            "and the partition %d stages", sch->pp, sch->num_stages, cfg->grid->pp,
                            cfg->partition->nstages);
    pp_driver *d = calloc(1, sizeof *d);
    if (!d) return pp_error_set(err, PP_ERR_NOMEM, "out of memory creating the driver");
    d->cfg = *cfg;
    if (cfg->loss_scale < 0 || !isfinite(cfg->loss_scale)) {
        free(d);
        return pp_error_set(err, PP_ERR_INVALID_ARG, "loss scale %g: give a positive number (or 0: no scaling)",
                            cfg->loss_scale);
    }
    d->loss_scale = cfg->loss_scale;
    if (!d->cfg.loss_scale_window) d->cfg.loss_scale_window = 2000;
    d->grid = cfg->grid;
    d->num_stages = sch->num_stages;
    d->microbatches = sch->microbatches;
    d->acts = pp_schedule_rank_actions(sch, cfg->grid->stage, &d->nacts);
    d->tag_wrap = TAG_LIMIT / (d->num_stages * 2 * MAX_PORTS);
    if (d->tag_wrap < 1) {
        free(d);
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "%d pipeline stages: message tags allow at most %d",
                            sch->num_stages, TAG_LIMIT / (2 * MAX_PORTS));
    }
    pp_status st = PP_OK;
    d->local = malloc((size_t)d->num_stages * sizeof *d->local);
    d->vs = calloc((size_t)d->num_stages, sizeof *d->vs);
    if (!d->local || !d->vs) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory creating the driver");
        goto fail;
    }
    for (int s = 0; s < d->num_stages; s++)
        d->local[s] = sch->stage_rank[s] == cfg->grid->stage ? d->nvs++ : -1;
    PP_CHECK_GOTO(init_shape_list(d, err), st, fail);
    /* each microbatch's loss seed, where the last stage's backward copies it from */
    PP_CHECK_GOTO(pp_device_alloc_as(cfg->dev, PP_MEM_COMM, (size_t)d->microbatches * sizeof *d->seeds,
                                     (void **)&d->seeds, err), st, fail);
    size_t maxport = 0;
    for (int s = 0, i = 0; s < d->num_stages; s++) {
        if (d->local[s] < 0) continue;
        PP_CHECK_GOTO(init_vstage(d, &d->vs[i], s, err), st, fail);
        for (int k = 0; k < (d->nshapes ? d->nshapes : 1); k++) {
            const pp_stage *x = d->nshapes ? d->vs[i].shape_s[k] : d->vs[i].s;
            for (int j = 0; j < pp_stage_num_inputs(x); j++)
                if (pp_stage_input(x, j)->nbytes > maxport) maxport = pp_stage_input(x, j)->nbytes;
            for (int j = 0; j < pp_stage_num_outputs(x); j++)
                if (pp_stage_output(x, j)->nbytes > maxport) maxport = pp_stage_output(x, j)->nbytes;
        }
        i++;
    }
    size_t nb = comm_buffer_bytes(maxport);
    PP_CHECK_GOTO(pp_device_alloc_as(cfg->dev, PP_MEM_COMM, nb, &d->zeros, err), st, fail);
    PP_CHECK_GOTO(pp_device_memset(cfg->dev, d->zeros, 0, nb, err), st, fail);
    PP_CHECK_GOTO(pp_device_alloc_as(cfg->dev, PP_MEM_COMM, nb, &d->scratch, err), st, fail);
    PP_CHECK_GOTO(driver_init_tied(d, err), st, fail);
    PP_CHECK_GOTO(init_norm(d, err), st, fail);
    *out = d;
    return PP_OK;
fail:
    pp_driver_destroy(d);
    return st;
}

void pp_driver_destroy(pp_driver *d)
{
    if (!d) return;
    for (int i = 0; i < d->nvs; i++) {
        vstage *v = &d->vs[i];
        driver_free_shapes(d, v);   /* v->s is the owner again, freed after the stages sharing its buffers */
        pp_stage_destroy(v->s);
        free(v->slot_of_mb);
        free(v->free_slots);
        free(v->draining);
        free(v->bw_done);
        free(v->grad_sent);
        free(v->sends);
        free(v->recv_act);
        free(v->recv_grad);
        free(v->buckets);
        if (v->reduce_buf) pp_device_free(d->cfg.dev, v->reduce_buf);
    }
    driver_free_tied(d);
    driver_graph_free(d);
    if (d->zeros) pp_device_free(d->cfg.dev, d->zeros);
    if (d->scratch) pp_device_free(d->cfg.dev, d->scratch);
    pp_device_free(d->cfg.dev, d->stats);
    pp_device_free(d->cfg.dev, d->seeds);
    free(d->stats_host);
    free(d->norm_index);
    free(d->norm_stage);
    free(d->norm_sums);
    free(d->trace);
    free(d->vs);
    free(d->local);
    free(d);
}
