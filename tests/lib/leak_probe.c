/* A program with one leak of its own, after MPI_Init and MPI_Finalize (whose leaks
 * tests/lsan.supp suppresses), built in the sanitizer build only (CMakeLists.txt):
 * tests/test_leak_check.sh runs it through tests/lib/sanitized.sh to show that the
 * tests' leak check fails on a leak of ours and names its function and line, and on
 * nothing else. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *volatile sink;

/* noinline: the report's frame #1 is this function's own line */
__attribute__((noinline)) static void leak_probe_lost(size_t n)
{
    sink = malloc(n);
    if (sink) memset(sink, 1, n);
    sink = NULL;   /* the only pointer gone: a direct leak of n bytes */
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Finalize();
    leak_probe_lost(4242);
    printf("leak_probe: rank %d leaked 4242 bytes in leak_probe_lost\n", rank);
    return 0;
}
