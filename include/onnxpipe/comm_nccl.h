/* The NCCL backend of pp_comm (device buffers), present in CUDA builds only; comm.h
 * stays backend-free. DESIGN.md "pp_comm". */
#ifndef ONNXPIPE_COMM_NCCL_H
#define ONNXPIPE_COMM_NCCL_H

#include <onnxpipe/comm.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A NCCL communicator over the ranks of `boot` (an MPI world or group, borrowed: it must
 * outlive the result, which uses it to end the job in pp_comm_abort). Collective over
 * boot: rank 0 makes the ncclUniqueId and broadcasts it through boot. Every operation
 * runs on cuda_stream (a cudaStream_t; NULL: a stream of its own) on cuda_device;
 * buffers are device memory. Tags are ignored (see comm.h): the sends to a peer must be
 * posted in the order that peer posts its receives. isend/irecv are held until the next
 * wait, test or collective on the communicator and then enqueued as one NCCL group, so
 * a rank may post its sends and receives of a step in any order before waiting; their
 * buffers must stay valid until their wait. A wait polls the request's CUDA
 * event and ncclCommGetAsyncError until boot->timeout; on an error or a timeout the
 * NCCL communicator is aborted (ncclCommAbort) and every later call fails. */
pp_status pp_comm_nccl_create(pp_comm *boot, int cuda_device, void *cuda_stream, pp_comm **out, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
