/* pp_comm against raw MPI in the same run: ping-pong bandwidth between ranks 0 and 1
 * (bytes / one-way time) and all-reduce bus bandwidth over all ranks
 * (2 (n-1)/n * bytes / time), 1 KiB .. 256 MiB in x4 steps. Three ways each: MPI's
 * blocking call (MPI_Send/Recv, MPI_Allreduce), MPI's non-blocking call + MPI_Wait (what
 * pp_comm runs underneath), and pp_comm; blocks of iterations rotate through them and
 * the best of 3 blocks counts. One JSON line per (op, size), ratio = raw non-blocking
 * time / pp_comm time. Usage: mpirun -np 2 bench_comm [max_bytes]. */
#include <onnxpipe/backend/comm_backend.h>
#include <onnxpipe/comm.h>
#include <onnxpipe/core_util.h>

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define REPEATS 3

static pp_comm *world;

static void check(pp_status st, const pp_error *err)
{
    if (st == PP_OK) return;
    fprintf(stderr, "bench_comm: %s\n", err->msg);
    pp_comm_abort(world, 1);
}

enum { MPI_BLOCKING, MPI_NONBLOCKING, PP_COMM, NWAYS };

/* One ping-pong round trip of n bytes between ranks 0 and 1 (others idle). */
static void pingpong(int way, char *buf, size_t n)
{
    int r = world->rank;
    if (r > 1) return;
    pp_error err = {0};
    for (int leg = 0; leg < 2; leg++) {
        int sending = (leg == 0) == (r == 0), peer = 1 - r;
        if (way == MPI_BLOCKING && sending) MPI_Send(buf, (int)n, MPI_BYTE, peer, 5, MPI_COMM_WORLD);
        else if (way == MPI_BLOCKING) MPI_Recv(buf, (int)n, MPI_BYTE, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else if (way == MPI_NONBLOCKING) {
            MPI_Request q;
            if (sending) MPI_Isend(buf, (int)n, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &q);
            else MPI_Irecv(buf, (int)n, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &q);
            MPI_Wait(&q, MPI_STATUS_IGNORE);
        } else {
            pp_request *q = NULL;
            check(sending ? pp_comm_isend(world, buf, n, peer, 5, &q, &err)
                          : pp_comm_irecv(world, buf, n, peer, 5, &q, &err),
                  &err);
            check(pp_comm_wait(world, q, &err), &err);
        }
    }
}

static void allreduce(int way, char *buf, size_t n)
{
    pp_error err = {0};
    int count = (int)(n / sizeof(float));
    if (way == MPI_BLOCKING) MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (way == MPI_NONBLOCKING) {
        MPI_Request q;
        MPI_Iallreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
    } else {
        check(pp_comm_allreduce(world, buf, n / sizeof(float), PP_DTYPE_F32, &err), &err);
    }
}

/* Seconds per iteration of op for each way, best block of REPEATS (max over ranks). */
static void measure(void (*op)(int, char *, size_t), char *buf, size_t n, int iters, double best[NWAYS])
{
    for (int way = 0; way < NWAYS; way++) {
        best[way] = 1e30;
        op(way, buf, n);   /* warm-up */
    }
    for (int rep = 0; rep < REPEATS; rep++)
        for (int way = 0; way < NWAYS; way++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int it = 0; it < iters; it++) op(way, buf, n);
            double t = (MPI_Wtime() - t0) / iters;
            MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (t < best[way]) best[way] = t;
        }
}

/* t: seconds per operation for each way; GB/s = scale * bytes / t. */
static void report(const char *op, size_t n, int iters, const double t[NWAYS], double scale)
{
    if (world->rank != 0) return;
    static const char *const keys[NWAYS] = {"mpi_blocking", "mpi_nonblocking", "pp_comm"};
    char key[48];
    pp_json j;
    pp_json_init(&j, stdout, 0);
    pp_json_begin_object(&j, NULL);
    pp_json_string(&j, "bench", "comm");
    pp_json_string(&j, "op", op);
    pp_json_int(&j, "bytes", (int64_t)n);
    pp_json_int(&j, "ranks", op[0] == 'p' ? 2 : world->size);
    pp_json_int(&j, "iters", iters);
    for (int way = 0; way < NWAYS; way++) {
        snprintf(key, sizeof key, "%s_GBps", keys[way]);
        pp_json_double(&j, key, scale * (double)n / t[way] / 1e9);
    }
    for (int way = 0; way < NWAYS; way++) {
        snprintf(key, sizeof key, "%s_us", keys[way]);
        pp_json_double(&j, key, t[way] * 1e6);
    }
    pp_json_double(&j, "ratio", t[MPI_NONBLOCKING] / t[PP_COMM]);
    pp_json_double(&j, "ratio_vs_blocking", t[MPI_BLOCKING] / t[PP_COMM]);
    pp_json_end_object(&j);
    pp_json_finish(&j);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    pp_error err = {0};
    if (pp_comm_mpi_world(&world, &err) != PP_OK) {
        fprintf(stderr, "bench_comm: %s\n", err.msg);
        return 1;
    }
    if (world->size < 2) {
        fprintf(stderr, "bench_comm: needs at least 2 ranks (mpirun -np 2 bench_comm)\n");
        pp_comm_destroy(world);
        pp_comm_mpi_finalize();
        return 1;
    }
    size_t max_bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)256 << 20;
    char *buf = malloc(max_bytes);
    if (!buf) check(pp_error_set(&err, PP_ERR_NOMEM, "no memory for %zu bytes", max_bytes), &err);
    memset(buf, 0, max_bytes);   /* touch every page before timing */
    double p = world->size, bus = 2 * (p - 1) / p;
    for (size_t n = 1024; n <= max_bytes; n *= 4) {
        /* about 64 MiB moved per block, at least 3 and at most 2000 iterations */
        size_t want = ((size_t)64 << 20) / n;
        int iters = want < 3 ? 3 : want > 2000 ? 2000 : (int)want;
        double t[NWAYS];
        measure(pingpong, buf, n, iters, t);
        for (int way = 0; way < NWAYS; way++) t[way] /= 2;   /* one way of the round trip */
        report("p2p", n, iters, t, 1.0);
        measure(allreduce, buf, n, iters, t);
        report("allreduce", n, iters, t, bus);
    }
    free(buf);
    pp_comm_destroy(world);
    pp_comm_mpi_finalize();
    return 0;
}
