/* The end of a step: data-parallel reductions, tied-weight sums, the loss, NaN/Inf
 * checks, the global gradient norm across stages, clipping, and the optimizer. The checks
 * stay on the device until one read of the step's sums (d->stats): each microbatch's loss
 * was added there as it was computed (driver.c), the gradients' squares are added here, and
 * a NaN or Inf shows as a bad loss or a squared norm that is not finite. */
#include "driver_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/kernels.h>

/* The squared norm's terms: every parameter's sum of squares (one kernel call over its
 * own elements, the same call on every layout), from replica 0 and, for a tied one, from
 * the first stage holding it, into its place among the step's sums (d->stats, on the
 * device); the other places stay 0, so the world's sum of the vectors is exact and every
 * rank adds the terms in one order. */
static pp_status param_sumsq(pp_driver *d, pp_error *err)
{
    for (int i = 0; i < d->nvs && d->grid->replica == 0; i++) {
        pp_stage *s = d->vs[i].s;
        for (int j = 0; j < pp_stage_num_params(s); j++) {
            const pp_stage_param *p = pp_stage_param_at(s, j);
            if (d->norm_stage[p->value] >= 0 && d->norm_stage[p->value] != d->vs[i].index) continue;
            PP_CHECK(pp_kernel_sumsq_add(d->cfg.dev, pp_stage_grads(s) + p->offset, p->numel,
                                         d->stats + ST_TERMS + d->norm_index[p->value], err));
        }
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

/* The data-parallel buckets' all-reduces finished (and widened back from bfloat16), then
 * the tied sums. */
static pp_status finish_reductions(pp_driver *d, pp_error *err)
{
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
    return PP_OK;
}

pp_status driver_read_sums(pp_driver *d, pp_error *err)
{
    const int dp = d->grid->dp;
    double *sums = d->norm_sums, *st = d->stats_host;
    /* the step's one read of the device: all its sums at once */
    PP_CHECK(pp_device_copy_to_host(d->cfg.dev, st, d->stats, (ST_TERMS + (size_t)d->nnorm) * sizeof *st, err));
    memset(sums, 0, (2 + (size_t)dp) * sizeof *sums);
    sums[0] = st[ST_LOSS];
    sums[1] = st[ST_BAD_LOSSES];
    if (st[ST_BAD_LOSSES] > 0) sums[2 + d->grid->replica] = st[ST_FIRST_BAD] + 1;
    memcpy(sums + 2 + dp, st + ST_TERMS, (size_t)d->nnorm * sizeof *sums);
    /* did every transfer of the step land (the sums were read after all of them)? */
    PP_CHECK(pp_comm_check(d->grid->world, err));
    if (d->grid->dp_comm) PP_CHECK(pp_comm_check(d->grid->dp_comm, err));
    return pp_comm_allreduce(d->cfg.control ? d->cfg.control : d->grid->world, sums, 2 + (size_t)dp + (size_t)d->nnorm,
                             PP_DTYPE_F64, err);
}

pp_status driver_optimizer_step(pp_driver *d, int64_t step, float lr, pp_step_stats *stats, pp_error *err)
{
    double t0 = pp_now();
    PP_CHECK(finish_reductions(d, err));
    /* fp16 loss scaling: the summed gradients unscaled; an overflow shows in the norm */
    for (int i = 0; i < d->nvs && d->loss_scale; i++)
        PP_CHECK(pp_kernel_scale(d->cfg.dev, pp_stage_grads(d->vs[i].s), pp_stage_param_elems(d->vs[i].s),
                                 1.0f / d->loss_scale, err));
    PP_CHECK(param_sumsq(d, err));
    PP_CHECK(driver_read_sums(d, err));
    d->wait_s += pp_now() - t0;
    return driver_finish_step(d, step, lr, 1, stats, err);
}

pp_status driver_device_tail(pp_driver *d, int64_t step, pp_error *err)
{
    PP_CHECK(finish_reductions(d, err));
    PP_CHECK(param_sumsq(d, err));
    for (int i = 0; i < d->nvs; i++) {
        pp_stage *s = d->vs[i].s;
        PP_CHECK(pp_kernel_optim_decide(d->cfg.dev, d->stats + ST_TERMS, d->nnorm, d->stats + ST_BAD_LOSSES,
                                        d->cfg.clip_norm, pp_stage_optim_step(s), err));
        PP_CHECK(pp_stage_update(s, step, err));
    }
    return PP_OK;
}

/* The step cannot go on: a microbatch's loss, or a gradient, was NaN or Inf. Says where:
 * the node whose output first held one (the replica's first bad microbatch run again on
 * every stage), or the parameter whose gradient does. */
static pp_status explain_nonfinite(pp_driver *d, int64_t step, const double *sums, pp_error *err)
{
    pp_error found = {0};
    const int mb = (int)sums[2 + d->grid->replica] - 1;
    if (sums[1] > 0) {
        if (mb >= 0) PP_CHECK(driver_diagnose_walk(d, step, mb, &found, err));
    } else {
        for (int i = 0; i < d->nvs && !found.msg[0]; i++) (void)pp_stage_check_grads(d->vs[i].s, step, &found);
    }
    if (found.msg[0]) return pp_error_set(err, PP_ERR_NUMERIC, "%s; pass --skip-nonfinite to skip such steps", found.msg);
    if (sums[1] > 0)
        return pp_error_set(err, PP_ERR_NUMERIC, "step %lld: the loss of %.0f microbatch(es) was NaN or Inf%s", (long long)step,
                            sums[1], mb >= 0 ? " (the rank where a stage's output first held one names the node)"
                                             : " in another replica (its ranks name the node)");
    return pp_error_set(err, PP_ERR_NUMERIC, "another rank found NaN/Inf gradients (it names the parameter)");
}

pp_status driver_finish_step(pp_driver *d, int64_t step, float lr, int update, pp_step_stats *stats, pp_error *err)
{
    const double *sums = d->norm_sums;
    double sumsq = 0;
    for (int i = 0; i < d->nnorm; i++) sumsq += sums[2 + d->grid->dp + i];
    stats->loss = sums[0];
    stats->grad_norm = sqrt(sumsq);
    pp_optim_step decided;   /* what a graph's step decided on the device, from the same sums */
    pp_optim_step_decide(sumsq, sums[1], d->cfg.clip_norm, &decided);
    if (d->loss_scale && update_scale(d, decided.skip)) {
        stats->skipped = 1;
        return PP_OK;
    }
    if (decided.skip) {
        if (!d->cfg.skip_nonfinite) return explain_nonfinite(d, step, sums, err);
        stats->skipped = 1;
        return PP_OK;
    }
    if (!update) return PP_OK;
    if (d->cfg.before_update) PP_CHECK(d->cfg.before_update(d->cfg.before_update_user, err));
    for (int i = 0; i < d->nvs; i++) PP_CHECK(pp_stage_step(d->vs[i].s, lr, decided.grad_scale, step, err));
    return PP_OK;
}
