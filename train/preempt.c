/* Preemption (--save-on-signal): the signals a batch system sends before it kills a job
 * (Slurm's --signal, Kubernetes' SIGTERM and grace period) only set a flag and note the
 * time; after each step every rank tells the others what it got (an allgather of 8 bytes),
 * so all agree at the same step boundary, whichever rank the signal reached. The run then
 * saves and ends (train.c).
 * A signal can also come from a launcher ending a job whose rank has died (mpirun sends
 * SIGTERM to the others): then the step never ends. So the signal also starts an alarm of
 * twice the longest step so far (with its evaluation, logs and
 * save) plus 10 s; a rank that has not reached the agreement by
 * then exits as the signal would have ended it (status 128 + the signal). */
#include "job_internal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <onnxpipe/core_util.h>

static volatile sig_atomic_t got;       /* the first signal caught, or 0 */
static struct timespec got_at;          /* when (CLOCK_MONOTONIC; written once, before got) */
static volatile sig_atomic_t deadline_s = 60;   /* the alarm: 2 x the longest step + 10 s */
static double longest_step_s;
static struct sigaction saved[65];

static void on_signal(int sig)
{
    if (got) return;
    clock_gettime(CLOCK_MONOTONIC, &got_at);   /* async-signal-safe */
    got = sig;
    alarm((unsigned)deadline_s);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "onnxpipe: error: a --save-on-signal signal came, and this rank could not finish its "
                              "step within twice the longest step + 10 s (a peer is gone?): it ends without saving\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(128 + got);
}

static int each(uint64_t mask, int s) { return s < 64 && (mask >> s & 1); }

pp_status train_preempt_install(uint64_t signals, pp_error *err)
{
    got = 0;
    longest_step_s = 0;
    deadline_s = 60;
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    for (int s = 1; s < 64; s++)
        if (each(signals, s) && sigaction(s, &sa, &saved[s]) != 0)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "--save-on-signal: cannot catch signal %d (SIG%s)", s,
                                sigabbrev_np(s) ? sigabbrev_np(s) : "?");
    sa.sa_handler = on_alarm;
    if (sigaction(SIGALRM, &sa, &saved[SIGALRM]) != 0)
        return pp_error_set(err, PP_ERR_INTERNAL, "--save-on-signal: cannot catch SIGALRM");
    return PP_OK;
}

void train_preempt_restore(uint64_t signals)
{
    alarm(0);
    for (int s = 1; s < 64; s++)
        if (each(signals, s)) sigaction(s, &saved[s], NULL);
    sigaction(SIGALRM, &saved[SIGALRM], NULL);
}

void train_preempt_step_took(double seconds)
{
    if (seconds <= longest_step_s) return;
    longest_step_s = seconds;
    deadline_s = (sig_atomic_t)(2 * seconds + 10 < 1e6 ? 2 * seconds + 10 : 1e6);
}

pp_status train_preempt_poll(pp_comm *world, train_preempt_state *out, pp_error *err)
{
    float mine[2] = {(float)got, 0};
    if (got) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        mine[1] = (float)((double)(now.tv_sec - got_at.tv_sec) + 1e-9 * (double)(now.tv_nsec - got_at.tv_nsec));
    }
    float *all = pp_realloc_array(NULL, (size_t)pp_comm_size(world), sizeof mine);
    if (!all) return PP_NOMEM(err);
    pp_status st = pp_comm_allgather(world, mine, all, sizeof mine, err);
    memset(out, 0, sizeof *out);
    for (int r = 0; st == PP_OK && r < pp_comm_size(world); r++)
        if (all[2 * r] != 0 && (!out->sig || all[2 * r + 1] > out->since_s)) {   /* the rank that got it first */
            out->sig = (int)all[2 * r];
            out->rank = r;
            out->since_s = all[2 * r + 1];
        }
    free(all);
    if (st == PP_OK && out->sig) alarm(0);   /* every rank got here: the save has no deadline */
    return st;
}
