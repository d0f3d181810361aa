/* Executed steps as Perfetto / chrome://tracing JSON: each rank records when each of
 * its actions ran (compute on one row, messages and reductions on another), and what it
 * waited for; rank 0 gathers the records and writes them with the same trace writer the
 * simulator uses. The records are public (pp_driver_events) for the profiler in train/. */
#include "driver_internal.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

void driver_trace_begin(pp_driver *d)
{
    d->ntrace = 0;
    d->trace_t0 = pp_now();
}

static pp_driver_event *next_rec(pp_driver *d)
{
    if (d->ntrace == d->trace_cap) {   /* waits come on top of the actions: grow (rarely) */
        pp_driver_event *t = pp_realloc_array(d->trace, (size_t)d->trace_cap * 2, sizeof *t);
        if (!t) return NULL;
        d->trace = t;
        d->trace_cap *= 2;
    }
    return &d->trace[d->ntrace++];
}

/* What an action moves: its stage's activations or their gradients (float ports). */
static double action_bytes(pp_driver *d, const pp_action *a)
{
    vstage *v = driver_local(d, a->stage);
    double n = 0;
    if (!v) return 0;
    int out = a->kind == PP_ACT_SEND_ACT || a->kind == PP_ACT_RECV_GRAD;
    int in = a->kind == PP_ACT_RECV_ACT || a->kind == PP_ACT_SEND_GRAD;
    for (int i = 0; out && i < pp_stage_num_outputs(v->s); i++) n += (double)pp_stage_output(v->s, i)->nbytes;
    for (int i = 0; in && i < pp_stage_num_inputs(v->s); i++)
        if (!pp_stage_input(v->s, i)->is_data) n += (double)pp_stage_input(v->s, i)->nbytes;
    if (a->kind == PP_ACT_REDUCE_GRADS) n = (double)pp_stage_param_elems(v->s) * sizeof(float);
    return n;
}

void driver_trace_add(pp_driver *d, const pp_action *a, double t_start, double t_end)
{
    if (!d->trace) return;
    pp_driver_event *r = next_rec(d);
    if (!r) return;
    *r = (pp_driver_event){
        .kind = a->kind, .stage = a->stage, .microbatch = a->microbatch,
        .peer = a->peer >= 0 ? pp_grid_rank_of(d->grid, a->peer, d->grid->replica) : -1,
        .bytes = action_bytes(d, a), .t_start = t_start - d->trace_t0, .t_end = t_end - d->trace_t0,
    };
}

void driver_trace_comm(pp_driver *d, int kind, int peer, double bytes, double t_start, double t_end)
{
    pp_driver_event *r = d->trace ? next_rec(d) : NULL;
    if (r)
        *r = (pp_driver_event){kind, -1, -1, peer, bytes, t_start - d->trace_t0, t_end - d->trace_t0};
}

pp_status pp_driver_record(pp_driver *d, int on, pp_error *err)
{
    if (!on) {
        free(d->trace);
        d->trace = NULL;
        d->trace_cap = 0;
        return PP_OK;
    }
    if (!d->trace) {
        d->trace_cap = 2 * d->nacts + 16;
        if (!(d->trace = calloc((size_t)d->trace_cap, sizeof *d->trace)))
            return pp_error_set(err, PP_ERR_NOMEM, "out of memory for the step trace");
    }
    return PP_OK;
}

int pp_driver_events(const pp_driver *d, const pp_driver_event **out)
{
    *out = d->trace;
    return d->trace ? d->ntrace : 0;
}

double pp_driver_step_start(const pp_driver *d) { return d->trace_t0; }

static int is_compute(int kind)
{
    return kind == PP_ACT_FORWARD || kind == PP_ACT_BACKWARD || kind == PP_ACT_BACKWARD_INPUT ||
           kind == PP_ACT_BACKWARD_WEIGHT || kind == PP_ACT_OPTIMIZER_STEP;
}

void pp_driver_event_label(const pp_driver_event *e, char *buf, size_t len)
{
    if (e->kind == PP_EVENT_WAIT) snprintf(buf, len, "wait");
    else if (e->kind == PP_EVENT_BUCKET) snprintf(buf, len, "allreduce bucket");
    else pp_action_format(&(pp_action){e->kind, e->stage, e->microbatch, -1}, buf, len);
}

pp_status pp_driver_write_trace(pp_driver *d, pp_comm *control, FILE *out, pp_error *err)
{
    if (!d->trace) return pp_error_set(err, PP_ERR_INVALID_ARG, "no step was recorded (pp_driver_record)");
    int size = pp_comm_size(control), most = 0;
    int *counts = malloc((size_t)size * sizeof *counts);
    if (!counts) return PP_NOMEM(err);
    pp_status st = pp_comm_allgather(control, &d->ntrace, counts, sizeof(int), err);
    for (int r = 0; st == PP_OK && r < size; r++)
        if (counts[r] > most) most = counts[r];
    pp_driver_event *mine = calloc((size_t)most + 1, sizeof *mine),
                    *all = calloc((size_t)size * (size_t)(most + 1), sizeof *all);
    if (st == PP_OK && (!mine || !all)) st = PP_NOMEM(err);
    if (st == PP_OK) {
        memcpy(mine, d->trace, (size_t)d->ntrace * sizeof *mine);
        st = pp_comm_allgather(control, mine, all, (size_t)(most + 1) * sizeof *mine, err);
    }
    pp_trace *t = NULL;
    if (st == PP_OK && pp_comm_rank(control) == 0 && (st = pp_trace_begin(out, &t, err)) == PP_OK) {
        for (int r = 0; r < size; r++) {
            char name[64];
            snprintf(name, sizeof name, "rank %d", r);
            pp_trace_name(t, r, -1, name);
            pp_trace_name(t, r, PP_TRACE_ROW_COMPUTE, "compute");
            pp_trace_name(t, r, PP_TRACE_ROW_COMM, "messages and reductions");
            for (int k = 0; k < counts[r]; k++) {
                const pp_driver_event *e = &all[(size_t)r * (size_t)(most + 1) + (size_t)k];
                char label[32];
                pp_driver_event_label(e, label, sizeof label);
                pp_trace_event(t, r, is_compute(e->kind) ? PP_TRACE_ROW_COMPUTE : PP_TRACE_ROW_COMM, label,
                               e->t_start, e->t_end);
            }
        }
        st = pp_trace_end(t, err);
    }
    free(counts);
    free(mine);
    free(all);
    return st;
}
