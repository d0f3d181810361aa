/* The training loop on one process: data for each microbatch, forward and backward
 * through the stage, global-norm clipping, the optimizer step, progress lines. */
#include <onnxpipe/partition.h>
#include <onnxpipe/train.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct run {
    const pp_train_config *cfg;
    pp_graph *g;
    pp_partition *part;
    pp_device *dev;
    pp_stage *stage;
    pp_dataset *data;
    const pp_dataset_array **feeds;     /* per stage input: its dataset array (data ports) */
    int64_t mb;                         /* samples per microbatch */
    int64_t tokens_per_sample;
    FILE *losses;
} run;

static pp_status check_config(const pp_train_config *c, pp_error *err)
{
    if (c->pp != 1 || c->dp != 1)
        return pp_error_set(err, PP_ERR_UNSUPPORTED,
                            "--pp %d --dp %d: this build trains on one process only (pp = dp = 1); the "
                            "distributed runtime is not built yet", c->pp, c->dp);
    if (c->microbatches < 1 || c->batch < 1 || c->batch % ((int64_t)c->dp * c->microbatches))
        return pp_error_set(err, PP_ERR_INVALID_ARG,
                            "--batch %lld must be a positive multiple of dp x microbatches = %lld",
                            (long long)c->batch, (long long)c->dp * c->microbatches);
    if (c->steps < 1) return pp_error_set(err, PP_ERR_INVALID_ARG, "--steps %lld must be >= 1", (long long)c->steps);
    return PP_OK;
}

/* Matches every data input of the stage with a dataset array of the same name and shape. */
static pp_status bind_data(run *r, pp_error *err)
{
    int n = pp_stage_num_inputs(r->stage);
    r->feeds = calloc((size_t)n + 1, sizeof *r->feeds);
    if (!r->feeds) return pp_error_set(err, PP_ERR_NOMEM, "out of memory");
    if (r->data->samples < r->cfg->batch)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "dataset '%s' holds %lld samples, fewer than one batch of %lld",
                            r->cfg->data, (long long)r->data->samples, (long long)r->cfg->batch);
    r->tokens_per_sample = 1;
    for (int i = 0; i < n; i++) {
        const pp_stage_port *p = pp_stage_input(r->stage, i);
        if (!p->is_data) continue;
        const pp_dataset_array *a = pp_dataset_find(r->data, p->name);
        if (!a)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "dataset '%s' has no array '%s' for the model input of that name",
                                r->cfg->data, p->name);
        int ok = a->dtype == p->dtype && a->shape.rank + 1 == p->shape.rank && p->shape.dims[0] == r->mb;
        for (int k = 0; ok && k < a->shape.rank; k++) ok = a->shape.dims[k] == p->shape.dims[k + 1];
        if (!ok) {
            char s1[96], s2[96];
            return pp_error_set(err, PP_ERR_SHAPE,
                                "dataset array '%s' is %s %s per sample, but the model input is %s %s for a "
                                "microbatch of %lld", p->name, pp_dtype_name(a->dtype),
                                pp_shape_format(&a->shape, s1, sizeof s1), pp_dtype_name(p->dtype),
                                pp_shape_format(&p->shape, s2, sizeof s2), (long long)r->mb);
        }
        r->feeds[i] = a;
        if (!strcmp(p->name, "input_ids") && a->shape.rank == 1) r->tokens_per_sample = a->shape.dims[0];
    }
    return PP_OK;
}

static pp_status setup(run *r, pp_error *err)
{
    const pp_train_config *c = r->cfg;
    r->mb = c->batch / ((int64_t)c->dp * c->microbatches);
    pp_graph_options gopt = {.batch = r->mb, .dims = c->dims, .ndims = c->ndims};
    PP_CHECK(pp_graph_load(c->model, &gopt, &r->g, err));
    PP_CHECK(pp_partition_create(r->g, c->pp, NULL, &r->part, err));
    PP_CHECK(pp_device_create(PP_DEVICE_CPU, 0, &r->dev, err));
    pp_stage_options so = {
        .slots = 1, .microbatch = r->mb, .global_batch = c->batch, .optim = c->optim,
        .loss = c->loss, .seed = c->seed, .training = 1,
    };
    PP_CHECK(pp_stage_create(r->part, 0, r->dev, &so, &r->stage, err));
    PP_CHECK(pp_dataset_open(c->data, &r->data, err));
    PP_CHECK(bind_data(r, err));
    if (c->losses_out && !(r->losses = fopen(c->losses_out, "w")))
        return pp_error_set(err, PP_ERR_IO, "cannot create '%s'", c->losses_out);
    return PP_OK;
}

static void teardown(run *r)
{
    if (r->losses) fclose(r->losses);
    free(r->feeds);
    pp_dataset_close(r->data);
    pp_stage_destroy(r->stage);
    pp_device_destroy(r->dev);
    pp_partition_destroy(r->part);
    pp_graph_destroy(r->g);
}

static void format_duration(double s, char *buf, size_t len)
{
    if (s < 60) snprintf(buf, len, "%.1fs", s);
    else if (s < 3600) snprintf(buf, len, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, len, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

static void progress(const run *r, int64_t step, double loss, float lr, double elapsed, double tok_s, int tty)
{
    char el[32], eta[32];
    format_duration(elapsed, el, sizeof el);
    format_duration(elapsed / (double)step * (double)(r->cfg->steps - step), eta, sizeof eta);
    printf("%sstep %lld/%lld  loss %.4f  lr %.3g  %.0f tok/s  elapsed %s  ETA %s%s", tty ? "\r" : "",
           (long long)step, (long long)r->cfg->steps, loss, lr, tok_s, el, eta, tty ? "   " : "\n");
    if (tty && step == r->cfg->steps) putchar('\n');
    fflush(stdout);
}

/* One optimizer step: returns the mean loss over the global batch. */
static pp_status train_step(run *r, int64_t step, double *loss, float *lr_out, pp_error *err)
{
    const pp_train_config *c = r->cfg;
    PP_CHECK(pp_stage_zero_grads(r->stage, err));
    double sum = 0;
    for (int64_t m = 0; m < c->microbatches; m++) {
        int64_t first = (step - 1) * c->batch + m * r->mb;
        for (int i = 0; i < pp_stage_num_inputs(r->stage); i++)
            if (r->feeds[i]) pp_dataset_read(r->data, r->feeds[i], first, r->mb, pp_stage_input_buffer(r->stage, 0, i));
        PP_CHECK(pp_stage_forward(r->stage, 0, step, m, err));
        sum += pp_stage_loss(r->stage, 0);
        PP_CHECK(pp_stage_backward(r->stage, 0, PP_BACKWARD_FULL, err));
    }
    *loss = sum / (double)c->microbatches;
    if (!isfinite(*loss) && !c->skip_nonfinite)
        return pp_error_set(err, PP_ERR_NUMERIC, "step %lld: the loss is %g; lower --lr or pass --skip-nonfinite",
                            (long long)step, *loss);
    pp_status st = pp_stage_check_grads(r->stage, step, err);
    if (st == PP_ERR_NUMERIC && c->skip_nonfinite) {
        pp_log(PP_LOG_WARN, "%s; step skipped", err->msg);
        return PP_OK;
    }
    PP_CHECK(st);
    float scale = 1.0f;
    if (c->clip_norm > 0) {
        double ss;
        PP_CHECK(pp_stage_grad_sumsq(r->stage, &ss, err));
        double norm = sqrt(ss);
        if (norm > c->clip_norm) scale = (float)(c->clip_norm / norm);
    }
    *lr_out = pp_lr_at(&c->lr, step);
    return pp_stage_step(r->stage, *lr_out, scale, step, err);
}

pp_status pp_train_run(const pp_train_config *cfg, pp_train_result *res, pp_error *err)
{
    memset(res, 0, sizeof *res);
    PP_CHECK(check_config(cfg, err));
    run r = {.cfg = cfg};
    pp_status st;
    PP_CHECK_GOTO(setup(&r, err), st, done);
    int tty = isatty(STDOUT_FILENO);
    double t0 = pp_now();
    for (int64_t step = 1; step <= cfg->steps; step++) {
        double loss;
        float lr = 0;
        PP_CHECK_GOTO(train_step(&r, step, &loss, &lr, err), st, done);
        double elapsed = pp_now() - t0;
        res->steps_done = step;
        if (step == 1) res->first_loss = loss;
        res->last_loss = loss;
        res->seconds = elapsed;
        res->tokens_per_s = (double)(step * cfg->batch * r.tokens_per_sample) / elapsed;
        if (r.losses) fprintf(r.losses, "%lld %.9g\n", (long long)step, loss);
        if (!cfg->quiet) progress(&r, step, loss, lr, elapsed, res->tokens_per_s, tty);
    }
    if (cfg->export_path) PP_CHECK_GOTO(pp_train_export(r.g, &r.stage, 1, cfg->export_path, err), st, done);
done:
    teardown(&r);
    return st;
}
