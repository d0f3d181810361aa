/* Communication: communicators (opaque; the vtable is onnxpipe/backend/comm_backend.h)
 * with MPI (host buffers) and NCCL (device buffers) backends, and the process grid that
 * maps ranks to (pipeline stage, data-parallel replica). DESIGN.md "pp_comm". comm knows
 * nothing of graphs. The status board, a host's ranks and name, polling a request, the
 * completion check, a grid's rank arithmetic and tied-weight stage groups are internal
 * (internal/onnxpipe/comm_lib.h). */
#ifndef ONNXPIPE_COMM_H
#define ONNXPIPE_COMM_H

#include <onnxpipe/core.h>
#include <onnxpipe/device.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_comm pp_comm;
typedef struct pp_request pp_request;   /* an outstanding isend / irecv / iallreduce */

/* A communicator is opaque here; its hooks and fields are the backend tier's
 * (onnxpipe/backend/comm_backend.h). This rank's index in c and the number of its ranks. Local. */
PP_API int pp_comm_rank(const pp_comm *c);
PP_API int pp_comm_size(const pp_comm *c);

/* The MPI world (MPI_Init_thread(FUNNELED) on first use, also without mpirun: a world
 * of one). A duplicate of MPI_COMM_WORLD, so its tags never meet the application's;
 * each call returns a new one (destroy each). Errors return instead of aborting
 * (MPI_ERRORS_RETURN) and name the world ranks. PP_COMM_TIMEOUT=seconds (default 120)
 * is read here; communicators split from it inherit c->timeout, which callers may change.
 * When it initialises MPI it defaults Open MPI's MPI_Iallreduce to the ring schedule
 * (OMPI_MCA_coll_libnbc_iallreduce_algorithm=1, unless set): see bench/comm.c.
 * Collective over the job's ranks (MPI_Comm_dup of MPI_COMM_WORLD). The caller frees it with pp_comm_destroy. */
PP_API pp_status pp_comm_mpi_world(pp_comm **out, pp_error *err);
/* MPI_Finalize once every communicator is destroyed (call at exit of a job); a no-op
 * when the application initialised MPI itself. Collective over the job's ranks. */
PP_API void pp_comm_mpi_finalize(void);
/* This process's rank and the size of MPI_COMM_WORLD without any communication (0 and 1
 * when MPI is not running), and MPI_Abort on it when it has several ranks: what an error
 * path uses, since a collective there could wait on ranks that are not failing. Local. */
PP_API void pp_comm_mpi_world_rank(int *rank, int *size);
PP_API void pp_comm_mpi_abort_world(int code);

/* Frees c (MPI_Comm_free: Collective over c in MPI's sense, so every rank frees its
 * communicators in the same order). Accepts NULL. */
PP_API void pp_comm_destroy(pp_comm *c);
/* Point-to-point: Local (the peer posts the matching call); a request is waited for
 * exactly once, on the thread that made it, which frees it. */
PP_API pp_status pp_comm_isend(pp_comm *c, const void *buf, size_t bytes, int peer, int tag, pp_request **req,
                               pp_error *err);
PP_API pp_status pp_comm_irecv(pp_comm *c, void *buf, size_t bytes, int peer, int tag, pp_request **req, pp_error *err);
PP_API pp_status pp_comm_wait(pp_comm *c, pp_request *req, pp_error *err);   /* req may be NULL: no-op */
/* Sum all-reduce in place, the blocking collectives and split: Collective over c. The caller
 * frees split's *out with pp_comm_destroy; iallreduce's *req is freed by its wait. */
PP_API pp_status pp_comm_iallreduce(pp_comm *c, void *buf, size_t count, pp_dtype dtype, pp_request **req,
                                    pp_error *err);
PP_API pp_status pp_comm_allreduce(pp_comm *c, void *buf, size_t count, pp_dtype dtype, pp_error *err);
PP_API pp_status pp_comm_broadcast(pp_comm *c, void *buf, size_t bytes, int root, pp_error *err);
PP_API pp_status pp_comm_allgather(pp_comm *c, const void *in, void *out, size_t bytes, pp_error *err);
PP_API pp_status pp_comm_barrier(pp_comm *c, pp_error *err);
PP_API pp_status pp_comm_split(pp_comm *c, int color, int key, pp_comm **out, pp_error *err);
PP_API void pp_comm_abort(pp_comm *c, int code);   /* Local: one rank ends the whole job */

/* The communicator for buffers in dev's memory (activations and gradients): world itself
 * when that is host memory (the cpu; *out == world: not to be destroyed), else one the
 * build's backend for the device makes over world's ranks, ordered against the device's
 * work (cuda: a NCCL communicator on the device's stream, comm_nccl.h; destroy it with
 * pp_comm_destroy before dev and world). Collective over world. PP_ERR_UNSUPPORTED naming
 * the device when this build has no communicator for it. */
PP_API pp_status pp_comm_for_device(pp_comm *world, pp_device *dev, pp_comm **out, pp_error *err);

/* ---- the process grid ------------------------------------------------------- */

typedef enum {
    PP_GRID_STAGE_MAJOR = 0,  /* rank = replica * pp + stage: pipeline neighbours are adjacent ranks */
    PP_GRID_REPLICA_MAJOR,    /* rank = stage * dp + replica: a stage's replicas are adjacent ranks */
} pp_grid_order;

typedef struct pp_grid {
    int pp, dp;
    pp_grid_order order;
    int rank, stage, replica;
    int prev, next;             /* world ranks of the pipeline neighbours (same replica), -1 at the ends */
    pp_comm *world;             /* borrowed */
    pp_comm *dp_comm;           /* the replicas of my stage (size dp) */
    pp_comm *pipe_comm;         /* the stages of my replica (size pp), for global-norm sums */
} pp_grid;

/* Collective over world. Fails on every rank with a clear message when pp x dp !=
 * world size ("--pp 2 x --dp 2 = 4 ranks, but the job has 3; launch with mpirun -np 4").
 * rank, stage, replica, prev, next are ranks of world. The grid keeps world, which must
 * outlive it; the caller frees it with pp_grid_destroy, Collective over world (it frees
 * dp_comm and pipe_comm). */
PP_API pp_status pp_grid_create(pp_comm *world, int pp, int dp, pp_grid_order order, pp_grid **out, pp_error *err);
PP_API void pp_grid_destroy(pp_grid *g);

#ifdef __cplusplus
}
#endif
#endif
