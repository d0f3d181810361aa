/* Renderers of a simulated schedule into a FILE*: the ASCII timeline (one row per rank,
 * time to the right) and the JSON summary the CLI prints with --json. */
#include "sched_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

/* Cell label of a compute action: "F3", or "1F3" (stage in front) with chunks > 1. */
static void cell_label(const pp_schedule *s, const pp_action *a, char *buf, size_t len)
{
    static const char letter[] = {'F', 'B', 'I', 'W'};
    if (a->kind == PP_ACT_OPTIMIZER_STEP) snprintf(buf, len, "O");
    else if (s->chunks > 1) snprintf(buf, len, "%d%c%d", a->stage, letter[a->kind], a->microbatch);
    else snprintf(buf, len, "%c%d", letter[a->kind], a->microbatch);
}

static int shows(const pp_action *a, const pp_sim_result *r, int g)
{
    return (action_is_compute(a->kind) || a->kind == PP_ACT_OPTIMIZER_STEP) && r->end[g] > r->start[g];
}

void pp_schedule_print_timeline(const pp_schedule *s, const pp_sim_result *r, FILE *out, int max_cols)
{
    char lab[48];
    double q = INFINITY;
    int width = 2;
    for (int rk = 0; rk < s->pp; rk++)
        for (int i = 0; i < s->count[rk]; i++) {
            const pp_action *a = &s->actions[rk][i];
            int g = r->offset[rk] + i;
            if (!shows(a, r, g)) continue;
            double d = r->end[g] - r->start[g];
            if (d < q) q = d;
            cell_label(s, a, lab, sizeof lab);
            if ((int)strlen(lab) > width) width = (int)strlen(lab);
        }
    if (!isfinite(q) || r->makespan <= 0) {
        fprintf(out, "(empty timeline)\n");
        return;
    }
    width += 1;
    if (max_cols < 8) max_cols = 8;
    int cols = (int)ceil(r->makespan / q - 1e-9);
    if (cols > max_cols) {
        q = r->makespan / max_cols;
        cols = max_cols;
    }
    char *row = pp_malloc((size_t)cols * width + 1);
    if (!row) return;
    fprintf(out, "time ->  one column = %.3g s, makespan %.6g s; '=' continues an action, '.' idle\n", q,
            r->makespan);
    for (int rk = 0; rk < s->pp; rk++) {
        memset(row, '.', (size_t)cols * width);
        for (int c = 0; c < cols; c++) memset(row + (size_t)c * width + 1, ' ', (size_t)width - 1);
        for (int i = 0; i < s->count[rk]; i++) {
            const pp_action *a = &s->actions[rk][i];
            int g = r->offset[rk] + i;
            if (!shows(a, r, g)) continue;
            int c0 = (int)floor(r->start[g] / q + 0.5), c1 = (int)floor(r->end[g] / q + 0.5);
            if (c0 >= cols) c0 = cols - 1;
            if (c1 <= c0) c1 = c0 + 1;
            if (c1 > cols) c1 = cols;
            for (int c = c0; c < c1; c++) {
                char *cell = row + (size_t)c * width;
                memset(cell, ' ', (size_t)width);
                memset(cell, '=', (size_t)width - 1);
            }
            cell_label(s, a, lab, sizeof lab);
            char *cell = row + (size_t)c0 * width;
            memset(cell, ' ', (size_t)width);
            memcpy(cell, lab, strlen(lab));
        }
        row[(size_t)cols * width] = 0;
        fprintf(out, "rank %3d |%s|\n", rk, row);
    }
    free(row);
}

/* The rank whose actions hold global index g (binary search over offset). */
static int rank_of(const pp_sim_result *r, int g)
{
    int lo = 0, hi = r->pp - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (r->offset[mid] <= g) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Critical-path entries printed in full before the middle is elided. */
#define PATH_SHOWN 24

void pp_sim_result_print_summary(const pp_schedule *s, const pp_costs *costs, const pp_sim_result *r, FILE *out)
{
    char t1[32], t2[32], t3[32], b[32], a[48], cf[160];
    if (costs->stage) {
        fprintf(out, "stage  rank  forward     bwd-input   bwd-weight  stash/mb    send/mb\n");
        for (int st = 0; st < s->num_stages; st++) {
            const pp_stage_cost *c = stage_cost(costs, st);
            fprintf(out, "%5d  %4d  %-10s  %-10s  %-10s  %-10s  %s\n", st, s->stage_rank[st],
                    pp_format_seconds(c->forward, t1, sizeof t1), pp_format_seconds(c->backward_input, t2, sizeof t2),
                    pp_format_seconds(c->backward_weight, t3, sizeof t3), pp_format_bytes(c->act_bytes, b, sizeof b),
                    pp_format_bytes(c->send_bytes, a, sizeof a));
        }
        fputc('\n', out);
    }
    fprintf(out, "step time %s; bubble %.2f%% (%s)",
            pp_format_seconds(r->makespan, t1, sizeof t1), 100 * r->bubble,
            pp_schedule_closed_form_text(s, costs, cf, sizeof cf));
    fprintf(out, "\n\nrank  busy        bubble   peak stash (microbatches, bytes)  W waiting\n");
    for (int rk = 0; rk < s->pp; rk++)
        fprintf(out, "%4d  %-10s  %6.2f%%  %4d  %-26s  %d\n", rk, pp_format_seconds(r->busy[rk], t1, sizeof t1),
                100 * r->rank_bubble[rk], r->peak_inflight[rk],
                r->peak_act_bytes[rk] > 0 ? pp_format_bytes(r->peak_act_bytes[rk], b, sizeof b) : "-",
                r->peak_w_pending[rk]);
    fprintf(out, "\ncritical path (%d actions):", r->n_critical);
    for (int i = 0; i < r->n_critical; i++) {
        if (r->n_critical > PATH_SHOWN && i == PATH_SHOWN / 2) {
            fprintf(out, " ... (%d more)", r->n_critical - PATH_SHOWN);
            i = r->n_critical - PATH_SHOWN / 2;
        }
        int g = r->critical[i], rk = rank_of(r, g);
        fprintf(out, " r%d:%s", rk, pp_action_format(&s->actions[rk][g - r->offset[rk]], a, sizeof a));
    }
    fputc('\n', out);
}

void pp_sim_result_write_json(const pp_schedule *s, const pp_costs *costs, const pp_sim_result *r, FILE *out,
                              int pretty)
{
    pp_json j;
    char a[48];
    pp_json_init(&j, out, pretty);
    pp_json_begin_object(&j, NULL);
    pp_json_string(&j, "kind", pp_schedule_kind_name(s->kind));
    pp_json_int(&j, "pp", s->pp);
    pp_json_int(&j, "microbatches", s->microbatches);
    pp_json_int(&j, "chunks", s->chunks);
    pp_json_int(&j, "actions", pp_schedule_action_count(s));
    pp_json_double(&j, "makespan_s", r->makespan);
    pp_json_double(&j, "bubble", r->bubble);
    double cf = pp_schedule_closed_form_bubble(s, costs);
    if (isnan(cf)) pp_json_null(&j, "closed_form_bubble");
    else pp_json_double(&j, "closed_form_bubble", cf);
    pp_json_begin_array(&j, "ranks");
    for (int rk = 0; rk < s->pp; rk++) {
        pp_json_begin_object(&j, NULL);
        pp_json_int(&j, "rank", rk);
        pp_json_double(&j, "busy_s", r->busy[rk]);
        pp_json_double(&j, "bubble", r->rank_bubble[rk]);
        pp_json_int(&j, "peak_inflight", r->peak_inflight[rk]);
        pp_json_double(&j, "peak_act_bytes", r->peak_act_bytes[rk]);
        pp_json_int(&j, "peak_w_pending", r->peak_w_pending[rk]);
        pp_json_end_object(&j);
    }
    pp_json_end_array(&j);
    pp_json_begin_array(&j, "critical_path");
    for (int i = 0; i < r->n_critical; i++) {
        int g = r->critical[i], rk = rank_of(r, g);
        char cell[64];
        snprintf(cell, sizeof cell, "r%d:%s", rk, pp_action_format(&s->actions[rk][g - r->offset[rk]], a, sizeof a));
        pp_json_string(&j, NULL, cell);
    }
    pp_json_end_array(&j);
    pp_json_end_object(&j);
    pp_json_finish(&j);
}
