/* Profiling of chosen steps (--profile-steps A:B --profile FILE): every rank keeps each
 * op's forward and backward (stage events), each action, message wait and all-reduce
 * bucket (driver events); after step B rank 0 gathers them into one Perfetto JSON (a
 * process per rank; threads for ops, communication and schedule actions), prints a per-op
 * table like torch.profiler's key_averages(), and the measured bubble per rank next to the
 * simulator's for the same (measured) stage costs, and to its replay of every action's
 * measured time (which keeps what the means smooth away: one slow microbatch delays the
 * whole pipeline). The input row holds the feeds' time (waiting for the data read ahead,
 * copying it) and the reader thread's reads, which overlap the steps. Other steps pay one
 * NULL test per op. */
#include "job_internal.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

enum { ROW_OPS, ROW_COMM, ROW_ACTIONS, ROW_INPUT, NROWS };
enum { C_F, C_B, C_BI, C_BW, NCOST };   /* per stage: seconds and count of each compute action */

typedef struct prof_rec {
    double t_start, t_end, flops, bytes;    /* s from the start of step A on this rank */
    int32_t row, peer, stage, step, backward, pad;
    char name[64], op_type[32], shapes[192];
} prof_rec;

struct train_prof {
    int64_t first, last;
    int started, done, keep_trace;
    const char *path;
    pp_driver *drv;
    pp_comm *world;
    const pp_schedule *sched;
    const pp_partition *part;
    const pp_grid *grid;
    double t0;
    prof_rec *recs;
    int nrec, cap;
    double step_s, compute_s, wait_s;       /* sums over the profiled steps */
    int nsteps;
    double *cost;                           /* [num_stages][NCOST][2]: seconds, count */
    double *act;                            /* [num_stages][NACT][microbatches][2]: seconds, count */
};

enum { NACT = PP_ACT_BACKWARD_WEIGHT - PP_ACT_FORWARD + 1 };   /* F, B, I, W */

static size_t act_len(const pp_schedule *s) { return (size_t)s->num_stages * NACT * (size_t)s->microbatches * 2; }

pp_status train_prof_open(const pp_train_config *c, pp_driver *drv, pp_comm *world, const pp_schedule *sched,
                          const pp_partition *part, const pp_grid *grid, train_prof **out, pp_error *err)
{
    *out = NULL;
    if (c->profile_first < 1) return PP_OK;
    FILE *f = pp_comm_rank(world) == 0 ? fopen(c->profile_out, "w") : NULL;   /* a bad path fails before step 1 */
    if (pp_comm_rank(world) == 0 && !f)
        return pp_error_set(err, PP_ERR_IO, "--profile: cannot create '%s'", c->profile_out);
    if (f) fclose(f);
    train_prof *p = calloc(1, sizeof *p);
    double *cost = calloc((size_t)sched->num_stages * NCOST * 2, sizeof *cost), *act = calloc(act_len(sched), sizeof *act);
    if (!p || !cost || !act) {
        free(p);
        free(cost);
        free(act);
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory for the profiler");
    }
    *p = (train_prof){.first = c->profile_first, .last = c->profile_last, .path = c->profile_out, .drv = drv,
                      .world = world, .sched = sched, .part = part, .grid = grid, .cost = cost, .act = act,
                      .keep_trace = c->trace_path != NULL};
    *out = p;
    return PP_OK;
}

static prof_rec *add_rec(train_prof *p)
{
    if (p->nrec == p->cap) {
        int cap = p->cap ? 2 * p->cap : 4096;
        prof_rec *r = pp_realloc_array(p->recs, (size_t)cap, sizeof *r);
        if (!r) return NULL;
        p->recs = r;
        p->cap = cap;
    }
    prof_rec *r = &p->recs[p->nrec++];
    memset(r, 0, sizeof *r);
    return r;
}

pp_status train_prof_begin(train_prof *p, int64_t step, pp_error *err)
{
    if (!p || p->started || step < p->first || step > p->last) return PP_OK;   /* a resumed run may start late */
    p->started = 1;
    for (int i = 0; i < pp_driver_num_stages(p->drv); i++) {
        PP_CHECK(pp_stage_profile_enable(pp_driver_stage(p->drv, i), 1, err));
        PP_CHECK(pp_stage_profile_events(pp_driver_stage(p->drv, i), 1, err));
    }
    PP_CHECK(pp_driver_record(p->drv, 1, err));
    p->t0 = pp_now();
    return PP_OK;
}

static int is_compute(int kind)
{
    return kind == PP_ACT_FORWARD || kind == PP_ACT_BACKWARD || kind == PP_ACT_BACKWARD_INPUT ||
           kind == PP_ACT_BACKWARD_WEIGHT || kind == PP_ACT_OPTIMIZER_STEP;
}

/* The step's actions and waits; a compute action's own time is its span less the waits in it. */
static void take_driver_events(train_prof *p, int64_t step)
{
    const pp_driver_event *ev;
    int n = pp_driver_events(p->drv, &ev);
    double off = pp_driver_step_start(p->drv) - p->t0;
    static const int cost_of[] = {[PP_ACT_FORWARD] = C_F, [PP_ACT_BACKWARD] = C_B, [PP_ACT_BACKWARD_INPUT] = C_BI,
                                  [PP_ACT_BACKWARD_WEIGHT] = C_BW};
    for (int k = 0; k < n; k++) {
        const pp_driver_event *e = &ev[k];
        prof_rec *r = add_rec(p);
        if (!r) return;
        r->row = is_compute(e->kind) ? ROW_ACTIONS : ROW_COMM;
        r->t_start = e->t_start + off, r->t_end = e->t_end + off;
        r->peer = e->peer, r->stage = e->stage, r->step = (int32_t)step, r->bytes = e->bytes;
        pp_driver_event_label(e, r->name, sizeof r->name);
        if (e->kind < PP_ACT_FORWARD || e->kind > PP_ACT_BACKWARD_WEIGHT || e->stage < 0) continue;
        double own = e->t_end - e->t_start;
        for (int j = 0; j < n; j++)
            if (ev[j].kind == PP_EVENT_WAIT && ev[j].t_start >= e->t_start && ev[j].t_end <= e->t_end)
                own -= ev[j].t_end - ev[j].t_start;
        double *c = p->cost + ((size_t)e->stage * NCOST + (size_t)cost_of[e->kind]) * 2;
        c[0] += own;
        c[1] += 1;
        if (e->stage >= p->sched->num_stages || e->microbatch < 0 || e->microbatch >= p->sched->microbatches) continue;
        double *a = p->act + (((size_t)e->stage * NACT + (size_t)(e->kind - PP_ACT_FORWARD)) *
                              (size_t)p->sched->microbatches + (size_t)e->microbatch) * 2;
        a[0] += own;
        a[1] += 1;
    }
}

static pp_status take_op_events(train_prof *p, int64_t step, pp_error *err)
{
    for (int i = 0; i < pp_driver_num_stages(p->drv); i++) {
        pp_stage *s = pp_driver_stage(p->drv, i);
        PP_CHECK(pp_stage_profile_flush(s, err));   /* the device's times of the step's calls */
        int n;
        const pp_stage_op_event *ev = pp_stage_profile_get_events(s, &n);
        for (int k = 0; k < n; k++) {
            prof_rec *r = add_rec(p);
            if (!r) break;
            pp_stage_op_info info;
            pp_stage_op_describe(s, ev[k].op, &info);
            r->row = ROW_OPS;
            r->t_start = ev[k].t_start - p->t0, r->t_end = ev[k].t_end - p->t0;
            r->flops = ev[k].flops, r->backward = ev[k].backward, r->peer = -1;
            r->stage = pp_driver_stage_index(p->drv, i), r->step = (int32_t)step;
            snprintf(r->name, sizeof r->name, "%s", info.name ? info.name : info.op_type);
            snprintf(r->op_type, sizeof r->op_type, "%s", info.op_type);
            snprintf(r->shapes, sizeof r->shapes, "%s", info.shapes);
        }
        pp_stage_profile_clear_events(s);
    }
    return PP_OK;
}

void train_prof_span(train_prof *p, int64_t step, const char *what, double t_start, double t_end)
{
    if (!p || !p->started || p->done) return;
    prof_rec *r = add_rec(p);
    if (!r) return;
    r->row = ROW_INPUT;
    r->t_start = t_start - p->t0, r->t_end = t_end - p->t0;
    r->peer = -1, r->stage = -1, r->step = (int32_t)step;
    snprintf(r->name, sizeof r->name, "%s", what);
    snprintf(r->op_type, sizeof r->op_type, "%s", what);
}

static pp_status finish(train_prof *p, pp_error *err);

pp_status train_prof_end(train_prof *p, int64_t step, int64_t last_step, const pp_step_stats *st, double step_s,
                         pp_error *err)
{
    if (!p || !p->started || p->done) return PP_OK;
    take_driver_events(p, step);
    PP_CHECK(take_op_events(p, step, err));
    p->step_s += step_s, p->compute_s += st->compute_s, p->wait_s += st->wait_s;
    p->nsteps++;
    if (step < p->last && step < last_step) return PP_OK;
    p->done = 1;
    for (int i = 0; i < pp_driver_num_stages(p->drv); i++)
        PP_CHECK(pp_stage_profile_enable(pp_driver_stage(p->drv, i), 0, err));
    if (!p->keep_trace) PP_CHECK(pp_driver_record(p->drv, 0, err));
    return finish(p, err);
}

/* ---- after the last profiled step: gather, write, print (rank 0) ------------------ */

static pp_status write_json(const train_prof *p, FILE *f, const prof_rec *all, const int *counts, int most,
                            const int *stage_of_rank, pp_error *err)
{
    static const char *const rows[] = {"ops (forward, backward)", "communication (messages, waits, all-reduce)",
                                       "schedule actions", "input (feeds; reads ahead on a thread)"};
    pp_json j;
    pp_json_init(&j, f, 0);
    pp_json_begin_object(&j, NULL);
    pp_json_string(&j, "displayTimeUnit", "ms");
    pp_json_begin_array(&j, "traceEvents");
    for (int r = 0; r < pp_comm_size(p->world); r++) {
        char name[96];
        snprintf(name, sizeof name, "rank %d (pipeline rank %d)", r, stage_of_rank[r]);
        for (int row = -1; row < NROWS; row++) {
            pp_json_begin_object(&j, NULL);
            pp_json_string(&j, "name", row < 0 ? "process_name" : "thread_name");
            pp_json_string(&j, "ph", "M");
            pp_json_int(&j, "pid", r);
            if (row >= 0) pp_json_int(&j, "tid", row);
            pp_json_begin_object(&j, "args");
            pp_json_string(&j, "name", row < 0 ? name : rows[row]);
            pp_json_end_object(&j);
            pp_json_end_object(&j);
        }
        for (int k = 0; k < counts[r]; k++) {
            const prof_rec *e = &all[(size_t)r * (size_t)most + (size_t)k];
            pp_json_begin_object(&j, NULL);
            pp_json_string(&j, "name", e->name);
            pp_json_string(&j, "cat", e->row == ROW_OPS ? (const char *[]){"forward", "backward", "recompute"}[e->backward]
                                      : e->row == ROW_COMM ? "comm" : e->row == ROW_INPUT ? "input" : "action");
            pp_json_string(&j, "ph", "X");
            pp_json_int(&j, "pid", r);
            pp_json_int(&j, "tid", e->row);
            pp_json_double(&j, "ts", e->t_start * 1e6);
            pp_json_double(&j, "dur", (e->t_end - e->t_start) * 1e6);
            pp_json_begin_object(&j, "args");
            pp_json_int(&j, "step", e->step);
            if (e->stage >= 0) pp_json_int(&j, "stage", e->stage);
            if (e->row == ROW_OPS) {
                pp_json_string(&j, "op_type", e->op_type);
                pp_json_string(&j, "shapes", e->shapes);
                pp_json_double(&j, "flops", e->flops);
            } else {
                if (e->peer >= 0) pp_json_int(&j, "peer", e->peer);
                if (e->bytes > 0) pp_json_double(&j, "bytes", e->bytes);
            }
            pp_json_end_object(&j);
            pp_json_end_object(&j);
        }
    }
    pp_json_end_array(&j);
    pp_json_end_object(&j);
    pp_json_finish(&j);
    return fflush(f) || ferror(f) ? pp_error_set(err, PP_ERR_IO, "--profile: cannot write '%s'", p->path) : PP_OK;
}

typedef struct op_row {
    const char *op_type;
    int64_t calls;
    double seconds, flops;
} op_row;

static int by_seconds(const void *a, const void *b)
{
    const op_row *x = a, *y = b;
    return (x->seconds < y->seconds) - (x->seconds > y->seconds);
}

/* torch.profiler's key_averages() by op type over all ranks: calls, total, share of
 * the ranks' step time, achieved GFLOP/s; with the input rows. */
static void print_ops(const prof_rec *all, const int *counts, int size, int most, double rank_step_s)
{
    op_row rows[256];
    int n = 0;
    for (int r = 0; r < size; r++)
        for (int k = 0; k < counts[r]; k++) {
            const prof_rec *e = &all[(size_t)r * (size_t)most + (size_t)k];
            if (e->row != ROW_OPS && e->row != ROW_INPUT) continue;
            char type[48];
            snprintf(type, sizeof type, "%s%s", e->op_type, (const char *[]){"", " (bw)", " (re)"}[e->backward]);
            int i = 0;
            while (i < n && strcmp(rows[i].op_type, type)) i++;
            if (i == n) {
                if (n == 256) continue;
                rows[n++] = (op_row){pp_strdup(type), 0, 0, 0};
            }
            rows[i].calls++;
            rows[i].seconds += e->t_end - e->t_start;
            rows[i].flops += e->flops;
        }
    qsort(rows, (size_t)n, sizeof *rows, by_seconds);
    printf("%-32s %8s %11s %8s %9s\n", "op type (all ranks)", "calls", "total ms", "share", "GFLOP/s");
    for (int i = 0; i < n; i++) {
        printf("%-32s %8lld %11.3f %7.1f%% %9.2f\n", rows[i].op_type, (long long)rows[i].calls, 1e3 * rows[i].seconds,
               rank_step_s > 0 ? 100 * rows[i].seconds / rank_step_s : 0,
               rows[i].seconds > 0 ? rows[i].flops / rows[i].seconds * 1e-9 : 0);
        free((char *)rows[i].op_type);
    }
}

/* Each compute action's mean measured time over the profiled steps (-1, its stage's mean,
 * where it was never seen), by global action index, for pp_costs.action. */
static double *replay_costs(const train_prof *p)
{
    const pp_schedule *s = p->sched;
    size_t n = 0;
    for (int r = 0; r < s->pp; r++) n += (size_t)s->count[r];
    double *t = calloc(n + 1, sizeof *t);
    if (!t) return NULL;
    size_t g = 0;
    for (int r = 0; r < s->pp; r++)
        for (int i = 0; i < s->count[r]; i++, g++) {
            const pp_action *a = &s->actions[r][i];
            if (a->kind < PP_ACT_FORWARD || a->kind > PP_ACT_BACKWARD_WEIGHT) continue;
            const double *m = p->act + (((size_t)a->stage * NACT + (size_t)(a->kind - PP_ACT_FORWARD)) *
                                        (size_t)s->microbatches + (size_t)a->microbatch) * 2;
            t[g] = m[1] > 0 ? m[0] / m[1] : -1;
        }
    return t;
}

/* The simulator on the measured mean cost of each stage's F, B (or I and W); replay: on
 * each action's own measured time. */
static pp_status predict(const train_prof *p, const double *cost, int replay, pp_sim_result **sim, pp_error *err)
{
    int ns = p->sched->num_stages;
    pp_stage_cost *sc = calloc((size_t)ns, sizeof *sc);
    if (!sc) return PP_NOMEM(err);
    for (int s = 0; s < ns; s++) {
        const double *c = cost + (size_t)s * NCOST * 2;
        double mean[NCOST];
        for (int k = 0; k < NCOST; k++) mean[k] = c[2 * k + 1] > 0 ? c[2 * k] / c[2 * k + 1] : 0;
        sc[s].forward = mean[C_F];
        sc[s].backward_input = c[2 * C_B + 1] > 0 ? mean[C_B] / 2 : mean[C_BI];
        sc[s].backward_weight = c[2 * C_B + 1] > 0 ? mean[C_B] / 2 : mean[C_BW];
        sc[s].act_bytes = p->part->stages[s].act_bytes > 0 ? (double)p->part->stages[s].act_bytes : 0;
    }
    pp_costs pc = {.stage = sc, .num_stages = ns, .action = replay ? replay_costs(p) : NULL};
    pp_status st = replay && !pc.action ? PP_NOMEM(err) : pp_schedule_simulate(p->sched, &pc, sim, err);
    free((double *)pc.action);
    free(sc);
    return st;
}

static pp_status finish(train_prof *p, pp_error *err)
{
    int size = pp_comm_size(p->world), most = 0, *counts = calloc((size_t)size, sizeof *counts),
        *stage_of = calloc((size_t)size, sizeof *stage_of);
    double mine[3] = {p->step_s / p->nsteps, p->compute_s / p->nsteps, p->wait_s / p->nsteps};
    double *per_rank = calloc((size_t)size * 3, sizeof *per_rank);
    prof_rec *padded = NULL, *all = NULL;
    pp_sim_result *sim = NULL, *replay = NULL;
    FILE *f = NULL;
    pp_status st = counts && stage_of && per_rank ? PP_OK : PP_NOMEM(err);
    if (st == PP_OK) st = pp_comm_allgather(p->world, &p->nrec, counts, sizeof(int), err);
    if (st == PP_OK) st = pp_comm_allgather(p->world, &p->grid->stage, stage_of, sizeof(int), err);
    if (st == PP_OK) st = pp_comm_allgather(p->world, mine, per_rank, sizeof mine, err);
    /* every replica ran every stage: sum, the counts divide it into means */
    if (st == PP_OK)
        st = pp_comm_allreduce(p->world, p->cost, (size_t)p->sched->num_stages * NCOST * 2, PP_DTYPE_F64, err);
    if (st == PP_OK) st = pp_comm_allreduce(p->world, p->act, act_len(p->sched), PP_DTYPE_F64, err);
    for (int r = 0; st == PP_OK && r < size; r++) most = counts[r] > most ? counts[r] : most;
    most++;
    if (st == PP_OK && (!(padded = calloc((size_t)most, sizeof *padded)) ||
                        !(all = calloc((size_t)most * (size_t)size, sizeof *all))))
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory for the profile (%d events on one rank)", most);
    if (st == PP_OK) {
        memcpy(padded, p->recs, (size_t)p->nrec * sizeof *padded);
        st = pp_comm_allgather(p->world, padded, all, (size_t)most * sizeof *padded, err);
    }
    if (st == PP_OK && pp_comm_rank(p->world) == 0) {
        if (!(f = fopen(p->path, "w"))) st = pp_error_set(err, PP_ERR_IO, "--profile: cannot create '%s'", p->path);
        if (st == PP_OK) st = write_json(p, f, all, counts, most, stage_of, err);
        if (st == PP_OK) st = predict(p, p->cost, 0, &sim, err);
        if (st == PP_OK) st = predict(p, p->cost, 1, &replay, err);
    }
    if (st == PP_OK && pp_comm_rank(p->world) == 0) {
        double slowest = 0, total = 0;
        for (int r = 0; r < size; r++) {
            slowest = per_rank[3 * r] > slowest ? per_rank[3 * r] : slowest;
            total += per_rank[3 * r] * p->nsteps;
        }
        printf("\nprofile of %d step%s from step %lld on %d ranks: %s (Perfetto / chrome://tracing)\n", p->nsteps,
               p->nsteps > 1 ? "s" : "", (long long)p->first, size, p->path);
        print_ops(all, counts, size, most, total);
        printf("\n%-6s %-14s %9s %11s %9s %9s %10s %9s\n", "rank", "pipeline rank", "step ms", "compute ms", "wait ms",
               "bubble", "simulated", "replayed");
        for (int r = 0; r < size; r++)
            printf("%-6d %-14d %9.3f %11.3f %9.3f %8.1f%% %9.1f%% %8.1f%%\n", r, stage_of[r], 1e3 * per_rank[3 * r],
                   1e3 * per_rank[3 * r + 1], 1e3 * per_rank[3 * r + 2], 100 * (1 - per_rank[3 * r + 1] / slowest),
                   100 * sim->rank_bubble[stage_of[r]], 100 * replay->rank_bubble[stage_of[r]]);
        printf("bubble: 1 - compute / the slowest rank's step; simulated: the schedule on the measured mean F, B "
               "(I, W) of each stage with free messages (predicted step %.3f ms, overall bubble %.1f%%); replayed: "
               "the schedule on each action's own measured time, free messages (replayed step %.3f ms, overall "
               "bubble %.1f%%)\n\n",
               1e3 * sim->makespan, 100 * sim->bubble, 1e3 * replay->makespan, 100 * replay->bubble);
        fflush(stdout);
    }
    if (f && fclose(f) && st == PP_OK) st = pp_error_set(err, PP_ERR_IO, "--profile: cannot write '%s'", p->path);
    pp_sim_result_destroy(sim);
    pp_sim_result_destroy(replay);
    free(counts);
    free(stage_of);
    free(per_rank);
    free(padded);
    free(all);
    return st;
}

void train_prof_close(train_prof *p)
{
    if (!p) return;
    free(p->recs);
    free(p->cost);
    free(p->act);
    free(p);
}
