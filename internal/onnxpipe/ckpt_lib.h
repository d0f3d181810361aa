/* Checkpoints beyond the public tier (internal tier: the library, the CLI, tests and
 * bench): the asynchronous writer the trainer saves with, the save directory's lock, a
 * tensor by name, verify (whole, or split across ranks), the list of a root's checkpoints
 * and the resume candidates, and the model writer export is built on. */
#ifndef ONNXPIPE_CKPT_LIB_H
#define ONNXPIPE_CKPT_LIB_H

#include <onnxpipe/ckpt.h>

#ifdef __cplusplus
extern "C" {
#endif

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
pp_status pp_ckpt_writer_create(const pp_ckpt_writer_options *opt, pp_ckpt_writer **out, pp_error *err);
/* Waits for the previous save, copies this rank's tensors (a disjoint part of each of its
 * stages) to host memory, and writes them: in a thread when async, else before returning
 * (rank 0 then also waits until the checkpoint is committed). With defer_copy, async on
 * the cpu, the thread makes the copy of parameters and optimizer state.
 * Every rank of the job calls it with the same meta->step (Collective over the job's ranks,
 * though through the filesystem: rank 0 waits for the other ranks' shards up to timeout_s).
 * *stall_s (may be NULL): the seconds this call took. */
pp_status pp_ckpt_writer_save(pp_ckpt_writer *w, const pp_ckpt_part *part, const pp_ckpt_meta *meta,
                              double *stall_s, pp_error *err);
/* With defer_copy, save leaves the copy of parameters and optimizer state to the writer
 * thread: call this before anything changes them (the next optimizer step). Returns the
 * seconds it waited. A no-op otherwise (NULL too). Local. */
double pp_ckpt_writer_wait_staged(pp_ckpt_writer *w);
/* Waits for the write in flight; on rank 0 until its checkpoint is committed. Returns the
 * write's error, if it had one. Local (rank 0 waits on the shards the others' saves write). */
pp_status pp_ckpt_writer_wait(pp_ckpt_writer *w, pp_error *err);
/* Waits (errors are dropped: call wait first to see them) and frees. NULL is fine. Local. */
void pp_ckpt_writer_destroy(pp_ckpt_writer *w);
/* ---- the save directory's owner ------------------------------------------------ */

/* One job owns a save directory: root/onnxpipe.lock, an fcntl lock (OFD: NFS honours it)
 * held from before the first write until pp_ckpt_lock_release, and a line naming the owner
 * (run id, host, pid, start time, the batch system's job id). */
typedef struct pp_ckpt_lock pp_ckpt_lock;
/* Takes root's lock for the job run_id (creating root). While another live process holds
 * it, waits up to wait_s seconds, then fails naming that owner; a dead owner's lock is taken
 * over with a warning. Call it on one rank of the job (rank 0). Local. */
pp_status pp_ckpt_lock_acquire(const char *root, const char *run_id, double wait_s, pp_ckpt_lock **out,
                               pp_error *err);
/* Marks the lock released and lets go of it. NULL is fine. Local. */
void pp_ckpt_lock_release(pp_ckpt_lock *l);
/* PP_OK when root has no lock file or its lock names run_id; else an error naming the
 * owner (the job lost the directory: it must stop writing there). Any rank. Local. */
pp_status pp_ckpt_lock_check(const char *root, const char *run_id, pp_error *err);

/* ---- reading ---------------------------------------------------------------- */

/* Reads every file of the checkpoint and checks its size and checksum and every tensor's;
 * fails naming the file and tensor. Local. */
pp_status pp_ckpt_verify(const char *dir, pp_error *err);
/* The same over files part, part + parts, ... (the ranks of a job verify in parallel). Local. */
pp_status pp_ckpt_verify_part(const char *dir, int part, int parts, pp_error *err);
/* The checkpoints in root, newest first. */
typedef struct pp_ckpt_entry {
    int64_t step;
    char *dir;                      /* root/step-<N> */
    int latest;                     /* `latest` names it */
} pp_ckpt_entry;
/* Local. The caller frees *out with pp_ckpt_list_free(*out, *n). */
pp_status pp_ckpt_list(const char *root, pp_ckpt_entry **out, int *n, pp_error *err);
void pp_ckpt_list_free(pp_ckpt_entry *e, int n);
/* The tensor of that name (owned by c), or NULL. Local. */
const pp_ckpt_tensor *pp_ckpt_find_tensor(const pp_ckpt *c, const char *name);

/* The checkpoints a resume may take, in the order to try them: the one `latest` names,
 * then older ones newest first (newer ones than `latest` belong to a run that was resumed
 * from an older checkpoint, and are left out); every one, newest first, when there is no
 * `latest`. Local. The caller frees *out with pp_ckpt_list_free(*out, *n). */
pp_status pp_ckpt_resume_candidates(const char *root, pp_ckpt_entry **out, int *n, pp_error *err);

/* ---- export ------------------------------------------------------------------ */

/* Where export finds a trained value: the data of initializer `name` (nbytes bytes), or
 * NULL to keep the model's own. */
typedef const void *(*pp_ckpt_value_fn)(void *user, const char *name, size_t nbytes);
/* Writes model (loaded without binding dims, so symbolic dims are kept) to path with the
 * values value_of gives. Local. */
pp_status pp_ckpt_write_model(const pp_graph *model, pp_ckpt_value_fn value_of, void *user, const char *path,
                              pp_error *err);
#ifdef __cplusplus
}
#endif
#endif
