/* Helpers the benchmark programs share: CPU time beside the wall clock (the machine is
 * shared, so wall time includes waiting for the core), and sorting for medians. */
#ifndef PP_BENCH_UTIL_H
#define PP_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* CPU seconds of this process, all its threads */
static inline double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v and returns its median. */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
