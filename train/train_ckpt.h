/* Private to train/: the job's checkpoints. Resuming (rank 0 picks the checkpoint, every
 * rank loads its own stages from it), saving every --save-every steps and at the end, and
 * the data position a resumed run continues from. */
#ifndef PP_TRAIN_CKPT_H
#define PP_TRAIN_CKPT_H

#include <onnxpipe/ckpt_lib.h>
#include <onnxpipe/comm.h>
#include <onnxpipe/driver_lib.h>
#include <onnxpipe/trainer_lib.h>

typedef struct train_ckpt {
    const pp_trainer_config *cfg;
    pp_comm *world;
    pp_driver *drv;             /* its loss scaler's state goes into the manifest */
    const pp_schedule *sched;
    pp_ckpt_part part;
    pp_stage **stages;
    int *index;
    pp_ckpt_writer *writer;
    pp_ckpt_lock *lock;         /* rank 0: the save directory's (ckpt/lock.c) */
    char run_id[32];            /* the job's: names its temporaries, and its lock */
    int64_t resumed_step;       /* the checkpoint's step (0: fresh start) */
    int64_t sample0;            /* global batch of step s starts at sample0 + (s - 1) x batch */
    int64_t last_saved;
    int saves;
    int failed_saves;           /* saves that did not commit (a full disk): training went on */
    double stall_s;
} train_ckpt;

/* Resumes when cfg->resume asks (collective over world) and opens the writer when
 * cfg->save_dir is set. cfg is borrowed until train_ckpt_free. */
pp_status train_ckpt_init(train_ckpt *k, const pp_trainer_config *cfg, pp_comm *world, pp_driver *drv,
                          const pp_partition *part, const pp_grid *grid, const pp_schedule *sched, pp_error *err);
/* Loads checkpoint dir into this rank's stages and goes on from its step (collective). */
pp_status train_ckpt_load(train_ckpt *k, const char *dir, pp_error *err);
/* Step's checkpoint to root/step-<step>, written before returning (collective). */
pp_status train_ckpt_save_to(train_ckpt *k, const char *root, int64_t step, pp_error *err);
/* After step `step`: saves when it is due (every save_every, and the last step). A save
 * before the last that fails on a full disk (or any other write error) is a warning and
 * training goes on; the next save tries again. The last one's failure is an error. */
pp_status train_ckpt_after_step(train_ckpt *k, int64_t step, pp_error *err);
/* Saves step `step` to save_dir before returning unless it is saved already (preemption),
 * after the save in flight; every rank returns once it is committed (collective). */
pp_status train_ckpt_save_now(train_ckpt *k, int64_t step, pp_error *err);
/* The driver's before_update: an async save still copying parameters finishes first. */
pp_status train_ckpt_before_update(void *k, pp_error *err);
/* Waits for the save in flight (rank 0: until committed). */
pp_status train_ckpt_finish(train_ckpt *k, pp_error *err);
void train_ckpt_free(train_ckpt *k);

#endif
