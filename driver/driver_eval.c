/* Forward-only passes through the pipeline (evaluation): every local stage runs its
 * microbatches in order, (microbatch, stage) ascending on every rank, so receives match
 * sends without a schedule; nothing is kept for backward and no gradient is made. */
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

static pp_status eval_walk(pp_driver *d, int64_t key, int64_t microbatches, pp_feed_fn feed, void *feed_user,
                           pp_observe_fn observe, void *observe_user, pp_error *err)
{
    for (int64_t mb = 0; mb < microbatches; mb++) {
        for (int k = 0; k < d->num_stages; k++) {
            vstage *v = driver_local(d, k);
            if (!v) continue;
            int slot = (int)(mb % v->nslots);
            /* the slot's previous sends must have left before its outputs are overwritten */
            PP_CHECK(driver_wait_all(d, v->sends + (size_t)slot * 2 * MAX_PORTS, 2 * MAX_PORTS, err));
            PP_CHECK(eval_inputs(d, v, slot, (int)mb, err));
            if (feed) PP_CHECK(feed(feed_user, v->s, slot, key, mb, err));
            PP_CHECK(pp_stage_forward(v->s, slot, key, mb, err));
            if (k == d->num_stages - 1 && observe) PP_CHECK(observe(observe_user, v->s, slot, mb, err));
            PP_CHECK(eval_outputs(d, v, slot, (int)mb, err));
        }
    }
    for (int i = 0; i < d->nvs; i++) {
        PP_CHECK(driver_wait_all(d, d->vs[i].sends, d->vs[i].nslots * 2 * MAX_PORTS, err));
        PP_CHECK(driver_drain_shapes(d, &d->vs[i], err));
    }
    return PP_OK;
}

pp_status pp_driver_forward(pp_driver *d, int64_t key, int64_t microbatches, pp_feed_fn feed, void *feed_user,
                            pp_observe_fn observe, void *observe_user, pp_error *err)
{
    for (int i = 0; i < d->nvs; i++) pp_stage_set_training(d->vs[i].s, 0);
    pp_status st = eval_walk(d, key, microbatches, feed, feed_user, observe, observe_user, err);
    for (int i = 0; i < d->nvs; i++) pp_stage_set_training(d->vs[i].s, d->cfg.stage_options.training);
    if (st != PP_OK)
        return pp_error_prefix(err, "rank %d (stage %d, replica %d), forward-only pass: ", d->grid->rank,
                               d->grid->stage, d->grid->replica);
    return PP_OK;
}
