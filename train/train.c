/* The training job of `onnxpipe train`, the same on every rank: a trainer made by
 * pp_trainer_create (trainer.c), fed from a dataset, stepped (saving at the options'
 * cadence) and evaluated through pp_trainer_eval, with the log cadence of the options;
 * rank 0 prints the plan and the progress lines. */
#include <onnxpipe/core_util.h>
#include <onnxpipe/options.h>
#include <onnxpipe/trainer.h>

#include <onnxpipe/env.h>
#include "job_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

typedef struct run {
    pp_trainer *t;              /* the job's model, layout, stages and checkpoints */
    pp_comm *world;             /* the MPI world, made before the trainer (its errors go through it) */
    pp_train_config conf;       /* the options, --epochs turned into steps */
    const pp_train_config *cfg; /* &conf */
    pp_dataset *data;
    train_prefetch *ahead;      /* data's samples read a step ahead (prefetch.c), or NULL */
    double input_s, read_s;     /* the step's time in feed's reads (waits and copies), the reader's for it */
    int64_t counted_step;       /* the step whose loss labels are weighed below */
    int64_t *labels;            /* that step's global batch of labels, when not read ahead */
    double *mb_weight;          /* [batch / mb] each microbatch's labels' weight (stage/loss.c) */
    double counted_global;      /* the global batch's */
    FILE *losses;
    /* the run a user watches (issue 12) */
    pp_sampler smp;             /* which sample each place of a global batch reads */
    train_io io;                /* tokens per sample, logits, labels (found at start) */
    train_eval *eval;
    train_log *log;
    train_prof *prof;
    double eval_s;              /* seconds in evaluations so far */
    int evals;
    double eval_loss;           /* the last evaluation's */
    int64_t stage_bytes;        /* this rank's stage allocations */
    train_straggler *straggler; /* --straggler-warn */
    train_straggler_note slow;  /* the last step's verdict */
    double tokens;              /* trained so far in this run: tokens that are not padding (or samples) */
    pp_dim_binding *dims;       /* --dim and what the data binds (check.c: train_data_dims) */
    int ndims;
} run;

/* The tokens of a step's global batch that are not padding (packed data), else its tokens
 * (or samples, for models without a token input). */
static int64_t step_tokens(const run *r, int64_t step)
{
    int64_t n = 0;
    if (pp_dataset_docs(r->data) == PP_DOCS_WINDOWS || !r->io.tokens_per_sample)
        return r->cfg->trainer.batch * (r->io.tokens_per_sample ? r->io.tokens_per_sample : 1);
    for (int64_t k = 0; k < r->cfg->trainer.batch; k++) n += ds_pack_tokens(r->data, pp_sampler_sample(&r->smp, step, k));
    return n;
}

/* A mean loss seeds each microbatch with its labels' share of the global batch's weight
 * (stage/loss.c says why). The global batch's labels are weighed once per step, when its
 * first microbatch reaches the last stage; every rank reads the same global batch, so
 * all agree without a message. */
static pp_status weigh_loss(run *r, pp_stage *s, int slot, int64_t step, int64_t offset, pp_error *err)
{
    pp_loss_labels l;
    if (pp_stage_loss_labels(s, &l, NULL) != PP_OK) return PP_OK;
    const pp_dataset_array *a = pp_dataset_find(r->data, l.labels);
    if (!a || a->dtype != PP_DTYPE_I64) return PP_OK;
    int64_t mb = r->t->mb, groups = r->cfg->trainer.batch / mb;
    if (!r->mb_weight && !(r->mb_weight = malloc((size_t)groups * sizeof *r->mb_weight))) return PP_NOMEM(err);
    if (r->counted_step != step) {
        size_t bytes = pp_dataset_sample_bytes(a, pp_sampler_len(&r->smp, r->data, step));   /* this step's length */
        const void *ahead = NULL;
        if (r->ahead) PP_CHECK(train_prefetch_get(r->ahead, step, a, 0, r->cfg->trainer.batch, &ahead, err));
        const int64_t *y = ahead;
        if (!y) {
            if (!r->labels && !(r->labels = malloc((size_t)r->cfg->trainer.batch * a->sample_bytes))) return PP_NOMEM(err);
            PP_CHECK(pp_sampler_read(&r->smp, r->data, a, step, 0, r->cfg->trainer.batch, r->labels, err));
            y = r->labels;
        }
        r->counted_global = pp_loss_labels_weight(&l, y, groups, mb * (int64_t)(bytes / sizeof(int64_t)),
                                                  r->mb_weight);
        r->counted_step = step;
    }
    pp_stage_set_loss_weight(s, slot, r->mb_weight[offset / mb], r->counted_global);
    return PP_OK;
}

/* Fills a stage's data inputs for a microbatch: replica r reads its share of the
 * global batch (f->offset), so the global batch is the same for any layout. Its time is
 * the step's input time. */
static pp_status feed(void *user, const pp_trainer_feed *f, pp_error *err)
{
    run *r = user;
    train_straggler_inject(r->straggler);
    double t0 = pp_now();
    pp_status st = train_feed_dataset(r->data, &r->smp, r->ahead, f->step, f, err);
    if (st == PP_OK) st = weigh_loss(r, f->stage, f->slot, f->step, f->offset, err);
    double t1 = pp_now();
    r->input_s += t1 - t0;
    train_prof_span(r->prof, f->step, "input", t0, t1);
    return st;
}

/* After a step: the reader goes on to the step after next; its time on this step's inputs
 * (a step earlier) for the logs and the profile. */
static void took_input(run *r, int64_t step)
{
    double t0, t1;
    r->read_s = r->ahead && train_prefetch_done(r->ahead, step, &t0, &t1) ? t1 - t0 : 0;
    if (r->read_s > 0) train_prof_span(r->prof, step, "input read (thread)", t0, t1);
}

/* The text summary at step 0: the command line and the plan as printed. */
static pp_status log_summary(run *r, pp_error *err)
{
    char *plan = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&plan, &len);
    if (!mem) return pp_error_set(err, PP_ERR_NOMEM, "out of memory for the plan summary");
    fprintf(mem, "%s\n\n", r->cfg->command_line ? r->cfg->command_line : r->cfg->trainer.model);
    trainer_print_plan(r->t, mem);
    fclose(mem);
    /* the text plugin renders markdown: the plan as a code block, indented */
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += plan[i] == '\n';
    char *md = malloc(len + 4 * lines + 1), *o = md;
    pp_status st = md ? PP_OK : pp_error_set(err, PP_ERR_NOMEM, "out of memory for the plan summary");
    for (size_t i = 0; md && i < len; i++) {
        if (i == 0 || plan[i - 1] == '\n') o += sprintf(o, "    ");
        *o++ = plan[i];
    }
    if (md) *o = 0;
    if (st == PP_OK) st = train_log_text(r->log, "config/plan", md, err);
    free(md);
    free(plan);
    return st;
}

/* Data order, evaluation and logs: what surrounds the steps a user watches. */
static pp_status setup_watch(run *r, pp_error *err)
{
    const pp_train_config *c = r->cfg;
    pp_trainer *t = r->t;
    pp_dataset_options dopt = pp_train_dataset_options(c);
    if (c->eval_data)
        PP_CHECK(train_eval_open(t->world, c->eval_data, &dopt, t->g, &c->trainer.loss, c->trainer.batch,
                                 c->trainer.microbatches, c->trainer.dp, c->trainer.eval_batches, &r->eval, err));
    PP_CHECK(train_log_open(c, t->world, c->trainer.steps, r->io.tokens_per_sample > 0, &r->log, err));
    if (c->straggler_warn > 0) PP_CHECK(train_straggler_open(c->straggler_warn, t->world, &r->straggler, err));
    PP_CHECK(train_prof_open(c, t->drv, t->world, t->sched, t->part, t->grid, &r->prof, err));
    for (int i = 0; i < pp_driver_num_stages(t->drv); i++) {
        pp_stage_bytes b;
        pp_stage_allocation(pp_driver_stage(t->drv, i), &b);
        r->stage_bytes += b.total;
    }
    return train_log_tb(r->log) ? log_summary(r, err) : PP_OK;
}

/* The options of the job that make collectives beyond the trainer's own (evaluation,
 * gathers of logs and profiles): every rank must have the same. */
static uint32_t job_hash(const pp_train_config *c)
{
    return pp_options_hash(pp_train_option_table, c, 0);   /* the trainer's own rows: the trainer hashes them */
}

/* The trainer of the options (pp_trainer_create), made once the dataset is open: its
 * size gives --epochs' steps, which the trainer's LR schedule and checkpoints need. */
static pp_status setup(run *r, const pp_train_config *cfg, pp_error *err)
{
    r->conf = *cfg;
    r->cfg = &r->conf;
    pp_train_config *c = &r->conf;
    pp_trainer_config *job = &c->trainer;
    if (job->steps < 1 && c->epochs < 1)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "--steps %lld must be >= 1", (long long)job->steps);
    if ((c->profile_first > 0) != (c->profile_out != NULL) || c->profile_last < c->profile_first)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "--profile-steps A:B (1 <= A <= B) and --profile FILE go "
                            "together");
    pp_trainer_config layout = *job;
    if (c->epochs > 0) layout.steps = 1;   /* known once the data is open */
    PP_CHECK(trainer_check_config(&layout, err));
    PP_CHECK(pp_comm_mpi_world(&r->world, err));
    pp_dataset_options dopt = pp_train_dataset_options(c);
    PP_CHECK(train_open_data(r->world, c->data, &dopt, &r->data, err));
    if (pp_dataset_samples(r->data) < job->batch)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "dataset '%s' holds %lld samples, fewer than one batch of %lld",
                            c->data, (long long)pp_dataset_samples(r->data), (long long)job->batch);
    pp_sampler_init(&r->smp, pp_dataset_samples(r->data), job->batch, c->shuffle, job->seed);
    const int64_t *bucket_first;
    int nbuckets = pp_dataset_buckets(r->data, &bucket_first);
    if (nbuckets) pp_sampler_set_buckets(&r->smp, nbuckets, bucket_first);
    if (r->smp.steps_per_epoch == 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "dataset '%s': no sequence bucket holds a batch of %lld samples; "
                            "use fewer buckets or a smaller --batch", c->data, (long long)job->batch);
    if (c->epochs > 0) job->steps = c->epochs * r->smp.steps_per_epoch;
    job->lr.steps = job->steps;
    char bound[512];
    PP_CHECK(train_data_dims(job, r->data, &r->dims, &r->ndims, bound, sizeof bound, err));
    if (bound[0] && pp_comm_rank(r->world) == 0 && !job->quiet) printf("dims from the data: %s\n\n", bound);
    job->dims = r->dims, job->ndims = r->ndims;
    PP_CHECK(pp_trainer_create(job, r->world, &r->t, err));
    pp_trainer *t = r->t;
    PP_CHECK(trainer_agree(t, job_hash(c), err));
    PP_CHECK(train_check_data(t->g, &job->loss, r->data, "--data", c->data, t->mb, &r->io, err));
    char packed[256];
    if (pp_dataset_docs(r->data) != PP_DOCS_WINDOWS && pp_comm_rank(t->world) == 0 && !job->quiet)
        printf("data: %s\n", pp_dataset_pack_summary(r->data, packed, sizeof packed));
    /* a resumed run goes on where its checkpoint stopped in the sample stream, whatever
     * batch that run had (and with --shuffle in the same permutation) */
    r->smp.start = t->ck.sample0;
    int64_t share = t->c.batch / t->c.dp;
    PP_CHECK(train_prefetch_open(r->data, &r->smp, t->drv, t->grid->replica * share, share, t->ck.resumed_step + 1,
                                 job->steps, &r->ahead, err));
    if (c->trace_path) PP_CHECK(pp_driver_record(t->drv, 1, err));
    if (c->losses_out && pp_comm_rank(t->world) == 0 && !(r->losses = fopen(c->losses_out, "w")))
        return pp_error_set(err, PP_ERR_IO, "cannot create '%s'", c->losses_out);
    if (c->save_signals) PP_CHECK(train_preempt_install(c->save_signals, err));
    return setup_watch(r, err);
}

static void teardown(run *r)
{
    if (r->cfg && r->cfg->save_signals) train_preempt_restore(r->cfg->save_signals);
    train_prefetch_close(r->ahead);
    free(r->labels);
    free(r->mb_weight);
    if (r->losses) fclose(r->losses);
    train_eval_close(r->eval);
    train_log_close(r->log, NULL);
    train_straggler_close(r->straggler);
    train_prof_close(r->prof);
    pp_dataset_close(r->data);
    pp_trainer_destroy(r->t);
    train_dims_free(r->dims, r->ndims);
    pp_comm_destroy(r->world);
}

static void format_duration(double s, char *buf, size_t len)
{
    if (s < 60) snprintf(buf, len, "%.1fs", s);
    else if (s < 3600) snprintf(buf, len, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, len, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

static void progress(const run *r, const pp_trainer_stats *st, double elapsed, double rate, double train_s, int tty)
{
    char el[32], eta[32], ev[64] = "", ep[64] = "";
    const pp_train_config *c = r->cfg;
    int64_t step = st->step;
    format_duration(elapsed, el, sizeof el);
    format_duration(train_eta(step, r->cfg->trainer.steps, step - r->t->ck.resumed_step, train_s, c->eval_every, r->evals,
                              r->eval_s, r->eval ? train_eval_batches(r->eval) : 0, r->eval != NULL),
                    eta, sizeof eta);
    if (r->evals) snprintf(ev, sizeof ev, "  eval %.4f", r->eval_loss);
    char scale[48] = "";
    if (st->loss_scale) snprintf(scale, sizeof scale, "  scale %g", st->loss_scale);
    if (c->epochs > 0)
        snprintf(ep, sizeof ep, "  epoch %lld/%lld", (long long)pp_sampler_epoch(&r->smp, step) + 1,
                 (long long)c->epochs);
    char slow[96] = "";
    if (r->slow.rank >= 0)
        snprintf(slow, sizeof slow, "  straggler rank %d (%.1fx its pipeline peers)", r->slow.rank, r->slow.ratio);
    printf("%sstep %lld/%lld%s  loss %.4f%s  lr %.3g%s  %.0f %s  elapsed %s  ETA %s%s%s%s", tty ? "\r" : "",
           (long long)step, (long long)r->cfg->trainer.steps, ep, st->loss, ev, (double)st->lr, scale, rate,
           r->io.tokens_per_sample ? "tok/s" : "samples/s", el, eta, st->skipped ? "  (skipped)" : "", slow,
           tty ? "   " : "\n");
    if (tty && step == r->cfg->trainer.steps) putchar('\n');
    fflush(stdout);
}

/* After a step: the evaluation when one is due, then the logs (collective when they
 * gather or an evaluation ran, the same on every rank). */
static pp_status watch_step(run *r, const pp_trainer_stats *stats, double rate, pp_error *err)
{
    const pp_train_config *c = r->cfg;
    int64_t step = stats->step;
    train_eval_result ev, *evp = NULL;
    if (r->eval && train_eval_due(step, r->cfg->trainer.steps, c->eval_every)) {
        if (r->cfg->trainer.nbuckets) PP_CHECK(pp_trainer_set_bucket(r->t, r->cfg->trainer.nbuckets - 1, err));   /* full length */
        PP_CHECK(train_eval_run(r->eval, r->t, step, &ev, err));
        r->eval_s += ev.seconds;
        r->evals++;
        r->eval_loss = ev.loss;
        evp = &ev;
        if (pp_comm_rank(r->t->world) == 0 && !c->trainer.quiet && !r->log)
            pp_log(PP_LOG_INFO, "step %lld: eval loss %.6f over %lld samples", (long long)step, ev.loss,
                   (long long)ev.samples);
    }
    if (!r->log) return PP_OK;
    train_step_log sl = {
        .step = step, .epoch = pp_sampler_epoch(&r->smp, step), .loss = stats->loss, .lr = stats->lr,
        .grad_norm = stats->grad_norm, .throughput = rate, .step_s = stats->seconds, .compute_s = stats->compute_s,
        .wait_s = stats->wait_s, .input_s = r->input_s, .input_read_s = r->read_s, .stage_bytes = r->stage_bytes, .skipped = stats->skipped,
        .loss_scale = stats->loss_scale,
        .rss_bytes = train_log_gathers(r->log, step) ? train_rss_peak_bytes() : 0,
        .has_ckpt = c->trainer.save_dir != NULL, .ckpt_saves = r->t->ck.saves, .ckpt_stall_s = r->t->ck.stall_s,
        .has_straggler = r->straggler != NULL, .straggler = r->slow,
    };
    PP_CHECK(train_log_step(r->log, &sl, evp, err));
    if (c->log_histograms > 0 && c->logdir && step % c->log_histograms == 0)
        PP_CHECK(train_log_histograms(train_log_tb(r->log), r->t->world, r->t->drv, r->t->g, r->t->part, r->t->grid->replica, step,
                                      err));
    return PP_OK;
}

/* The last step as executed, every rank's actions on a Perfetto timeline (rank 0 writes). */
static pp_status write_trace(run *r, pp_error *err)
{
    FILE *f = NULL;
    if (pp_comm_rank(r->t->world) == 0 && !(f = fopen(r->cfg->trace_path, "w")))
        return pp_error_set(err, PP_ERR_IO, "cannot create '%s'", r->cfg->trace_path);
    pp_status st = pp_driver_write_trace(r->t->drv, r->t->world, f, err);
    if (f && fclose(f) && st == PP_OK) st = pp_error_set(err, PP_ERR_IO, "cannot write '%s'", r->cfg->trace_path);
    return st;
}

/* After a step: when a rank got a --save-on-signal signal, every rank saves the step and
 * the run ends (res->preempted). */
static pp_status preempt(run *r, int64_t step, pp_train_result *res, pp_error *err)
{
    train_preempt_state p;
    PP_CHECK(train_preempt_poll(r->t->world, &p, err));
    if (!p.sig) return PP_OK;
    double t0 = pp_now();
    PP_CHECK(train_ckpt_save_now(&r->t->ck, step, err));
    res->preempted = p.sig;
    res->preempted_rank = p.rank;
    res->preempt_s = p.since_s + (pp_now() - t0);
    res->saves = r->t->ck.saves;
    res->save_stall_s = r->t->ck.stall_s;
    if (pp_comm_rank(r->t->world) == 0)
        printf("SIG%s reached rank %d during step %lld: every rank finished the step and saved %s/step-%lld in %.2f s, "
               "%.2f s after the signal\n", sigabbrev_np(p.sig) ? sigabbrev_np(p.sig) : "?", p.rank, (long long)step,
               r->cfg->trainer.save_dir, (long long)step, pp_now() - t0, res->preempt_s);
    return PP_OK;
}

pp_status pp_train_run(const pp_train_config *cfg, pp_train_result *res, pp_error *err)
{
    memset(res, 0, sizeof *res);
    run r = {0};
    pp_status st;
    PP_CHECK_GOTO(setup(&r, cfg, err), st, done);
    pp_trainer *t = r.t;
    cfg = r.cfg;
    /* mpirun hands ranks a pty: there, plain lines */
    int tty = isatty(STDOUT_FILENO) && !pp_env_get("OMPI_COMM_WORLD_SIZE"), rank0 = pp_comm_rank(t->world) == 0;
    double t0 = pp_now();
    int64_t resumed = t->ck.resumed_step;
    res->first_step = resumed + 1;
    res->eval_loss = NAN;
    if (rank0 && resumed >= cfg->trainer.steps)
        printf("checkpoint step %lld already reached --steps %lld; nothing to train\n", (long long)resumed,
               (long long)cfg->trainer.steps);
    double t_poll = t0;
    for (int64_t step = res->first_step; step <= cfg->trainer.steps; step++) {
        pp_trainer_stats stats;
        PP_CHECK_GOTO(train_prof_begin(r.prof, step, err), st, done);
        /* the step, and a save due after it (before the logs, so they carry its cost) */
        r.input_s = 0;
        if (cfg->trainer.nbuckets) PP_CHECK_GOTO(pp_trainer_set_bucket(t, pp_sampler_bucket(&r.smp, step), err), st, done);
        PP_CHECK_GOTO(pp_trainer_step(t, feed, &r, &stats, err), st, done);
        took_input(&r, step);
        pp_step_stats ps = {.loss = stats.loss, .grad_norm = stats.grad_norm, .skipped = stats.skipped,
                            .compute_s = stats.compute_s, .wait_s = stats.wait_s};
        PP_CHECK_GOTO(train_prof_end(r.prof, step, cfg->trainer.steps, &ps, stats.seconds, err), st, done);
        PP_CHECK_GOTO(train_straggler_step(r.straggler, stats.seconds - stats.wait_s, t->grid->replica, &r.slow, err),
                      st, done);
        /* throughput over the training time: evaluations do not count */
        double train_s = pp_now() - t0 - r.eval_s;
        r.tokens += (double)step_tokens(&r, step);
        double rate = r.tokens / train_s;
        PP_CHECK_GOTO(watch_step(&r, &stats, rate, err), st, done);
        double elapsed = pp_now() - t0;
        res->steps_done = step;
        if (step == res->first_step) res->first_loss = stats.loss;
        res->last_loss = stats.loss;
        res->seconds = elapsed;
        res->tokens_per_s = rate;
        res->counts_tokens = r.io.tokens_per_sample > 0;
        res->epochs_done = pp_sampler_epoch(&r.smp, step) + 1;
        res->evals = r.evals;
        res->eval_seconds = r.eval_s;
        if (r.evals) res->eval_loss = r.eval_loss;
        if (r.losses && (fprintf(r.losses, "%lld %.9g\n", (long long)step, stats.loss) < 0 || fflush(r.losses)))
            PP_CHECK_GOTO(pp_error_set(err, PP_ERR_IO, "--losses: cannot write '%s'", cfg->losses_out), st, done);
        if (rank0 && !cfg->trainer.quiet) progress(&r, &stats, elapsed, rate, train_s, tty);
        if (cfg->save_signals && step < cfg->trainer.steps) {
            train_preempt_step_took(pp_now() - t_poll);   /* the step with its evaluation, logs and save */
            t_poll = pp_now();
            PP_CHECK_GOTO(preempt(&r, step, res, err), st, done);
            if (res->preempted) break;
        }
    }
    st = PP_OK;
    if (res->preempted) goto done;   /* saved: the trace and export are the end of a whole run's */
    PP_CHECK_GOTO(pp_trainer_wait_saves(t, err), st, done);
    res->saves = t->ck.saves;
    res->save_stall_s = t->ck.stall_s;
    if (cfg->trainer.nbuckets) PP_CHECK_GOTO(pp_trainer_set_bucket(t, cfg->trainer.nbuckets - 1, err), st, done);   /* the largest's */
    PP_CHECK_GOTO(train_report_memory(t, rank0 && !cfg->trainer.quiet, err), st, done);
    if (cfg->trace_path) PP_CHECK_GOTO(write_trace(&r, err), st, done);
    if (cfg->export_path) PP_CHECK_GOTO(pp_trainer_export(t, cfg->export_path, err), st, done);
done:
    /* A step that failed on one rank of a job may leave receives and reductions posted
     * into the stages' buffers, and MPI could still write into them: leave everything
     * allocated, since the caller ends the job (pp_comm_mpi_abort_world). */
    if (st != PP_OK && r.world && pp_comm_size(r.world) > 1) {
        train_prefetch_close(r.ahead);   /* its buffers are no message's: the reader ends on every path */
        return st;
    }
    teardown(&r);
    return st;
}
