/* Private to comm/: what the backends (mpi.c, nccl.c) share with the public
 * wrappers (comm.c): the polling pause, the
 * message for a wait that ran out of time, the status board's hooks, and the list of
 * device communicators. */
#ifndef PP_COMM_INTERNAL_H
#define PP_COMM_INTERNAL_H

#include <onnxpipe/comm_lib.h>
#include <onnxpipe/backend/comm_backend.h>

/* Largest message one MPI call moves (bytes); longer ones go in chunks of this size
 * with the same tag, which MPI keeps in order. A field so tests can shrink it. */
#define COMM_DEFAULT_CHUNK ((size_t)1 << 30)

/* Called between polls of an unfinished request: spins for the first millisecond,
 * then sleeps 50 us per call so oversubscribed ranks leave the core to their peers.
 * waited: seconds since the wait began. */
void comm_poll_pause(double waited);

/* A collective's communicator as the status board sees it. */
typedef struct comm_group {
    uint32_t id;                /* the same on every member, different for another communicator */
    uint64_t seq;               /* collectives this rank began on it, this one included */
    const int *world_ranks;     /* [n] its members */
    int n;
} comm_group;

/* The status board (board.c), written by the waits of a backend that blocks the host
 * (MPI): the wait under way (op "recv", "allreduce"; peer: the world rank of a
 * point-to-point peer, else -1 and group: the collective's communicator), and its end.
 * No-ops while no board is open; plain stores, no system call. */
void comm_board_wait_begin(const char *op, int peer, const comm_group *group, size_t bytes, int tag);
void comm_board_wait_end(void);
/* After this rank's wait timed out (err holds its message): logs every rank's record,
 * follows the wait-for chain from this rank, and appends to err the rank that holds the
 * job up and what it last did. Returns err->status. */
pp_status comm_board_explain(pp_error *err);

/* A pp_comm with the given vtable and context (NULL when out of memory). */
pp_comm *comm_new(const pp_comm_i *i, int rank, int size, double timeout, void *ctx);

/* MPI backend: bytes per MPI call of c and of the communicators split from it. */
void comm_mpi_set_chunk(pp_comm *c, size_t bytes);

/* A communicator for the memory of one kind of device, an entry of the list in
 * comm/backends.c (what PP_COMM_BACKENDS names; its definition is compiled only when
 * CMake compiles the backend). */
typedef struct pp_comm_backend {
    const char *name;           /* "nccl" */
    pp_device_kind device;      /* the kind of device whose buffers it carries */
    /* A communicator over world's ranks for buffers in dev's memory, ordered against the
     * work queued on dev. Collective over world; destroy before dev and world. */
    pp_status (*create)(pp_comm *world, pp_device *dev, pp_comm **out, pp_error *err);
    /* The ordinal of the device of this kind at a PCI bus id (placement's gpu_busid); an
     * error naming the bus id when no visible device sits there. */
    pp_status (*device_at_busid)(const char *busid, int *index, pp_error *err);
} pp_comm_backend;

/* The entry serving this kind of device, or NULL when the build has none. */
const pp_comm_backend *comm_backend_for(pp_device_kind kind);

#endif
