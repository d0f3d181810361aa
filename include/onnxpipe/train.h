/* The training loop and what surrounds it: datasets, learning-rate schedules, the
 * step loop with progress lines, and export of the trained model. */
#ifndef ONNXPIPE_TRAIN_H
#define ONNXPIPE_TRAIN_H

#include <onnxpipe/core.h>
#include <onnxpipe/graph.h>
#include <onnxpipe/optim.h>
#include <onnxpipe/partition.h>
#include <onnxpipe/schedule.h>
#include <onnxpipe/stage.h>
#include <onnxpipe/trainer.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How the documents of a token stream or an indexed dataset become samples of seq tokens:
 * windows of the stream (documents run on, as nanoGPT and Megatron train), packed (--pack:
 * first-fit decreasing, several per sample) or one per sample, padded (--pad). Packed and
 * padded samples have input_ids, labels (ignore_index across documents and in padding) and
 * position_ids restarting per document (train/dataset_pack.c). */
typedef enum { PP_DOCS_WINDOWS = 0, PP_DOCS_PACK, PP_DOCS_PAD } pp_docs;

/* ---- datasets ---------------------------------------------------------------
 * A dataset is read in place from what users have, only the samples asked for (pread; the
 * corpus is never mapped or scanned whole, docs/data.md):
 * - onnxpipe's own directory with dataset.json:
 *     {"format": "onnxpipe-dataset-1", "samples": N,
 *      "arrays": [{"name": "input_ids", "dtype": "int64", "shape": [T], "file": "input_ids.bin"}, ...]}
 *   each array's file holding N samples of `shape` (per sample), packed little-endian;
 * - NumPy: a directory of NAME.npy files (or one .npy file), each array [N, ...] named by
 *   its file;
 * - a flat token stream: a .bin file of uint16 tokens (nanoGPT; uint32 with token_dtype),
 *   or llm.c's (a 1024-byte header with magic 20240520), windowed into samples of seq
 *   tokens: input_ids, and as labels the next tokens;
 * - a Megatron-LM indexed dataset (PREFIX.bin + PREFIX.idx, as megatron-core's
 *   IndexedDatasetBuilder writes): its documents one after another, windowed the same way.
 * Array names are the graph inputs they feed; token ids are delivered as int64. With --pack
 * or --pad the documents' index and the samples they make are built once and cached beside
 * the data (train/dataset_cache.c). */
typedef struct pp_dataset_array {
    char *name;
    pp_dtype dtype;             /* what a read delivers */
    pp_shape shape;             /* per sample */
    size_t sample_bytes;        /* per sample, as delivered */
    int file;                   /* the dataset's file it is read from (packed: -1): sample s */
    int64_t offset;             /* starts at byte offset + s x stride of it */
    pp_dtype stored;            /* the file's element type (token streams: uint16, uint32, ... widened to int64) */
    size_t stride;              /* bytes from one sample to the next in the file */
    int packed;                 /* 0: read from the file as above; else which array of a packed
                                   sequence a read builds (train/dataset_pack.c) */
} pp_dataset_array;

typedef struct pp_dataset_pack pp_dataset_pack;

typedef struct pp_dataset {
    char *dir;                  /* the path it was opened from */
    int64_t samples;
    pp_dataset_array *arrays;
    int narrays;
    struct pp_dataset_files *files;   /* its open files and maps, the labels' check (train/dataset_internal.h) */
    const char *format;         /* "onnxpipe", "npy", "tokens", "llm.c", "megatron" */
    pp_docs docs;               /* how documents became samples */
    pp_dataset_pack *pack;      /* --pack, --pad: the documents and the samples they were placed in */
    int64_t documents;          /* packed or padded: documents and their tokens (the rest of samples x seq */
    int64_t real_tokens;        /* is padding) */
    int nbuckets;               /* --seq-buckets: 0, or the samples in order of their bucket: bucket b */
    int64_t *bucket_len;        /* holds bucket_len[b] tokens (padding included) in samples */
    int64_t *bucket_first;      /* bucket_first[b] .. bucket_first[b + 1] - 1 */
} pp_dataset;

/* How a token stream becomes samples. */
typedef struct pp_dataset_options {
    int64_t seq;                /* tokens per sample of a token stream or indexed dataset (--seq) */
    const char *labels;         /* the labels array's name (default "labels") */
    pp_dtype token_dtype;       /* a raw .bin stream's tokens: U16 (default) or U32 */
    pp_docs docs;               /* windows (default), --pack or --pad */
    int64_t eos;                /* a token stream's end-of-document token (--eos; -1: none) */
    int64_t ignore_index;       /* the labels of padding and document ends (packed or padded) */
    const int64_t *buckets;     /* --seq-buckets (packed or padded): ascending lengths, the last seq; */
    int nbuckets;               /* a sample's bucket is the shortest that holds its tokens */
    const char *cache_dir;      /* --data-cache: where --pack/--pad's index files go (NULL: beside
                                   the data, or HOME/.cache/onnxpipe/data where that is read-only) */
} pp_dataset_options;

/* Local. The caller frees it with pp_dataset_close; the arrays belong to d. find is Thread-safe. */
PP_API pp_status pp_dataset_open(const char *dir, pp_dataset **out, pp_error *err);
/* Any of the forms above (o may be NULL: no token streams). With --pack or --pad, a missing or
 * stale index (the data's size or mtime changed) is built first, to a temporary file renamed
 * into place, so processes that open the same data at once all get a whole one. Local. */
PP_API pp_status pp_dataset_open_with(const char *path, const pp_dataset_options *o, pp_dataset **out, pp_error *err);
PP_API void pp_dataset_close(pp_dataset *d);
PP_API const pp_dataset_array *pp_dataset_find(const pp_dataset *d, const char *name);
/* A packed or padded dataset's line "packed D documents (N tokens) into S samples of T tokens:
 * P% padding" into buf; "" for others. Local. Thread-safe. */
PP_API const char *pp_dataset_pack_summary(const pp_dataset *d, char *buf, size_t len);
/* Copies samples first .. first+count-1 (wrapping around the end) of array a into dst. Fails
 * naming the file and byte offset on a read error, or on a label the job's check refuses
 * (train/check.c). Local. Thread-safe. */
PP_API pp_status pp_dataset_read(const pp_dataset *d, const pp_dataset_array *a, int64_t first, int64_t count,
                                 void *dst, pp_error *err);
/* The same at sequence length len (packed or padded samples of a bucket no longer than len:
 * token arrays [len], masks [.., len, len]); len 0: the full length. sample_bytes: one
 * sample's bytes at len. Local. Thread-safe. */
PP_API pp_status pp_dataset_read_len(const pp_dataset *d, const pp_dataset_array *a, int64_t first, int64_t count,
                                     int64_t len, void *dst, pp_error *err);
PP_API size_t pp_dataset_sample_bytes(const pp_dataset_array *a, int64_t len);
/* Byte-level language-model data from any file: vocab 256, samples of seq tokens
 * (input_ids) with the next tokens as labels, non-overlapping windows. Local. */
PP_API pp_status pp_dataset_write_text(const char *text_path, const char *dir, int64_t seq, pp_error *err);
/* The same with split < 1: DIR/train from the first `split` of the bytes and DIR/valid
 * from the rest (split 1: DIR itself holds all). Local. */
PP_API pp_status pp_dataset_write_text_split(const char *text_path, const char *dir, int64_t seq, double split,
                                             pp_error *err);

/* ---- the order of samples ---------------------------------------------------
 * Epochs are whole global batches: steps_per_epoch = samples / batch, and the samples
 * past the last whole batch wait for the next epoch. Step s reads places start + (s - 1)
 * x batch ... of the stream of samples (start: what a resumed run's checkpoint had read
 * before its first step). With shuffle, epoch e reads its samples in the permutation
 * pp_shuffle_index(seed, e, ., samples): a pure function, so every layout, and a job
 * resumed at any step, reads the same global order.
 * With sequence buckets (a dataset's samples in order of their bucket), a global batch
 * comes from one bucket: an epoch is each bucket's whole batches, in a seeded order that
 * mixes the buckets (pp_shuffle_index over the epoch's batches, shuffle or not), each
 * bucket's samples in order or, with shuffle, permuted within the bucket. */
typedef struct pp_sampler {
    int64_t samples, batch, steps_per_epoch;
    int shuffle;
    uint64_t seed;
    int64_t start;              /* 0 at init */
    int nbuckets;               /* 0, or the buckets of pp_sampler_set_buckets */
    const int64_t *bucket_first;
} pp_sampler;
/* Local; epoch and sample are Thread-safe (pure). */
PP_API void pp_sampler_init(pp_sampler *s, int64_t samples, int64_t batch, int shuffle, uint64_t seed);
PP_API int64_t pp_sampler_epoch(const pp_sampler *s, int64_t step);                 /* 0-based, step from 1 */
/* Batches from buckets: bucket b holds samples bucket_first[b] .. bucket_first[b + 1] - 1
 * (borrowed; a dataset's). Sets steps_per_epoch; 0 when no bucket holds a whole batch. Local. */
PP_API void pp_sampler_set_buckets(pp_sampler *s, int nbuckets, const int64_t *bucket_first);
/* The bucket of step's global batch (0 without buckets). Local. Thread-safe (pure). */
PP_API int pp_sampler_bucket(const pp_sampler *s, int64_t step);
/* The dataset sample at place `offset` (0 .. batch-1) of step's global batch. Local. Thread-safe. */
PP_API int64_t pp_sampler_sample(const pp_sampler *s, int64_t step, int64_t offset);
/* The sequence length of step's global batch: its bucket's (d's buckets, set on s), or 0
 * without buckets (the dataset's own). Local. Thread-safe (pure). */
PP_API int64_t pp_sampler_len(const pp_sampler *s, const pp_dataset *d, int64_t step);
/* Copies the samples at places offset .. offset+count-1 of step's global batch into dst, at
 * the step's length (pp_sampler_len); pp_dataset_read's errors. Local. Thread-safe. */
PP_API pp_status pp_sampler_read(const pp_sampler *s, const pp_dataset *d, const pp_dataset_array *a, int64_t step,
                                 int64_t offset, int64_t count, void *dst, pp_error *err);
/* A permutation of [0, n) drawn from (seed, epoch): where index i goes (Feistel network
 * with cycle walking; O(1) time and no memory). Local. Thread-safe. */
PP_API uint64_t pp_shuffle_index(uint64_t seed, uint64_t epoch, uint64_t i, uint64_t n);

/* ---- TensorBoard event files ---------------------------------------------------
 * DIR/events.out.tfevents.<time>.<host>.<pid>: TFRecord-framed Event protobufs with
 * TensorBoard's field numbers, readable by TensorBoard and its EventAccumulator. */
typedef struct pp_tb_writer pp_tb_writer;
/* Creates DIR when missing, the file, and its file_version event. Local. The caller frees it
 * with pp_tb_close; the path belongs to w. */
PP_API pp_status pp_tb_open(const char *dir, pp_tb_writer **out, pp_error *err);
PP_API const char *pp_tb_path(const pp_tb_writer *w);
/* One event at step with n scalar values (simple_value, stored as float32). Local. */
PP_API pp_status pp_tb_scalars(pp_tb_writer *w, int64_t step, int n, const char *const *tags, const double *values,
                               pp_error *err);
/* A text summary (the text plugin's string tensor). Local. */
PP_API pp_status pp_tb_text(pp_tb_writer *w, const char *tag, int64_t step, const char *text, pp_error *err);
/* A histogram: counts[i] values in (limits[i-1], limits[i]] (the first from -inf). */
typedef struct pp_tb_histogram {
    double min, max, num, sum, sum_squares;
    int nbuckets;
    const double *limits, *counts;
} pp_tb_histogram;
/* Writing a histogram, flushing and closing (close frees w, accepts NULL): Local. */
PP_API pp_status pp_tb_write_histogram(pp_tb_writer *w, const char *tag, int64_t step, const pp_tb_histogram *h,
                                       pp_error *err);
PP_API pp_status pp_tb_flush(pp_tb_writer *w, pp_error *err);
PP_API pp_status pp_tb_close(pp_tb_writer *w, pp_error *err);   /* accepts NULL */
/* TFRecord's checksum: CRC32C rotated right by 15 plus 0xa282ead8. Local. Thread-safe. */
PP_API uint32_t pp_tb_masked_crc(const void *data, size_t n);

/* ---- the training run ------------------------------------------------------- */
typedef struct pp_train_config {
    pp_trainer_config trainer;      /* the trainer's options (trainer.h): model, layout, optimizer,
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

/* `onnxpipe train`'s defaults: pp_trainer_config_default's, eos -1, the rest zero. Local.
 * Thread-safe. */
PP_API pp_train_config pp_train_config_default(void);

/* The options every stage of a job from c is built with (the microbatch is c->batch /
 * (dp x microbatches); the driver sets slots and first_sample). `onnxpipe partition` and
 * `onnxpipe schedule --model` estimate memory from the same, so an option that shapes a
 * stage reaches the previews too. Local; thread-safe. */
PP_API pp_stage_options pp_train_stage_options(const pp_trainer_config *c);
/* How the job reads its datasets: c's seq and token dtype, the labels named as the loss's.
 * Local; thread-safe. */
PP_API pp_dataset_options pp_train_dataset_options(const pp_train_config *c);

/* The partition the job of c makes of g into nstages stages with stages planned for a
 * device of this kind: c->partition with the job's microbatches and recompute, and as its
 * memory model (the memory balance's) the stage planner's profile of g with the job's stage
 * options (pp_stage_memory_profile); where those stages cannot be planned (a preview of a
 * model without a loss named, unbound dims) the partitioner's own estimate, and *why (may be
 * NULL) says why. `onnxpipe train`, `partition` and `schedule --model` all split this way.
 * Local; the caller frees *out with pp_partition_destroy. */
PP_API pp_status pp_train_partition(const pp_trainer_config *c, const pp_graph *g, int nstages, pp_device_kind kind,
                                    pp_partition **out, pp_error *why, pp_error *err);

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
PP_API pp_status pp_train_run(const pp_train_config *cfg, pp_train_result *res, pp_error *err);

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
PP_API pp_status pp_eval_run(const pp_eval_config *cfg, int64_t *samples_done, pp_error *err);   /* Local */

/* Predicted per-stage costs for the simulator from a partition: F from the stage's
 * FLOPs at `gflops` GFLOP/s, backward = 2F (input and weight halves of F each),
 * stashed activations and bytes sent per microbatch (pp_plan_stage_costs with flat rates,
 * fp32, no recompute; all zero when a shape is unknown). costs[part->nstages]. Local. Thread-safe. */
PP_API void pp_train_stage_costs(const pp_partition *part, double gflops, pp_stage_cost *costs);

#ifdef __cplusplus
}
#endif
#endif
