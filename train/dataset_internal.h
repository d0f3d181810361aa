/* Private to train/dataset*.c: how a dataset reads its files (pread through a table of open
 * files: nothing the size of the corpus is mapped or scanned at open), the documents of a
 * token stream or of a Megatron index, the cache files of --pack/--pad, and the check of
 * the labels as they are read. The job sees datasets through <onnxpipe/dataset.h>. */
#ifndef PP_DATASET_INTERNAL_H
#define PP_DATASET_INTERNAL_H

#include <onnxpipe/dataset.h>

/* The layout behind <onnxpipe/dataset.h>'s opaque pp_dataset. */
typedef struct pp_dataset_pack pp_dataset_pack;

struct pp_dataset {
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
};

/* A dataset's files (pread), the small ones it maps whole (indexes, cache files), and the
 * array checked as read: its values must be in [0, classes) or ignore (ds_check_labels). */
struct pp_dataset_files {
    struct ds_file {
        int fd;
        char *path;
    } *file;                    /* [nfiles] */
    int nfiles;
    struct ds_map {
        void *p;
        size_t len;
    } *map;                     /* [nmaps] */
    int nmaps;
    int check;                  /* the checked array's index in d->arrays, or -1 */
    int64_t classes, ignore;
    char *who;                  /* "--data 'DIR'": how the job named the dataset */
    char *logits;               /* the logits the labels index */
};

/* dataset_files.c: file opens path (read-only, kept open until d closes); pread fills dst with n
 * bytes at offset of file or fails naming both (a short read: the file is truncated); tokens
 * reads n integers of type stored there as int64; map maps path whole (unmapped with d). */
pp_status ds_file_open(pp_dataset *d, const char *path, int *file, int64_t *size, pp_error *err);
pp_status ds_pread(const pp_dataset *d, int file, int64_t offset, size_t n, void *dst, pp_error *err);
pp_status ds_read_tokens(const pp_dataset *d, int file, int64_t offset, pp_dtype stored, int64_t n, int64_t *dst,
                         pp_error *err);
pp_status ds_map_file(pp_dataset *d, const char *path, const void **out, size_t *len, pp_error *err);
const char *ds_file_path(const pp_dataset *d, int file);
int ds_file_fd(const pp_dataset *d, int file);
/* A new array named name (zeroed, file -1); the forms other than onnxpipe's own directory
 * (dataset_formats.c: npy, token streams, Megatron's indexed datasets). */
pp_dataset_array *ds_add_array(pp_dataset *d, const char *name, pp_error *err);
pp_status ds_open_format(pp_dataset *d, const char *path, const pp_dataset_options *o, pp_error *err);
/* n integers of type stored at src as int64. */
void ds_widen(pp_dtype stored, const void *src, int64_t n, int64_t *dst);

/* ---- documents (dataset_docs.c) -------------------------------------------------
 * Document k of a token stream is its tokens [ds_docs_first(k), ds_docs_first(k + 1)), k < n:
 * from a stream's cached index (split after each --eos token) or from a Megatron .idx
 * (document k: sequences doc_idx[k] .. doc_idx[k + 1]; Megatron's may be empty). */
typedef struct ds_docs {
    int64_t n;
    const int64_t *first;       /* a stream's index: [n + 1] token offsets; or NULL, and: */
    const unsigned char *idx;   /* the mapped .idx */
    uint64_t nseq;
    int64_t ntok;
    size_t es;                  /* bytes per token (the .idx's pointers are bytes) */
    const char *path;           /* the index, for errors */
} ds_docs;
int64_t ds_docs_first(const ds_docs *x, int64_t k);   /* 0 <= k <= n */
/* The documents of the stream of ntok tokens of type t at byte base of file (named path),
 * split after each eos: its cached index (built by one pass of bounded memory when missing
 * or stale). */
pp_status ds_docs_of_stream(pp_dataset *d, const char *path, int file, int64_t base, int64_t ntok, pp_dtype t,
                            const pp_dataset_options *o, ds_docs *out, pp_error *err);
/* Fails naming x's index unless document k's bounds are in order (a Megatron .idx the pack
 * plan's build walks: k from 0 up). */
pp_status ds_docs_check(const ds_docs *x, int64_t k, pp_error *err);

/* ---- cache files (dataset_cache.c) -----------------------------------------------
 * A file of a header (DS_HDR int64 fields: magic, format version, body bytes, the key, the
 * counts, a CRC32C of the rest) and a body of int64 arrays, next to the data (DATA + suffix)
 * or, where the data's folder is read-only, in HOME/.cache/onnxpipe/data (or --data-cache).
 * It is valid while its key (the sources' sizes and mtimes, the options) is the caller's. */
enum { DS_NKEY = 12, DS_NCOUNT = 16, DS_HDR = 32 };
typedef struct ds_writer ds_writer;
typedef struct ds_cache {
    const char *data;           /* the data file it belongs to */
    const char *suffix;         /* the file's name after the data's, e.g. ".eos2.docs" */
    const char *what;           /* for messages: "document index", "sample plan" */
    int64_t key[DS_NKEY];
    const char *dir;            /* --data-cache or NULL */
    /* writes the body through w and sets counts (DS_NCOUNT of them) */
    pp_status (*build)(void *user, ds_writer *w, int64_t *counts, pp_error *err);
    void *user;
} ds_cache;
/* c's valid file, mapped in d (built first when there is none): its counts and body. */
pp_status ds_cache_get(pp_dataset *d, const ds_cache *c, const int64_t **counts, const char **body, size_t *body_len,
                       pp_error *err);
/* The key's first fields for data of size bytes and mtime (ns) of file. */
pp_status ds_cache_source(const pp_dataset *d, int file, int64_t *size, int64_t *mtime_ns, pp_error *err);
/* Appends n bytes to the body; writes n bytes at body offset off (over what was appended there). */
pp_status ds_write(ds_writer *w, const void *p, size_t n, pp_error *err);
pp_status ds_write_at(ds_writer *w, int64_t off, const void *p, size_t n, pp_error *err);

/* ---- the sample plan of --pack and --pad (dataset_plan.c) ---------------------------
 * Its body: bucket_first [nb + 1] (bucket b: samples bucket_first[b] ..; no buckets: nb 1),
 * region_before [docs + 1], efirst [explicit + 1], epieces [pieces]. The region, samples
 * bucket_first[nb - 1] .. + region - 1, holds a piece each, in document order: document k's
 * pieces j = 0 .. (region_before[k + 1] - region_before[k] - 1), tokens j x seq on. The other
 * samples, in order, are explicit: sample e holds the last (shorter than seq) pieces of the
 * documents epieces[efirst[e] .. efirst[e + 1]). */
enum { DS_PLAN_DOCS, DS_PLAN_DOCUMENTS, DS_PLAN_TOKENS, DS_PLAN_SAMPLES, DS_PLAN_REGION, DS_PLAN_EXPLICIT,
       DS_PLAN_PIECES, DS_PLAN_BUCKETS, DS_PLAN_NCOUNTS };
typedef struct ds_plan_args {
    const ds_docs *x;
    const pp_dataset_options *o;
} ds_plan_args;
pp_status ds_plan_build(void *user, ds_writer *w, int64_t *counts, pp_error *err);   /* a ds_cache's build */

/* ---- --pack and --pad (dataset_pack.c) ---------------------------------------------
 * The documents x (NULL: the stream's, split after each o->eos) of the ntok tokens of type t
 * at byte base of file (named path), in samples of o->seq: d's samples, buckets and its
 * input_ids, labels and position_ids, from the cached plan (built when missing or stale).
 * read builds sample s of a packed array at len tokens; locate: where the token that
 * element j of sample s's labels holds lies in the stream's file (0: padding, none). */
pp_status ds_pack_open(pp_dataset *d, const char *path, int file, int64_t base, int64_t ntok, pp_dtype t,
                       const ds_docs *x, const pp_dataset_options *o, pp_error *err);
pp_status ds_pack_read(const pp_dataset *d, const pp_dataset_array *a, int64_t s, int64_t len, void *dst,
                       pp_error *err);
int ds_pack_locate(const pp_dataset *d, int64_t s, int64_t j, int *file, int64_t *byte);
void ds_pack_free(pp_dataset_pack *p);

#endif
