/* NCCL through pp_comm against raw NCCL in the same run (CUDA builds only; one GPU per
 * rank, the rank's index on its host): one-way bandwidth from rank 0 to rank 1 (N
 * back-to-back messages / time) and all-reduce bus bandwidth over all ranks
 * (2 (n-1)/n * bytes / time), 1 MiB .. 256 MiB in x4 steps, best of 3 blocks, one JSON
 * line per (op, size) with ratio = raw time / pp_comm time. pp_comm's path is the step's:
 * an event orders the NCCL stream after the compute stream, and the wait orders the
 * compute stream after the transfer. Usage: mpirun -np 2 bench_gpu_p2p_nccl; with fewer
 * than two ranks or no GPU it prints a "skipped" line. */
#include <onnxpipe/backend/comm_backend.h>
#include <onnxpipe/comm_lib.h>
#include <onnxpipe/comm_nccl.h>
#include <onnxpipe/backend/device_cuda.h>

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>

#define ITERS 20
#define REPEATS 3

static pp_comm *world;

static void check(pp_status st, const pp_error *err)
{
    if (st == PP_OK) return;
    printf("{\"bench\":\"gpu_p2p\",\"error\":\"%s\"}\n", err->msg);
    pp_comm_abort(world, 1);
}

static void check_raw(int bad, const char *what, const char *why)
{
    if (!bad) return;
    printf("{\"bench\":\"gpu_p2p\",\"error\":\"%s: %s\"}\n", what, why);
    pp_comm_abort(world, 1);
}

/* ITERS transfers of n bytes (0 -> 1, or an all-reduce of n / 4 floats) through pp_comm
 * (raw == NULL) or raw NCCL; seconds from a common start to the device finishing. */
static double run(int allreduce, pp_comm *nc, ncclComm_t raw, pp_device *dev, void *buf, size_t n)
{
    pp_error err = {0};
    cudaStream_t s = pp_cuda_device_stream(dev);
    check(pp_comm_barrier(world, &err), &err);
    double t0 = pp_now();
    for (int i = 0; i < ITERS; i++) {
        if (allreduce && !raw) {
            pp_request *q = NULL;
            check(pp_comm_iallreduce(nc, buf, n / 4, PP_DTYPE_F32, &q, &err), &err);
            check(pp_comm_wait(nc, q, &err), &err);
        } else if (allreduce) {
            ncclResult_t r = ncclAllReduce(buf, buf, n / 4, ncclFloat32, ncclSum, raw, s);
            check_raw(r != ncclSuccess, "ncclAllReduce", ncclGetErrorString(r));
        } else if (world->rank <= 1 && !raw) {
            pp_request *q = NULL;
            if (world->rank == 0) check(pp_comm_isend(nc, buf, n, 1, 0, &q, &err), &err);
            else check(pp_comm_irecv(nc, buf, n, 0, 0, &q, &err), &err);
            check(pp_comm_wait(nc, q, &err), &err);
        } else if (world->rank <= 1) {
            ncclResult_t r = world->rank == 0 ? ncclSend(buf, n, ncclUint8, 1, raw, s) : ncclRecv(buf, n, ncclUint8, 0, raw, s);
            check_raw(r != ncclSuccess, "ncclSend/ncclRecv", ncclGetErrorString(r));
        }
    }
    check(pp_device_synchronize(dev, &err), &err);
    double dt = pp_now() - t0, times[64], worst = 0;
    check(pp_comm_allgather(world, &dt, times, sizeof dt, &err), &err);   /* the slowest rank's time counts */
    for (int r = 0; r < world->size; r++) worst = times[r] > worst ? times[r] : worst;
    return worst;
}

int main(void)
{
    pp_error err = {0};
    check(pp_comm_mpi_world(&world, &err), &err);
    pp_comm *node = NULL;
    check(pp_comm_mpi_node(world, &node, &err), &err);
    int local = node->rank;
    pp_comm_destroy(node);
    pp_device *dev = NULL;
    if (world->size > 64) check(pp_error_set(&err, PP_ERR_INVALID_ARG, "at most 64 ranks"), &err);
    int have = world->size >= 2 && pp_device_create(PP_DEVICE_CUDA, local, &dev, &err) == PP_OK;
    double all = have;
    check(pp_comm_allreduce(world, &all, 1, PP_DTYPE_F64, &err), &err);
    if (all < world->size) {
        if (world->rank == 0)
            printf("{\"bench\":\"gpu_p2p\",\"skipped\":\"needs mpirun -np 2 or more, one GPU per rank: %s\"}\n",
                   world->size < 2 ? "one rank" : err.msg[0] ? err.msg : "another rank has no GPU");
        pp_device_destroy(dev);
        pp_comm_destroy(world);
        pp_comm_mpi_finalize();
        return 0;
    }
    pp_comm *nc = NULL;
    check(pp_comm_nccl_create(world, local, pp_cuda_device_stream(dev), &nc, &err), &err);
    ncclUniqueId id;
    if (world->rank == 0) check_raw(ncclGetUniqueId(&id) != ncclSuccess, "ncclGetUniqueId", "failed");
    check(pp_comm_broadcast(world, &id, sizeof id, 0, &err), &err);
    check(pp_comm_barrier(world, &err), &err);   /* every rank has the id before any init blocks (comm/nccl.c) */
    ncclComm_t raw = NULL;
    ncclResult_t r = ncclCommInitRank(&raw, world->size, id, world->rank);
    check_raw(r != ncclSuccess, "ncclCommInitRank", ncclGetErrorString(r));
    const size_t max = (size_t)256 << 20;
    void *buf = NULL;
    check(pp_device_alloc(dev, max, &buf, &err), &err);
    check(pp_device_memset(dev, buf, 0, max, &err), &err);
    for (int op = 0; op < 2; op++)
        for (size_t n = (size_t)1 << 20; n <= max; n *= 4) {
            double best_pp = 1e30, best_raw = 1e30;
            run(op, nc, NULL, dev, buf, n);   /* warm-up: connections, buffers */
            run(op, nc, raw, dev, buf, n);
            for (int k = 0; k < REPEATS; k++) {
                double a = run(op, nc, NULL, dev, buf, n), b = run(op, nc, raw, dev, buf, n);
                best_pp = a < best_pp ? a : best_pp;
                best_raw = b < best_raw ? b : best_raw;
            }
            double factor = op ? 2.0 * (world->size - 1) / world->size : 1.0;
            if (world->rank == 0)
                printf("{\"bench\":\"gpu_p2p\",\"op\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"onnxpipe_gbs\":%.2f,"
                       "\"nccl_gbs\":%.2f,\"ratio\":%.3f}\n",
                       op ? "allreduce" : "p2p", world->size, n, factor * n * ITERS / best_pp / 1e9,
                       factor * n * ITERS / best_raw / 1e9, best_raw / best_pp);
        }
    pp_device_free(dev, buf);
    ncclCommDestroy(raw);
    pp_comm_destroy(nc);
    pp_device_destroy(dev);
    pp_comm_destroy(world);
    pp_comm_mpi_finalize();
    return 0;
}
