/* The process grid: world rank <-> (pipeline stage, data-parallel replica) in either
 * order, the pipeline neighbours, and the communicators of a stage's replicas, of a
 * replica's stages and of tied-weight stage groups. */
#include "comm_internal.h"

#include <stdlib.h>
#include <onnxpipe/core_util.h>

int pp_grid_rank_of(const pp_grid *g, int stage, int replica)
{
    if (stage < 0 || stage >= g->pp || replica < 0 || replica >= g->dp) return -1;
    return g->order == PP_GRID_STAGE_MAJOR ? replica * g->pp + stage : stage * g->dp + replica;
}

pp_status pp_grid_create(pp_comm *world, int pp, int dp, pp_grid_order order, pp_grid **out, pp_error *err)
{
    *out = NULL;
    if (!world) return pp_error_set(err, PP_ERR_INVALID_ARG, "pp_grid_create: world communicator is NULL");
    if (pp < 1 || dp < 1)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "--pp %d x --dp %d: both must be at least 1", pp, dp);
    if (order != PP_GRID_STAGE_MAJOR && order != PP_GRID_REPLICA_MAJOR)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "grid order %d is neither stage- nor replica-major", (int)order);
    if ((long)pp * dp != world->size)
        return pp_error_set(err, PP_ERR_INVALID_ARG,
                            "--pp %d x --dp %d = %ld ranks, but the job has %d; launch with mpirun -np %ld", pp, dp,
                            (long)pp * dp, world->size, (long)pp * dp);
    pp_grid *g = pp_calloc(1, sizeof *g);
    if (!g) return pp_error_set(err, PP_ERR_NOMEM, "out of memory for the process grid");
    *g = (pp_grid){.pp = pp, .dp = dp, .order = order, .rank = world->rank, .world = world};
    if (order == PP_GRID_STAGE_MAJOR) {
        g->stage = g->rank % pp;
        g->replica = g->rank / pp;
    } else {
        g->stage = g->rank / dp;
        g->replica = g->rank % dp;
    }
    g->prev = g->stage > 0 ? pp_grid_rank_of(g, g->stage - 1, g->replica) : -1;
    g->next = g->stage < pp - 1 ? pp_grid_rank_of(g, g->stage + 1, g->replica) : -1;
    pp_status st = PP_OK;
    PP_CHECK_GOTO(pp_comm_split(world, g->stage, g->replica, &g->dp_comm, err), st, fail);
    PP_CHECK_GOTO(pp_comm_split(world, g->replica, g->stage, &g->pipe_comm, err), st, fail);
    *out = g;
    return PP_OK;
fail:
    pp_error_prefix(err, "building the --pp %d x --dp %d grid: ", pp, dp);
    pp_grid_destroy(g);
    return st;
}

void pp_grid_destroy(pp_grid *g)
{
    if (!g) return;
    pp_comm_destroy(g->dp_comm);
    pp_comm_destroy(g->pipe_comm);
    free(g);
}

pp_status pp_grid_stage_group(pp_grid *g, const int *stages, int nstages, pp_comm **out, pp_error *err)
{
    *out = NULL;
    int key = -1;
    for (int i = 0; i < nstages; i++) {
        if (stages[i] < 0 || stages[i] >= g->pp)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "stage group: stage %d out of range (0..%d)", stages[i],
                                g->pp - 1);
        for (int j = 0; j < i; j++)
            if (stages[j] == stages[i])
                return pp_error_set(err, PP_ERR_INVALID_ARG, "stage group: stage %d is listed twice", stages[i]);
        if (stages[i] == g->stage) key = i;
    }
    /* every rank takes part in the split; those outside the group pass color -1 */
    return pp_comm_split(g->world, key >= 0 ? g->replica : -1, key, out, err);
}
