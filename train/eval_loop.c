/* Periodic evaluation during training: K global batches of the eval dataset go forward
 * through the same pipeline (pp_driver_forward), each replica its share; the last stages
 * sum loss x label weight, the weight, and argmax hits, and one all-reduce makes the
 * eval loss (a mean over the labels, as the training loss), perplexity and accuracy. */
#include "train_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct train_eval {
    pp_dataset *data;
    const pp_graph *g;
    train_io io;
    pp_sampler smp;             /* unshuffled: global batch b is "step" b + 1 */
    int64_t batches, microbatches, mb, per_replica, replica;
    double sum[4];              /* loss x weight, weight, correct, counted labels */
    float *logits;              /* host copy of one microbatch's logits */
    const pp_dataset_array *label_array;    /* io.labels in the eval data, or NULL */
    int64_t *labels;            /* one microbatch's: their weight, and the hits against the logits */
    int accuracy;               /* the last stage keeps the logits as a graph output */
};

static void place_of(const train_eval *e, int64_t j, int64_t *step, int64_t *offset)
{
    *step = j / e->microbatches + 1;
    *offset = e->replica * e->per_replica + (j % e->microbatches) * e->mb;
}

static pp_status eval_feed(void *user, pp_stage *s, int slot, int64_t key, int64_t j, pp_error *err)
{
    (void)key;
    train_eval *e = user;
    int64_t step, offset;
    place_of(e, j, &step, &offset);
    return train_feed_stage(s, slot, e->data, &e->smp, step, offset, e->mb, err);
}

/* Hits of argmax over the class axis against the labels (ignore_index skipped). */
static void count_hits(train_eval *e, double *correct, double *counted)
{
    const pp_shape *L = &e->g->values[e->io.logits].shape;
    int64_t outer = 1, inner = 1, C = e->io.classes;
    for (int k = 0; k < e->io.class_axis; k++) outer *= L->dims[k];
    for (int k = e->io.class_axis + 1; k < L->rank; k++) inner *= L->dims[k];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t y = e->labels[o * inner + in];
            if (y == e->io.ignore_index) continue;
            const float *x = e->logits + o * C * inner + in;
            int64_t best = 0;
            for (int64_t c = 1; c < C; c++)
                if (x[c * inner] > x[best * inner]) best = c;
            *correct += best == y;
            *counted += 1;
        }
}

static pp_status eval_observe(void *user, pp_stage *s, int slot, int64_t j, pp_error *err)
{
    train_eval *e = user;
    int64_t step, offset;
    place_of(e, j, &step, &offset);
    double w = (double)e->mb;
    pp_loss_labels l;
    const pp_dataset_array *ya = e->label_array;
    if (ya) pp_sampler_read(&e->smp, e->data, ya, step, offset, e->mb, e->labels);
    if (ya && pp_stage_loss_labels(s, &l, NULL) == PP_OK)   /* the microbatch's W_m (stage/loss.c) */
        w = pp_loss_labels_weight(&l, e->labels, 1, e->mb * (int64_t)(ya->sample_bytes / sizeof(int64_t)), NULL);
    if (w > 0) {
        e->sum[0] += pp_stage_loss(s, slot) * w;
        e->sum[1] += w;
    }
    void *buf = e->accuracy ? pp_stage_value_buffer(s, slot, e->io.logits) : NULL;
    if (!buf || !ya) return PP_OK;
    const pp_value *v = &e->g->values[e->io.logits];
    PP_CHECK(pp_device_copy_to_host(pp_stage_device(s), e->logits, buf,
                                    (size_t)pp_shape_numel(&v->shape) * sizeof(float), err));
    count_hits(e, &e->sum[2], &e->sum[3]);
    return PP_OK;
}

pp_status train_eval_open(const char *dir, const pp_graph *g, const pp_loss_spec *loss, int64_t batch,
                          int64_t microbatches, int dp, int replica, int64_t batches, train_eval **out, pp_error *err)
{
    *out = NULL;
    train_eval *e = calloc(1, sizeof *e);
    if (!e) return PP_NOMEM(err);
    pp_status st;
    e->g = g;
    e->microbatches = microbatches;
    e->per_replica = batch / dp;
    e->mb = e->per_replica / microbatches;
    e->replica = replica;
    PP_CHECK_GOTO(pp_dataset_open(dir, &e->data, err), st, fail);
    PP_CHECK_GOTO(train_check_data(g, loss, e->data, "--eval-data", dir, e->mb, &e->io, err), st, fail);
    int64_t whole = e->data->samples / batch;
    if (whole < 1) {
        st = pp_error_set(err, PP_ERR_INVALID_ARG, "--eval-data '%s' holds %lld samples, fewer than one global batch "
                          "of %lld: give more eval data or a smaller --batch", dir, (long long)e->data->samples,
                          (long long)batch);
        goto fail;
    }
    e->batches = batches > 0 && batches < whole ? batches : whole;
    pp_sampler_init(&e->smp, e->data->samples, batch, 0, 0);
    const pp_dataset_array *ya = e->io.labels ? pp_dataset_find(e->data, e->io.labels) : NULL;
    size_t label_bytes = ya ? (size_t)e->mb * ya->sample_bytes : 0;
    if (e->io.logits >= 0 && e->io.labels && g->values[e->io.logits].dtype == PP_DTYPE_F32) {
        size_t rows = (size_t)pp_shape_numel(&g->values[e->io.logits].shape) / (size_t)e->io.classes;
        if (rows * sizeof *e->labels > label_bytes) label_bytes = rows * sizeof *e->labels;
        if (!(e->logits = malloc((size_t)pp_shape_numel(&g->values[e->io.logits].shape) * sizeof *e->logits))) {
            st = pp_error_set(err, PP_ERR_NOMEM, "out of memory for the eval logits");
            goto fail;
        }
        e->accuracy = g->values[e->io.logits].is_output;
    }
    if (ya && !(e->labels = malloc(label_bytes + 8))) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory for the eval labels");
        goto fail;
    }
    e->label_array = ya;
    *out = e;
    return PP_OK;
fail:
    train_eval_close(e);
    return st;
}

int64_t train_eval_batches(const train_eval *e) { return e->batches; }

pp_status train_eval_run(train_eval *e, pp_driver *drv, pp_comm *world, int64_t step, train_eval_result *res,
                         pp_error *err)
{
    double t0 = pp_now();
    memset(e->sum, 0, sizeof e->sum);
    PP_CHECK(pp_driver_forward(drv, -step, e->batches * e->microbatches, eval_feed, e, eval_observe, e, err));
    PP_CHECK(pp_comm_allreduce(world, e->sum, 4, PP_DTYPE_F64, err));
    *res = (train_eval_result){
        .step = step,
        .loss = e->sum[1] > 0 ? e->sum[0] / e->sum[1] : NAN,
        .accuracy = e->sum[3] > 0 ? e->sum[2] / e->sum[3] : NAN,
        .has_accuracy = e->sum[3] > 0,
        .has_perplexity = e->io.tokens_per_sample > 0,
        .samples = e->batches * e->smp.batch,
    };
    res->perplexity = exp(res->loss);
    res->seconds = pp_now() - t0;
    return PP_OK;
}

void train_eval_close(train_eval *e)
{
    if (!e) return;
    pp_dataset_close(e->data);
    free(e->logits);
    free(e->labels);
    free(e);
}
