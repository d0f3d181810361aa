/* The validator: runs all ranks together with rendezvous message matching (a send waits
 * until its receive is posted) and reports the first problem, with a per-rank grid of
 * the actions around where every rank stopped. */
#include "sched_internal.h"

/* Actions shown before / after each rank's stop in the grid. */
#define GRID_BEFORE 6
#define GRID_AFTER 3

static void print_grid(const engine *e, pp_status st, FILE *out)
{
    const pp_schedule *s = e->s;
    char a[48], d[160];
    fprintf(out, "schedule %s: pp %d, microbatches %d, chunks %d; [x] = where the rank stopped\n",
            pp_schedule_kind_name(s->kind), s->pp, s->microbatches, s->chunks);
    for (int r = 0; r < s->pp; r++) {
        int pc = e->pc[r], n = s->count[r];
        int lo = pc - GRID_BEFORE > 0 ? pc - GRID_BEFORE : 0;
        int hi = pc + GRID_AFTER < n ? pc + GRID_AFTER : n - 1;
        fprintf(out, "rank %3d: %s", r, lo > 0 ? "... " : "");
        for (int i = lo; i <= hi; i++) {
            pp_action_format(&s->actions[r][i], a, sizeof a);
            fprintf(out, i == pc ? "[%s] " : "%s ", a);
        }
        if (pc >= n) fprintf(out, "(done)");
        else if (hi < n - 1) fprintf(out, "...");
        if (r == e->fail_rank) fprintf(out, "  <-- %s", st == PP_ERR_DEADLOCK ? "first stuck" : "error");
        if (st == PP_ERR_DEADLOCK && pc < n && e->blocked[r] >= 0) {
            engine_describe_token(e, e->blocked[r], d, sizeof d);
            fprintf(out, "  (waits for %s)", d);
        }
        fputc('\n', out);
    }
}

pp_status pp_schedule_validate(const pp_schedule *s, FILE *report, pp_error *err)
{
    engine e;
    PP_CHECK(engine_init(&e, s, s->lowered ? RUN_RENDEZVOUS : RUN_COMPUTE_ONLY, NULL, 0, err));
    pp_status st = engine_run(&e, err);
    if (st == PP_OK) st = engine_check_complete(&e, err);
    if (st != PP_OK && report) print_grid(&e, st, report);
    engine_free(&e);
    return st;
}
