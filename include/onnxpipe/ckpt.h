/* Sharded, layout-free checkpoints. A checkpoint is a directory step-<N>/ of safetensors
 * shards and a manifest.json; tensors are stored by ONNX initializer name (parameters as
 * NAME, optimizer state as NAME.exp_avg, NAME.exp_avg_sq or NAME.momentum, BatchNorm
 * running statistics as NAME), so any layout reads back what any layout wrote. Every
 * rank writes its part in parallel; rank 0 commits: manifest, rename, `latest`. */
#ifndef ONNXPIPE_CKPT_H
#define ONNXPIPE_CKPT_H

#include <onnxpipe/core.h>
#include <onnxpipe/graph.h>
#include <onnxpipe/optim.h>
#include <onnxpipe/partition.h>
#include <onnxpipe/stage.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PP_CKPT_FORMAT "onnxpipe-checkpoint"
#define PP_CKPT_VERSION 2       /* the newest manifest format this build reads and writes (2: the
                                   manifest carries its own checksum; 1, without it, is still read) */

/* This rank's part of a job: its stages and its place among the data-parallel replicas. */
typedef struct pp_ckpt_part {
    pp_stage *const *stages;        /* this rank's (virtual) stages */
    const int *stage_index;         /* [nstages] their index in the partition */
    int nstages;
    const pp_partition *partition;  /* a tied parameter is stored once, by the first stage holding it */
    int replica, replicas;          /* each replica of a stage writes a disjoint part of its tensors */
    int rank;                       /* rank 0 commits the checkpoint (it must call save too) */
} pp_ckpt_part;

/* What a checkpoint records besides its tensors. */
typedef struct pp_ckpt_meta {
    int64_t step;                   /* optimizer steps done */
    int64_t samples;                /* samples consumed */
    uint64_t seed;                  /* Dropout RNG seed */
    pp_optim_hparams optim;         /* kind and hyper-parameters (lr: the peak) */
    double loss_scale;              /* mixed precision's loss scale; 0: none */
    const char *model_path;         /* informational */
    /* the layout it was written with (informational: any layout resumes it) */
    int pp, dp, chunks;
    int64_t batch, microbatches;
    const char *schedule;
    const char *trainer_json;       /* a JSON object the trainer owns (LR schedule and its
                                       position, data order), stored as "trainer"; NULL: none */
} pp_ckpt_meta;

/* ---- writing ---------------------------------------------------------------- */

typedef struct pp_ckpt_writer pp_ckpt_writer;

typedef struct pp_ckpt_writer_options {
    const char *root;               /* checkpoints go to root/step-<N>/ (created if missing) */
    int keep;                       /* rank 0 keeps the newest K checkpoints, deleting older ones
                                       after `latest` has moved; 0: keep all */
    int async;                      /* 1: save returns once this rank's tensors are copied to host
                                       memory and a thread writes them while training goes on */
    const char *run_id;             /* the same on every rank of the job, unique per job (names the
                                       temporary directory, so a crashed job's leftovers never mix in) */
    int defer_copy;                 /* async on the cpu: the thread also makes the copy of parameters
                                       and optimizer state, and the caller calls
                                       pp_ckpt_writer_wait_staged before its next optimizer step */
    double timeout_s;               /* how long rank 0 waits for the other ranks' shards (0: 600) */
    /* Every save checks root's lock (pp_ckpt_lock_check) before it writes, and rank 0 again
     * before it commits: a root whose lock names another run is not written. */
} pp_ckpt_writer_options;

/* Local; opt's strings are copied. The caller frees it with pp_ckpt_writer_destroy. */
PP_API pp_status pp_ckpt_writer_create(const pp_ckpt_writer_options *opt, pp_ckpt_writer **out, pp_error *err);
/* Waits for the previous save, copies this rank's tensors (a disjoint part of each of its
 * stages) to host memory, and writes them: in a thread when async, else before returning
 * (rank 0 then also waits until the checkpoint is committed). With defer_copy, async on
 * the cpu, the thread makes the copy of parameters and optimizer state.
 * Every rank of the job calls it with the same meta->step (Collective over the job's ranks,
 * though through the filesystem: rank 0 waits for the other ranks' shards up to timeout_s).
 * *stall_s (may be NULL): the seconds this call took. */
PP_API pp_status pp_ckpt_writer_save(pp_ckpt_writer *w, const pp_ckpt_part *part, const pp_ckpt_meta *meta,
                                     double *stall_s, pp_error *err);
/* With defer_copy, save leaves the copy of parameters and optimizer state to the writer
 * thread: call this before anything changes them (the next optimizer step). Returns the
 * seconds it waited. A no-op otherwise (NULL too). Local. */
PP_API double pp_ckpt_writer_wait_staged(pp_ckpt_writer *w);
/* Waits for the write in flight; on rank 0 until its checkpoint is committed. Returns the
 * write's error, if it had one. Local (rank 0 waits on the shards the others' saves write). */
PP_API pp_status pp_ckpt_writer_wait(pp_ckpt_writer *w, pp_error *err);
/* Waits (errors are dropped: call wait first to see them) and frees. NULL is fine. Local. */
PP_API void pp_ckpt_writer_destroy(pp_ckpt_writer *w);
/* A synchronous save to root/step-<meta->step>/ (a writer of one save): called by every
 * rank of the job, as pp_ckpt_writer_save: Collective over the job's ranks. */
PP_API pp_status pp_ckpt_save(const char *root, const char *run_id, const pp_ckpt_part *part, const pp_ckpt_meta *meta,
                              pp_error *err);

/* ---- the save directory's owner ------------------------------------------------ */

/* One job owns a save directory: root/onnxpipe.lock, an fcntl lock (OFD: NFS honours it)
 * held from before the first write until pp_ckpt_lock_release, and a line naming the owner
 * (run id, host, pid, start time, the batch system's job id). */
typedef struct pp_ckpt_lock pp_ckpt_lock;
/* Takes root's lock for the job run_id (creating root). While another live process holds
 * it, waits up to wait_s seconds, then fails naming that owner; a dead owner's lock is taken
 * over with a warning. Call it on one rank of the job (rank 0). Local. */
PP_API pp_status pp_ckpt_lock_acquire(const char *root, const char *run_id, double wait_s, pp_ckpt_lock **out,
                                      pp_error *err);
/* Marks the lock released and lets go of it. NULL is fine. Local. */
PP_API void pp_ckpt_lock_release(pp_ckpt_lock *l);
/* PP_OK when root has no lock file or its lock names run_id; else an error naming the
 * owner (the job lost the directory: it must stop writing there). Any rank. Local. */
PP_API pp_status pp_ckpt_lock_check(const char *root, const char *run_id, pp_error *err);

/* ---- reading ---------------------------------------------------------------- */

typedef struct pp_ckpt_tensor {
    const char *name;               /* NAME or NAME.<state> */
    const char *param;              /* the initializer NAME */
    const char *state;              /* "exp_avg", "exp_avg_sq", "momentum"; NULL for the value itself */
    int file;                       /* index into files */
    int64_t offset, nbytes;         /* in the file, from its first byte */
    pp_dtype dtype;
    pp_shape shape;
    uint32_t crc32c;
} pp_ckpt_tensor;

typedef struct pp_ckpt_file {
    const char *name;               /* relative to the checkpoint directory */
    int64_t size;
    uint32_t crc32c;                /* of the whole file */
} pp_ckpt_file;

typedef struct pp_ckpt_info {
    const char *dir;
    int format_version;
    const char *onnxpipe_version;
    uint64_t model_hash;            /* pp_graph_model_hash of the model it was written from */
    pp_ckpt_meta meta;              /* strings owned by the checkpoint */
    const struct pp_jvalue *trainer; /* the trainer's object (JSON tree, core_util.h; internal), or NULL */
    const pp_ckpt_tensor *tensors;
    int ntensors;
    const pp_ckpt_file *files;
    int nfiles;
    int64_t bytes;                  /* sum of the file sizes */
} pp_ckpt_info;

typedef struct pp_ckpt pp_ckpt;

/* Reads dir/manifest.json (not the shards). Refuses a manifest of a newer format. Local.
 * The caller frees it with pp_ckpt_close; the info belongs to c. */
PP_API pp_status pp_ckpt_open(const char *dir, pp_ckpt **out, pp_error *err);
PP_API const pp_ckpt_info *pp_ckpt_inspect(const pp_ckpt *c);
/* The tensor of that name (owned by c), or NULL. Local. */
PP_API const pp_ckpt_tensor *pp_ckpt_find_tensor(const pp_ckpt *c, const char *name);
PP_API void pp_ckpt_close(pp_ckpt *c);   /* Local; accepts NULL */

/* Loads this rank's stages: every parameter, its optimizer state and buffers, read by name
 * from the shards that hold them (mmapped; each tensor's checksum checked on the bytes
 * read). Refuses, naming both sides: another model (hashes), another optimizer, a missing
 * tensor, a shape or dtype that differs, a checksum that fails (file and tensor). Local. */
PP_API pp_status pp_ckpt_load(pp_ckpt *c, const pp_ckpt_part *part, pp_error *err);

/* Reads every file of the checkpoint and checks its size and checksum and every tensor's;
 * fails naming the file and tensor. Local. */
PP_API pp_status pp_ckpt_verify(const char *dir, pp_error *err);
/* The same over files part, part + parts, ... (the ranks of a job verify in parallel). Local. */
PP_API pp_status pp_ckpt_verify_part(const char *dir, int part, int parts, pp_error *err);

/* The checkpoints in root, newest first. */
typedef struct pp_ckpt_entry {
    int64_t step;
    char *dir;                      /* root/step-<N> */
    int latest;                     /* `latest` names it */
} pp_ckpt_entry;
/* Local. The caller frees *out with pp_ckpt_list_free(*out, *n). */
PP_API pp_status pp_ckpt_list(const char *root, pp_ckpt_entry **out, int *n, pp_error *err);
PP_API void pp_ckpt_list_free(pp_ckpt_entry *e, int n);
/* The checkpoints a resume may take, in the order to try them: the one `latest` names,
 * then older ones newest first (newer ones than `latest` belong to a run that was resumed
 * from an older checkpoint, and are left out); every one, newest first, when there is no
 * `latest`. Local. The caller frees *out with pp_ckpt_list_free(*out, *n). */
PP_API pp_status pp_ckpt_resume_candidates(const char *root, pp_ckpt_entry **out, int *n, pp_error *err);
/* The first of the resume candidates that verifies, into dir (len bytes), or "" when root
 * holds none (or does not exist). One that fails is skipped with a warning naming why. Local. */
PP_API pp_status pp_ckpt_find_resume(const char *root, char *dir, size_t len, pp_error *err);

/* ---- export ------------------------------------------------------------------ */

/* Where export finds a trained value: the data of initializer `name` (nbytes bytes), or
 * NULL to keep the model's own. */
typedef const void *(*pp_ckpt_value_fn)(void *user, const char *name, size_t nbytes);
/* Writes model (loaded without binding dims, so symbolic dims are kept) to path with the
 * values value_of gives. Local. */
PP_API pp_status pp_ckpt_write_model(const pp_graph *model, pp_ckpt_value_fn value_of, void *user, const char *path,
                                     pp_error *err);
/* The inference model from a checkpoint: the ONNX file at model_path with the checkpoint's
 * parameters and buffers (no MPI, no device). Refuses a checkpoint of another model. Local. */
PP_API pp_status pp_ckpt_export(const pp_ckpt *c, const char *model_path, const char *path, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
