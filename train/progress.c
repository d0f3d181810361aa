/* The arithmetic of the progress line: when evaluations fall, and the ETA, which covers
 * the evaluations still to come (at their measured cost, or a guess of a third of a
 * training step per eval batch before the first has run: forward only). */
#include "job_internal.h"

int train_eval_due(int64_t step, int64_t steps, int64_t every)
{
    return step == steps || (every > 0 && step % every == 0);
}

int64_t train_evals_left(int64_t step, int64_t steps, int64_t every)
{
    if (step >= steps) return 0;
    if (every <= 0) return 1;
    return steps / every - step / every + (steps % every != 0);
}

double train_eta(int64_t step, int64_t steps, int64_t done, double train_s, int64_t eval_every, int evals,
                 double eval_s, int64_t eval_batches, int has_eval)
{
    double per_step = done > 0 ? train_s / (double)done : 0;
    double eta = per_step * (double)(steps - step);
    if (!has_eval) return eta;
    double per_eval = evals > 0 ? eval_s / evals : per_step * (double)eval_batches / 3.0;
    return eta + per_eval * (double)train_evals_left(step, steps, eval_every);
}
