/* Perfetto / chrome://tracing JSON writer, streamed event by event so the same API
 * records simulated steps here and executed steps in the driver: one process per rank,
 * one thread per row (compute, comm), complete ("X") events in microseconds. */
#include "sched_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

struct pp_trace {
    pp_json j;
};

pp_status pp_trace_begin(FILE *out, pp_trace **t, pp_error *err)
{
    *t = pp_calloc(1, sizeof **t);
    if (!*t) return pp_error_set(err, PP_ERR_NOMEM, "out of memory for a trace");
    pp_json_init(&(*t)->j, out, 0);
    pp_json_begin_object(&(*t)->j, NULL);
    pp_json_string(&(*t)->j, "displayTimeUnit", "ms");
    pp_json_begin_array(&(*t)->j, "traceEvents");
    return PP_OK;
}

void pp_trace_name(pp_trace *t, int rank, int row, const char *name)
{
    pp_json *j = &t->j;
    pp_json_begin_object(j, NULL);
    pp_json_string(j, "name", row < 0 ? "process_name" : "thread_name");
    pp_json_string(j, "ph", "M");
    pp_json_int(j, "pid", rank);
    if (row >= 0) pp_json_int(j, "tid", row);
    pp_json_begin_object(j, "args");
    pp_json_string(j, "name", name);
    pp_json_end_object(j);
    pp_json_end_object(j);
}

void pp_trace_event(pp_trace *t, int rank, int row, const char *name, double t_start, double t_end)
{
    pp_json *j = &t->j;
    pp_json_begin_object(j, NULL);
    pp_json_string(j, "name", name);
    pp_json_string(j, "ph", "X");
    pp_json_int(j, "pid", rank);
    pp_json_int(j, "tid", row);
    pp_json_double(j, "ts", t_start * 1e6);
    pp_json_double(j, "dur", (t_end - t_start) * 1e6);
    pp_json_end_object(j);
}

pp_status pp_trace_end(pp_trace *t, pp_error *err)
{
    if (!t) return PP_OK;
    pp_json_end_array(&t->j);
    pp_json_end_object(&t->j);
    pp_json_finish(&t->j);
    int bad = fflush(t->j.out) != 0 || ferror(t->j.out);
    int e = errno;
    free(t);
    if (bad) return pp_error_set(err, PP_ERR_IO, "writing the trace failed: %s", strerror(e));
    return PP_OK;
}

pp_status pp_schedule_write_trace(const pp_schedule *s, const pp_sim_result *r, FILE *out, pp_error *err)
{
    pp_trace *t;
    char name[48], label[64];
    PP_CHECK(pp_trace_begin(out, &t, err));
    for (int rk = 0; rk < s->pp; rk++) {
        snprintf(label, sizeof label, "rank %d", rk);
        pp_trace_name(t, rk, -1, label);
        pp_trace_name(t, rk, PP_TRACE_ROW_COMPUTE, "compute");
        pp_trace_name(t, rk, PP_TRACE_ROW_COMM, "comm");
        for (int i = 0; i < s->count[rk]; i++) {
            const pp_action *a = &s->actions[rk][i];
            int g = r->offset[rk] + i;
            int row = (action_is_compute(a->kind) || a->kind == PP_ACT_OPTIMIZER_STEP) ? PP_TRACE_ROW_COMPUTE
                                                                                         : PP_TRACE_ROW_COMM;
            /* A receive shows only the time spent waiting for its data. */
            if (row == PP_TRACE_ROW_COMM && r->end[g] <= r->start[g]) continue;
            pp_action_format(a, name, sizeof name);
            pp_trace_event(t, rk, row, name, r->start[g], r->end[g]);
        }
    }
    return pp_trace_end(t, err);
}
