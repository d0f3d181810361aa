/* The library trainer: one object that loads a model, partitions it, places the ranks,
 * builds this rank's stages under the driver and runs steps, evaluations, checkpoints and
 * export, fed by the caller's data. What a custom trainer links: a config (opaque, with a
 * default and setters), create, step, eval, save/load, export, destroy. `onnxpipe train`
 * is one of its users: the job around it (datasets, sampler, read-ahead, TensorBoard,
 * metrics, profiles, stragglers, preemption) is the CLI's and not public. The layers under
 * it (stage.h, driver.h, schedule.h) stay public for trainers that need more.
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

/* ---- options ---------------------------------------------------------------
 * An opaque config with a _default() and setters (so that options can be added without
 * changing the ABI): every option is one of `onnxpipe train --help`'s, set by its long name
 * and its value as the command line reads it, through the same table (train/options.c):
 * the same parser, bounds, defaults and error messages, e.g.
 *     pp_trainer_config_set(c, "--microbatches", "4", &err);
 *     pp_trainer_config_set(c, "lr-schedule", "cosine", &err);
 * The trainer's options are the layout (--model, --pp, --dp, --batch, --microbatches, --dim,
 * --schedule, --chunks, --bucket-kb), the split (--balance, --cut, ...), the stage
 * (--device, --optimizer, --precision, --recompute, --loss/--logits/--labels, --trainable,
 * --frozen, ...), training (--steps, --lr, --lr-schedule, --warmup, --min-lr, --beta1, ...,
 * --clip-norm, --seed), mixed precision, checkpoints (--save, --save-every, --keep,
 * --save-sync, --resume, --lock-wait), --eval-batches and --quiet. The job's own options
 * (--data, --epochs, --logdir, --metrics, --profile, ...) are `onnxpipe train`'s, not the
 * trainer's: a custom trainer feeds its own data and logs what it likes. A graph built in
 * memory and sequence buckets have setters of their own. */
typedef struct pp_trainer_config pp_trainer_config;

/* A new config holding `onnxpipe train`'s defaults: pp 1, dp 1, device auto, 1f1b, batch 8,
 * 1 microbatch, 10 steps, AdamW (0.9, 0.999, 1e-8) at a constant lr 1e-3, ignore_index -100,
 * seed 0, a balance tolerance of 0.02; no model. NULL when out of memory. The caller frees it
 * with pp_trainer_config_destroy, after the trainers created from it. Local. Thread-safe. */
PP_API pp_trainer_config *pp_trainer_config_default(void);
/* Frees c and what its setters copied. Accepts NULL. Local. */
PP_API void pp_trainer_config_destroy(pp_trainer_config *c);
/* Sets the option named `option` ("--steps" or "steps") to value, as on the command line: a
 * number within the option's bounds, a kind by name ("cosine"), a list "A,B,.."; a list
 * option given again (--dim NAME=V, --cut) adds to it; a flag (--quiet, --save-sync,
 * --skip-nonfinite, --nesterov) takes "1" or "0". c keeps a copy of value. Fails naming the
 * option and the value it expects; an option that is not the trainer's is an error that says
 * so. Local. */
PP_API pp_status pp_trainer_config_set(pp_trainer_config *c, const char *option, const char *value, pp_error *err);
/* Trains g, a graph built in memory (pp_example_gpt), instead of a --model file; its batch
 * dim is fixed to the microbatch: batch / (dp x microbatches). Borrowed until the trainers
 * created from c are destroyed. Local. */
PP_API void pp_trainer_config_set_graph(pp_trainer_config *c, const pp_graph *g);
/* Sequence buckets: a step (or eval) runs at one of these n lengths (ascending, >= 1; copied)
 * of the model file's symbolic dim `dim` (NULL: "seq"; not also bound by --dim), chosen by
 * pp_trainer_set_bucket; different steps may run at different ones. The model is loaded once
 * per length and split once, at the largest (the plan printed at create is that one's): each
 * rank's stages at every length share one copy of the parameters, gradients, optimizer state
 * and activation memory (sized by the largest). Messages between stages carry their bucket;
 * the schedule is the same. Checkpoints do not depend on the buckets. n 0: one shape, dims as
 * given. Local. */
PP_API pp_status pp_trainer_config_set_buckets(pp_trainer_config *c, const char *dim, const int64_t *lengths, int n,
                                               pp_error *err);


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
 * freed by pp_trainer_destroy; world, cfg and its graph must outlive it. */
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
    int skipped;                    /* NaN/Inf gradients skipped the update (--skip-nonfinite, or an
                                       fp16 overflow under loss scaling) */
    double loss_scale;              /* the fp16 loss scale the step used; 0: none */
    double seconds;                 /* this rank's wall time of the step */
    double compute_s, wait_s;       /* this rank's forward/backward time, and time blocked on peers */
} pp_trainer_stats;

/* One optimizer step over a global batch of batch samples fed by feed(user, ...), then
 * the save to --save's directory when one is due. A loss that is NaN or Inf is an error
 * unless --skip-nonfinite. Collective over the trainer's communicator. */
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

/* Forward only (Dropout off, BatchNorm on its running statistics) of --eval-batches global
 * batches (default 1) fed by feed (f->training 0); no parameter changes. The loss and accuracy read
 * the labels the feed gives the last stage. Collective over the trainer's communicator. */
PP_API pp_status pp_trainer_eval(pp_trainer *t, pp_trainer_feed_fn feed, void *user, pp_trainer_eval_stats *stats,
                                 pp_error *err);

/* Writes a checkpoint of parameters and optimizer state to dir/step-<N> (N: the steps
 * made) and points dir/latest at it; returns once it is committed. Collective over the
 * trainer's communicator. */
PP_API pp_status pp_trainer_save(pp_trainer *t, const char *dir, pp_error *err);
/* Waits for the save in flight (without --save-sync a thread writes it); on rank 0 until its
 * checkpoint is committed. Returns that write's error, if it had one (pp_trainer_destroy
 * waits too, but drops it). Collective over the trainer's communicator. */
PP_API pp_status pp_trainer_wait_saves(pp_trainer *t, pp_error *err);
/* Loads the checkpoint directory path (written by any layout) and goes on from its
 * step. Collective over the trainer's communicator. */
PP_API pp_status pp_trainer_load(pp_trainer *t, const char *path, pp_error *err);
/* Writes the trained model as ONNX to path (rank 0 writes). Collective over the trainer's
 * communicator. */
PP_API pp_status pp_trainer_export(pp_trainer *t, const char *path, pp_error *err);

/* The bucket (index into pp_trainer_config_set_buckets's lengths) the following steps and evals run at; create leaves
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
