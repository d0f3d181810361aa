/* Private to train/: what differs between a CPU build and a CUDA build for the job, in
 * two files of which a build compiles one (data_comm.c, or data_comm_nccl.c with CUDA;
 * cmake/cuda.cmake swaps them): the communicator that carries device buffers, and the
 * GPU ordinal placement gave a rank. */
#ifndef PP_TRAIN_DATA_COMM_H
#define PP_TRAIN_DATA_COMM_H

#include <onnxpipe/comm.h>
#include <onnxpipe/device.h>

/* The communicator for activations and gradients in dev's memory: world itself on the cpu
 * (*out == world: not to be destroyed), a NCCL communicator over world's ranks on cuda,
 * ordered against dev's stream by events (destroy with pp_comm_destroy before dev and
 * world). Collective over world. */
pp_status pp_train_data_comm(pp_comm *world, pp_device *dev, pp_comm **out, pp_error *err);

/* The CUDA ordinal for a rank: the GPU at busid when placement named one, else fallback
 * (the rank's index among its host's ranks). */
pp_status pp_train_gpu_index(const char *busid, int fallback, int *index, pp_error *err);

#endif
