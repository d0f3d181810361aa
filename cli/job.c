/* How a command that runs as an MPI job ends: errors carry the rank and end the whole
 * job (MPI_Abort) so no rank hangs; only rank 0 prints results. */
#include "cli.h"

#include <onnxpipe/comm.h>

int cli_fail_job(const pp_error *err)
{
    int rank, size;
    pp_comm_mpi_world_rank(&rank, &size);
    if (size > 1) {
        fprintf(stderr, "onnxpipe: error: [rank %d] %s\n", rank, err->msg[0] ? err->msg : pp_status_string(err->status));
        fflush(stderr);
        pp_comm_mpi_abort_world(1);
    }
    pp_comm_mpi_finalize();
    return cli_fail(err);
}

int cli_job_rank0(void)
{
    int rank, size;
    pp_comm_mpi_world_rank(&rank, &size);
    return rank == 0;
}

void cli_job_end(void)
{
    pp_comm_mpi_finalize();
}
