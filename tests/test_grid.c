/* The process grid on every rank of the job (a world of one under ctest, 4 and 3
 * ranks from test_comm_mpi.sh): for every (pp, dp) with pp x dp = size and both orders,
 * stage/replica/neighbours against the rank formula, the members of dp_comm and
 * pipe_comm gathered and compared, sums over them, tied-weight stage groups, and the
 * errors for a grid that does not fit the job. */
#include "comm_check.h"
#include <onnxpipe/backend/comm_backend.h>
#include <onnxpipe/comm_lib.h>

/* The formula the grid must follow (comm.h), written out independently. */
static void expect_place(int rank, int pp, int dp, pp_grid_order order, int *stage, int *replica)
{
    (void)dp;
    if (order == PP_GRID_STAGE_MAJOR) *stage = rank % pp, *replica = rank / pp;
    else *stage = rank / dp, *replica = rank % dp;
}

/* Gathers the world ranks of comm's members (in comm rank order) and checks them
 * against want[0..n), and that an allreduce over comm sums them. */
static void check_members(pp_comm *comm, const int *want, int n, const char *what)
{
    CHECK(comm && comm->size == n, "%s: size %d, expected %d", what, comm ? comm->size : -1, n);
    int me = check_world->rank, got[64];
    CHECK_OK(pp_comm_allgather(comm, &me, got, sizeof me, err));
    int64_t sum = me, want_sum = 0;
    for (int k = 0; k < n; k++) {
        CHECK(got[k] == want[k], "%s: member %d is world rank %d, expected %d", what, k, got[k], want[k]);
        want_sum += want[k];
    }
    CHECK_OK(pp_comm_allreduce(comm, &sum, 1, PP_DTYPE_I64, err));
    CHECK(sum == want_sum, "%s: sum of world ranks %lld, expected %lld", what, (long long)sum, (long long)want_sum);
}

static void check_grid(pp_comm *world, int pp, int dp, pp_grid_order order)
{
    const char *oname = order == PP_GRID_STAGE_MAJOR ? "stage-major" : "replica-major";
    pp_grid *g = NULL;
    CHECK_OK(pp_grid_create(world, pp, dp, order, &g, err));
    int s, r;
    expect_place(world->rank, pp, dp, order, &s, &r);
    CHECK(g->stage == s && g->replica == r && g->rank == world->rank, "pp %d dp %d %s: (stage %d, replica %d)", pp,
          dp, oname, g->stage, g->replica);
    /* rank_of inverts the placement for every cell, and the cells cover every rank once */
    int seen[64] = {0};
    for (int st = 0; st < pp; st++)
        for (int rp = 0; rp < dp; rp++) {
            int wr = pp_grid_rank_of(g, st, rp), s2, r2;
            CHECK(wr >= 0 && wr < world->size, "rank_of(%d, %d) = %d", st, rp, wr);
            expect_place(wr, pp, dp, order, &s2, &r2);
            CHECK(s2 == st && r2 == rp && !seen[wr]++, "rank_of(%d, %d) = %d is placed at (%d, %d)", st, rp, wr, s2,
                  r2);
        }
    CHECK(pp_grid_rank_of(g, pp, 0) == -1 && pp_grid_rank_of(g, 0, -1) == -1, "rank_of outside the grid");
    int prev = s > 0 ? pp_grid_rank_of(g, s - 1, r) : -1, next = s < pp - 1 ? pp_grid_rank_of(g, s + 1, r) : -1;
    CHECK(g->prev == prev && g->next == next, "neighbours %d %d, expected %d %d", g->prev, g->next, prev, next);

    int want[64];
    for (int k = 0; k < dp; k++) want[k] = pp_grid_rank_of(g, s, k);
    check_members(g->dp_comm, want, dp, "dp_comm");
    CHECK(g->dp_comm->rank == r, "dp_comm rank %d, replica %d", g->dp_comm->rank, r);
    for (int k = 0; k < pp; k++) want[k] = pp_grid_rank_of(g, k, r);
    check_members(g->pipe_comm, want, pp, "pipe_comm");
    CHECK(g->pipe_comm->rank == s, "pipe_comm rank %d, stage %d", g->pipe_comm->rank, s);

    /* tied weights: last and first stage (in that order), and one single stage */
    int tied[2] = {pp - 1, 0};
    int ntied = pp > 1 ? 2 : 1;
    pp_comm *grp = NULL;
    CHECK_OK(pp_grid_stage_group(g, tied, ntied, &grp, err));
    if (s == tied[0] || s == tied[ntied - 1]) {
        for (int k = 0; k < ntied; k++) want[k] = pp_grid_rank_of(g, tied[k], r);
        check_members(grp, want, ntied, "stage group {last, first}");
    } else {
        CHECK(grp == NULL, "stage %d got a group it is not in", s);
    }
    pp_comm_destroy(grp);
    int mid = pp / 2;
    CHECK_OK(pp_grid_stage_group(g, &mid, 1, &grp, err));
    CHECK((grp != NULL) == (s == mid) && (!grp || grp->size == 1), "stage group {%d} on stage %d", mid, s);
    pp_comm_destroy(grp);

    int dup[2] = {0, 0}, bad = pp;
    CHECK_FAILS(pp_grid_stage_group(g, dup, 2, &grp, err), PP_ERR_INVALID_ARG, "stage 0 is listed twice");
    char msg[64];
    snprintf(msg, sizeof msg, "stage %d out of range (0..%d)", pp, pp - 1);
    CHECK_FAILS(pp_grid_stage_group(g, &bad, 1, &grp, err), PP_ERR_INVALID_ARG, msg);
    pp_grid_destroy(g);
    SAY("grid pp %d x dp %d %s: places, rank_of, neighbours, dp_comm, pipe_comm, stage groups checked\n", pp, dp,
        oname);
}

int main(void)
{
    pp_comm *world = NULL;
    pp_error e = {0};
    if (pp_comm_mpi_world(&world, &e) != PP_OK) {
        fprintf(stderr, "pp_comm_mpi_world: %s\n", e.msg);
        return 1;
    }
    check_world = world;
    const int W = world->size;
    CHECK(W <= 64, "test written for <= 64 ranks");
    int grids = 0;
    for (int pp = 1; pp <= W; pp++) {
        if (W % pp) continue;
        for (int o = 0; o < 2; o++, grids++) check_grid(world, pp, W / pp, (pp_grid_order)o);
    }
    /* a grid that does not fit the job fails on every rank with the launch line */
    pp_grid *g = NULL;
    char msg[160];
    snprintf(msg, sizeof msg, "--pp %d x --dp 2 = %d ranks, but the job has %d; launch with mpirun -np %d", W, 2 * W,
             W, 2 * W);
    CHECK_FAILS(pp_grid_create(world, W, 2, PP_GRID_STAGE_MAJOR, &g, err), PP_ERR_INVALID_ARG, msg);
    CHECK(g == NULL, "a failed grid was returned");
    CHECK_FAILS(pp_grid_create(world, 0, W, PP_GRID_STAGE_MAJOR, &g, err), PP_ERR_INVALID_ARG, "--pp 0 x --dp");
    SAY("grid errors: '%s'\n", msg);
    CHECK_OK(pp_comm_barrier(world, err));
    SAY("all %d grids on %d ranks passed\n", grids, W);
    check_world = NULL;
    pp_comm_destroy(world);
    pp_comm_mpi_finalize();
    return 0;
}
