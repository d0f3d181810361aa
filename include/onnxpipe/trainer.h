/* The high-level trainer: one object that loads a model, partitions it, places the
 * ranks, builds this rank's stages under the driver and runs steps, evaluations,
 * checkpoints and export, fed by the caller's data. `onnxpipe train` is one of its users
 * (pp_train_run, train.h); the layers under it (stage.h, driver.h, schedule.h) stay
 * public for trainers that need more.
 *
 * Threads: a trainer is used by one thread at a time; the feed callback runs on that
 * thread, inside the call that was given it. Collective calls are made by every rank of
 * the trainer's communicator, in the same order, with the same arguments. */
#ifndef ONNXPIPE_TRAINER_H
#define ONNXPIPE_TRAINER_H

#include <onnxpipe/comm.h>
#include <onnxpipe/core.h>
#include <onnxpipe/driver.h>
#include <onnxpipe/graph.h>
#include <onnxpipe/optim.h>
#include <onnxpipe/partition.h>
#include <onnxpipe/schedule.h>
#include <onnxpipe/stage.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_trainer pp_trainer;

/* ---- learning-rate schedules ------------------------------------------------ */
typedef enum { PP_LR_CONSTANT = 0, PP_LR_LINEAR, PP_LR_COSINE, PP_LR_POLY } pp_lr_kind;
typedef struct pp_lr_schedule {
    pp_lr_kind kind;
    float lr;               /* peak */
    float min_lr;           /* reached at the last step (linear, cosine, poly) */
    int64_t warmup;         /* linear warmup steps from 0 */
    int64_t steps;          /* total steps */
    float power;            /* poly */
} pp_lr_schedule;
/* LR of step (1-based); parsing and naming kinds ("constant", "linear", "cosine", "poly": static
 * strings). Local. Thread-safe. */
PP_API float pp_lr_at(const pp_lr_schedule *s, int64_t step);
PP_API int pp_lr_parse(const char *name, pp_lr_kind *out);
PP_API const char *pp_lr_kind_name(pp_lr_kind k);


/* Strings and graph are borrowed until pp_trainer_destroy (export reloads the model file). */
typedef struct pp_trainer_config {
    const char *model;              /* ONNX file, its batch dim bound to the microbatch; or NULL and: */
    const pp_graph *graph;          /* a graph built in memory (pp_example_gpt), its batch dim fixed
                                       to the microbatch: batch / (dp x microbatches) */
    int pp, dp;                     /* pp x dp ranks in the communicator */
    const char *device;             /* "auto" (NULL: a GPU when every rank has one), "cpu", "cuda" */
    pp_schedule_kind schedule;      /* default 1f1b */
    int chunks;                     /* virtual stages per rank; 0: pp_schedule_default_chunks */
    int64_t batch;                  /* global batch: samples per optimizer step */
    int64_t microbatches;           /* per replica and step */
    int64_t steps;                  /* the run's length: the LR schedule runs over it (lr.steps is
                                       set to it); more steps may be made, at the last LR */
    pp_dim_binding *dims;           /* symbolic dims of the model file's inputs (read by create) */
    int ndims;
    /* Sequence buckets: a step (or eval) runs at one of these lengths of the model file's
     * symbolic dim bucket_dim, chosen by pp_trainer_set_bucket; different steps may run at
     * different ones. The model is loaded once per length and split once, at the largest
     * (the plan printed at create is that one's): each rank's stages at every length share
     * one copy of the parameters, gradients, optimizer state and activation memory (sized
     * by the largest). Messages between stages carry their bucket; the schedule is the same.
     * Checkpoints do not depend on the buckets. NULL / 0: one shape, dims as given. */
    const int64_t *buckets;         /* ascending lengths >= 1 (read by create) */
    int nbuckets;
    const char *bucket_dim;         /* NULL: "seq"; not also among dims */
    pp_param_rules params;          /* what is trained besides graph/params.c's rules (--trainable,
                                       --frozen, --untie, --tie); the model file's load and export */
    pp_optim_hparams optim;
    pp_lr_schedule lr;
    float clip_norm;                /* 0: no clipping */
    int64_t bucket_bytes;           /* data-parallel all-reduce bucket; 0: 4 MiB */
    int skip_nonfinite;             /* skip a step whose gradients hold NaN/Inf instead of failing */
    pp_dtype precision;             /* PP_DTYPE_BF16 / F16: mixed precision (pp_stage_options); 0: fp32 */
    pp_dtype reduce_dtype;          /* the data-parallel gradient all-reduce's dtype: 0 / F32
                                       or BF16 (--reduce-dtype) */
    float loss_scale;               /* fp16: > 0 a fixed loss scale; 0: dynamic, from 65536 */
    int64_t loss_scale_window;      /* fp16 dynamic: clean steps before the scale doubles; 0: 2000 */
    pp_recompute recompute;         /* activation recomputation (partition.h): what the stash keeps;
                                       losses and weights are bitwise the same; default none */
    pp_fused_attention fused_attention; /* attention as one Attention op (pp_stage_options); 0: AUTO */
    pp_partition_options partition; /* how the model is split (pp_train_partition): balance, tolerance,
                                       order, time model, manual cuts; zeros: by parameters, the
                                       orders searched, no tolerance (the default config's is 0.02) */
    pp_loss_spec loss;              /* when the model does not end in SoftmaxCrossEntropyLoss */
    uint64_t seed;                  /* Dropout draws */
    int64_t eval_batches;           /* global batches per pp_trainer_eval; 0: 1 (pp_train_run: 0 is
                                       the whole eval dataset) */
    int quiet;                      /* 0: rank 0 prints the plan at create and a line per checkpoint */
    /* checkpoints (ckpt.h), besides pp_trainer_save: */
    const char *save_dir;           /* pp_trainer_step saves to save_dir/step-<N> after every
                                       save_every-th step and after step `steps` (NULL: never) */
    int64_t save_every;             /* 0: only after step `steps` */
    int keep;                       /* keep the newest K checkpoints in save_dir; 0: all */
    int save_sync;                  /* 1: a save is written before pp_trainer_step returns; 0: a thread
                                       writes it while training goes on (the next update waits for
                                       its copy of the parameters; pp_trainer_destroy for the write) */
    double lock_wait_s;             /* save_dir held by another live job (ckpt.h's lock): wait up to
                                       this long for it to end, then fail naming it; default 60 */
    const char *resume;             /* at create: "auto": the newest checkpoint in save_dir that verifies
                                       (none: start from scratch); a path: that checkpoint; NULL: none.
                                       pp_trainer_steps_done says where it goes on */
} pp_trainer_config;

/* The defaults `onnxpipe train` has (its option table, train/options.c): pp 1, dp 1, device
 * auto, 1f1b, batch 8, 1 microbatch, 10 steps, AdamW (0.9, 0.999, 1e-8) at a constant lr
 * 1e-3, ignore_index -100, seed 0, a balance tolerance of 0.02; no model. Local. Thread-safe. */
PP_API pp_trainer_config pp_trainer_config_default(void);

/* One graph input this rank needs for a microbatch: fill data with nbytes of it, laid
 * out as dtype and shape (the microbatch's, batch dim first). data is host memory (the
 * device's own on the cpu), valid during the callback only. */
typedef struct pp_trainer_input {
    const char *name;
    pp_dtype dtype;
    pp_shape shape;
    size_t nbytes;
    void *data;
} pp_trainer_input;

typedef struct pp_trainer_feed {
    int training;                   /* 1: pp_trainer_step; 0: pp_trainer_eval */
    int64_t step;                   /* training: the step (from 1); eval: the eval batch (from 1) */
    int64_t microbatch;             /* 0 .. microbatches-1, within this replica */
    int replica;                    /* 0 .. dp-1 */
    int64_t offset;                 /* its first sample's place in the global batch: replica x
                                       batch / dp + microbatch x samples */
    int64_t samples;                /* samples per microbatch */
    pp_trainer_input *inputs;       /* the graph inputs of this rank's stage: the first stage's
                                       token ids, the last stage's labels */
    int ninputs;
    pp_stage *stage;                /* for trainers that need the stage (pp_stage_set_loss_weight) */
    int slot;
    int bucket;                     /* the step's bucket (pp_trainer_set_bucket), its length; 0, 0 */
    int64_t length;                 /* without buckets. inputs' shapes are that bucket's */
} pp_trainer_feed;

/* Fills f->inputs. Called only on ranks whose stage reads a graph input, once per
 * (stage, microbatch). */
typedef pp_status (*pp_trainer_feed_fn)(void *user, const pp_trainer_feed *f, pp_error *err);

/* Loads the model, agrees with the other ranks on it and on cfg, partitions, places the
 * ranks, opens the device and builds this rank's stages. world: the communicator of the
 * pp x dp ranks, borrowed (NULL: MPI_COMM_WORLD, initialising MPI when needed, or one
 * rank without mpirun). Collective over world (the job's ranks when NULL). *out: the caller's,
 * freed by pp_trainer_destroy; world and cfg's strings and graph must outlive it. */
PP_API pp_status pp_trainer_create(const pp_trainer_config *cfg, pp_comm *world, pp_trainer **out, pp_error *err);
/* Collective over the trainer's communicator (it frees communicators). Accepts NULL. After
 * a failed collective call on a job of several ranks, end the job instead
 * (pp_comm_mpi_abort_world): a peer's message may still be on its way into the trainer's buffers. */
PP_API void pp_trainer_destroy(pp_trainer *t);

typedef struct pp_trainer_stats {
    int64_t step;                   /* the step just made (from 1) */
    float lr;                       /* its learning rate */
    double loss;                    /* mean over the global batch, the same on every rank */
    double grad_norm;               /* global, before clipping */
    int skipped;                    /* NaN/Inf gradients skipped the update (skip_nonfinite, or an
                                       fp16 overflow under loss scaling) */
    double loss_scale;              /* the fp16 loss scale the step used; 0: none */
    double seconds;                 /* this rank's wall time of the step */
    double compute_s, wait_s;       /* this rank's forward/backward time, and time blocked on peers */
} pp_trainer_stats;

/* One optimizer step over a global batch of batch samples fed by feed(user, ...), then
 * the save to save_dir when one is due. A loss that is NaN or Inf is an error unless
 * skip_nonfinite. Collective over the trainer's communicator. */
PP_API pp_status pp_trainer_step(pp_trainer *t, pp_trainer_feed_fn feed, void *user, pp_trainer_stats *stats,
                                 pp_error *err);

typedef struct pp_trainer_eval_stats {
    double loss;                    /* mean over the eval batches' labels, weighed as training weighs
                                       them (ignore_index counts nothing, class weights count their
                                       weight); a mean over samples when the loss has no such labels.
                                       The same on every rank */
    int64_t samples;
    double seconds;
    double perplexity;              /* exp(loss), for token models (has_perplexity) */
    double accuracy;                /* argmax of the logits == label over the labels counted (not
                                       ignore_index), when the logits are a graph output
                                       (has_accuracy); else NaN */
    int has_perplexity, has_accuracy;
} pp_trainer_eval_stats;

/* Forward only (Dropout off, BatchNorm on its running statistics) of eval_batches global
 * batches fed by feed (f->training 0); no parameter changes. The loss and accuracy read
 * the labels the feed gives the last stage. Collective over the trainer's communicator. */
PP_API pp_status pp_trainer_eval(pp_trainer *t, pp_trainer_feed_fn feed, void *user, pp_trainer_eval_stats *stats,
                                 pp_error *err);

/* Writes a checkpoint of parameters and optimizer state to dir/step-<N> (N: the steps
 * made) and points dir/latest at it; returns once it is committed. Collective over the
 * trainer's communicator. */
PP_API pp_status pp_trainer_save(pp_trainer *t, const char *dir, pp_error *err);
/* Waits for the save in flight (save_sync 0: a thread writes it); on rank 0 until its
 * checkpoint is committed. Returns that write's error, if it had one (pp_trainer_destroy
 * waits too, but drops it). Collective over the trainer's communicator. */
PP_API pp_status pp_trainer_wait_saves(pp_trainer *t, pp_error *err);
/* Loads the checkpoint directory path (written by any layout) and goes on from its
 * step. Collective over the trainer's communicator. */
PP_API pp_status pp_trainer_load(pp_trainer *t, const char *path, pp_error *err);
/* Writes the trained model as ONNX to path (rank 0 writes). Collective over the trainer's
 * communicator. */
PP_API pp_status pp_trainer_export(pp_trainer *t, const char *path, pp_error *err);

/* The bucket (index into cfg.buckets) the following steps and evals run at; create leaves
 * the largest. Every rank of the trainer sets the same one before a step or eval (a message
 * from a rank at another bucket is an error naming both ranks). pp_trainer_graph and the
 * driver's stages are then that bucket's. Between steps only. Local. */
PP_API pp_status pp_trainer_set_bucket(pp_trainer *t, int bucket, pp_error *err);
PP_API int pp_trainer_bucket(const pp_trainer *t);   /* Local; 0 without buckets */

/* The steps made so far (0 after create, the checkpoint's after pp_trainer_load). Local. */
PP_API int64_t pp_trainer_steps_done(const pp_trainer *t);
/* This rank in the communicator, and its place in the (stage, replica) grid. Local. */
PP_API int pp_trainer_rank(const pp_trainer *t);
PP_API int pp_trainer_stage(const pp_trainer *t);
PP_API int pp_trainer_replica(const pp_trainer *t);
/* The lower layers under the trainer, owned by it (not to be freed): for trainers that need
 * them. Local. */
PP_API pp_driver *pp_trainer_driver(pp_trainer *t);
PP_API const pp_graph *pp_trainer_graph(const pp_trainer *t);   /* at the current bucket */

#ifdef __cplusplus
}
#endif
#endif
