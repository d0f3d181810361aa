/* Communication beyond the public tier (internal tier: the library, the CLI, tests and
 * bench): the ranks of a host, the host's name, the completion check a step ends with, the
 * communicators of tied-weight stage groups, and the status board that names the rank a
 * hang waits for. */
#ifndef ONNXPIPE_COMM_LIB_H
#define ONNXPIPE_COMM_LIB_H

#include <onnxpipe/comm.h>
#include <onnxpipe/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Ranks that share memory with this one (a host), via MPI_Comm_split_type. Collective
 * over world. The caller frees it with pp_comm_destroy. */
pp_status pp_comm_mpi_node(pp_comm *world, pp_comm **out, pp_error *err);
/* Name of this host (MPI_Get_processor_name). Local. A static buffer, not to be freed,
 * overwritten by the next call. */
const char *pp_comm_mpi_host(void);

/* The vtable's check (PP_OK where it has none): whether the operations already waited for
 * really completed; a step calls it after the host synchronisation that ends it. Local. */
pp_status pp_comm_check(pp_comm *c, pp_error *err);
/* A communicator over the given stages of my replica (tied weights: first and last
 * stage share the token embedding); its rank i holds stages[i]. Collective over
 * g->world: every rank calls it with the same stage list (distinct, in 0..pp-1); ranks of
 * other stages get NULL. The caller frees it with pp_comm_destroy. */
pp_status pp_grid_stage_group(pp_grid *g, const int *stages, int nstages, pp_comm **out, pp_error *err);

/* ---- the status board: what every rank is doing, for the report of a hang ---- */

/* Opens this process's record on the job's status board: a file per rank, memory-mapped,
 * in dir/.status/ (dir: the --save directory, seen by every host that shares it), or with
 * dir NULL in /dev/shm/onnxpipe-status-<job id>/ (/tmp without /dev/shm), which only the
 * ranks of one host see. Each rank records the action it runs and the last it completed
 * (pp_comm_board_begin / _end) and, inside the MPI backend's waits, what it waits for.
 * When a wait times out, the waiting rank logs every record it can read and its error
 * names the rank that holds the job up, found by following who waits for whom
 * ("rank 1 never arrived: its last completed action was 1B3 of step 57, 63.2 s ago; its
 * process 4242 on node7 is stopped"). One board per process; a rank of an older job
 * still writing there keeps its own file. Collective over world (a broadcast of the job's
 * id). pp_comm_board_close (a no-op when none is open) removes the record. */
pp_status pp_comm_board_open(pp_comm *world, const char *dir, pp_error *err);
void pp_comm_board_close(void);
/* The action this rank starts (a short label, e.g. pp_action_format's "1B3") in step, and
 * its end; plain stores into the record, no system call. Local; no-ops without a board. */
void pp_comm_board_begin(int64_t step, const char *action);
void pp_comm_board_end(void);

/* Whether req is done, without waiting; NULL: done. req stays the caller's either way:
 * pp_comm_wait frees it (at once when it is done). Local, on the thread that made req. */
pp_status pp_comm_test(pp_comm *c, pp_request *req, int *done, pp_error *err);
/* World rank of (stage, replica). Local. Thread-safe. */
int pp_grid_rank_of(const pp_grid *g, int stage, int replica);
#ifdef __cplusplus
}
#endif
#endif
