/* The NCCL backend of pp_comm (device buffers), present in CUDA builds only; comm.h
 * stays backend-free. DESIGN.md "pp_comm". */
#ifndef ONNXPIPE_COMM_NCCL_H
#define ONNXPIPE_COMM_NCCL_H

#include <onnxpipe/comm.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A NCCL communicator over the ranks of `boot` (an MPI world or group, borrowed: it must
 * outlive the result, which uses it to end the job). Collective over boot: rank 0 makes
 * the ncclUniqueId and broadcasts it through boot. Buffers are device memory on
 * cuda_device. The communicator, and each one split from it, runs NCCL on a stream of its
 * own; compute_stream (a cudaStream_t; NULL: the legacy default stream) is the stream the
 * caller's kernels run on:
 * - an operation starts on the device after the work queued on compute_stream before it
 *   was posted (its send buffer is written, its receive buffer no longer read);
 * - wait() does not block the host: it makes compute_stream wait for the operation, so
 *   the kernels queued after it see the result, and returns. Read a result on the host
 *   through compute_stream (pp_device_copy_to_host does). test() asks without waiting.
 *   broadcast, allgather and barrier also wait on the host, up to boot->timeout.
 * Tags are ignored (see comm.h): the sends to a peer must be posted in the order that
 * peer posts its receives. Each operation is enqueued when posted and NCCL's streams run
 * in order, so a receive blocks the operations posted after it on its communicator until
 * its send arrives: ranks must post their messages in one global order (the schedule's
 * lowering does). Buffers must stay valid until the operation has completed on the
 * device. check() reports a failure that came after a wait. A watchdog thread (comm/nccl_watch.c) polls
 * every live communicator's oldest operation and ncclCommGetAsyncError; on an error, or an
 * operation in flight longer than the communicator's timeout, it aborts every NCCL
 * communicator of the process (ncclCommAbort) and every later call fails with that error;
 * if the job has not ended 10 s later (a thread stuck inside NCCL) it calls MPI_Abort.
 * The caller frees the result with pp_comm_destroy, before boot. */
pp_status pp_comm_nccl_create(pp_comm *boot, int cuda_device, void *compute_stream, pp_comm **out,
                                     pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
