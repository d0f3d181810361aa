/* Executed steps as Perfetto / chrome://tracing JSON: each rank records when each of
 * its actions ran (compute on one row, messages and reductions on another); rank 0
 * gathers the records and writes them with the same trace writer the simulator uses. */
#include "driver_internal.h"

#include <stdlib.h>
#include <string.h>

void driver_trace_begin(pp_driver *d)
{
    d->ntrace = 0;
    d->trace_t0 = pp_now();
}

void driver_trace_add(pp_driver *d, const pp_action *a, double t_start, double t_end)
{
    if (!d->trace || d->ntrace >= d->nacts) return;
    trace_rec *r = &d->trace[d->ntrace++];
    r->v[0] = a->kind;
    r->v[1] = a->stage;
    r->v[2] = a->microbatch;
    r->v[3] = t_start - d->trace_t0;
    r->v[4] = t_end - d->trace_t0;
}

pp_status pp_driver_record(pp_driver *d, int on, pp_error *err)
{
    if (!on) {
        free(d->trace);
        d->trace = NULL;
        return PP_OK;
    }
    if (!d->trace && !(d->trace = calloc((size_t)d->nacts + 1, sizeof *d->trace)))
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory for the step trace");
    return PP_OK;
}

static int is_compute(int kind)
{
    return kind == PP_ACT_FORWARD || kind == PP_ACT_BACKWARD || kind == PP_ACT_BACKWARD_INPUT ||
           kind == PP_ACT_BACKWARD_WEIGHT || kind == PP_ACT_OPTIMIZER_STEP;
}

pp_status pp_driver_write_trace(pp_driver *d, pp_comm *control, FILE *out, pp_error *err)
{
    if (!d->trace) return pp_error_set(err, PP_ERR_INVALID_ARG, "no step was recorded (pp_driver_record)");
    int size = control->size, most = 0;
    int *counts = malloc((size_t)size * sizeof *counts);
    if (!counts) return pp_error_set(err, PP_ERR_NOMEM, "out of memory");
    pp_status st = pp_comm_allgather(control, &d->ntrace, counts, sizeof(int), err);
    for (int r = 0; st == PP_OK && r < size; r++)
        if (counts[r] > most) most = counts[r];
    trace_rec *mine = calloc((size_t)most + 1, sizeof *mine), *all = calloc((size_t)size * (size_t)(most + 1), sizeof *all);
    if (st == PP_OK && (!mine || !all)) st = pp_error_set(err, PP_ERR_NOMEM, "out of memory");
    if (st == PP_OK) {
        memcpy(mine, d->trace, (size_t)d->ntrace * sizeof *mine);
        st = pp_comm_allgather(control, mine, all, (size_t)(most + 1) * sizeof *mine, err);
    }
    pp_trace *t = NULL;
    if (st == PP_OK && control->rank == 0 && (st = pp_trace_begin(out, &t, err)) == PP_OK) {
        for (int r = 0; r < size; r++) {
            char name[64];
            snprintf(name, sizeof name, "rank %d", r);
            pp_trace_name(t, r, -1, name);
            pp_trace_name(t, r, PP_TRACE_ROW_COMPUTE, "compute");
            pp_trace_name(t, r, PP_TRACE_ROW_COMM, "messages and reductions");
            for (int k = 0; k < counts[r]; k++) {
                const double *v = all[(size_t)r * (size_t)(most + 1) + (size_t)k].v;
                pp_action a = {(int32_t)v[0], (int32_t)v[1], (int32_t)v[2], -1};
                char label[32];
                pp_action_format(&a, label, sizeof label);
                pp_trace_event(t, r, is_compute(a.kind) ? PP_TRACE_ROW_COMPUTE : PP_TRACE_ROW_COMM, label, v[3], v[4]);
            }
        }
        st = pp_trace_end(t, err);
    }
    free(counts);
    free(mine);
    free(all);
    return st;
}
