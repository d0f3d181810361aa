/* Opening the job's datasets on every rank: rank 0 first, so what --pack and --pad cache
 * beside the data is built once while the other ranks wait (polling, so a build of any
 * length meets no timeout), then the others, which find it (or, without a shared folder,
 * build their own the same way); a failure on any rank is every rank's, with its message. */
#include "job_internal.h"

#include <stdlib.h>
#include <time.h>

/* Every rank's status of this phase (mine: this rank's), waited for by polling; on a failure
 * every rank returns the first failing rank's, with its message. */
static pp_status agree(pp_comm *world, pp_status mine, pp_error *err)
{
    int n = pp_comm_size(world), me = pp_comm_rank(world), bad = -1;
    int64_t *all = calloc((size_t)n, sizeof *all);
    if (!all) return PP_NOMEM(err);
    all[me] = mine;
    pp_error note = {0};
    if (mine != PP_OK) note = *err;
    pp_request *req = NULL;
    pp_status st = pp_comm_iallreduce(world, all, (size_t)n, PP_DTYPE_I64, &req, err);
    for (int done = 0; st == PP_OK && !done;) {
        st = pp_comm_test(world, req, &done, err);
        struct timespec pause = {0, 20 * 1000 * 1000};
        if (st == PP_OK && !done) nanosleep(&pause, NULL);
    }
    if (st == PP_OK) st = pp_comm_wait(world, req, err);
    for (int r = n - 1; r >= 0 && st == PP_OK; r--)
        if (all[r] != PP_OK) bad = r;
    if (st == PP_OK && bad >= 0) st = pp_comm_broadcast(world, note.msg, sizeof note.msg, bad, err);
    if (st == PP_OK && bad >= 0)
        st = bad == me ? pp_error_set(err, mine, "%s", note.msg)
                       : pp_error_set(err, (pp_status)all[bad], "[rank %d] %s", bad, note.msg);
    free(all);
    return st;
}

pp_status train_open_data(pp_comm *world, const char *path, const pp_dataset_options *o, pp_dataset **out,
                          pp_error *err)
{
    *out = NULL;
    for (int phase = 0; phase < 2; phase++) {
        pp_status st = PP_OK;
        if ((pp_comm_rank(world) == 0) == (phase == 0)) st = pp_dataset_open_with(path, o, out, err);
        if ((st = agree(world, st, err)) != PP_OK) {
            pp_dataset_close(*out);
            *out = NULL;
            return st;
        }
    }
    return PP_OK;
}
