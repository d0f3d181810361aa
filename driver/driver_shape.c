/* Steps at several shapes (sequence buckets): each local stage built at every shape, the
 * ones of cfg.partition owning the buffers the others share; choosing the shape of the
 * following steps; and the header that travels with every message between stages so a
 * rank at another shape is an error that names both ranks instead of a garbled tensor
 * or a hang. */
#include "driver_internal.h"

#include <stdlib.h>

static pp_comm *control(const pp_driver *d) { return d->cfg.control ? d->cfg.control : d->grid->world; }

/* The header's place for microbatch mb (eval passes count past the step's microbatches:
 * they run one microbatch at a time, so the row wraps). */
static size_t hdr_at(const pp_driver *d, int mb, int grad) { return (size_t)(mb % d->microbatches) * 2 + (size_t)grad; }

pp_status driver_init_shapes(pp_driver *d, vstage *v, const pp_stage_options *so, pp_error *err)
{
    if (d->nshapes == 0) return PP_OK;
    size_t m2 = (size_t)d->microbatches * 2;
    v->shape_s = calloc((size_t)d->nshapes, sizeof *v->shape_s);
    v->hdr_send = calloc(m2, sizeof *v->hdr_send);
    v->hdr_recv = calloc(m2, sizeof *v->hdr_recv);
    v->hdr_in = calloc(m2 * 2, sizeof *v->hdr_in);
    if (!v->shape_s || !v->hdr_send || !v->hdr_recv || !v->hdr_in) return PP_NOMEM(err);
    pp_stage_options shared = *so;
    shared.share = v->s;
    for (int k = 0; k < d->nshapes; k++) {
        if (d->cfg.shapes[k] == d->cfg.partition) {
            v->shape_s[k] = v->s;
            continue;
        }
        pp_status st = pp_stage_create(d->cfg.shapes[k], v->index, d->cfg.dev, &shared, &v->shape_s[k], err);
        if (st != PP_OK) return pp_error_prefix(err, "shape %d: ", k);
        pp_stage_set_progress_hook(v->shape_s[k], driver_progress, d);
        pp_stage_seed_from(v->shape_s[k], d->seeds);
        if (pp_stage_num_inputs(v->shape_s[k]) != pp_stage_num_inputs(v->s) ||
            pp_stage_num_outputs(v->shape_s[k]) != pp_stage_num_outputs(v->s))
            return pp_error_set(err, PP_ERR_INVALID_ARG, "stage %d: %d inputs and %d outputs at shape %d, %d and %d at "
                                "shape %d", v->index, pp_stage_num_inputs(v->shape_s[k]),
                                pp_stage_num_outputs(v->shape_s[k]), k, pp_stage_num_inputs(v->s),
                                pp_stage_num_outputs(v->s), d->shape);
    }
    return PP_OK;
}

void driver_free_shapes(pp_driver *d, vstage *v)
{
    for (int k = 0; v->shape_s && k < d->nshapes; k++) {
        if (d->cfg.shapes[k] == d->cfg.partition) v->s = v->shape_s[k];   /* the owner: the caller frees it */
        else pp_stage_destroy(v->shape_s[k]);
    }
    free(v->shape_s);
    free(v->hdr_send);
    free(v->hdr_recv);
    free(v->hdr_in);
}

pp_status pp_driver_set_shape(pp_driver *d, int shape, pp_error *err)
{
    int n = d->nshapes ? d->nshapes : 1;
    if (shape < 0 || shape >= n)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "shape %d out of range (0..%d)", shape, n - 1);
    for (int i = 0; d->nshapes && i < d->nvs; i++) {
        vstage *v = &d->vs[i];
        pp_stage *prev = v->s;
        v->s = v->shape_s[shape];
        PP_CHECK(pp_stage_activate(v->s, prev, err));
    }
    d->shape = shape;
    d->shape_hdr[0] = shape;
    return PP_OK;
}

int pp_driver_shape(const pp_driver *d) { return d->shape; }

pp_status driver_send_shape(pp_driver *d, vstage *v, int mb, int grad, int peer, pp_error *err)
{
    if (d->nshapes < 2) return PP_OK;
    pp_request **q = &v->hdr_send[hdr_at(d, mb, grad)];
    PP_CHECK(driver_wait_on(d, control(d), q, 1, err));   /* an eval pass's earlier microbatch in the same row */
    int boundary = grad ? v->index - 1 : v->index;
    return pp_comm_isend(control(d), d->shape_hdr, sizeof d->shape_hdr, peer,
                         driver_msg_tag(d, boundary, mb, grad, SHAPE_PORT), q, err);
}

pp_status driver_recv_shape(pp_driver *d, vstage *v, int mb, int grad, int peer, pp_error *err)
{
    if (d->nshapes < 2) return PP_OK;
    size_t at = hdr_at(d, mb, grad);
    int boundary = grad ? v->index : v->index - 1;
    return pp_comm_irecv(control(d), &v->hdr_in[at * 2], 2 * sizeof *v->hdr_in, peer,
                         driver_msg_tag(d, boundary, mb, grad, SHAPE_PORT), &v->hdr_recv[at], err);
}

pp_status driver_check_shape(pp_driver *d, vstage *v, int mb, int grad, pp_error *err)
{
    size_t at = hdr_at(d, mb, grad);
    if (d->nshapes < 2 || !v->hdr_recv[at]) return PP_OK;
    PP_CHECK(driver_wait_on(d, control(d), &v->hdr_recv[at], 1, err));
    const int64_t *h = &v->hdr_in[at * 2];
    if (h[0] == d->shape) return PP_OK;
    const pp_stage_port *want = NULL, *got = NULL;
    for (int i = 0; i < pp_stage_num_inputs(v->s) && !grad; i++)   /* the first tensor, at both shapes */
        if (!pp_stage_input(v->s, i)->is_data) {
            want = pp_stage_input(v->s, i);
            if (h[0] >= 0 && h[0] < d->nshapes) got = pp_stage_input(v->shape_s[h[0]], i);
            break;
        }
    if (grad && pp_stage_num_outputs(v->s) > 0) {
        want = pp_stage_output(v->s, 0);
        if (h[0] >= 0 && h[0] < d->nshapes) got = pp_stage_output(v->shape_s[h[0]], 0);
    }
    char a[96] = "", b[96] = "";
    if (want) pp_shape_format(&want->shape, a, sizeof a);
    if (got) pp_shape_format(&got->shape, b, sizeof b);
    return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d (stage %d) runs microbatch %d at shape %d (%s %s) but rank "
                        "%lld sent its %s at shape %lld (%s): every rank must run a step at the same shape "
                        "(pp_driver_set_shape, pp_trainer_set_bucket)", d->grid->rank, v->index, mb, d->shape,
                        want ? want->name : "", a, (long long)h[1], grad ? "gradients" : "activations",
                        (long long)h[0], b);
}

pp_status driver_drain_shapes(pp_driver *d, vstage *v, pp_error *err)
{
    if (d->nshapes < 2) return PP_OK;
    return driver_wait_on(d, control(d), v->hdr_send, d->microbatches * 2, err);
}
