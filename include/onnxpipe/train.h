/* The training loop and what surrounds it: datasets, learning-rate schedules, the
 * step loop with progress lines, and export of the trained model. */
#ifndef ONNXPIPE_TRAIN_H
#define ONNXPIPE_TRAIN_H

#include <onnxpipe/core.h>
#include <onnxpipe/graph.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/partition.h>
#include <onnxpipe/schedule.h>
#include <onnxpipe/stage.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- datasets ---------------------------------------------------------------
 * A dataset is a directory with dataset.json:
 *   {"format": "onnxpipe-dataset-1", "samples": N,
 *    "arrays": [{"name": "input_ids", "dtype": "int64", "shape": [T], "file": "input_ids.bin"}, ...]}
 * Each array's file holds N samples of `shape` (per sample), packed little-endian.
 * Array names are the graph inputs they feed. Files are mmapped. */
typedef struct pp_dataset_array {
    char *name;
    pp_dtype dtype;
    pp_shape shape;             /* per sample */
    size_t sample_bytes;
    const void *data;           /* N samples */
} pp_dataset_array;

typedef struct pp_dataset {
    char *dir;
    int64_t samples;
    pp_dataset_array *arrays;
    int narrays;
    void **maps;
    size_t *map_lens;
} pp_dataset;

pp_status pp_dataset_open(const char *dir, pp_dataset **out, pp_error *err);
void pp_dataset_close(pp_dataset *d);
const pp_dataset_array *pp_dataset_find(const pp_dataset *d, const char *name);
/* Copies samples first .. first+count-1 (wrapping around the end) of array a into dst. */
void pp_dataset_read(const pp_dataset *d, const pp_dataset_array *a, int64_t first, int64_t count, void *dst);
/* Byte-level language-model data from any file: vocab 256, samples of seq tokens
 * (input_ids) with the next tokens as labels, non-overlapping windows. */
pp_status pp_dataset_write_text(const char *text_path, const char *dir, int64_t seq, pp_error *err);

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
/* LR of step (1-based). */
float pp_lr_at(const pp_lr_schedule *s, int64_t step);
int pp_lr_parse(const char *name, pp_lr_kind *out);

/* ---- the training run ------------------------------------------------------- */
typedef struct pp_train_config {
    const char *model;
    const char *data;               /* dataset directory */
    int pp, dp;
    const char *device;             /* "auto" (default: a GPU when one works, else the cpu), "cpu", "cuda" */
    pp_schedule_kind schedule;      /* gpipe, 1f1b (default), interleaved, zb-h1 */
    int chunks;                     /* virtual stages per rank (interleaved), else 1 */
    int64_t batch;                  /* global batch: samples per optimizer step */
    int64_t microbatches;           /* per replica and step */
    int64_t steps;
    pp_dim_binding *dims;
    int ndims;
    pp_optim_hparams optim;
    pp_lr_schedule lr;
    float clip_norm;                /* 0: no clipping */
    int64_t bucket_bytes;           /* data-parallel all-reduce bucket; 0: 4 MiB (--bucket-kb) */
    int skip_nonfinite;             /* skip a step whose gradients hold NaN/Inf instead of failing */
    pp_loss_spec loss;
    uint64_t seed;
    const char *losses_out;         /* write "step loss" lines here (NULL: no) */
    const char *export_path;        /* write the trained model here at the end (NULL: no) */
    const char *trace_path;         /* write a Perfetto trace of the last step here (NULL: no) */
    /* checkpoints (ckpt.h): to save_dir/step-<N>/ every save_every steps and at the end */
    const char *save_dir;           /* NULL: no checkpoints */
    int64_t save_every;             /* 0: only at the end */
    int keep;                       /* keep the newest K checkpoints; 0: all */
    int save_sync;                  /* 1: write before training goes on (default: a thread writes) */
    const char *resume;             /* "auto": the newest checkpoint in save_dir that verifies (none:
                                       start from scratch); a path: that checkpoint; NULL: no resume.
                                       steps counts from the start of the run, not from the resume */
    int quiet;                      /* no progress lines */
} pp_train_config;

typedef struct pp_train_result {
    int64_t first_step;             /* 1, or the step after the checkpoint resumed from */
    int64_t steps_done;
    double first_loss, last_loss;
    double seconds;
    double tokens_per_s;            /* samples x sequence length per second */
    int saves;                      /* checkpoints saved */
    double save_stall_s;            /* training time they cost this rank (async: the copy to host) */
} pp_train_result;

/* Runs the job on this rank. When it fails on a rank of a job of several, it returns
 * without freeing what outstanding messages may still write into: the caller must end
 * the job (pp_comm_mpi_abort_world), as the CLI does. */
pp_status pp_train_run(const pp_train_config *cfg, pp_train_result *res, pp_error *err);

/* Inference over a dataset: forward of every `batch` samples, each graph output
 * appended raw to OUT_DIR/<output name>.bin. */
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
pp_status pp_eval_run(const pp_eval_config *cfg, int64_t *samples_done, pp_error *err);

/* Predicted per-stage costs for the simulator from a partition: F from the stage's
 * FLOPs at `gflops` GFLOP/s, backward = 2F (input and weight halves of F each),
 * stashed activations and bytes sent per microbatch. costs[part->nstages]. */
void pp_train_stage_costs(const pp_partition *part, double gflops, pp_stage_cost *costs);

#ifdef __cplusplus
}
#endif
#endif
