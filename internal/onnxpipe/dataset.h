/* Datasets and the order of samples: the training job's (`onnxpipe train`, `onnxpipe data`,
 * `onnxpipe eval`; internal tier: train/, the CLI, tests and bench). A custom trainer feeds
 * its own data through trainer.h's feed callback and needs none of this. */
#ifndef ONNXPIPE_DATASET_H
#define ONNXPIPE_DATASET_H

#include <onnxpipe/core.h>
#include <onnxpipe/tensor.h>

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

/* An open dataset: opaque (its layout is train/dataset_internal.h's), read through the
 * calls below. */
typedef struct pp_dataset pp_dataset;

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
pp_status pp_dataset_open(const char *dir, pp_dataset **out, pp_error *err);
/* Any of the forms above (o may be NULL: no token streams). With --pack or --pad, a missing or
 * stale index (the data's size or mtime changed) is built first, to a temporary file renamed
 * into place, so processes that open the same data at once all get a whole one. Local. */
pp_status pp_dataset_open_with(const char *path, const pp_dataset_options *o, pp_dataset **out, pp_error *err);
void pp_dataset_close(pp_dataset *d);
/* What d is: the path it was opened from, its form ("onnxpipe", "npy", "tokens", "llm.c",
 * "megatron"), its samples, how documents became samples, and its arrays (array i, 0 ..
 * narrays-1; they belong to d). With sequence buckets (--seq-buckets over --pack/--pad) the
 * samples lie in order of their bucket: bucket b holds first[b] .. first[b + 1] - 1 (*first
 * borrowed from d), and buckets returns their count (0: none). Local. Thread-safe. */
const char *pp_dataset_path(const pp_dataset *d);
const char *pp_dataset_format(const pp_dataset *d);
int64_t pp_dataset_samples(const pp_dataset *d);
pp_docs pp_dataset_docs(const pp_dataset *d);
int pp_dataset_num_arrays(const pp_dataset *d);
const pp_dataset_array *pp_dataset_array_at(const pp_dataset *d, int i);
int pp_dataset_buckets(const pp_dataset *d, const int64_t **first);
const pp_dataset_array *pp_dataset_find(const pp_dataset *d, const char *name);
/* A packed or padded dataset's line "packed D documents (N tokens) into S samples of T tokens:
 * P% padding" into buf; "" for others. Local. Thread-safe. */
const char *pp_dataset_pack_summary(const pp_dataset *d, char *buf, size_t len);
/* Copies samples first .. first+count-1 (wrapping around the end) of array a into dst. Fails
 * naming the file and byte offset on a read error, or on a label the job's check refuses
 * (train/check.c). Local. Thread-safe. */
pp_status pp_dataset_read(const pp_dataset *d, const pp_dataset_array *a, int64_t first, int64_t count,
                                 void *dst, pp_error *err);
/* The same at sequence length len (packed or padded samples of a bucket no longer than len:
 * token arrays [len], masks [.., len, len]); len 0: the full length. sample_bytes: one
 * sample's bytes at len. Local. Thread-safe. */
pp_status pp_dataset_read_len(const pp_dataset *d, const pp_dataset_array *a, int64_t first, int64_t count,
                                     int64_t len, void *dst, pp_error *err);
size_t pp_dataset_sample_bytes(const pp_dataset_array *a, int64_t len);
/* Byte-level language-model data from any file: vocab 256, samples of seq tokens
 * (input_ids) with the next tokens as labels, non-overlapping windows. Local. */
pp_status pp_dataset_write_text(const char *text_path, const char *dir, int64_t seq, pp_error *err);
/* The same with split < 1: DIR/train from the first `split` of the bytes and DIR/valid
 * from the rest (split 1: DIR itself holds all). Local. */
pp_status pp_dataset_write_text_split(const char *text_path, const char *dir, int64_t seq, double split,
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
void pp_sampler_init(pp_sampler *s, int64_t samples, int64_t batch, int shuffle, uint64_t seed);
int64_t pp_sampler_epoch(const pp_sampler *s, int64_t step);                 /* 0-based, step from 1 */
/* Batches from buckets: bucket b holds samples bucket_first[b] .. bucket_first[b + 1] - 1
 * (borrowed; a dataset's). Sets steps_per_epoch; 0 when no bucket holds a whole batch. Local. */
void pp_sampler_set_buckets(pp_sampler *s, int nbuckets, const int64_t *bucket_first);
/* The bucket of step's global batch (0 without buckets). Local. Thread-safe (pure). */
int pp_sampler_bucket(const pp_sampler *s, int64_t step);
/* The dataset sample at place `offset` (0 .. batch-1) of step's global batch. Local. Thread-safe. */
int64_t pp_sampler_sample(const pp_sampler *s, int64_t step, int64_t offset);
/* The sequence length of step's global batch: its bucket's (d's buckets, set on s), or 0
 * without buckets (the dataset's own). Local. Thread-safe (pure). */
int64_t pp_sampler_len(const pp_sampler *s, const pp_dataset *d, int64_t step);
/* Copies the samples at places offset .. offset+count-1 of step's global batch into dst, at
 * the step's length (pp_sampler_len); pp_dataset_read's errors. Local. Thread-safe. */
pp_status pp_sampler_read(const pp_sampler *s, const pp_dataset *d, const pp_dataset_array *a, int64_t step,
                                 int64_t offset, int64_t count, void *dst, pp_error *err);
/* A permutation of [0, n) drawn from (seed, epoch): where index i goes (Feistel network
 * with cycle walking; O(1) time and no memory). Local. Thread-safe. */
uint64_t pp_shuffle_index(uint64_t seed, uint64_t epoch, uint64_t i, uint64_t n);

/* ---- what the job's checks (train/check.c) ask of a dataset ----------------------
 * --pack or --pad: add_mask adds the attention mask a model input of per-sample shape
 * [..., seq, seq] (or its [seq] padding mask) and dtype t takes; set_ignore sets the label of
 * padding and document ends (o->ignore_index at open); tokens: sample s's tokens that are not
 * padding. check_labels: every later read of array a fails unless its values are in
 * [0, classes) or ignore, naming the file and byte offset of the first that is not (the
 * labels are checked as they are read, so no rank reads the corpus whole; who: "--data
 * 'DIR'"). */
pp_status ds_pack_add_mask(pp_dataset *d, const char *name, const pp_shape *per_sample, pp_dtype t, pp_error *err);
void ds_pack_set_ignore(pp_dataset *d, int64_t ignore_index);
int64_t ds_pack_tokens(const pp_dataset *d, int64_t s);
const char *ds_docs_flag(pp_docs docs);   /* "--pack", "--pad" */
pp_status ds_check_labels(pp_dataset *d, const pp_dataset_array *a, int64_t classes, int64_t ignore, const char *who,
                          const char *logits, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
