/* Peak memory per rank at the end of a run, measured (what the stages allocated on the
 * device: parameters, gradients, optimizer state, the stash at the schedule's peak of
 * microbatches in flight, scratch; and the process's peak resident set) next to the
 * partition preview's estimate for the same stages (`onnxpipe partition`). */
#include "train_internal.h"

#include <stdlib.h>

enum { M_PARAMS, M_GRADS, M_OPTIM, M_STASH, M_SCRATCH, M_TOTAL, M_RSS, M_ESTIMATE, M_STAGE, M_SLOTS, NM };

pp_status train_report_memory(pp_comm *world, pp_driver *drv, const pp_partition *part, int64_t microbatches,
                              int print, pp_error *err)
{
    double mine[NM] = {0};
    mine[M_STAGE] = pp_driver_stage_index(drv, 0);
    for (int i = 0; i < pp_driver_num_stages(drv); i++) {
        pp_stage_bytes b;
        pp_stage_allocation(pp_driver_stage(drv, i), &b);
        mine[M_PARAMS] += (double)b.params, mine[M_GRADS] += (double)b.grads, mine[M_OPTIM] += (double)b.optimizer;
        mine[M_STASH] += (double)b.stash, mine[M_SCRATCH] += (double)(b.scratch + b.constants);
        mine[M_TOTAL] += (double)b.total, mine[M_SLOTS] += b.slots;
        pp_stage_memory est = pp_partition_stage_memory(part, pp_driver_stage_index(drv, i), microbatches);
        mine[M_ESTIMATE] += (double)est.total_bytes;
    }
    mine[M_RSS] = (double)train_rss_peak_bytes();
    double *all = calloc((size_t)world->size * NM, sizeof *all);
    if (!all) return PP_NOMEM(err);
    pp_status st = pp_comm_allgather(world, mine, all, sizeof mine, err);
    if (st == PP_OK && print && world->rank == 0) {
        printf("\nmemory per rank: measured (the stages' device allocations; the process's peak RSS) and the "
               "partition preview's estimate\n%-5s %-6s %10s %10s %10s %16s %10s %10s %10s %10s\n", "rank", "stage",
               "params", "grads", "optimizer", "stash (slots)", "scratch", "total", "RSS peak", "estimate");
        for (int r = 0; r < world->size; r++) {
            const double *m = all + (size_t)r * NM;
            char b[NM][32], slots[48];
            for (int k = 0; k < M_STAGE; k++) pp_format_bytes(m[k], b[k], sizeof b[k]);
            snprintf(slots, sizeof slots, "%s (%.0f)", b[M_STASH], m[M_SLOTS]);
            printf("%-5d %-6.0f %10s %10s %10s %16s %10s %10s %10s %10s\n", r, m[M_STAGE], b[M_PARAMS], b[M_GRADS],
                   b[M_OPTIM], slots, b[M_SCRATCH], b[M_TOTAL], b[M_RSS], b[M_ESTIMATE]);
        }
        printf("(the estimate counts params, grads, two optimizer moments and the stashed activations of the "
               "microbatches in flight; the stages also keep scratch arenas and constants)\n");
        fflush(stdout);
    }
    free(all);
    return st;
}
