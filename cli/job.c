/* How a command that runs as an MPI job ends: errors carry the rank and end the whole
 * job (MPI_Abort) so no rank hangs; only rank 0 prints results. */
#include "cli.h"

#include <onnxpipe/comm.h>

int cli_fail_job(const pp_error *err)
{
    pp_comm *w = NULL;
    if (pp_comm_mpi_world(&w, NULL) == PP_OK && w->size > 1) {
        fprintf(stderr, "onnxpipe: error: [rank %d] %s\n", w->rank, err->msg[0] ? err->msg : pp_status_string(err->status));
        fflush(stderr);
        pp_comm_abort(w, 1);
    }
    pp_comm_destroy(w);
    pp_comm_mpi_finalize();
    return cli_fail(err);
}

int cli_job_rank0(void)
{
    pp_comm *w = NULL;
    int rank0 = pp_comm_mpi_world(&w, NULL) != PP_OK || w->rank == 0;
    pp_comm_destroy(w);
    return rank0;
}

void cli_job_end(void)
{
    pp_comm_mpi_finalize();
}
