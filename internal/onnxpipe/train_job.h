/* The training job `onnxpipe train` runs (internal tier: the CLI owns it; train/, tests and
 * bench): its options around the trainer's (data, epochs, evaluation, logs, profiles,
 * preemption), the run, its result, and `onnxpipe eval`'s inference over a dataset. The
 * library trainer it drives is trainer.h's. */
#ifndef ONNXPIPE_TRAIN_JOB_H
#define ONNXPIPE_TRAIN_JOB_H

#include <onnxpipe/dataset.h>
#include <onnxpipe/trainer_lib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the training run ------------------------------------------------------- */
typedef struct pp_train_config {
    pp_trainer_config trainer;      /* the trainer's options (trainer_lib.h): model, layout, optimizer,
                                       precision, checkpoints, ...; its dims are bound from the data
                                       too (--dim binds the rest), its steps from epochs, and its
                                       eval_batches 0 is the whole eval dataset */
    const char *data;               /* the dataset (pp_dataset_open_with: a directory, .npy, a token
                                       stream, a Megatron indexed dataset) */
    pp_dataset_options dataset;     /* how data is read: seq, token dtype, --pack / --pad, eos (-1:
                                       none); pp_train_dataset_options adds the labels' name,
                                       ignore_index and buckets from the trainer's options */
    const char *losses_out;         /* write "step loss" lines here (NULL: no) */
    const char *export_path;        /* write the trained model here at the end (NULL: no) */
    const char *trace_path;         /* write a Perfetto trace of the last step here (NULL: no) */
    uint64_t save_signals;          /* bit s: signal s makes every rank finish its step, save and
                                       end the run (pp_train_result.preempted); 0: none */
    /* the run a user watches: data order, evaluation, logs, profiling */
    int64_t epochs;                 /* > 0: steps = epochs x steps per epoch (samples / batch) */
    int shuffle;                    /* a seeded permutation of the samples per epoch (pp_sampler) */
    const char *eval_data;          /* evaluation dataset directory (NULL: none) */
    int64_t eval_every;             /* evaluate after every N steps, and after the last (0: last only) */
    const char *logdir;             /* TensorBoard event files, written by rank 0 (NULL: none) */
    const char *metrics_out;        /* JSON lines, one object per step (NULL: none) */
    int64_t log_every;              /* per-rank figures (wait, memory, bubble) every N steps (0: 10) */
    int64_t log_histograms;         /* weight and gradient histograms every N steps (0: never) */
    double straggler_warn;          /* > 0: name the rank whose busy time per step (step less time
                                       blocked on peers), its median over 10 steps, exceeds this x the median of
                                       its pipeline peers' (progress line, metrics, TensorBoard) */
    int64_t profile_first, profile_last;   /* --profile-steps A:B, 1-based, inclusive (0: off) */
    const char *profile_out;        /* Perfetto JSON of the profiled steps (rank 0) */
    const char *command_line;       /* shown in the TensorBoard text summary */
} pp_train_config;

/* `onnxpipe train`'s defaults: pp_trainer_config_init's, eos -1, the rest zero. Local.
 * Thread-safe. */
pp_train_config pp_train_config_default(void);

/* How the job reads its datasets: c's seq and token dtype, the labels named as the loss's.
 * Local; thread-safe. */
pp_dataset_options pp_train_dataset_options(const pp_train_config *c);

typedef struct pp_train_result {
    int64_t first_step;             /* 1, or the step after the checkpoint resumed from */
    int64_t steps_done;
    double first_loss, last_loss;
    double seconds;
    double tokens_per_s;            /* samples x sequence length per second (samples/s without counts_tokens) */
    int saves;                      /* checkpoints saved */
    double save_stall_s;            /* training time they cost this rank (async: the copy to host) */
    int counts_tokens;              /* the model reads [batch, seq] integer tokens */
    int64_t epochs_done;            /* epochs started */
    int evals;                      /* evaluations run */
    double eval_loss;               /* the last evaluation's (NaN: none) */
    double eval_seconds;            /* all evaluations together */
    int preempted;                  /* a save_signals signal ended the run after step steps_done
                                       (saved): its number; 0: the run ended at its last step */
    int preempted_rank;             /* the first rank that got it */
    double preempt_s;               /* seconds from the signal to the committed save */
} pp_train_result;

/* Runs the job on this rank. Collective over the job's ranks (the MPI world: every rank of
 * the job calls it with the same config). When it fails on a rank of a job of several, it returns
 * without freeing what outstanding messages may still write into: the caller must end
 * the job (pp_comm_mpi_abort_world), as the CLI does. */
pp_status pp_train_run(const pp_train_config *cfg, pp_train_result *res, pp_error *err);

/* Inference over a dataset: forward of every `batch` samples, each graph output
 * appended raw to OUT_DIR/<output name>.bin. Local: one process. */
typedef struct pp_eval_config {
    const char *model;
    const char *data;
    const char *out_dir;
    const char *device;     /* auto | cpu | cuda (NULL: auto) */
    int64_t batch;          /* samples per forward */
    int64_t samples;        /* 0: the whole dataset (rounded down to whole batches) */
    pp_dim_binding *dims;
    int ndims;
} pp_eval_config;
pp_status pp_eval_run(const pp_eval_config *cfg, int64_t *samples_done, pp_error *err);   /* Local */

#ifdef __cplusplus
}
#endif
#endif
