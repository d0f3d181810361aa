/* Forward-only passes through the pipeline: evaluation, and the diagnosis of a step whose
 * loss was NaN or Inf (one microbatch again, every op's outputs checked). Every local
 * stage runs its microbatches in order, (microbatch, stage) ascending on every rank, so
 * receives match sends without a schedule; nothing is kept for backward and no gradient
 * is made. */
#include "driver_internal.h"

#include <string.h>

/* Activations for microbatch mb into v's slot: from the local previous stage (copied
 * when it ran) or received from the rank holding it. */
static pp_status eval_inputs(pp_driver *d, vstage *v, int slot, int mb, pp_error *err)
{
    if (v->index == 0 || driver_local(d, v->index - 1)) return PP_OK;
    int peer = pp_grid_rank_of(d->grid, d->cfg.schedule->stage_rank[v->index - 1], d->grid->replica);
    pp_request **q = v->recv_act;   /* microbatch 0's row: nothing else is in flight here */
    for (int i = 0; i < pp_stage_num_inputs(v->s); i++)
        if (!pp_stage_input(v->s, i)->is_data)
            PP_CHECK(pp_comm_irecv(d->grid->world, pp_stage_input_buffer(v->s, slot, i),
                                   pp_stage_input(v->s, i)->nbytes, peer, driver_msg_tag(d, v->index - 1, mb, 0, i),
                                   &q[i], err));
    PP_CHECK(driver_recv_shape(d, v, mb, 0, peer, err));
    PP_CHECK(driver_check_shape(d, v, mb, 0, err));
    return driver_wait_all(d, q, MAX_PORTS, err);
}

/* Outputs to the next stage: copied into its slot when it is local, else sent. */
static pp_status eval_outputs(pp_driver *d, vstage *v, int slot, int mb, pp_error *err)
{
    if (v->index == d->num_stages - 1) return PP_OK;
    vstage *next = driver_local(d, v->index + 1);
    int peer = next ? -1 : pp_grid_rank_of(d->grid, d->cfg.schedule->stage_rank[v->index + 1], d->grid->replica);
    for (int i = 0; i < pp_stage_num_outputs(v->s); i++) {
        const void *src = pp_stage_output_buffer(v->s, slot, i);
        size_t n = pp_stage_output(v->s, i)->nbytes;
        if (next) {
            PP_CHECK(pp_device_copy(d->cfg.dev, pp_stage_input_buffer(next->s, mb % next->nslots, i), src, n, err));
        } else {
            PP_CHECK(driver_add_send(d, v, slot, src, n, peer, driver_msg_tag(d, v->index, mb, 0, i), err));
        }
    }
    return next ? PP_OK : driver_send_shape(d, v, mb, 0, peer, err);
}

/* What runs on each stage's slot once its inputs are there (then its outputs go on). */
typedef pp_status (*walk_fn)(pp_driver *d, vstage *v, int slot, int64_t mb, void *user, pp_error *err);

static pp_status walk(pp_driver *d, int64_t key, int64_t mb0, int64_t mb1, pp_feed_fn feed, void *feed_user,
                      walk_fn run, void *user, pp_error *err)
{
    for (int64_t mb = mb0; mb < mb1; mb++) {
        for (int k = 0; k < d->num_stages; k++) {
            vstage *v = driver_local(d, k);
            if (!v) continue;
            int slot = (int)(mb % v->nslots);
            /* the slot's previous sends must have left before its outputs are overwritten */
            PP_CHECK(driver_wait_all(d, v->sends + (size_t)slot * 2 * MAX_PORTS, 2 * MAX_PORTS, err));
            PP_CHECK(eval_inputs(d, v, slot, (int)mb, err));
            if (feed) PP_CHECK(feed(feed_user, v->s, slot, key, mb, err));
            PP_CHECK(run(d, v, slot, mb, user, err));
            PP_CHECK(eval_outputs(d, v, slot, (int)mb, err));
        }
    }
    for (int i = 0; i < d->nvs; i++) {
        PP_CHECK(driver_wait_all(d, d->vs[i].sends, d->vs[i].nslots * 2 * MAX_PORTS, err));
        PP_CHECK(driver_drain_shapes(d, &d->vs[i], err));
    }
    return PP_OK;
}

typedef struct eval_run {
    int64_t key;
    pp_observe_fn observe;
    void *user;
} eval_run;

static pp_status eval_one(pp_driver *d, vstage *v, int slot, int64_t mb, void *user, pp_error *err)
{
    const eval_run *e = user;
    PP_CHECK(pp_stage_forward(v->s, slot, e->key, mb, err));
    if (v->index == d->num_stages - 1 && e->observe) PP_CHECK(e->observe(e->user, v->s, slot, mb, err));
    return PP_OK;
}

pp_status pp_driver_forward(pp_driver *d, int64_t key, int64_t microbatches, pp_feed_fn feed, void *feed_user,
                            pp_observe_fn observe, void *observe_user, pp_error *err)
{
    for (int i = 0; i < d->nvs; i++) pp_stage_set_training(d->vs[i].s, 0);
    eval_run e = {key, observe, observe_user};
    pp_status st = walk(d, key, 0, microbatches, feed, feed_user, eval_one, &e, err);
    for (int i = 0; i < d->nvs; i++) pp_stage_set_training(d->vs[i].s, d->cfg.stage_options.training);
    if (st != PP_OK)
        return pp_error_prefix(err, "rank %d (stage %d, replica %d), forward-only pass: ", d->grid->rank,
                               d->grid->stage, d->grid->replica);
    return PP_OK;
}

typedef struct diagnosis {
    int64_t step;
    pp_error *found;    /* this rank's first finding */
} diagnosis;

/* The stage's forward, every op's outputs checked; a finding is kept (the first) and the
 * walk goes on, so that the later stages get their inputs and the ranks stay together. */
static pp_status diagnose_one(pp_driver *d, vstage *v, int slot, int64_t mb, void *user, pp_error *err)
{
    (void)d;
    diagnosis *x = user;
    pp_error here = {0};
    pp_status st = pp_stage_diagnose(v->s, slot, x->step, mb, &here);
    if (st == PP_ERR_NUMERIC) {
        if (!x->found->msg[0]) *x->found = here;
        return PP_OK;
    }
    if (st != PP_OK) *err = here;
    return st;
}

pp_status driver_diagnose_walk(pp_driver *d, int64_t step, int mb, pp_error *found, pp_error *err)
{
    diagnosis x = {step, found};
    pp_status st = walk(d, step, mb, mb + 1, d->cfg.feed, d->cfg.feed_user, diagnose_one, &x, err);
    if (st != PP_OK)
        return pp_error_prefix(err, "rank %d (stage %d, replica %d), step %lld, diagnosing microbatch %d's NaN/Inf "
                               "loss: ", d->grid->rank, d->grid->stage, d->grid->replica, (long long)step, mb);
    return PP_OK;
}
