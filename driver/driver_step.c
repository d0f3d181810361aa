/* The end of a step: data-parallel reductions, tied-weight sums, the loss, NaN/Inf
 * checks, the global gradient norm across stages, clipping, and the optimizer. */
#include "driver_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static float *param_grad(pp_stage *s, int value, int64_t *numel)
{
    for (int i = 0; i < pp_stage_num_params(s); i++) {
        const pp_stage_param *p = pp_stage_param_at(s, i);
        if (p->value == value) {
            *numel = p->numel;
            return pp_stage_grads(s) + p->offset;
        }
    }
    return NULL;
}

/* Sums a tied parameter's gradient over the stages of this rank, then over the ranks
 * holding it, and writes the sum back to every local copy. */
static pp_status reduce_tied(pp_driver *d, tied_group *g, pp_error *err)
{
    int64_t n = 0;
    float *first = param_grad(d->vs[g->local_stage[0]].s, g->value, &n);
    if (!first) return pp_error_set(err, PP_ERR_INTERNAL, "tied parameter %d not found in its stage", g->value);
    for (int k = 1; k < g->nlocal; k++) {
        int64_t m;
        float *other = param_grad(d->vs[g->local_stage[k]].s, g->value, &m);
        if (other) PP_CHECK(pp_kernel_accumulate(d->cfg.dev, first, other, n, err));
    }
    if (g->comm) PP_CHECK(pp_comm_allreduce(g->comm, first, (size_t)n, PP_DTYPE_F32, err));
    for (int k = 1; k < g->nlocal; k++) {
        int64_t m;
        float *other = param_grad(d->vs[g->local_stage[k]].s, g->value, &m);
        if (other) PP_CHECK(pp_device_copy(d->cfg.dev, other, first, (size_t)n * sizeof(float), err));
    }
    return PP_OK;
}

/* This rank's share of the squared global norm: every stage's gradients, with a tied
 * parameter counted once (by the rank holding its first stage, in its first copy). */
static pp_status local_sumsq(pp_driver *d, double *out, pp_error *err)
{
    double total = 0;
    for (int i = 0; i < d->nvs; i++) {
        double ss;
        PP_CHECK(pp_stage_grad_sumsq(d->vs[i].s, &ss, err));
        total += ss;
    }
    for (int t = 0; t < d->ntied; t++) {
        tied_group *g = &d->tied[t];
        for (int k = g->canonical ? 1 : 0; k < g->nlocal; k++) {
            int64_t n = 0;
            float *gr = param_grad(d->vs[g->local_stage[k]].s, g->value, &n);
            double ss;
            PP_CHECK(pp_kernel_sumsq(d->cfg.dev, gr, n, &ss, err));
            total -= ss;
        }
    }
    *out = total;
    return PP_OK;
}

/* fp16 loss scaling: the gradients (summed over replicas and tied copies by now) divided
 * by the scale, in the same pass that looks for NaN/Inf. */
static pp_status unscale(pp_driver *d, double *found, pp_error *err)
{
    for (int i = 0; i < d->nvs; i++) {
        pp_stage *s = d->vs[i].s;
        int inf = 0;
        PP_CHECK(pp_kernel_unscale(d->cfg.dev, pp_stage_grads(s), pp_stage_param_elems(s), 1.0f / d->loss_scale, &inf,
                                   err));
        if (inf) *found = 1;
    }
    return PP_OK;
}

/* The scaler's move after a step, the same on every rank (overflow is the world's flag):
 * an overflow skips the step (1) and halves a dynamic scale; window clean steps double it. */
static int update_scale(pp_driver *d, int overflow)
{
    if (overflow) {
        if (d->cfg.loss_scale_dynamic && d->loss_scale > 0x1p-24f) d->loss_scale *= 0.5f;
        d->clean_steps = 0;
        return 1;
    }
    if (d->cfg.loss_scale_dynamic && ++d->clean_steps >= d->cfg.loss_scale_window) {
        if (d->loss_scale < 0x1p100f) d->loss_scale *= 2.0f;
        d->clean_steps = 0;
    }
    return 0;
}

void pp_driver_loss_scale(const pp_driver *d, double *scale, int64_t *clean_steps)
{
    *scale = d->loss_scale;
    *clean_steps = d->clean_steps;
}

void pp_driver_set_loss_scale(pp_driver *d, double scale, int64_t clean_steps)
{
    if (!d->loss_scale || !(scale > 0)) return;   /* off, or not a scale */
    d->loss_scale = (float)scale;
    d->clean_steps = clean_steps;
}

pp_status driver_start_buckets(pp_driver *d, vstage *v, int done, pp_error *err)
{
    for (int b = 0; b < v->nbuckets; b++) {
        bucket *k = &v->buckets[b];
        if (k->started || (done >= 0 && k->ready > done)) continue;
        k->started = 1;
        float *g = pp_stage_grads(v->s) + k->offset;
        if (!v->reduce_buf) {
            PP_CHECK(pp_comm_iallreduce(d->grid->dp_comm, g, (size_t)k->count, PP_DTYPE_F32, &k->req, err));
            continue;
        }
        uint16_t *h = (uint16_t *)v->reduce_buf + k->offset;
        PP_CHECK(pp_kernel_convert(d->cfg.dev, h, PP_DTYPE_BF16, g, PP_DTYPE_F32, k->count, err));
        PP_CHECK(pp_comm_iallreduce(d->grid->dp_comm, h, (size_t)k->count, PP_DTYPE_BF16, &k->req, err));
    }
    /* let the reductions already under way progress (MPI moves data inside its calls) */
    for (int b = 0; b < v->nbuckets; b++) {
        int finished;
        if (v->buckets[b].req) PP_CHECK(pp_comm_test(d->grid->dp_comm, v->buckets[b].req, &finished, err));
    }
    return PP_OK;
}

pp_status driver_finish_step(pp_driver *d, int64_t step, float lr, pp_step_stats *stats, pp_error *err)
{
    double t0 = pp_now();
    for (int i = 0; i < d->nvs; i++)
        for (int b = 0; b < d->vs[i].nbuckets; b++) {
            const vstage *v = &d->vs[i];
            bucket *k = &v->buckets[b];
            double tb = d->trace ? pp_now() : 0;
            pp_status st = pp_comm_wait(d->grid->dp_comm, k->req, err);
            if (d->trace && k->req)
                driver_trace_comm(d, PP_EVENT_BUCKET, -1, (double)k->count * (v->reduce_buf ? 2 : sizeof(float)), tb,
                                  pp_now());
            if (st == PP_OK && k->req && v->reduce_buf)
                st = pp_kernel_convert(d->cfg.dev, pp_stage_grads(v->s) + k->offset, PP_DTYPE_F32,
                                       (uint16_t *)v->reduce_buf + k->offset, PP_DTYPE_BF16, k->count, err);
            k->req = NULL;
            k->started = 0;
            PP_CHECK(st);
        }
    for (int t = 0; t < d->ntied; t++) PP_CHECK(reduce_tied(d, &d->tied[t], err));
    /* loss, bad-gradient flag and squared norm in one reduction over the world (a flag summed
     * over every rank, stages and replicas: a step is skipped everywhere or nowhere); the
     * norm is summed over replicas too, whose gradients are equal now, so divide */
    double bad = 0;
    pp_error local = {0};
    if (d->loss_scale) PP_CHECK(unscale(d, &bad, err));
    for (int i = 0; i < d->nvs && !bad && !d->loss_scale; i++)
        if (pp_stage_check_grads(d->vs[i].s, step, &local) == PP_ERR_NUMERIC) bad = 1;
    double sums[3] = {d->loss_sum, bad, 0};
    PP_CHECK(local_sumsq(d, &sums[2], err));
    /* the norm was read on the host, after every transfer of the step: did they all land? */
    PP_CHECK(pp_comm_check(d->grid->world, err));
    if (d->grid->dp_comm) PP_CHECK(pp_comm_check(d->grid->dp_comm, err));
    PP_CHECK(pp_comm_allreduce(d->cfg.control ? d->cfg.control : d->grid->world, sums, 3, PP_DTYPE_F64, err));
    d->wait_s += pp_now() - t0;
    stats->loss = sums[0];
    stats->grad_norm = sqrt(fmax(sums[2], 0) / d->grid->dp);
    if (d->loss_scale && update_scale(d, sums[1] > 0)) {
        stats->skipped = 1;
        return PP_OK;
    }
    if (sums[1] > 0) {
        if (!d->cfg.skip_nonfinite) {
            if (local.msg[0]) return pp_error_set(err, PP_ERR_NUMERIC, "%s; pass --skip-nonfinite to skip such steps",
                                                  local.msg);
            return pp_error_set(err, PP_ERR_NUMERIC, "another rank found NaN/Inf gradients (it names the parameter)");
        }
        stats->skipped = 1;
        return PP_OK;
    }
    float scale = 1.0f;
    if (d->cfg.clip_norm > 0 && stats->grad_norm > d->cfg.clip_norm) scale = (float)(d->cfg.clip_norm / stats->grad_norm);
    if (d->cfg.before_update) PP_CHECK(d->cfg.before_update(d->cfg.before_update_user, err));
    for (int i = 0; i < d->nvs; i++) PP_CHECK(pp_stage_step(d->vs[i].s, lr, scale, step, err));
    return PP_OK;
}
