/* The schedule driver: walks one rank's actions for a step. Each (virtual stage,
 * microbatch) takes a stash slot when it is first touched (its activations arrive or
 * its forward runs) and gives it back once its backward is done and its input
 * gradient has been sent. Sends are asynchronous: a slot given back drains (its sends
 * finish while work goes on) and is waited for only when a microbatch needs a slot and
 * none is free, or at the end of the step. */
#include "driver_internal.h"

#include <onnxpipe/kernels.h>

#include <stdlib.h>
#include <string.h>

/* Tags name the boundary (the lower stage of the pair), the microbatch, the direction
 * and the port, so interleaved stages on the same pair of ranks never mix messages.
 * Microbatches wrap at tag_wrap: messages of one boundary keep their order (MPI keeps
 * order per peer and tag), so equal tags far apart cannot be confused. */
int driver_msg_tag(const pp_driver *d, int boundary, int mb, int grad, int port)
{
    return (((mb % d->tag_wrap) * d->num_stages + boundary) * 2 + grad) * MAX_PORTS + port;
}

vstage *driver_local(pp_driver *d, int stage)
{
    return stage >= 0 && stage < d->num_stages && d->local[stage] >= 0 ? &d->vs[d->local[stage]] : NULL;
}

static pp_status reclaim(pp_driver *d, vstage *v, int block, pp_error *err);

static pp_status touch(pp_driver *d, vstage *v, int mb, pp_error *err)
{
    if (v->slot_of_mb[mb] >= 0) return PP_OK;
    if (!v->nfree) PP_CHECK(reclaim(d, v, 1, err));
    if (!v->nfree)
        return pp_error_set(err, PP_ERR_INTERNAL, "rank %d: stage %d has no free stash slot for microbatch %d "
                            "(%d slots)", d->grid->rank, v->index, mb, v->nslots);
    v->slot_of_mb[mb] = v->free_slots[--v->nfree];
    v->bw_done[mb] = v->grad_sent[mb] = 0;
    return PP_OK;
}

pp_status driver_wait_on(pp_driver *d, pp_comm *comm, pp_request **reqs, int n, pp_error *err)
{
    double t0 = pp_now();
    int waited = 0;
    for (int i = 0; i < n; i++) {
        if (!reqs[i]) continue;
        pp_status st = pp_comm_wait(comm, reqs[i], err);
        reqs[i] = NULL;
        waited = 1;
        if (st != PP_OK) return st;
    }
    double t1 = pp_now();
    d->wait_s += t1 - t0;
    if (d->trace && waited) driver_trace_comm(d, PP_EVENT_WAIT, -1, 0, t0, t1);
    return PP_OK;
}

pp_status driver_wait_all(pp_driver *d, pp_request **reqs, int n, pp_error *err)
{
    return driver_wait_on(d, d->grid->world, reqs, n, err);
}

/* 1 when every send still reading the slot has finished (tested, not waited for). */
static int sends_done(pp_driver *d, vstage *v, int slot)
{
    pp_request **q = v->sends + (size_t)slot * 2 * MAX_PORTS;
    for (int i = 0; i < 2 * MAX_PORTS; i++) {
        int done = 1;
        pp_error ignored;   /* a failed send is reported by the wait that frees it */
        if (q[i] && pp_comm_test(d->grid->world, q[i], &done, &ignored) == PP_OK && !done) return 0;
    }
    return 1;
}

/* Frees the draining slots whose sends have finished; block: the oldest one too, waiting
 * for its sends, when no slot is free; block 2: every one. */
static pp_status reclaim(pp_driver *d, vstage *v, int block, pp_error *err)
{
    int n = 0;
    for (int k = 0; k < v->ndrain; k++) {
        int slot = v->draining[k];
        if ((block == 2 || (block && !v->nfree)) || sends_done(d, v, slot)) {
            PP_CHECK(driver_wait_all(d, v->sends + (size_t)slot * 2 * MAX_PORTS, 2 * MAX_PORTS, err));
            v->free_slots[v->nfree++] = slot;
        } else {
            v->draining[n++] = slot;
        }
    }
    v->ndrain = n;
    return PP_OK;
}

pp_status driver_drain(pp_driver *d, pp_error *err)
{
    for (int i = 0; i < d->nvs; i++) {
        PP_CHECK(reclaim(d, &d->vs[i], 2, err));
        PP_CHECK(driver_drain_shapes(d, &d->vs[i], err));
    }
    return PP_OK;
}

/* Gives the slot back (to drain) when the backward is done and the input gradient was sent. */
static pp_status try_release(pp_driver *d, vstage *v, int mb, pp_error *err)
{
    int slot = v->slot_of_mb[mb];
    if (slot < 0 || !v->bw_done[mb] || (v->index > 0 && !v->grad_sent[mb])) return PP_OK;
    v->slot_of_mb[mb] = -1;
    v->draining[v->ndrain++] = slot;
    return reclaim(d, v, 0, err);
}

pp_status driver_add_send(pp_driver *d, vstage *v, int slot, const void *buf, size_t bytes, int peer, int tag,
                          pp_error *err)
{
    pp_request **q = v->sends + (size_t)slot * 2 * MAX_PORTS;
    for (int i = 0; i < 2 * MAX_PORTS; i++)
        if (!q[i]) return pp_comm_isend(d->grid->world, buf, bytes, peer, tag, &q[i], err);
    return pp_error_set(err, PP_ERR_INTERNAL, "too many sends in flight for one slot");
}

static int is_act_input(const pp_stage *s, int i) { return !pp_stage_input(s, i)->is_data; }

/* Activation inputs come first among a stage's inputs and pair with the previous
 * stage's outputs one to one (both in value-id order). */
static pp_status copy_local_acts(pp_driver *d, vstage *from, vstage *to, int mb, pp_error *err)
{
    PP_CHECK(touch(d, to, mb, err));
    int fs = from->slot_of_mb[mb], ts = to->slot_of_mb[mb];
    for (int i = 0; i < pp_stage_num_outputs(from->s); i++)
        PP_CHECK(pp_device_copy(d->cfg.dev, pp_stage_input_buffer(to->s, ts, i), pp_stage_output_buffer(from->s, fs, i),
                                pp_stage_output(from->s, i)->nbytes, err));
    return PP_OK;
}

static pp_status copy_local_grads(pp_driver *d, vstage *from, vstage *to, int mb, pp_error *err)
{
    int fs = from->slot_of_mb[mb], ts = to->slot_of_mb[mb];
    for (int i = 0; i < pp_stage_num_outputs(to->s); i++) {
        void *dst = pp_stage_grad_output_buffer(to->s, ts, i), *src = pp_stage_grad_input_buffer(from->s, fs, i);
        size_t n = pp_stage_output(to->s, i)->nbytes;
        if (!dst) continue;
        if (src) PP_CHECK(pp_device_copy(d->cfg.dev, dst, src, n, err));
        else PP_CHECK(pp_device_memset(d->cfg.dev, dst, 0, n, err));
    }
    from->grad_sent[mb] = 1;
    return try_release(d, from, mb, err);
}

/* A microbatch's data inputs into the slot: fed (and, on the last stage, its loss seed
 * copied to the device), or, in a graph, copied from what was fed before it ran. */
static pp_status take_inputs(pp_driver *d, vstage *v, int slot, int mb, int64_t step, pp_error *err)
{
    if (d->in_graph) {
        size_t at = (size_t)mb * v->data_bytes;
        for (int i = 0; i < pp_stage_num_inputs(v->s); i++) {
            const pp_stage_port *p = pp_stage_input(v->s, i);
            if (!p->is_data) continue;
            PP_CHECK(pp_device_copy(d->cfg.dev, pp_stage_input_buffer(v->s, slot, i), (char *)v->staging + at, p->nbytes,
                                    err));
            at += p->nbytes;
        }
        return PP_OK;
    }
    if (d->cfg.feed) PP_CHECK(d->cfg.feed(d->cfg.feed_user, v->s, slot, step, mb, err));
    if (!pp_stage_loss_data(v->s, slot)) return PP_OK;
    const float seed = pp_stage_loss_seed(v->s, slot);
    return pp_device_copy_from_host(d->cfg.dev, d->seeds + mb, &seed, sizeof seed, err);
}

static pp_status do_forward(pp_driver *d, vstage *v, int mb, int64_t step, pp_error *err)
{
    PP_CHECK(touch(d, v, mb, err));
    int slot = v->slot_of_mb[mb];
    PP_CHECK(driver_check_shape(d, v, mb, 0, err));
    PP_CHECK(driver_wait_all(d, v->recv_act + (size_t)mb * MAX_PORTS, MAX_PORTS, err));
    PP_CHECK(take_inputs(d, v, slot, mb, step, err));
    double t0 = pp_now();
    PP_CHECK(pp_stage_forward(v->s, slot, step, mb, err));
    d->compute_s += pp_now() - t0;
    /* the loss's share, and whether it was NaN or Inf, into the step's sums on the device:
     * read once at the step's end (driver_read_sums), which names a bad loss's node then */
    const float *loss = pp_stage_loss_data(v->s, slot);
    if (v->index == d->num_stages - 1 && loss)
        PP_CHECK(pp_kernel_loss_add(d->cfg.dev, d->stats, loss, d->seeds + mb, mb, err));
    vstage *next = driver_local(d, v->index + 1);
    if (next) PP_CHECK(copy_local_acts(d, v, next, mb, err));
    return PP_OK;
}

static pp_status do_backward(pp_driver *d, vstage *v, int mb, pp_backward_part part, pp_error *err)
{
    int slot = v->slot_of_mb[mb];
    if (slot < 0)
        return pp_error_set(err, PP_ERR_INTERNAL, "rank %d: backward of stage %d microbatch %d before its forward",
                            d->grid->rank, v->index, mb);
    if (part & PP_BACKWARD_INPUT) {
        PP_CHECK(driver_check_shape(d, v, mb, 1, err));
        PP_CHECK(driver_wait_all(d, v->recv_grad + (size_t)mb * MAX_PORTS, MAX_PORTS, err));
    }
    double t0 = pp_now();
    PP_CHECK(pp_stage_backward(v->s, slot, part, err));
    d->compute_s += pp_now() - t0;
    if (part & PP_BACKWARD_INPUT) {
        vstage *prev = driver_local(d, v->index - 1);
        if (prev) PP_CHECK(copy_local_grads(d, v, prev, mb, err));
    }
    if (part & PP_BACKWARD_WEIGHT) {
        v->bw_done[mb] = 1;
        PP_CHECK(try_release(d, v, mb, err));
    }
    return PP_OK;
}

static pp_status do_send_act(pp_driver *d, vstage *v, int mb, int peer, pp_error *err)
{
    int slot = v->slot_of_mb[mb];
    for (int i = 0; i < pp_stage_num_outputs(v->s); i++)
        PP_CHECK(driver_add_send(d, v, slot, pp_stage_output_buffer(v->s, slot, i), pp_stage_output(v->s, i)->nbytes,
                                 peer, driver_msg_tag(d, v->index, mb, 0, i), err));
    return driver_send_shape(d, v, mb, 0, peer, err);
}

static pp_status do_recv_act(pp_driver *d, vstage *v, int mb, int peer, pp_error *err)
{
    PP_CHECK(touch(d, v, mb, err));
    int slot = v->slot_of_mb[mb];
    for (int i = 0; i < pp_stage_num_inputs(v->s); i++)
        if (is_act_input(v->s, i))
            PP_CHECK(pp_comm_irecv(d->grid->world, pp_stage_input_buffer(v->s, slot, i),
                                   pp_stage_input(v->s, i)->nbytes, peer, driver_msg_tag(d, v->index - 1, mb, 0, i),
                                   &v->recv_act[(size_t)mb * MAX_PORTS + i], err));
    return driver_recv_shape(d, v, mb, 0, peer, err);
}

/* Gradients travel for every float port; a side that has no gradient buffer for it
 * sends zeros or receives into scratch, so both sides always agree on the messages. */
static pp_status do_send_grad(pp_driver *d, vstage *v, int mb, int peer, pp_error *err)
{
    int slot = v->slot_of_mb[mb];
    for (int i = 0; i < pp_stage_num_inputs(v->s); i++) {
        const pp_stage_port *p = pp_stage_input(v->s, i);
        if (p->is_data || !pp_dtype_is_float(p->dtype)) continue;
        const void *buf = pp_stage_grad_input_buffer(v->s, slot, i);
        PP_CHECK(driver_add_send(d, v, slot, buf ? buf : d->zeros, p->nbytes, peer,
                                 driver_msg_tag(d, v->index - 1, mb, 1, i), err));
    }
    PP_CHECK(driver_send_shape(d, v, mb, 1, peer, err));
    v->grad_sent[mb] = 1;
    return try_release(d, v, mb, err);
}

static pp_status do_recv_grad(pp_driver *d, vstage *v, int mb, int peer, pp_error *err)
{
    int slot = v->slot_of_mb[mb];
    for (int i = 0; i < pp_stage_num_outputs(v->s); i++) {
        const pp_stage_port *p = pp_stage_output(v->s, i);
        if (!pp_dtype_is_float(p->dtype)) continue;
        void *buf = pp_stage_grad_output_buffer(v->s, slot, i);
        PP_CHECK(pp_comm_irecv(d->grid->world, buf ? buf : d->scratch, p->nbytes, peer,
                               driver_msg_tag(d, v->index, mb, 1, i), &v->recv_grad[(size_t)mb * MAX_PORTS + i], err));
    }
    return driver_recv_shape(d, v, mb, 1, peer, err);
}

/* The first request still under way among n, else NULL. */
static pp_request *first_pending(pp_request **q, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (q[i]) return q[i];
    return NULL;
}

/* Between a stage's ops, at most every 200 us: MPI moves every message under way inside
 * any of its calls, so testing one outstanding send or receive lets a peer's transfer
 * finish now instead of when this rank next waits (a receiver copies a large message
 * itself, so a sender's slot stays busy until the receiver enters MPI). Errors surface at
 * the waits. */
void driver_progress(void *user)
{
    pp_driver *d = user;
    const double now = pp_now();
    if (now - d->last_progress < 2e-4) return;
    d->last_progress = now;
    const size_t m = (size_t)d->microbatches * MAX_PORTS;
    for (int i = 0; i < d->nvs; i++) {
        vstage *v = &d->vs[i];
        pp_request *q = first_pending(v->recv_act, m);
        if (!q) q = first_pending(v->recv_grad, m);
        if (!q) q = first_pending(v->sends, (size_t)v->nslots * 2 * MAX_PORTS);
        if (!q) continue;
        int done;
        pp_error ignored;
        (void)pp_comm_test(d->grid->world, q, &done, &ignored);
        return;
    }
}

/* Inside the stage's last backward of the step: buckets whose gradients are final
 * start their all-reduce while the rest of backward runs. */
static void bucket_hook(void *user, int done)
{
    pp_driver *d = user;
    if (d->hook_status == PP_OK) d->hook_status = driver_start_buckets(d, d->hooked, done, &d->hook_err);
}

static pp_status run_last_backward(pp_driver *d, vstage *v, int mb, pp_backward_part part, pp_error *err)
{
    d->hooked = v;
    d->hook_status = PP_OK;
    pp_stage_set_grad_hook(v->s, bucket_hook, d);
    pp_status st = do_backward(d, v, mb, part, err);
    pp_stage_set_grad_hook(v->s, NULL, NULL);
    if (st == PP_OK && d->hook_status != PP_OK) {
        *err = d->hook_err;
        st = d->hook_status;
    }
    return st;
}

static pp_status run_action(pp_driver *d, const pp_action *a, int64_t step, pp_error *err)
{
    vstage *v = driver_local(d, a->stage);
    /* the schedule's peers are pipeline ranks; messages stay inside my replica */
    int peer = a->peer >= 0 ? pp_grid_rank_of(d->grid, a->peer, d->grid->replica) : -1;
    if (a->kind != PP_ACT_OPTIMIZER_STEP && !v)
        return pp_error_set(err, PP_ERR_INTERNAL, "rank %d: the schedule names stage %d, which this rank does not hold",
                            d->grid->rank, a->stage);
    switch (a->kind) {
    case PP_ACT_FORWARD: return do_forward(d, v, a->microbatch, step, err);
    case PP_ACT_BACKWARD:
    case PP_ACT_BACKWARD_WEIGHT: {
        pp_backward_part part = a->kind == PP_ACT_BACKWARD ? PP_BACKWARD_FULL : PP_BACKWARD_WEIGHT;
        if (a == &d->acts[v->last_backward] && d->grid->dp > 1) return run_last_backward(d, v, a->microbatch, part, err);
        return do_backward(d, v, a->microbatch, part, err);
    }
    case PP_ACT_BACKWARD_INPUT: return do_backward(d, v, a->microbatch, PP_BACKWARD_INPUT, err);
    case PP_ACT_SEND_ACT: return do_send_act(d, v, a->microbatch, peer, err);
    case PP_ACT_RECV_ACT: return do_recv_act(d, v, a->microbatch, peer, err);
    case PP_ACT_SEND_GRAD: return do_send_grad(d, v, a->microbatch, peer, err);
    case PP_ACT_RECV_GRAD: return do_recv_grad(d, v, a->microbatch, peer, err);
    /* bucket_hook started the stage's buckets during its last backward; start any left */
    case PP_ACT_REDUCE_GRADS: return d->grid->dp > 1 ? driver_start_buckets(d, v, -1, err) : PP_OK;
    case PP_ACT_OPTIMIZER_STEP: return PP_OK;   /* driver_optimizer_step runs it after the walk */
    default: return pp_error_set(err, PP_ERR_INTERNAL, "unknown action kind %d", a->kind);
    }
}

pp_status driver_walk(pp_driver *d, int64_t step, pp_error *err)
{
    PP_CHECK(pp_device_memset(d->cfg.dev, d->stats, 0, (ST_TERMS + (size_t)d->nnorm) * sizeof *d->stats, err));
    for (int i = 0; i < d->nvs; i++) {
        PP_CHECK(pp_stage_zero_grads(d->vs[i].s, err));
        pp_stage_set_loss_scale(d->vs[i].s, d->loss_scale ? d->loss_scale : 1.0f);
    }
    driver_trace_begin(d);
    char label[32];
    for (int k = 0; k < d->nacts; k++) {
        double ts = d->trace ? pp_now() : 0;
        /* the status board says what this rank runs, should a peer time out waiting for it */
        pp_comm_board_begin(step, pp_action_format(&d->acts[k], label, sizeof label));
        pp_status st = run_action(d, &d->acts[k], step, err);
        pp_comm_board_end();
        if (d->trace && d->acts[k].kind != PP_ACT_OPTIMIZER_STEP) driver_trace_add(d, &d->acts[k], ts, pp_now());
        if (st != PP_OK)
            return pp_error_prefix(err, "rank %d (stage %d, replica %d), step %lld, action %s: ", d->grid->rank,
                                   d->grid->stage, d->grid->replica, (long long)step, label);
    }
    return PP_OK;
}

void driver_reset_walk(pp_driver *d)
{
    const size_t m = (size_t)d->microbatches;
    for (int i = 0; i < d->nvs; i++) {
        vstage *v = &d->vs[i];
        for (size_t k = 0; k < m; k++) v->slot_of_mb[k] = -1;
        memset(v->bw_done, 0, m);
        memset(v->grad_sent, 0, m);
        for (int k = 0; k < v->nslots; k++) v->free_slots[k] = v->nslots - 1 - k;
        v->nfree = v->nslots;
        v->ndrain = 0;
    }
}

pp_status pp_driver_step(pp_driver *d, int64_t step, float lr, pp_step_stats *stats, pp_error *err)
{
    memset(stats, 0, sizeof *stats);
    d->compute_s = d->wait_s = 0;
    stats->loss_scale = d->loss_scale;
    int ran = 0;
    PP_CHECK(driver_graph_step(d, step, lr, stats, &ran, err));
    if (ran) return PP_OK;
    PP_CHECK(driver_walk(d, step, err));
    double ts = pp_now();
    char label[32];
    const pp_action finish = {PP_ACT_OPTIMIZER_STEP, -1, -1, -1};
    pp_comm_board_begin(step, pp_action_format(&finish, label, sizeof label));
    pp_status st = driver_drain(d, err);
    if (st == PP_OK) st = driver_optimizer_step(d, step, lr, stats, err);
    pp_comm_board_end();
    if (d->trace) driver_trace_add(d, &finish, ts, pp_now());
    if (st != PP_OK)
        return pp_error_prefix(err, "rank %d (stage %d, replica %d), step %lld: ", d->grid->rank, d->grid->stage,
                               d->grid->replica, (long long)step);
    stats->compute_s = d->compute_s;
    stats->wait_s = d->wait_s;
    return PP_OK;
}

int pp_driver_num_stages(const pp_driver *d) { return d->nvs; }
pp_stage *pp_driver_stage(pp_driver *d, int i) { return i >= 0 && i < d->nvs ? d->vs[i].s : NULL; }
int pp_driver_stage_index(const pp_driver *d, int i) { return i >= 0 && i < d->nvs ? d->vs[i].index : -1; }
