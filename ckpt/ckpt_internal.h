/* Private to ckpt/: a shard as staged in host memory, the safetensors framing, the
 * manifest's parts, and the file-system steps that make a save atomic. */
#ifndef PP_CKPT_INTERNAL_H
#define PP_CKPT_INTERNAL_H

#include <onnxpipe/ckpt_lib.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/core_util.h>

/* One tensor of a shard. */
typedef struct ck_item {
    char *name;             /* NAME or NAME.<state> */
    char *param;            /* NAME */
    const char *state;      /* static string or NULL */
    pp_dtype dtype;
    pp_shape shape;
    int64_t nbytes;
    int64_t offset;         /* from the start of the shard's data area (safetensors data_offsets) */
    uint32_t crc;
    const char *data;       /* the bytes the shard writer reads: staged host memory, or (a
                            synchronous save on the cpu) the stage's own buffer */
    const void *src;        /* still to copy from here into data (the writer thread does), or NULL */
    pp_device *dev;
} ck_item;

/* What one (stage, replica) writes: its items staged back to back in host memory. */
typedef struct ck_shard {
    int stage, replica;
    ck_item *items;
    int nitems;
    char *host;             /* staged bytes, data area order (NULL: written in place) */
    int64_t bytes;
    /* filled when written */
    char file[64];          /* "" when the shard holds nothing */
    int64_t header_bytes;   /* 8 + the JSON header (padded): where the data area starts */
    int64_t file_size;
    uint32_t file_crc;
} ck_shard;

/* safetensors.c */
/* Writes the shard as a safetensors file at path (fsynced), checksumming as it goes. */
pp_status ck_shard_write(ck_shard *sh, const char *path, int64_t step, pp_error *err);

/* manifest.c: the JSON forms (marker: one shard's index; manifest: the whole) */
pp_status ck_marker_write(const ck_shard *sh, const char *path, pp_error *err);
pp_status ck_manifest_write(const char *path, const pp_ckpt_meta *meta, uint64_t model_hash,
                            const pp_jvalue *const *markers, int nmarkers, pp_error *err);
pp_status ck_crc_parse(const pp_jvalue *v, uint32_t *out);
/* The manifest's own checksum (format version 2): its last member, "manifest_crc32c", is
 * the CRC32C of every byte of the file before that key's opening quote; the file ends
 * right after it, with "\n}\n". */
#define CK_MANIFEST_CRC_KEY "manifest_crc32c"
/* text (n bytes, path for messages) ends with its checksum, and the checksum matches. */
pp_status ck_manifest_check(const char *path, const char *text, size_t n, pp_error *err);

/* fs.c */
char *ck_path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));   /* malloc'ed; NULL: no memory */
pp_status ck_mkdir(const char *path, pp_error *err);            /* one level; EEXIST is fine */
pp_status ck_fsync_path(const char *path, pp_error *err);       /* a file or a directory */
pp_status ck_write_file(const char *path, const void *data, size_t n, pp_error *err);  /* fsynced */
/* Writes n bytes to fd; a full disk (ENOSPC, EDQUOT) names path, the need bytes the whole
 * file needs and what is free there. */
pp_status ck_write_all(int fd, const char *path, const void *data, size_t n, int64_t need, pp_error *err);
/* Reserves the file's n bytes (fallocate; filesystems without it are written as they are). */
pp_status ck_reserve(int fd, const char *path, int64_t n, pp_error *err);
/* The error of a failed write or fsync of path (errno), with the space it needed when the
 * disk is full. */
pp_status ck_write_error(pp_error *err, int fd, const char *path, int64_t need);
pp_status ck_read_file(const char *path, char **out, size_t *n, pp_error *err);        /* NUL-terminated */
pp_status ck_rename(const char *from, const char *to, pp_error *err);
pp_status ck_remove_tree(const char *path, pp_error *err);
/* Maps a whole file read-only; *n its size (0: *out NULL). ck_unmap frees. */
pp_status ck_map(const char *path, const void **out, size_t *n, pp_error *err);
void ck_unmap(const void *p, size_t n);
/* "step-<N>" -> N, or -1 when name is not exactly that. */
int64_t ck_step_of(const char *name);

/* open.c: a checkpoint as read from its manifest */
struct pp_ckpt {
    pp_ckpt_info info;
    char *dir;
    pp_jvalue *root;            /* the manifest; tensor and file names point into it */
    pp_ckpt_tensor *tensors;
    int *by_name;               /* tensor indices sorted by name */
    pp_ckpt_file *files;
    const void **maps;          /* [nfiles] mapped on first use (load) */
    size_t *map_lens;
    unsigned char *checked;     /* [nfiles] ck_check_file passed */
};
/* files[f] mapped, with its size checked against the manifest */
pp_status ck_map_file(pp_ckpt *c, int f, pp_error *err);
/* Checks tensor t's bytes in its mapped file against its checksum. */
pp_status ck_check_tensor(const pp_ckpt *c, const pp_ckpt_tensor *t, pp_error *err);

/* verify.c: files[f] mapped, and its size and checksum those of the manifest (a mismatch
 * names the tensor whose bytes changed); the directory holds nothing the manifest does
 * not list. Loading and export check these before a single tensor is used. */
pp_status ck_check_file(pp_ckpt *c, int f, pp_error *err);
pp_status ck_check_listing(const pp_ckpt *c, pp_error *err);

/* commit.c: rank 0, after its own shards: waits for every (stage, replica) marker in tmp,
 * writes the manifest and moves the checkpoint into place, then `latest`, then prunes. */
typedef struct ck_commit {
    const char *root, *tmp, *final_dir;
    const char *run_id;
    int expected;           /* markers: stages x replicas */
    int replicas;
    double timeout_s;
    int keep;
    uint64_t model_hash;
    const pp_ckpt_meta *meta;
} ck_commit;
pp_status ck_commit_run(const ck_commit *c, pp_error *err);

#endif
