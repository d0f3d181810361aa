/* The simulator: times a lowered schedule under per-stage costs (the engine in async
 * mode), then derives makespan, bubbles, peak stashed activations and the critical path.
 * Also the closed-form bubble fractions the tests and the CLI compare against. */
#include "sched_internal.h"

#include <math.h>
#include <stdlib.h>
#include <onnxpipe/core_util.h>

void pp_costs_unit(pp_costs *c)
{
    pp_costs z = {.uniform = {.forward = 1, .backward_input = 1, .backward_weight = 1}};
    *c = z;
}

void pp_sim_result_destroy(pp_sim_result *r)
{
    if (!r) return;
    free(r->busy);
    free(r->rank_bubble);
    free(r->peak_inflight);
    free(r->peak_act_bytes);
    free(r->peak_w_pending);
    free(r->offset);
    free(r->start);
    free(r->end);
    free(r->critical);
    free(r);
}

double pp_sim_result_makespan(const pp_sim_result *r)
{
    return r->makespan;
}

double pp_sim_result_bubble(const pp_sim_result *r)
{
    return r->bubble;
}

static pp_status check_costs(const pp_schedule *s, const pp_costs *c, pp_error *err)
{
    if (c->stage && c->num_stages != s->num_stages)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "costs given for %d stages, the schedule has %d",
                            c->num_stages, s->num_stages);
    for (int st = 0; st < (c->stage ? c->num_stages : 1); st++) {
        const pp_stage_cost *x = stage_cost(c, st);
        if (!(x->forward >= 0 && x->backward_input >= 0 && x->backward_weight >= 0 && x->act_bytes >= 0 &&
              x->send_bytes >= 0 && x->send_time >= 0 && x->allreduce >= 0))
            return pp_error_set(err, PP_ERR_INVALID_ARG, "stage %d: costs must be finite and >= 0", st);
    }
    if (!(c->send_latency >= 0 && c->bandwidth >= 0 && c->allreduce >= 0 && c->optimizer >= 0))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "latency, bandwidth, all-reduce and optimizer costs must be >= 0");
    return PP_OK;
}

/* Walks each rank's actions in order: busy time and peaks of stashed microbatches. */
static void rank_stats(const pp_schedule *s, const pp_costs *c, pp_sim_result *res)
{
    for (int r = 0; r < s->pp; r++) {
        int inflight = 0, wpend = 0;
        double bytes = 0;
        for (int i = 0; i < s->count[r]; i++) {
            const pp_action *a = &s->actions[r][i];
            int g = res->offset[r] + i;
            if (action_is_compute(a->kind) || a->kind == PP_ACT_OPTIMIZER_STEP) res->busy[r] += res->end[g] - res->start[g];
            double ab = action_is_compute(a->kind) ? stage_cost(c, a->stage)->act_bytes : 0;
            if (a->kind == PP_ACT_FORWARD) {
                inflight++;
                bytes += ab;
            } else if (a->kind == PP_ACT_BACKWARD || a->kind == PP_ACT_BACKWARD_INPUT) {
                inflight--;
                bytes -= ab;
            }
            if (a->kind == PP_ACT_BACKWARD_INPUT) wpend++;
            if (a->kind == PP_ACT_BACKWARD_WEIGHT) wpend--;
            if (inflight > res->peak_inflight[r]) res->peak_inflight[r] = inflight;
            if (bytes > res->peak_act_bytes[r]) res->peak_act_bytes[r] = bytes;
            if (wpend > res->peak_w_pending[r]) res->peak_w_pending[r] = wpend;
        }
    }
}

pp_status pp_schedule_simulate(const pp_schedule *s, const pp_costs *costs, pp_sim_result **out, pp_error *err)
{
    *out = NULL;
    if (!s->lowered) return pp_error_set(err, PP_ERR_INVALID_ARG, "simulate needs a lowered schedule (call pp_schedule_lower)");
    PP_CHECK(check_costs(s, costs, err));
    engine e;
    PP_CHECK(engine_init(&e, s, RUN_ASYNC, costs, 1, err));
    pp_status st = engine_run(&e, err);
    pp_sim_result *res = NULL;
    if (st != PP_OK) goto done;
    int p = s->pp;
    long n = e.offset[p];
    res = pp_calloc(1, sizeof *res);
    if (!res) goto nomem;
    res->pp = p;
    res->busy = pp_calloc((size_t)p, sizeof *res->busy);
    res->rank_bubble = pp_calloc((size_t)p, sizeof *res->rank_bubble);
    res->peak_inflight = pp_calloc((size_t)p, sizeof *res->peak_inflight);
    res->peak_act_bytes = pp_calloc((size_t)p, sizeof *res->peak_act_bytes);
    res->peak_w_pending = pp_calloc((size_t)p, sizeof *res->peak_w_pending);
    if (!res->busy || !res->rank_bubble || !res->peak_inflight || !res->peak_act_bytes || !res->peak_w_pending)
        goto nomem;
    /* The engine's per-action arrays become the result's. */
    res->offset = e.offset;
    res->start = e.start;
    res->end = e.end;
    e.offset = NULL;
    e.start = e.end = NULL;
    long last = -1;
    for (long g = 0; g < n; g++)
        if (last < 0 || res->end[g] > res->end[last]) last = g;
    res->makespan = last >= 0 ? res->end[last] : 0;
    int len = 0;
    for (long g = last; g >= 0; g = e.pred[g]) len++;
    res->critical = pp_malloc((size_t)len * sizeof *res->critical + 1);
    if (!res->critical) goto nomem;
    res->n_critical = len;
    for (long g = last; g >= 0; g = e.pred[g]) res->critical[--len] = (int)g;
    rank_stats(s, costs, res);
    double busy = 0;
    for (int r = 0; r < p; r++) {
        busy += res->busy[r];
        res->rank_bubble[r] = res->makespan > 0 ? 1 - res->busy[r] / res->makespan : 0;
    }
    res->bubble = res->makespan > 0 ? 1 - busy / (p * res->makespan) : 0;
    goto done;
nomem:
    st = pp_error_set(err, PP_ERR_NOMEM, "out of memory for the simulation result");
done:
    engine_free(&e);
    if (st != PP_OK) {
        pp_sim_result_destroy(res);
        return st;
    }
    *out = res;
    return PP_OK;
}

/* The F, B, W a closed form reads: the uniform costs, or the stages' means (the equal
 * stages of the same work). */
static pp_stage_cost closed_form_costs(const pp_schedule *s, const pp_costs *c)
{
    if (!c->stage) return c->uniform;
    pp_stage_cost mean = {0};
    for (int i = 0; i < s->num_stages; i++) {
        mean.forward += c->stage[i].forward / s->num_stages;
        mean.backward_input += c->stage[i].backward_input / s->num_stages;
        mean.backward_weight += c->stage[i].backward_weight / s->num_stages;
    }
    return mean;
}

double pp_schedule_closed_form_bubble(const pp_schedule *s, const pp_costs *c)
{
    double p = s->pp, m = s->microbatches, v = s->chunks;
    pp_stage_cost u = closed_form_costs(s, c);
    double f = u.forward, b = u.backward_input, w = u.backward_weight;
    switch (s->kind) {
    case PP_SCHED_GPIPE:
    case PP_SCHED_1F1B: return (p - 1) / (m + p - 1);
    case PP_SCHED_INTERLEAVED: return (p - 1) / (v * m + p - 1);
    case PP_SCHED_ZB_H1: {
        if (m < p || !(f + b + w > 0)) return NAN;  /* the steady state never forms; no work */
        double idle = (p - 1) * (f + b - w);
        return idle / (m * (f + b + w) + idle);
    }
    case PP_SCHED_ZB_V: {
        /* Rank p-1 cannot start before microbatch 0 has run the p-1 forwards above it,
         * and then has 2m (F+B+W) of work: makespan >= (p-1)F + 2m(F+B+W). With F = B = W
         * and the full V formed (m >= 2p-1) the order meets that bound on every rank. */
        if (m < 2 * p - 1 || f != b || b != w || !(f > 0)) return NAN;
        return (p - 1) * f / (2 * m * (f + b + w) + (p - 1) * f);
    }
    default: return NAN;
    }
}

const char *pp_schedule_closed_form_text(const pp_schedule *s, const pp_costs *c, char *buf, size_t len)
{
    double cf = pp_schedule_closed_form_bubble(s, c);
    pp_stage_cost u = closed_form_costs(s, c);
    int p = s->pp, m = s->microbatches;
    const char *form = s->kind == PP_SCHED_INTERLEAVED ? "(p-1)/(v*m+p-1)"
                       : s->kind == PP_SCHED_ZB_H1     ? "(p-1)(F+B-W)/(m(F+B+W)+(p-1)(F+B-W))"
                       : s->kind == PP_SCHED_ZB_V      ? "(p-1)F/(2m(F+B+W)+(p-1)F)"
                                                       : "(p-1)/(m+p-1)";
    if (!isnan(cf)) snprintf(buf, len, "closed form %s = %.2f%% for equal stages and free links", form, 100 * cf);
    else if (s->kind == PP_SCHED_ZB_H1 && m < p)
        snprintf(buf, len, "no closed form: %d microbatches < pp %d, the steady state never forms", m, p);
    else if (s->kind == PP_SCHED_ZB_V && m < 2 * p - 1)
        snprintf(buf, len, "no closed form below 2pp-1 = %d microbatches (%d here)", 2 * p - 1, m);
    else if (s->kind == PP_SCHED_ZB_V && (u.forward != u.backward_input || u.backward_input != u.backward_weight))
        snprintf(buf, len, "no closed form for unequal F, B, W");
    else if (s->kind == PP_SCHED_ZB_H1 || s->kind == PP_SCHED_ZB_V)
        snprintf(buf, len, "no closed form without stage costs");
    else
        snprintf(buf, len, "no closed form for a %s schedule", pp_schedule_kind_name(s->kind));
    return buf;
}
