/* Peak memory per rank at the end of a run: measured by the device's counters (total and
 * by category, everything allocated through the device since it was opened) next to the
 * estimate `onnxpipe partition` / `schedule --model` print for the same job
 * (pp_driver_estimate), and the process's peak resident set. */
#include "job_internal.h"

#include <stdlib.h>
#include <onnxpipe/core_util.h>

/* Per rank: the peak total, the peak of each category, the estimate the same way, the
 * RSS peak and the pipeline position. */
enum { F_PEAK = 0, F_EST = 1 + PP_MEM_CATEGORY_COUNT, F_RSS = 2 * (1 + PP_MEM_CATEGORY_COUNT), F_POS, NF };

/* The estimate of a rank by category, in the device counters' order. */
static void estimate_row(const pp_driver_bytes *b, double *row)
{
    row[0] = (double)b->total;
    for (int k = 0; k < PP_MEM_CATEGORY_COUNT; k++)
        row[1 + k] = (double)(k == PP_MEM_COMM ? b->comm : pp_stage_bytes_category(&b->stages, (pp_mem_category)k));
}

static void print_row(const char *what, const double *row, FILE *out)
{
    char b[32];
    fprintf(out, "%-9s", what);
    for (int k = 0; k <= PP_MEM_CATEGORY_COUNT; k++) fprintf(out, " %11s", pp_format_bytes(row[k], b, sizeof b));
}

pp_status train_report_memory(const pp_trainer *t, int print, pp_error *err)
{
    double mine[NF] = {0};
    pp_device_memory_stats ms;
    pp_device_memory(t->dev, &ms);
    mine[F_PEAK] = (double)ms.peak_total;
    for (int k = 0; k < PP_MEM_CATEGORY_COUNT; k++) mine[F_PEAK + 1 + k] = (double)ms.peak[k];
    pp_driver_bytes *est = calloc((size_t)t->sched->pp, sizeof *est);
    if (!est) return PP_NOMEM(err);
    pp_stage_options so = pp_train_stage_options(&t->c);
    pp_dtype reduce = t->c.dp > 1 ? t->c.reduce_dtype : PP_DTYPE_F32;
    pp_status st = pp_driver_estimate(t->sched, t->part, pp_device_get_kind(t->dev), &so, reduce, NULL, est, err);
    if (st == PP_OK) estimate_row(&est[t->grid->stage], mine + F_EST);
    free(est);
    PP_CHECK(st);
    mine[F_RSS] = (double)train_rss_peak_bytes();
    mine[F_POS] = t->grid->stage;
    double *all = calloc((size_t)pp_comm_size(t->world) * NF, sizeof *all);
    if (!all) return PP_NOMEM(err);
    st = pp_comm_allgather(t->world, mine, all, sizeof mine, err);
    if (st == PP_OK && print && pp_comm_rank(t->world) == 0) {
        printf("\nmemory per rank: the peak of the device's allocations (its counters) and the estimate of "
               "`onnxpipe partition|schedule --model` for the same job\n%-5s %-8s %-9s %11s", "rank", "stages",
               "", "total");
        for (int k = 0; k < PP_MEM_CATEGORY_COUNT; k++) printf(" %11s", pp_mem_category_name((pp_mem_category)k));
        printf(" %11s %8s\n", "RSS peak", "peak/est");
        for (int r = 0; r < pp_comm_size(t->world); r++) {
            const double *m = all + (size_t)r * NF;
            char stages[32] = "", rss[32];
            int n = 0, pos = (int)m[F_POS];
            for (int s = 0; s < t->sched->num_stages; s++)
                if (t->sched->stage_rank[s] == pos && n < (int)sizeof stages - 8)
                    n += snprintf(stages + n, sizeof stages - (size_t)n, "%s%d", n ? "," : "", s);
            printf("%-5d %-8s ", r, stages);
            print_row("peak", m + F_PEAK, stdout);
            printf(" %11s %8.3f\n", pp_format_bytes(m[F_RSS], rss, sizeof rss), m[F_EST] > 0 ? m[F_PEAK] / m[F_EST] : 0);
            printf("%-5s %-8s ", "", "");
            print_row("estimate", m + F_EST, stdout);
            putchar('\n');
        }
        printf("(categories as in device.h: the stages' flat parameter, gradient and optimizer buffers, their stash "
               "slots, their scratch arenas with kernel workspaces, the driver's communication buffers, constants; "
               "the peak of the total is the most live at once, not the sum of the category peaks; memory that "
               "kernels take from the host heap or libraries keep for themselves shows only in the RSS)\n");
        fflush(stdout);
    }
    free(all);
    return st;
}
