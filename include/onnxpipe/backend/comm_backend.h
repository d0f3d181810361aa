/* For writing a communicator backend (backend tier: may change in a minor release,
 * docs/library.md: ABI): the hooks a backend fills and the layout of pp_comm, which comm.h keeps
 * opaque. The pp_comm_* wrappers (comm/comm.c) call these hooks. */
#ifndef ONNXPIPE_COMM_BACKEND_H
#define ONNXPIPE_COMM_BACKEND_H

#include <onnxpipe/comm.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_comm_i {
    const char *(*name)(const pp_comm *c);                       /* "mpi", "nccl" */
    /* Point-to-point; bytes are opaque. 0 <= tag < 2^20. *req is freed by wait (exactly
     * one wait per request). MPI matches (peer, tag) and keeps order per (peer, tag);
     * NCCL ignores tags: the sends to a peer must be posted in the order the peer
     * posts its receives, and each op is its own ncclSend / ncclRecv (no group: they
     * block the GPU's stream until the peer's matching op, so the schedule orders every
     * rank's messages by one key, scheduler/lower.c). A receive that gets fewer or more
     * bytes than asked is an error (MPI backend). */
    pp_status (*isend)(pp_comm *c, const void *buf, size_t bytes, int peer, int tag, pp_request **req,
                       pp_error *err);
    pp_status (*irecv)(pp_comm *c, void *buf, size_t bytes, int peer, int tag, pp_request **req, pp_error *err);
    /* Waits for req and frees it, also on failure; fails with PP_ERR_TIMEOUT naming the
     * peer ("rank R: waited S s for recv of N bytes with rank P (tag T); is rank P
     * alive?") when req has not completed c->timeout seconds after the wait began. After
     * a timeout the point-to-point request is cancelled; a timed-out collective leaves
     * c unusable for collectives, so the caller should end the job (abort). NCCL: the
     * host does not block; the caller's compute stream is ordered after req, and a
     * watchdog enforces the timeout (comm_nccl.h). */
    pp_status (*wait)(pp_comm *c, pp_request *req, pp_error *err);
    /* Sets *done when req has completed; req stays valid until its wait (which then
     * returns at once). */
    pp_status (*test)(pp_comm *c, pp_request *req, int *done, pp_error *err);
    /* Sum in place over all ranks of c; asynchronous, completed by wait. MPI: float32,
     * float64, int32, int64; NCCL adds float16 and bfloat16. Others: PP_ERR_UNSUPPORTED. */
    pp_status (*iallreduce)(pp_comm *c, void *buf, size_t count, pp_dtype dtype, pp_request **req, pp_error *err);
    pp_status (*broadcast)(pp_comm *c, void *buf, size_t bytes, int root, pp_error *err);
    /* Gathers `bytes` from every rank into out (size x bytes), on every rank. */
    pp_status (*allgather)(pp_comm *c, const void *in, void *out, size_t bytes, pp_error *err);
    pp_status (*barrier)(pp_comm *c, pp_error *err);
    /* The blocking collectives (broadcast, allgather, barrier) time out like wait. */
    /* A communicator over the ranks with the same color, ordered by key (ties by rank).
     * Collective over c. color < 0: this rank joins none and gets *out = NULL. */
    pp_status (*split)(pp_comm *c, int color, int key, pp_comm **out, pp_error *err);
    /* Ends the whole job (every rank of every communicator) with this exit code. */
    void (*abort)(pp_comm *c, int code);
    void (*destroy)(pp_comm *c);
    /* NULL where every failure is reported by the call or wait it belongs to (MPI). NCCL:
     * the error of an operation that failed on the device after its wait returned (the
     * watchdog aborted it); call it after a host synchronisation that follows the waits. */
    pp_status (*check)(pp_comm *c, pp_error *err);
} pp_comm_i;

struct pp_comm {
    const pp_comm_i *i;
    int rank, size;
    double timeout;         /* seconds without progress before wait fails (PP_COMM_TIMEOUT) */
    void *ctx;
};

#ifdef __cplusplus
}
#endif
#endif
