/* Scheduler speed: time to generate + lower + validate + simulate a schedule for
 * p in {4, 16, 64, 256} and m in {8, 64, 512, 4096} (1f1b; all kinds at p = 64,
 * m = 512). One JSON line per case; the best of a few repetitions. Target: p = 64,
 * m = 512 under 50 ms. Yardstick: ns per action, and a plain pass over the same
 * number of 16-byte actions (memcpy) in the same run. Wall and CPU time are both given:
 * the machine is shared, and wall time then includes time spent waiting for a core. */
#include "bench_util.h"

#include <onnxpipe/schedule_lib.h>
#include <onnxpipe/driver_lib.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct timing {
    double generate, lower, validate, simulate;  /* wall s */
    double cpu;                                   /* process CPU s for all four */
    long actions;
} timing;

static int run_once(pp_schedule_kind kind, int p, int m, int v, timing *t, pp_error *err)
{
    pp_schedule *s = NULL;
    pp_sim_result *r = NULL;
    pp_costs c;
    pp_costs_unit(&c);
    double c0 = cpu_now(), t0 = pp_now();
    if (pp_schedule_generate(kind, p, m, v, &s, err) != PP_OK) return 0;
    double t1 = pp_now();
    int ok = pp_schedule_lower(s, err) == PP_OK;
    double t2 = pp_now();
    ok = ok && pp_schedule_validate(s, NULL, err) == PP_OK;
    double t3 = pp_now();
    ok = ok && pp_schedule_simulate(s, &c, &r, err) == PP_OK;
    double t4 = pp_now();
    t->cpu = cpu_now() - c0;
    t->generate = t1 - t0;
    t->lower = t2 - t1;
    t->validate = t3 - t2;
    t->simulate = t4 - t3;
    t->actions = pp_schedule_action_count(s);
    pp_sim_result_destroy(r);
    pp_schedule_destroy(s);
    return ok;
}

/* Seconds to copy n 16-byte actions once (the floor of any O(actions) pass). */
static double copy_yardstick(long n)
{
    pp_action *a = calloc((size_t)n, sizeof *a), *b = malloc((size_t)n * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return -1;
    }
    memcpy(b, a, (size_t)n * sizeof *a);  /* touch both once */
    double t0 = pp_now();
    memcpy(b, a, (size_t)n * sizeof *a);
    double t = pp_now() - t0;
    volatile int sink = b[n / 2].kind;
    (void)sink;
    free(a);
    free(b);
    return t;
}

static void bench(pp_schedule_kind kind, int p, int m, int v)
{
    pp_error err = {0};
    timing best = {0}, t;
    int reps = (long)p * m > 100000 ? 1 : 3;
    for (int i = 0; i < reps; i++) {
        if (!run_once(kind, p, m, v, &t, &err)) {
            printf("{\"bench\":\"schedule\",\"kind\":\"%s\",\"pp\":%d,\"microbatches\":%d,\"chunks\":%d,\"error\":\"%s\"}\n",
                   pp_schedule_kind_name(kind), p, m, v, err.msg);
            return;
        }
        double sum = t.generate + t.lower + t.validate + t.simulate;
        double bsum = best.generate + best.lower + best.validate + best.simulate;
        if (i == 0 || sum < bsum) best = t;
    }
    double total = best.generate + best.lower + best.validate + best.simulate;
    printf("{\"bench\":\"schedule\",\"kind\":\"%s\",\"pp\":%d,\"microbatches\":%d,\"chunks\":%d,\"actions\":%ld,"
           "\"generate_ms\":%.3f,\"lower_ms\":%.3f,\"validate_ms\":%.3f,\"simulate_ms\":%.3f,\"total_ms\":%.3f,"
           "\"cpu_ms\":%.3f,\"ns_per_action\":%.1f,\"memcpy_actions_ms\":%.3f}\n",
           pp_schedule_kind_name(kind), p, m, v, best.actions, best.generate * 1e3, best.lower * 1e3,
           best.validate * 1e3, best.simulate * 1e3, total * 1e3, best.cpu * 1e3, total * 1e9 / (double)best.actions,
           copy_yardstick(best.actions) * 1e3);
    fflush(stdout);
}

int main(void)
{
    static const int ps[] = {4, 16, 64, 256}, ms[] = {8, 64, 512, 4096};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) bench(PP_SCHED_1F1B, ps[i], ms[j], 1);
    bench(PP_SCHED_GPIPE, 64, 512, 1);
    bench(PP_SCHED_INTERLEAVED, 64, 512, 2);
    bench(PP_SCHED_ZB_H1, 64, 512, 1);
    return 0;
}
