/* The trainer's internal tier (the library, the CLI, tests and bench; a custom trainer has
 * trainer.h): the layout of the trainer's options, its learning-rate schedules, and the
 * stage options and partition a job of those options makes, which `onnxpipe train` and the
 * previews (partition, schedule --model, plan, place) share. */
#ifndef ONNXPIPE_TRAINER_LIB_H
#define ONNXPIPE_TRAINER_LIB_H

#include <onnxpipe/trainer.h>

#ifdef __cplusplus
extern "C" {
#endif

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
float pp_lr_at(const pp_lr_schedule *s, int64_t step);
int pp_lr_parse(const char *name, pp_lr_kind *out);
const char *pp_lr_kind_name(pp_lr_kind k);

/* The layout behind trainer.h's opaque pp_trainer_config: the option tables (train/options.c)
 * place their rows in it, `onnxpipe train` and the previews fill it from argv. Strings and
 * graph are borrowed until pp_trainer_destroy (export reloads the model file). */
struct pp_trainer_config {
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
};

/* c gets the defaults pp_trainer_config_default (trainer.h) states, from the trainer's
 * option table: a config of the library's own callers (the CLI fills it from argv, its
 * strings borrowed). The public setters pp_trainer_config_set and _set_buckets take only
 * a config from pp_trainer_config_default, which owns what they copy. Local. Thread-safe. */
void pp_trainer_config_init(pp_trainer_config *c);

/* The options every stage of a job from c is built with (the microbatch is c->batch /
 * (dp x microbatches); the driver sets slots and first_sample). `onnxpipe partition` and
 * `onnxpipe schedule --model` estimate memory from the same, so an option that shapes a
 * stage reaches the previews too. Local; thread-safe. */
pp_stage_options pp_train_stage_options(const pp_trainer_config *c);

/* The partition the job of c makes of g into nstages stages with stages planned for a
 * device of this kind: c->partition with the job's microbatches and recompute, and as its
 * memory model (the memory balance's) the stage planner's profile of g with the job's stage
 * options (pp_stage_memory_profile); where those stages cannot be planned (a preview of a
 * model without a loss named, unbound dims) the partitioner's own estimate, and *why (may be
 * NULL) says why. `onnxpipe train`, `partition` and `schedule --model` all split this way.
 * Local; the caller frees *out with pp_partition_destroy. */
pp_status pp_train_partition(const pp_trainer_config *c, const pp_graph *g, int nstages, pp_device_kind kind,
                                    pp_partition **out, pp_error *why, pp_error *err);

/* Predicted per-stage costs for the simulator from a partition: F from the stage's
 * FLOPs at `gflops` GFLOP/s, backward = 2F (input and weight halves of F each),
 * stashed activations and bytes sent per microbatch (pp_plan_stage_costs with flat rates,
 * fp32, no recompute; all zero when a shape is unknown). costs[part->nstages]. Local. Thread-safe. */
void pp_train_stage_costs(const pp_partition *part, double gflops, pp_stage_cost *costs);

#ifdef __cplusplus
}
#endif
#endif
