/* The MPI communicator on every rank of the job (a world of one when ctest runs it
 * directly, 4 ranks from test_comm_mpi.sh): ring exchanges of known byte patterns,
 * in-place all-reduce sums against closed forms, broadcast, allgather, split, the
 * node communicator, argument errors, short receives, and the timeout of a receive
 * that is never sent; bfloat16 / float16 sums. `--kill-rank K` instead runs ring
 * exchanges until rank K kills itself (test_comm_kill_mpi.sh). */
#include "comm_check.h"
#include "comm_internal.h"
#include <onnxpipe/element.h>   /* the 16-bit conversions */

#include <math.h>
#include <mpi.h>
#include <signal.h>

static unsigned char pattern(int src, size_t i, int salt)
{
    return (unsigned char)(src * 131 + i * 7 + (i >> 8) * 13 + salt);
}

/* Sends n bytes to the next rank and receives from the previous (receive posted
 * first, waits in reverse order), checks every byte. */
static void ring_once(pp_comm *c, size_t n, int salt, int tag)
{
    int next = (c->rank + 1) % c->size, prev = (c->rank + c->size - 1) % c->size;
    unsigned char *out = malloc(n ? n : 1), *in = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) out[i] = pattern(c->rank, i, salt), in[i] = 0;
    pp_request *rr = NULL, *sr = NULL;
    CHECK_OK(pp_comm_irecv(c, in, n, prev, tag, &rr, err));
    CHECK_OK(pp_comm_isend(c, out, n, next, tag, &sr, err));
    CHECK_OK(pp_comm_wait(c, sr, err));
    CHECK_OK(pp_comm_wait(c, rr, err));
    for (size_t i = 0; i < n; i++)
        CHECK(in[i] == pattern(prev, i, salt), "%zu-byte message from rank %d: byte %zu is %d, expected %d", n, prev,
              i, in[i], pattern(prev, i, salt));
    free(out);
    free(in);
}

static void test_ring(pp_comm *c)
{
    int count = 0;
    for (size_t n = 1; n <= (size_t)4 << 20; n *= 4, count++) ring_once(c, n, count, 100 + count);
    ring_once(c, 0, 0, 7);
    /* every message split into 1000-byte MPI calls (the path of messages > 1 GiB) */
    comm_mpi_set_chunk(c, 1000);
    ring_once(c, 1, 1, 3);
    ring_once(c, 4 << 20, 2, 3);
    ring_once(c, 1000 * 7 + 3, 3, 3);
    comm_mpi_set_chunk(c, COMM_DEFAULT_CHUNK);
    SAY("ring: %d sizes 0 B .. 4 MiB, and 1000-byte chunks up to 4 MiB, byte-exact on %d ranks\n", count + 1,
        c->size);
}

/* Sums of x_r[i] over r = 0..P-1 checked against closed forms: exact ones for
 * integer-valued data, and sum_r 1/(r + 1 + i % 5) computed in long double. */
static void test_allreduce(pp_comm *c, size_t chunk, size_t max_count)
{
    comm_mpi_set_chunk(c, chunk);
    const int P = c->size, r = c->rank;
    const size_t counts[] = {1, 1000, max_count};
    double max_f32 = 0, max_f64 = 0;
    for (int t = 0; t < 3; t++) {
        size_t n = counts[t];
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        double *d = malloc(n * sizeof *d);
        int64_t *q = malloc(n * sizeof *q);
        for (size_t i = 0; i < n; i++) {
            a[i] = (float)((r + 1) * (int)(i % 17)) * 0.5f;
            b[i] = 1.0f / (float)(r + 1 + (int)(i % 5));
            d[i] = r + (double)i * 1e-3;
            q[i] = (int64_t)r * ((int64_t)1 << 40) + (int64_t)i;
        }
        /* four outstanding at once, waited in reverse order */
        pp_request *ra, *rb, *rd, *rq;
        CHECK_OK(pp_comm_iallreduce(c, a, n, PP_DTYPE_F32, &ra, err));
        CHECK_OK(pp_comm_iallreduce(c, b, n, PP_DTYPE_F32, &rb, err));
        CHECK_OK(pp_comm_iallreduce(c, d, n, PP_DTYPE_F64, &rd, err));
        CHECK_OK(pp_comm_iallreduce(c, q, n, PP_DTYPE_I64, &rq, err));
        CHECK_OK(pp_comm_wait(c, rq, err));
        CHECK_OK(pp_comm_wait(c, rd, err));
        CHECK_OK(pp_comm_wait(c, rb, err));
        CHECK_OK(pp_comm_wait(c, ra, err));
        for (size_t i = 0; i < n; i++) {
            float wa = (float)(i % 17) * 0.5f * (float)(P * (P + 1) / 2);
            CHECK(a[i] == wa, "float32 sum [%zu] = %g, expected %g", i, a[i], wa);
            long double wb = 0;
            for (int k = 0; k < P; k++) wb += 1.0L / (k + 1 + (int)(i % 5));
            double eb = fabs((double)(b[i] - wb));
            CHECK(eb <= 4 * P * 6e-8 * (double)wb, "float32 sum [%zu] = %.9g, expected %.9Lg", i, b[i], wb);
            max_f32 = fmax(max_f32, eb);
            double wd = P * (P - 1) / 2.0 + P * (double)i * 1e-3;
            double ed = fabs(d[i] - wd);
            CHECK(ed <= 1e-12 * fmax(1, wd), "float64 sum [%zu] = %.17g, expected %.17g", i, d[i], wd);
            max_f64 = fmax(max_f64, ed);
            int64_t wq = (int64_t)(P * (P - 1) / 2) * ((int64_t)1 << 40) + (int64_t)P * (int64_t)i;
            CHECK(q[i] == wq, "int64 sum [%zu] = %lld, expected %lld", i, (long long)q[i], (long long)wq);
        }
        free(a), free(b), free(d), free(q);
    }
    comm_mpi_set_chunk(c, COMM_DEFAULT_CHUNK);
    SAY("allreduce (chunk %zu B): 1, 1000, %zu elements on %d ranks; exact for integer-valued float32 and int64; "
        "max |diff| float32 %.3g, float64 %.3g vs closed form\n",
        chunk, max_count, P, max_f32, max_f64);
}

/* bfloat16 / float16 sums (MPI has neither: a user op): integer-valued data the 16-bit type
 * holds exactly sums exactly; x_r[i] = 1/(r + 1 + i % 5) rounded to 16 bits sums within
 * (P - 1) roundings of u = 2^-8 (bf16) / 2^-11 (fp16) relative of the exact sum of the
 * rounded inputs (each partial sum is rounded once, and partial sums only grow). */
static void test_allreduce_16bit(pp_comm *c, pp_dtype dt, size_t n)
{
    comm_mpi_set_chunk(c, 1000);   /* chunks, and elements split across them */
    const int P = c->size, r = c->rank, bf = dt == PP_DTYPE_BF16;
    const double u = bf ? 1.0 / 256 : 1.0 / 2048;
    uint16_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        float x = (float)((r + 1) * (int)(i % 9)), y = 1.0f / (float)(r + 1 + (int)(i % 5));
        a[i] = bf ? pp_el_bf16_from_f32(x) : pp_el_f16_from_f32(x);
        b[i] = bf ? pp_el_bf16_from_f32(y) : pp_el_f16_from_f32(y);
    }
    pp_request *ra, *rb;
    CHECK_OK(pp_comm_iallreduce(c, a, n, dt, &ra, err));
    CHECK_OK(pp_comm_iallreduce(c, b, n, dt, &rb, err));
    CHECK_OK(pp_comm_wait(c, rb, err));
    CHECK_OK(pp_comm_wait(c, ra, err));
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        float ga = bf ? pp_el_f32_from_bf16(a[i]) : pp_el_f32_from_f16(a[i]);
        float gb = bf ? pp_el_f32_from_bf16(b[i]) : pp_el_f32_from_f16(b[i]);
        float wa = (float)((int)(i % 9) * P * (P + 1) / 2);
        CHECK(ga == wa, "%s sum [%zu] = %g, expected %g", pp_dtype_name(dt), i, ga, wa);
        double wb = 0;
        for (int k = 0; k < P; k++) {
            float y = 1.0f / (float)(k + 1 + (int)(i % 5));
            wb += bf ? pp_el_f32_from_bf16(pp_el_bf16_from_f32(y)) : pp_el_f32_from_f16(pp_el_f16_from_f32(y));
        }
        double rel = fabs(gb - wb) / wb;
        CHECK(rel <= (P - 1) * u, "%s sum [%zu] = %.6g, exact sum of the inputs %.6g (%.2g relative)",
              pp_dtype_name(dt), i, gb, wb, rel);
        worst = fmax(worst, rel);
    }
    free(a), free(b);
    comm_mpi_set_chunk(c, COMM_DEFAULT_CHUNK);
    SAY("allreduce %s: %zu elements on %d ranks; integer-valued sums exact; 1/(r+1+i%%5) within %.2g relative "
        "of the exact sum (bound (P-1)u = %.2g)\n", pp_dtype_name(dt), n, P, worst, (P - 1) * u);
}

static void test_collectives(pp_comm *c)
{
    const int P = c->size, r = c->rank;
    int mine[3] = {r, r * r, 7}, all[3 * 64];
    CHECK(P <= 64, "test written for <= 64 ranks");
    CHECK_OK(pp_comm_allgather(c, mine, all, sizeof mine, err));
    for (int k = 0; k < P; k++)
        CHECK(all[3 * k] == k && all[3 * k + 1] == k * k && all[3 * k + 2] == 7, "allgather slot %d: %d %d %d", k,
              all[3 * k], all[3 * k + 1], all[3 * k + 2]);
    size_t n = 100003;
    unsigned char *b = malloc(n);
    for (size_t i = 0; i < n; i++) b[i] = r == P - 1 ? pattern(P - 1, i, 9) : 0;
    CHECK_OK(pp_comm_broadcast(c, b, n, P - 1, err));
    for (size_t i = 0; i < n; i++) CHECK(b[i] == pattern(P - 1, i, 9), "broadcast byte %zu", i);
    free(b);
    CHECK_OK(pp_comm_barrier(c, err));

    /* split: even and odd ranks, in reverse order; rank 0 stays out */
    pp_comm *sub = NULL;
    int color = r == 0 ? -1 : r % 2;
    CHECK_OK(pp_comm_split(c, color, -r, &sub, err));
    if (color < 0) {
        CHECK(sub == NULL, "color -1 gave a communicator");
    } else {
        int members = 0, above = 0;
        for (int k = 1; k < P; k++)
            if (k % 2 == color) members++, above += k > r;
        CHECK(sub && sub->size == members && sub->rank == above, "split: size %d rank %d, expected %d %d",
              sub ? sub->size : -1, sub ? sub->rank : -1, members, above);
        int64_t v = r;
        CHECK_OK(pp_comm_allreduce(sub, &v, 1, PP_DTYPE_I64, err));
        int64_t want = 0;
        for (int k = 1; k < P; k++) want += k % 2 == color ? k : 0;
        CHECK(v == want, "sum over the split = %lld, expected %lld", (long long)v, (long long)want);
        pp_comm_destroy(sub);
    }

    /* node communicator: the ranks whose processor name equals mine */
    char host[64] = {0}, hosts[64 * 64];
    snprintf(host, sizeof host, "%s", pp_comm_mpi_host());
    CHECK(host[0], "empty host name");
    CHECK_OK(pp_comm_allgather(c, host, hosts, sizeof host, err));
    int same = 0;
    for (int k = 0; k < P; k++) same += strcmp(hosts + 64 * k, host) == 0;
    pp_comm *node = NULL;
    CHECK_OK(pp_comm_mpi_node(c, &node, err));
    CHECK(node->size == same, "node communicator has %d ranks, %d share host '%s'", node->size, same, host);
    pp_comm_destroy(node);
    SAY("collectives: allgather, 100003-byte broadcast, barrier, split (even/odd, reversed), node (%d ranks on "
        "'%s') checked\n",
        same, host);
}

static void test_errors(pp_comm *c)
{
    char buf[32] = {0}, want[160];
    pp_request *req = NULL;
    snprintf(want, sizeof want, "peer %d out of range (0..%d)", c->size + 5, c->size - 1);
    CHECK_FAILS(pp_comm_isend(c, buf, 4, c->size + 5, 0, &req, err), PP_ERR_INVALID_ARG, want);
    CHECK_FAILS(pp_comm_irecv(c, buf, 4, 0, 1 << 20, &req, err), PP_ERR_INVALID_ARG, "tag 1048576 out of range");
    CHECK_FAILS(pp_comm_iallreduce(c, buf, 4, PP_DTYPE_U8, &req, err), PP_ERR_UNSUPPORTED, "uint8");
    CHECK_FAILS(pp_comm_broadcast(c, buf, 4, -1, err), PP_ERR_INVALID_ARG, "root -1");

    /* a receive that gets fewer bytes than asked, and one that gets more (Open MPI
     * truncates a message to oneself silently, so that one needs two ranks) */
    int next = (c->rank + 1) % c->size, prev = (c->rank + c->size - 1) % c->size;
    char out[16] = "0123456789";
    for (int t = 0; t < (c->size > 1 ? 2 : 1); t++) {
        size_t ask = t == 0 ? 20 : 5;
        pp_request *rr = NULL, *sr = NULL;
        CHECK_OK(pp_comm_irecv(c, buf, ask, prev, 11, &rr, err));
        CHECK_OK(pp_comm_isend(c, out, 10, next, 11, &sr, err));
        CHECK_OK(pp_comm_wait(c, sr, err));
        CHECK_FAILS(pp_comm_wait(c, rr, err), PP_ERR_COMM, t == 0 ? "got 10 bytes" : "recv of 5 bytes");
    }
    setenv("PP_COMM_TIMEOUT", "abc", 1);
    pp_comm *w = NULL;
    CHECK_FAILS(pp_comm_mpi_world(&w, err), PP_ERR_INVALID_ARG, "PP_COMM_TIMEOUT='abc' is not a number");
    SAY("errors: bad peer, tag, dtype, root, short and long receives, bad PP_COMM_TIMEOUT refused with messages\n");
}

/* Every rank waits for a message from the next rank that is never sent. */
static void test_timeout(pp_comm *c)
{
    int next = (c->rank + 1) % c->size, wnext, peer_mpi;
    MPI_Comm_rank(MPI_COMM_WORLD, &peer_mpi);
    wnext = (peer_mpi + 1) % c->size;   /* c duplicates the world */
    c->timeout = 2;
    char buf[8];
    pp_request *rr = NULL;
    CHECK_OK(pp_comm_irecv(c, buf, sizeof buf, next, 999, &rr, err));
    int done = -1;
    CHECK_OK(pp_comm_test(c, rr, &done, err));
    CHECK(done == 0, "a receive nobody sends is done");
    double t0 = pp_now();
    pp_error e = {0};
    pp_status st = pp_comm_wait(c, rr, &e);
    double dt = pp_now() - t0;
    char want[96];
    snprintf(want, sizeof want, "is rank %d alive?", wnext);
    CHECK(st == PP_ERR_TIMEOUT && strstr(e.msg, want) && strstr(e.msg, "(tag 999)") && dt >= 2.0,
          "after %.2f s: %s '%s'", dt, pp_status_string(st), e.msg);
    SAY("timeout after %.2f s: %s\n", dt, e.msg);
    c->timeout = 60;
    /* the cancelled receive leaves the communicator usable */
    CHECK_OK(pp_comm_barrier(c, err));
    ring_once(c, 1 << 16, 5, 999);
}

/* Ring exchanges of 1 MiB until rank `victim` kills itself; mpirun must end the job. */
static int run_kill(pp_comm *c, int victim)
{
    for (int it = 0; it < 100000; it++) {
        if (c->rank == victim && it == 20) {
            fprintf(stderr, "rank %d: killing myself with SIGKILL at exchange %d\n", c->rank, it);
            fflush(stderr);
            raise(SIGKILL);
        }
        ring_once(c, 1 << 20, it & 0xff, 1);
    }
    fprintf(stderr, "rank %d: finished every exchange although rank %d was killed\n", c->rank, victim);
    return 1;
}

int main(int argc, char **argv)
{
    setenv("PP_COMM_TIMEOUT", "2", 1);
    pp_comm *c = NULL;
    pp_error e = {0};
    if (pp_comm_mpi_world(&c, &e) != PP_OK) {
        fprintf(stderr, "pp_comm_mpi_world: %s\n", e.msg);
        return 1;
    }
    check_world = c;
    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(c->rank == rank && c->size == size, "world %d/%d vs MPI %d/%d", c->rank, c->size, rank, size);
    CHECK(strcmp(c->i->name(c), "mpi") == 0, "backend name %s", c->i->name(c));
    CHECK(c->timeout == 2, "PP_COMM_TIMEOUT=2 gave timeout %g", c->timeout);
    c->timeout = 60;   /* 2 s only where a timeout is the point: the rest may run slowly under load */
    if (argc == 3 && strcmp(argv[1], "--kill-rank") == 0) return run_kill(c, atoi(argv[2]));
    SAY("world of %d rank(s), backend %s\n", c->size, c->i->name(c));
    test_ring(c);
    test_allreduce(c, COMM_DEFAULT_CHUNK, 1 << 20);
    test_allreduce(c, 1000, 100003);
    test_allreduce_16bit(c, PP_DTYPE_BF16, 100003);
    test_allreduce_16bit(c, PP_DTYPE_F16, 100003);
    test_collectives(c);
    test_errors(c);
    test_timeout(c);
    CHECK_OK(pp_comm_barrier(c, err));
    SAY("all comm checks passed\n");
    check_world = NULL;
    pp_comm_destroy(c);
    pp_comm_mpi_finalize();
    return 0;
}
