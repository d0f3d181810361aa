/* The end of a step: data-parallel reductions, tied-weight sums, the loss, NaN/Inf
 * checks, the global gradient norm across stages, clipping, and the optimizer. */
#include "driver_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <onnxpipe/kernels.h>

/* The squared norm's terms: every parameter's sum of squares (one kernel call over its
 * own elements, the same call on every layout), from replica 0 and, for a tied one, from
 * the first stage holding it, into its place in sq[]; the other places stay 0, so the
 * world's sum of the vectors is exact and every rank adds the terms in one order. */
static pp_status param_sumsq(pp_driver *d, double *sq, pp_error *err)
{
    memset(sq, 0, (size_t)d->nnorm * sizeof *sq);
    for (int i = 0; i < d->nvs && d->grid->replica == 0; i++) {
        pp_stage *s = d->vs[i].s;
        for (int j = 0; j < pp_stage_num_params(s); j++) {
            const pp_stage_param *p = pp_stage_param_at(s, j);
            if (d->norm_stage[p->value] >= 0 && d->norm_stage[p->value] != d->vs[i].index) continue;
            PP_CHECK(pp_kernel_sumsq(d->cfg.dev, pp_stage_grads(s) + p->offset, p->numel, &sq[d->norm_index[p->value]],
                                     err));
        }
    }
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

pp_status driver_optimizer_step(pp_driver *d, int64_t step, float lr, pp_step_stats *stats, pp_error *err)
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
    for (int t = 0; t < d->ntied; t++) PP_CHECK(driver_reduce_tied(d, &d->tied[t], err));
    /* loss, bad-gradient flag and the norm's terms in one reduction over the world (a flag
     * summed over every rank, stages and replicas: a step is skipped everywhere or nowhere) */
    double bad = 0;
    pp_error local = {0};
    if (d->loss_scale) PP_CHECK(unscale(d, &bad, err));
    for (int i = 0; i < d->nvs && !bad && !d->loss_scale; i++)
        if (pp_stage_check_grads(d->vs[i].s, step, &local) == PP_ERR_NUMERIC) bad = 1;
    double *sums = d->norm_sums, sumsq = 0;
    sums[0] = d->loss_sum, sums[1] = bad;
    PP_CHECK(param_sumsq(d, sums + 2, err));
    /* the norm was read on the host, after every transfer of the step: did they all land? */
    PP_CHECK(pp_comm_check(d->grid->world, err));
    if (d->grid->dp_comm) PP_CHECK(pp_comm_check(d->grid->dp_comm, err));
    PP_CHECK(pp_comm_allreduce(d->cfg.control ? d->cfg.control : d->grid->world, sums, 2 + (size_t)d->nnorm,
                               PP_DTYPE_F64, err));
    d->wait_s += pp_now() - t0;
    for (int i = 0; i < d->nnorm; i++) sumsq += sums[2 + i];
    stats->loss = sums[0];
    stats->grad_norm = sqrt(sumsq);
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
