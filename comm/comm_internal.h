/* Private to comm/: what the backends (mpi.c, nccl.c) share with the public
 * wrappers (comm.c): the one reader of PP_COMM_TIMEOUT, the polling pause, and
 * the message for a wait that ran out of time. */
#ifndef PP_COMM_INTERNAL_H
#define PP_COMM_INTERNAL_H

#include <onnxpipe/comm.h>

/* Largest message one MPI call moves (bytes); longer ones go in chunks of this size
 * with the same tag, which MPI keeps in order. A field so tests can shrink it. */
#define COMM_DEFAULT_CHUNK ((size_t)1 << 30)

/* Seconds from PP_COMM_TIMEOUT (default 120); an error names a bad value. The only
 * getenv of the module. */
pp_status comm_timeout_from_env(double *seconds, pp_error *err);

/* Called between polls of an unfinished request: spins for the first millisecond,
 * then sleeps 50 us per call so oversubscribed ranks leave the core to their peers.
 * waited: seconds since the wait began. */
void comm_poll_pause(double waited);

/* A pp_comm with the given vtable and context (NULL when out of memory). */
pp_comm *comm_new(const pp_comm_i *i, int rank, int size, double timeout, void *ctx);

/* MPI backend: bytes per MPI call of c and of the communicators split from it. */
void comm_mpi_set_chunk(pp_comm *c, size_t bytes);

#endif
