/* Periodic evaluation during training: K global batches of the eval dataset go through
 * pp_trainer_eval (trainer.c), each replica reading its share of each batch from the
 * eval dataset, unshuffled; the loss is a mean over the labels, as the training loss,
 * with perplexity and accuracy beside it. */
#include "job_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct train_eval {
    pp_dataset *data;
    train_io io;
    pp_sampler smp;             /* unshuffled: global batch b is "step" b + 1 */
    int64_t batches;
};

/* pp_trainer_eval's feed: eval batch f->step, this replica's place in it. */
static pp_status eval_feed(void *user, const pp_trainer_feed *f, pp_error *err)
{
    train_eval *e = user;
    return train_feed_dataset(e->data, &e->smp, NULL, f->step, f, err);
}

pp_status train_eval_open(pp_comm *world, const char *dir, const pp_dataset_options *dopt, const pp_graph *g,
                          const pp_loss_spec *loss, int64_t batch, int64_t microbatches, int dp, int64_t batches,
                          train_eval **out, pp_error *err)
{
    *out = NULL;
    train_eval *e = calloc(1, sizeof *e);
    if (!e) return PP_NOMEM(err);
    pp_status st;
    int64_t mb = batch / dp / microbatches;
    PP_CHECK_GOTO(train_open_data(world, dir, dopt, &e->data, err), st, fail);
    PP_CHECK_GOTO(train_check_data(g, loss, e->data, "--eval-data", dir, mb, &e->io, err), st, fail);
    int64_t whole = pp_dataset_samples(e->data) / batch;
    if (whole < 1) {
        st = pp_error_set(err, PP_ERR_INVALID_ARG, "--eval-data '%s' holds %lld samples, fewer than one global batch "
                          "of %lld: give more eval data or a smaller --batch", dir, (long long)pp_dataset_samples(e->data),
                          (long long)batch);
        goto fail;
    }
    e->batches = batches > 0 && batches < whole ? batches : whole;
    pp_sampler_init(&e->smp, pp_dataset_samples(e->data), batch, 0, 0);
    *out = e;
    return PP_OK;
fail:
    train_eval_close(e);
    return st;
}

int64_t train_eval_batches(const train_eval *e) { return e->batches; }

pp_status train_eval_run(train_eval *e, pp_trainer *t, int64_t step, train_eval_result *res, pp_error *err)
{
    pp_trainer_eval_stats ev;
    t->eval_batches = e->batches;
    PP_CHECK(pp_trainer_eval(t, eval_feed, e, &ev, err));
    *res = (train_eval_result){
        .step = step, .loss = ev.loss, .perplexity = ev.perplexity, .accuracy = ev.accuracy,
        .has_perplexity = ev.has_perplexity, .has_accuracy = ev.has_accuracy, .samples = ev.samples,
        .seconds = ev.seconds,
    };
    return PP_OK;
}

void train_eval_close(train_eval *e)
{
    if (!e) return;
    pp_dataset_close(e->data);
    free(e);
}
