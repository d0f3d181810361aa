/* Private to train/: the training job `onnxpipe train` runs around the library trainer
 * (train.c: pp_train_run): what it checks of its model and data at start (check.c), its data
 * opened on every rank (dataset_job.c), read ahead (prefetch.c), the forward-only evaluation
 * (eval_loop.c), TensorBoard events and metrics lines (metrics.c, histogram.c), stragglers,
 * preemption, progress and the profiler of chosen steps. It drives the trainer
 * (trainer_internal.h); nothing under it includes this. */
#ifndef PP_JOB_INTERNAL_H
#define PP_JOB_INTERNAL_H

#include <onnxpipe/train_job.h>

#include "tensorboard.h"
#include "trainer_internal.h"

/* dataset_job.c: pp_dataset_open_with on every rank of world, rank 0 first (it builds what
 * --pack/--pad cache beside the data while the others wait, without a timeout), then the
 * others; a failure on any rank is every rank's, with its message. Collective over world. */
pp_status train_open_data(pp_comm *world, const char *path, const pp_dataset_options *o, pp_dataset **out,
                          pp_error *err);

/* preempt.c: --save-on-signal. Install catches the signals of the mask (bit s: signal s);
 * poll, collective over world after a step, says whether any rank got one: the signal,
 * the rank that got it first and the seconds since. A rank that does not reach the poll
 * within twice the longest step + 10 s of its signal exits (status 128 + signal). */
typedef struct train_preempt_state {
    int sig;                    /* 0: none */
    int rank;
    double since_s;
} train_preempt_state;
pp_status train_preempt_install(uint64_t signals, pp_error *err);
void train_preempt_restore(uint64_t signals);
/* A step took this long: the alarm after a signal is twice the longest plus 10 s. */
void train_preempt_step_took(double seconds);
pp_status train_preempt_poll(pp_comm *world, train_preempt_state *out, pp_error *err);

/* Every mismatch between dataset d (named `dir`, given by option `opt`) and the model g
 * bound to microbatch mb: arrays missing, dtypes, per-sample shapes, a fixed batch dim
 * other than mb, labels outside the logits' classes. The message says what to change. */
pp_status train_check_data(const pp_graph *g, const pp_loss_spec *loss, pp_dataset *d, const char *opt,
                           const char *dir, int64_t mb, train_io *io, pp_error *err);

/* The dims of the job (check.c): c's --dim bindings, then each symbolic dim of a model input
 * that they leave open (the batch dim and the buckets' dim, which each step binds, aside),
 * bound from the per-sample shape of the --data array of the input's name; a disagreement
 * with --dim or between two arrays is an error naming both. note gets "seq = 256 (from
 * --data input_ids), ..." (empty: nothing bound). Free *dims with train_dims_free. */
pp_status train_data_dims(const pp_trainer_config *c, const pp_dataset *d, pp_dim_binding **dims, int *ndims,
                          char *note, size_t note_len, pp_error *err);
void train_dims_free(pp_dim_binding *dims, int ndims);

/* f's inputs from the samples at places f->offset .. + f->samples - 1 of step's global
 * batch under smp: copied from what pf read ahead, or read now (pf NULL, or not its). */
typedef struct train_prefetch train_prefetch;
pp_status train_feed_dataset(const pp_dataset *d, const pp_sampler *smp, train_prefetch *pf, int64_t step,
                             const pp_trainer_feed *f, pp_error *err);
/* prefetch.c: a thread reads ahead, into a ring of two steps' host buffers, what the
 * stages of drv are fed from d under smp in step k+1 while step k runs: their data inputs
 * at places first .. first+count-1 of each global batch (this replica's), and the global
 * batch of the labels of a stage's mean loss. Steps first_step .. last_step, one after the
 * other; a step asked out of order is read then. *out NULL when no stage of drv reads d, or
 * PP_PREFETCH=0. get: places offset .. offset+count-1 of array a of step's global batch,
 * pp_sampler_read's bytes (or its error), waiting for the thread; valid until a get of
 * another step or done; *out NULL where it does not read them. done: after step (its feeds), so the thread reads
 * step + 2 while step + 1 runs (waking it there, not in a feed); when the thread read step
 * (pp_now), if it holds it. close joins the thread; accepts NULL. */
pp_status train_prefetch_open(const pp_dataset *d, const pp_sampler *smp, pp_driver *drv, int64_t first,
                              int64_t count, int64_t first_step, int64_t last_step, train_prefetch **out,
                              pp_error *err);
pp_status train_prefetch_get(train_prefetch *p, int64_t step, const pp_dataset_array *a, int64_t offset,
                             int64_t count, const void **out, pp_error *err);
int train_prefetch_done(train_prefetch *p, int64_t step, double *t_start, double *t_end);
void train_prefetch_close(train_prefetch *p);

/* eval_loop.c: the eval dataset under the training layout (batch, microbatches per
 * replica, dp), opened on every rank of world (train_open_data) and checked like the
 * training data; batches: global batches per evaluation (0 or more than it holds: all of
 * it). Collective over world. */
typedef struct train_eval train_eval;
typedef struct train_eval_result {
    int64_t step;               /* the training step after which it ran */
    double loss;                /* mean over the labels of the eval batches */
    double perplexity;          /* exp(loss), for token models (has_perplexity) */
    double accuracy;            /* argmax of the logits == label, over counted labels */
    int has_perplexity, has_accuracy;
    int64_t samples;
    double seconds;
} train_eval_result;
pp_status train_eval_open(pp_comm *world, const char *dir, const pp_dataset_options *dopt, const pp_graph *g,
                          const pp_loss_spec *loss, int64_t batch, int64_t microbatches, int dp, int64_t batches,
                          train_eval **out, pp_error *err);
int64_t train_eval_batches(const train_eval *e);
/* pp_trainer_eval of t fed from the eval dataset, after training step `step`.
 * Collective (every rank of t). */
pp_status train_eval_run(train_eval *e, pp_trainer *t, int64_t step, train_eval_result *res, pp_error *err);
void train_eval_close(train_eval *e);

/* straggler.c: --straggler-warn (NULL when off). step is collective: every rank's busy
 * time (step less time blocked on peers); note->rank the rank whose median over the last
 * STRAGGLER_WINDOW steps exceeds factor x the median of its pipeline peers' (-1: none),
 * the largest such ratio. inject sleeps where PP_DEBUG_SLOW_RANK=RANK:SECONDS names this
 * rank (tests make a slow rank with it; called per fed microbatch). */
typedef struct train_straggler train_straggler;
typedef struct train_straggler_note {
    int rank;
    double ratio, busy_s, median_s;
} train_straggler_note;
pp_status train_straggler_open(double factor, pp_comm *world, train_straggler **out, pp_error *err);
pp_status train_straggler_step(train_straggler *s, double busy_s, int replica, train_straggler_note *note,
                               pp_error *err);
void train_straggler_inject(const train_straggler *s);
void train_straggler_close(train_straggler *s);

/* metrics.c: rank 0's TensorBoard events and metrics lines (NULL when neither is asked
 * for). Steps 1, every log_every-th and the last gather every rank's figures (collective
 * then: every rank calls train_log_step for every step). */
typedef struct train_log train_log;
typedef struct train_step_log {
    int64_t step, epoch;
    double loss, lr, grad_norm;
    double throughput;          /* tokens (or samples) per second over the run so far */
    double step_s, compute_s, wait_s;   /* this rank's */
    double input_s, input_read_s;       /* this rank's feeds (waits + copies), the reader's for the step */
    int64_t stage_bytes;        /* this rank's stage allocations */
    int64_t rss_bytes;          /* this process's peak resident set */
    int skipped;
    double loss_scale;          /* fp16 loss scaling: the step's scale; 0: off */
    int has_ckpt;               /* --save: checkpoints saved so far, training time they cost (rank 0's) */
    int ckpt_saves;
    double ckpt_stall_s;
    int has_straggler;          /* --straggler-warn: the rank named (-1: none) and its ratio */
    train_straggler_note straggler;
} train_step_log;
pp_status train_log_open(const pp_train_config *c, pp_comm *world, int64_t steps, int tokens, train_log **out,
                         pp_error *err);
pp_status train_log_text(train_log *l, const char *tag, const char *text, pp_error *err);
int train_log_gathers(const train_log *l, int64_t step);
pp_status train_log_step(train_log *l, const train_step_log *s, const train_eval_result *ev, pp_error *err);
pp_tb_writer *train_log_tb(train_log *l);   /* rank 0's writer, or NULL */
pp_status train_log_close(train_log *l, pp_error *err);
int64_t train_rss_peak_bytes(void);
/* histogram.c: weight and gradient histograms of every parameter, written by rank 0
 * (tb non-NULL there). Collective over world. */
pp_status train_log_histograms(pp_tb_writer *tb, pp_comm *world, pp_driver *drv, const pp_graph *g,
                               const pp_partition *part, int replica, int64_t step, pp_error *err);

/* progress.c: whether an evaluation follows step (every N and the last), how many are
 * left after step, and the ETA in seconds: the steps left at the mean training step so
 * far (train_s over the `done` steps this run has made; a resumed run starts late) plus
 * the evaluations left at their mean cost. */
int train_eval_due(int64_t step, int64_t steps, int64_t every);
int64_t train_evals_left(int64_t step, int64_t steps, int64_t every);
double train_eta(int64_t step, int64_t steps, int64_t done, double train_s, int64_t eval_every, int evals,
                 double eval_s, int64_t eval_batches, int has_eval);

/* profile.c: per-op profiling of steps A..B (--profile-steps, --profile); NULL when off.
 * begin before the step, end after it (collective after the last profiled step, which is
 * B or the run's last step). */
typedef struct train_prof train_prof;
pp_status train_prof_open(const pp_train_config *c, pp_driver *drv, pp_comm *world, const pp_schedule *sched,
                          const pp_partition *part, const pp_grid *grid, train_prof **out, pp_error *err);
pp_status train_prof_begin(train_prof *p, int64_t step, pp_error *err);
pp_status train_prof_end(train_prof *p, int64_t step, int64_t last_step, const pp_step_stats *st, double step_s,
                         pp_error *err);
/* A span of input time of step on the timeline's input row and in the table as op type
 * `what`, while profiling (a read ahead may begin before the first profiled step: then it
 * starts before the timeline's 0). */
void train_prof_span(train_prof *p, int64_t step, const char *what, double t_start, double t_end);
void train_prof_close(train_prof *p);
/* memory.c: every rank's measured peak memory (the device's counters) and the previews'
 * estimate, printed by rank 0 when print (collective over t->world). */
pp_status train_report_memory(const pp_trainer *t, int print, pp_error *err);

#endif
