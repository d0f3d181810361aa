/* Sharded, layout-free checkpoints. A checkpoint is a directory step-<N>/ of safetensors
 * shards and a manifest.json; tensors are stored by ONNX initializer name (parameters as
 * NAME, optimizer state as NAME.exp_avg, NAME.exp_avg_sq or NAME.momentum, BatchNorm
 * running statistics as NAME), so any layout reads back what any layout wrote. Every
 * rank writes its part in parallel; rank 0 commits: manifest, rename, `latest`. Public:
 * save, open / inspect / load, resume and export; the asynchronous writer, the directory
 * lock, verify, list and the per-tensor and partial reads are internal/onnxpipe/ckpt_lib.h. */
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

/* Writes this rank's part of the checkpoint root/step-<meta->step>/ (each replica of a
 * stage a disjoint part of its tensors) and waits until rank 0 has committed it (manifest,
 * rename, `latest`). Called by every rank of the job with the same meta->step: Collective
 * over the job's ranks, though through the filesystem. (The trainer's asynchronous writer
 * and the save directory's lock are internal: internal/onnxpipe/ckpt_lib.h.) */
PP_API pp_status pp_ckpt_save(const char *root, const char *run_id, const pp_ckpt_part *part, const pp_ckpt_meta *meta,
                              pp_error *err);

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
PP_API void pp_ckpt_close(pp_ckpt *c);   /* Local; accepts NULL */

/* Loads this rank's stages: every parameter, its optimizer state and buffers, read by name
 * from the shards that hold them (mmapped; each tensor's checksum checked on the bytes
 * read). Refuses, naming both sides: another model (hashes), another optimizer, a missing
 * tensor, a shape or dtype that differs, a checksum that fails (file and tensor). Local. */
PP_API pp_status pp_ckpt_load(pp_ckpt *c, const pp_ckpt_part *part, pp_error *err);

/* The first of the resume candidates that verifies, into dir (len bytes), or "" when root
 * holds none (or does not exist). One that fails is skipped with a warning naming why. Local. */
PP_API pp_status pp_ckpt_find_resume(const char *root, char *dir, size_t len, pp_error *err);

/* ---- export ------------------------------------------------------------------ */

/* The inference model from a checkpoint: the ONNX file at model_path with the checkpoint's
 * parameters and buffers (no MPI, no device). Refuses a checkpoint of another model. Local. */
PP_API pp_status pp_ckpt_export(const pp_ckpt *c, const char *model_path, const char *path, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
