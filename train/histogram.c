/* Weight and gradient histograms for TensorBoard (--log-histograms N): the ranks of
 * replica 0 summarise each parameter they own (min, max, sums, 30 equal buckets), rank 0
 * gathers the summaries and writes weights/<name> and grads/<name>. */
#include "job_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/graph_ir.h>

#define NB 30
enum { R_VALUE, R_KIND, R_MIN, R_MAX, R_NUM, R_SUM, R_SUMSQ, R_COUNTS, REC = R_COUNTS + NB };

static void summarise(const float *x, int64_t n, double *rec)
{
    double lo = INFINITY, hi = -INFINITY, sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
        sq += v * v;
    }
    rec[R_MIN] = lo, rec[R_MAX] = hi, rec[R_NUM] = (double)n, rec[R_SUM] = sum, rec[R_SUMSQ] = sq;
    double w = (hi - lo) / NB;
    for (int64_t i = 0; i < n; i++) {
        int b = w > 0 ? (int)ceil((x[i] - lo) / w) - 1 : NB - 1;
        rec[R_COUNTS + (b < 0 ? 0 : b >= NB ? NB - 1 : b)] += 1;
    }
}

static int owns(const pp_partition *part, int stage, int value)
{
    for (int t = 0; t < part->ntied; t++)
        if (part->tied[t].value == value) return part->tied[t].stages[0] == stage;
    return 1;
}

/* This rank's records: two per parameter it owns in replica 0. */
static pp_status collect(pp_driver *drv, const pp_partition *part, int replica, double **out, int *n, pp_error *err)
{
    int total = 0, most = 0;
    for (int i = 0; i < pp_driver_num_stages(drv); i++) total += 2 * pp_stage_num_params(pp_driver_stage(drv, i));
    double *rec = calloc((size_t)total * REC + 1, sizeof *rec);
    float *host = NULL;
    if (!rec) return pp_error_set(err, PP_ERR_NOMEM, "out of memory for histograms");
    for (int i = 0; replica == 0 && i < pp_driver_num_stages(drv); i++) {
        pp_stage *s = pp_driver_stage(drv, i);
        for (int k = 0; k < pp_stage_num_params(s); k++) {
            const pp_stage_param *p = pp_stage_param_at(s, k);
            if (!owns(part, pp_driver_stage_index(drv, i), p->value)) continue;
            if (p->numel > most) {
                free(host);
                most = (int)p->numel;
                if (!(host = malloc((size_t)most * sizeof *host))) {
                    free(rec);
                    return pp_error_set(err, PP_ERR_NOMEM, "out of memory for histograms");
                }
            }
            for (int kind = 0; kind < 2; kind++) {
                const float *src = (kind ? pp_stage_grads(s) : pp_stage_params(s)) + p->offset;
                pp_status st = pp_device_copy_to_host(pp_stage_device(s), host, src,
                                                      (size_t)p->numel * sizeof *host, err);
                if (st != PP_OK) {
                    free(host);
                    free(rec);
                    return st;
                }
                double *r = rec + (size_t)(*n)++ * REC;
                r[R_VALUE] = p->value, r[R_KIND] = kind;
                summarise(host, p->numel, r);
            }
        }
    }
    free(host);
    *out = rec;
    return PP_OK;
}

static pp_status write_all(pp_tb_writer *tb, const pp_graph *g, int64_t step, const double *all, int nrec,
                           pp_error *err)
{
    for (int i = 0; i < nrec; i++) {
        const double *r = all + (size_t)i * REC;
        double limits[NB];
        for (int b = 0; b < NB; b++)
            limits[b] = b == NB - 1 ? r[R_MAX] : r[R_MIN] + (b + 1) * (r[R_MAX] - r[R_MIN]) / NB;
        pp_tb_histogram h = {r[R_MIN], r[R_MAX], r[R_NUM], r[R_SUM], r[R_SUMSQ], NB, limits, r + R_COUNTS};
        char tag[512];
        snprintf(tag, sizeof tag, "%s/%s", r[R_KIND] ? "grads" : "weights", g->values[(int)r[R_VALUE]].name);
        PP_CHECK(pp_tb_write_histogram(tb, tag, step, &h, err));
    }
    return pp_tb_flush(tb, err);
}

pp_status train_log_histograms(pp_tb_writer *tb, pp_comm *world, pp_driver *drv, const pp_graph *g,
                               const pp_partition *part, int replica, int64_t step, pp_error *err)
{
    double *mine = NULL, *all = NULL;
    int n = 0, most = 0, *counts = calloc((size_t)pp_comm_size(world), sizeof *counts);
    if (!counts) return pp_error_set(err, PP_ERR_NOMEM, "out of memory for histograms");
    pp_status st = collect(drv, part, replica, &mine, &n, err);
    if (st == PP_OK) st = pp_comm_allgather(world, &n, counts, sizeof n, err);
    for (int r = 0; st == PP_OK && r < pp_comm_size(world); r++) most = counts[r] > most ? counts[r] : most;
    size_t row = (size_t)(most + 1) * REC;
    double *padded = st == PP_OK ? calloc(row, sizeof *padded) : NULL;
    if (st == PP_OK && (!padded || !(all = calloc(row * (size_t)pp_comm_size(world), sizeof *all))))
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory for histograms");
    if (st == PP_OK) {
        memcpy(padded, mine, (size_t)n * REC * sizeof *padded);
        st = pp_comm_allgather(world, padded, all, row * sizeof *padded, err);
    }
    for (int r = 0; st == PP_OK && tb && r < pp_comm_size(world); r++)
        st = write_all(tb, g, step, all + row * r, counts[r], err);
    free(padded);
    free(all);
    free(mine);
    free(counts);
    return st;
}
