/* Private to train/: the library trainer (trainer.c and what it is made of: buckets.c,
 * feed.c, model_io.c, split.c, train_ckpt.c) — the object pp_trainer_* works on,
 * which the job (job_internal.h) drives. Nothing here knows the job: no dataset, sampler,
 * log or profile. */
#ifndef PP_TRAINER_INTERNAL_H
#define PP_TRAINER_INTERNAL_H

#include <onnxpipe/comm.h>
#include <onnxpipe/driver_lib.h>
#include <onnxpipe/placement.h>
#include <onnxpipe/trainer_lib.h>

#include <stdio.h>

#include "train_ckpt.h"

/* What the model reads and predicts, found once before step 1. */
typedef struct train_io {
    int64_t tokens_per_sample;  /* seq of an integer [batch, seq] input; 0: not a token model */
    const char *token_input;    /* that input's name */
    int logits;                 /* value id of the logits, or -1 */
    int class_axis;             /* 1 under SoftmaxCrossEntropyLoss ([N, C, d...]), last for --logits */
    int64_t classes;
    const char *labels;         /* the labels array, or NULL */
    int64_t ignore_index;       /* INT64_MIN: none */
} train_io;
/* model_io.c: io found from the graph and the loss options alone (no dataset). */
void train_find_io(const pp_graph *g, const pp_loss_spec *loss, train_io *io);

/* The host buffers feeds fill (feed.c: train_feed_inputs), kept from call to call. */
typedef struct train_feed_buf {
    pp_trainer_input *in;
    int *port;
    int cap;
    void *host;
    size_t bytes;
} train_feed_buf;

/* trainer.c: the trainer's state on this rank; the job (train.c) is one of its users. */
struct pp_trainer {
    pp_trainer_config c;        /* the options, defaults applied: c.steps and c.lr.steps are the run's length */
    pp_comm *world;             /* MPI: host-memory collectives */
    int owns_world;
    pp_comm *link;              /* device buffers: world on the cpu, its NCCL twin on cuda */
    pp_grid *grid;
    pp_graph *owned;            /* the graph loaded from c.model, or NULL: */
    const pp_graph *g;          /* ... owned, or the caller's (pp_trainer_config.graph) */
    pp_partition *part;
    pp_schedule *sched;
    pp_device *dev;
    pp_driver *drv;
    pp_topology *topo;
    pp_placement *place;
    pp_bind_result bind;
    pp_device_kind kind;
    pp_error device_note;       /* why auto chose the cpu */
    int64_t mb;                 /* samples per microbatch */
    int64_t step;               /* steps done */
    pp_lr_schedule lr;          /* c.lr over c.steps */
    int64_t eval_batches;       /* global batches per pp_trainer_eval */
    train_ckpt ck;
    /* the call in progress: its feed, and how a driver microbatch maps onto it */
    pp_trainer_feed_fn feed;
    void *feed_user;
    int training;
    train_feed_buf feed_buf;    /* what the feeds fill on a device the host cannot write */
    train_io io;                /* logits, labels, tokens: what pp_trainer_eval reports on */
    double eval_sum[4];         /* pp_trainer_eval: loss x weight, weight, correct, counted labels */
    int64_t **eval_labels;      /* [eval_slots] each slot's fed labels (eval_feed_labels), or none: */
    int64_t *eval_nlabels;      /* ... 0 */
    int eval_slots;
    size_t eval_label_bytes;    /* each eval_labels[i]'s size */
    float *eval_logits;         /* host copy of one microbatch's logits, for accuracy */
    size_t eval_logits_bytes;
    /* sequence buckets (c.buckets): the model and its partition at each length, the largest
       being owned and part; the one steps run at */
    pp_graph **bucket_g;
    pp_partition **bucket_part;
    int bucket;
};

/* buckets.c: the model loaded at every bucket (t->owned: the largest); after t->part (the
 * largest's), the other buckets' partitions, split the same way; freeing them. */
pp_status train_load_buckets(pp_trainer *t, const pp_graph_options *gopt, pp_error *err);
pp_status train_partition_buckets(pp_trainer *t, pp_error *err);
void train_free_buckets(pp_trainer *t);

/* The options pp_trainer_create checks first (batch against dp x microbatches, steps,
 * profile steps). */
pp_status trainer_check_config(const pp_trainer_config *c, pp_error *err);
/* Fails, naming the rank, unless every rank of t gives the same h (a hash of options
 * that make collectives beyond the trainer's own). Collective. */
pp_status trainer_agree(pp_trainer *t, uint32_t h, pp_error *err);
void trainer_print_plan(const pp_trainer *t, FILE *out);


/* feed.c: hands stage s's data inputs of slot to fn as host buffers (the device's own
 * on a host-memory device, else b's staging, copied in after fn); fn is not called when the
 * stage reads no graph input. f: the microbatch, inputs and stage filled in here. b keeps
 * the staging and the input table from call to call (a step allocates none after its
 * first); train_feed_buf_free frees them. */
pp_status train_feed_inputs(train_feed_buf *b, pp_stage *s, int slot, pp_trainer_feed *f, pp_trainer_feed_fn fn,
                            void *user, pp_error *err);
void train_feed_buf_free(train_feed_buf *b);
#endif
