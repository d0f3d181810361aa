/* The job's checkpoints: --resume (rank 0 chooses, every rank loads its own stages by
 * name, so any layout resumes any checkpoint), --save-every and the final save through
 * the async writer, and the LR schedule and data position recorded for the trainer. */
#include "train_ckpt.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/graph_ir.h>

/* What was trained (graph/params.c): the rules beyond the defaults, the trained element
 * count, and the initializers the job froze or untied (the tensors list names the trained). */
static void params_json(pp_json *j, const pp_trainer_config *c, const pp_graph *g)
{
    pp_json_begin_object(j, "params");
    const char *keys[] = {"trainable", "frozen_globs", "untie", "tie"},
               *vals[] = {c->params.trainable, c->params.frozen, c->params.untie, c->params.tie};
    for (int k = 0; k < 4; k++)
        if (vals[k]) pp_json_string(j, keys[k], vals[k]);
        else pp_json_null(j, keys[k]);
    pp_json_int(j, "trained_elements", g->nparams);
    pp_json_begin_array(j, "frozen");
    for (int i = 0; i < g->ninits; i++)
        if (g->values[g->inits[i].value].frozen) pp_json_string(j, NULL, g->values[g->inits[i].value].name);
    pp_json_end_array(j);
    pp_json_begin_array(j, "untied");
    for (int i = 0; i < g->ninits; i++)
        if (g->values[g->inits[i].value].untied_from) pp_json_string(j, NULL, g->values[g->inits[i].value].name);
    pp_json_end_array(j);
    pp_json_end_object(j);
}

/* The trainer's part of the manifest: the LR schedule and its position, the batch, the
 * fp16 loss scaler's state, what was trained. */
static char *trainer_json(const pp_trainer_config *c, const pp_graph *g, pp_driver *drv, int64_t step)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return NULL;
    pp_json j;
    pp_json_init(&j, f, 0);
    pp_json_begin_object(&j, NULL);
    pp_json_begin_object(&j, "lr_schedule");
    pp_json_string(&j, "kind", pp_lr_kind_name(c->lr.kind));
    pp_json_double(&j, "lr", c->lr.lr);
    pp_json_double(&j, "min_lr", c->lr.min_lr);
    pp_json_int(&j, "warmup", c->lr.warmup);
    pp_json_int(&j, "steps", c->lr.steps);
    pp_json_double(&j, "power", c->lr.power);
    pp_json_int(&j, "position", step);
    pp_json_end_object(&j);
    pp_json_double(&j, "clip_norm", c->clip_norm);
    pp_json_int(&j, "steps", c->steps);
    double scale;
    int64_t clean;
    pp_driver_loss_scale(drv, &scale, &clean);
    if (scale > 0) {
        pp_json_begin_object(&j, "loss_scale");
        pp_json_double(&j, "scale", scale);
        pp_json_int(&j, "clean_steps", clean);
        pp_json_end_object(&j);
    }
    params_json(&j, c, g);
    pp_json_end_object(&j);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The settings come from the command line; say which differ from the ones the checkpoint
 * was trained with (a user may mean it: a lower LR to go on with, say). */
static void compare_settings(const pp_trainer_config *c, const pp_ckpt_info *in)
{
    const pp_optim_hparams *o = &in->meta.optim;
    const pp_jvalue *lr = in->trainer ? pp_json_get(in->trainer, "lr_schedule") : NULL;
    const pp_jvalue *kind = lr ? pp_json_get(lr, "kind") : NULL, *clip = in->trainer ? pp_json_get(in->trainer, "clip_norm") : NULL;
    char diff[512] = "";
    size_t n = 0;
#define DIFF(cond, ...) \
    if ((cond) && n < sizeof diff) n += (size_t)snprintf(diff + n, sizeof diff - n, __VA_ARGS__)
    DIFF(kind && kind->type == PP_JSTR && strcmp(kind->str, pp_lr_kind_name(c->lr.kind)), " --lr-schedule %s (now %s)",
         kind->str, pp_lr_kind_name(c->lr.kind));
    DIFF(o->lr != c->lr.lr, " --lr %g (now %g)", (double)o->lr, (double)c->lr.lr);
    DIFF(o->beta1 != c->optim.beta1 || o->beta2 != c->optim.beta2, " --beta1 %g --beta2 %g (now %g, %g)",
         (double)o->beta1, (double)o->beta2, (double)c->optim.beta1, (double)c->optim.beta2);
    DIFF(o->eps != c->optim.eps, " --eps %g (now %g)", (double)o->eps, (double)c->optim.eps);
    DIFF(o->weight_decay != c->optim.weight_decay, " --weight-decay %g (now %g)", (double)o->weight_decay,
         (double)c->optim.weight_decay);
    DIFF(o->momentum != c->optim.momentum || o->nesterov != c->optim.nesterov, " --momentum %g%s (now %g%s)",
         (double)o->momentum, o->nesterov ? " --nesterov" : "", (double)c->optim.momentum,
         c->optim.nesterov ? " --nesterov" : "");
    DIFF(clip && clip->type == PP_JNUM && (float)clip->num != c->clip_norm, " --clip-norm %g (now %g)", clip->num,
         (double)c->clip_norm);
#undef DIFF
    if (n) pp_log(PP_LOG_WARN, "the checkpoint was trained with%s", diff);
}

/* --resume auto: the candidates in order (`latest` first), each verified by all ranks
 * together, each its share of the files, so no rank waits in a collective while one
 * reads a whole checkpoint; the first that verifies everywhere. */
static pp_status pick(train_ckpt *k, char *dir, size_t len, pp_error *err)
{
    pp_ckpt_entry *e = NULL;
    int n = 0;
    if (pp_comm_rank(k->world) == 0) PP_CHECK(pp_ckpt_resume_candidates(k->cfg->save_dir, &e, &n, err));
    double cand = n;
    pp_status st = pp_comm_broadcast(k->world, &cand, sizeof cand, 0, err);
    for (int i = 0; st == PP_OK && i < (int)cand; i++) {
        snprintf(dir, len, "%s", e ? e[i].dir : "");
        if ((st = pp_comm_broadcast(k->world, dir, len, 0, err)) != PP_OK) break;
        pp_error why = {0};
        double bad = pp_ckpt_verify_part(dir, pp_comm_rank(k->world), pp_comm_size(k->world), &why) != PP_OK;
        if (bad) pp_log(PP_LOG_WARN, "skipping checkpoint '%s': %s", dir, why.msg);
        if ((st = pp_comm_allreduce(k->world, &bad, 1, PP_DTYPE_F64, err)) != PP_OK || bad == 0) break;
        dir[0] = 0;
    }
    if (!cand) dir[0] = 0;
    pp_ckpt_list_free(e, n);
    return st;
}

pp_status train_ckpt_load(train_ckpt *k, const char *dir, pp_error *err)
{
    const pp_trainer_config *c = k->cfg;
    int rank0 = pp_comm_rank(k->world) == 0;
    pp_ckpt *ck = NULL;
    PP_CHECK(pp_ckpt_open(dir, &ck, err));
    const pp_ckpt_info *in = pp_ckpt_inspect(ck);
    pp_status st = PP_OK;
    /* Dropout masks are drawn from the seed: another one would not continue the same run */
    if (in->meta.seed != c->seed)
        st = pp_error_set(err, PP_ERR_INVALID_ARG, "checkpoint '%s' was trained with --seed %llu, this run has --seed "
                          "%llu: pass --seed %llu to go on with the same random draws", dir,
                          (unsigned long long)in->meta.seed, (unsigned long long)c->seed,
                          (unsigned long long)in->meta.seed);
    if (st == PP_OK && in->meta.step > INT64_MAX / 4 / c->batch)
        st = pp_error_set(err, PP_ERR_INVALID_ARG, "checkpoint '%s': step %lld x --batch %lld is out of range", dir,
                          (long long)in->meta.step, (long long)c->batch);
    if (st == PP_OK) st = pp_ckpt_load(ck, &k->part, err);
    if (st == PP_OK) {
        k->resumed_step = k->last_saved = in->meta.step;
        k->sample0 = in->meta.samples - in->meta.step * c->batch;
        const pp_jvalue *ls = in->trainer ? pp_json_get(in->trainer, "loss_scale") : NULL;
        const pp_jvalue *scale = ls ? pp_json_get(ls, "scale") : NULL, *clean = ls ? pp_json_get(ls, "clean_steps") : NULL;
        if (scale && scale->type == PP_JNUM)   /* a run without loss scaling ignores it */
            pp_driver_set_loss_scale(k->drv, scale->num, clean && clean->type == PP_JNUM ? (int64_t)clean->num : 0);
        if (rank0) compare_settings(c, in);
        if (rank0 && !c->quiet)
            printf("resumed from '%s': step %lld, %lld samples (written with pp %d x dp %d, %s)\n\n", dir,
                   (long long)in->meta.step, (long long)in->meta.samples, in->meta.pp, in->meta.dp,
                   in->meta.schedule ? in->meta.schedule : "?");
    }
    pp_ckpt_close(ck);
    return st;
}

/* Picks the checkpoint (auto, or the one named), then every rank loads its own stages. */
static pp_status resume(train_ckpt *k, pp_error *err)
{
    const pp_trainer_config *c = k->cfg;
    char dir[4096] = "";
    if (!strcmp(c->resume, "auto")) PP_CHECK(pick(k, dir, sizeof dir, err));
    else snprintf(dir, sizeof dir, "%s", c->resume);
    if (!dir[0]) {
        if (pp_comm_rank(k->world) == 0 && !c->quiet)
            printf("resume: no checkpoint in '%s' verifies, starting from scratch\n\n", c->save_dir);
        return PP_OK;
    }
    return train_ckpt_load(k, dir, err);
}

/* One id for the whole job (rank 0's clock and pid): it names the temporary directories
 * and the lock. */
static pp_status run_id(pp_comm *world, char *id, size_t len, pp_error *err)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char buf[32];
    snprintf(buf, sizeof buf, "%llx%05lx", (unsigned long long)ts.tv_sec, (unsigned long)getpid() & 0xfffff);
    PP_CHECK(pp_comm_broadcast(world, buf, sizeof buf, 0, err));
    snprintf(id, len, "%s", buf);
    return PP_OK;
}

/* Rank 0 takes root's lock for run id; every rank returns once it holds it, or fails
 * (collective). */
static pp_status lock_root(train_ckpt *k, const char *root, const char *id, pp_ckpt_lock **lock, pp_error *err)
{
    pp_status st = PP_OK;
    if (pp_comm_rank(k->world) == 0) st = pp_ckpt_lock_acquire(root, id, k->cfg->lock_wait_s, lock, err);
    double ok = st == PP_OK;
    PP_CHECK(pp_comm_broadcast(k->world, &ok, sizeof ok, 0, err));
    if (st != PP_OK) return st;
    if (!ok) return pp_error_set(err, PP_ERR_IO, "rank 0 could not take the lock of save directory '%s' (its error "
                                 "says why)", root);
    return PP_OK;
}

pp_status train_ckpt_init(train_ckpt *k, const pp_trainer_config *cfg, pp_comm *world, pp_driver *drv,
                          const pp_partition *part, const pp_grid *grid, const pp_schedule *sched, pp_error *err)
{
    memset(k, 0, sizeof *k);
    k->cfg = cfg;
    k->world = world;
    k->drv = drv;
    k->sched = sched;
    if (cfg->resume && !strcmp(cfg->resume, "auto") && !cfg->save_dir)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "--resume auto looks in the --save directory: pass --save DIR");
    int n = pp_driver_num_stages(drv);
    k->stages = calloc((size_t)n, sizeof *k->stages);
    k->index = calloc((size_t)n, sizeof *k->index);
    if (!k->stages || !k->index) return PP_NOMEM(err);
    for (int i = 0; i < n; i++) {
        k->stages[i] = pp_driver_stage(drv, i);
        k->index[i] = pp_driver_stage_index(drv, i);
    }
    k->part = (pp_ckpt_part){.stages = k->stages, .stage_index = k->index, .nstages = n, .partition = part,
                             .replica = grid->replica, .replicas = grid->dp, .rank = pp_comm_rank(world)};
    /* the save directory is this job's before anything reads or writes it */
    if (cfg->save_dir) {
        PP_CHECK(run_id(world, k->run_id, sizeof k->run_id, err));
        PP_CHECK(lock_root(k, cfg->save_dir, k->run_id, &k->lock, err));
    }
    if (cfg->resume) PP_CHECK(resume(k, err));
    if (!cfg->save_dir) return PP_OK;
    pp_ckpt_writer_options o = {.root = cfg->save_dir, .keep = cfg->keep, .async = !cfg->save_sync, .run_id = k->run_id,
                                .defer_copy = 1};   /* the driver's before_update waits for the copy */
    return pp_ckpt_writer_create(&o, &k->writer, err);
}

/* Step's checkpoint through writer w (root: where it goes, for the line printed). */
static pp_status save(train_ckpt *k, pp_ckpt_writer *w, const char *root, int async, int64_t step, pp_error *err)
{
    const pp_trainer_config *c = k->cfg;
    char *tj = trainer_json(c, k->part.partition->graph, k->drv, step);
    if (!tj) return PP_NOMEM(err);
    pp_ckpt_meta m = {
        .step = step, .samples = k->sample0 + step * c->batch, .seed = c->seed, .optim = c->optim,
        .model_path = c->model, .pp = c->pp, .dp = c->dp, .chunks = k->sched->chunks, .batch = c->batch,
        .microbatches = c->microbatches, .schedule = pp_schedule_kind_name(k->sched->kind), .trainer_json = tj,
    };
    m.optim.lr = c->lr.lr;
    double stall = 0;
    pp_status st = pp_ckpt_writer_save(w, &k->part, &m, &stall, err);
    free(tj);
    PP_CHECK(st);
    k->last_saved = step;
    k->saves++;
    k->stall_s += stall;
    if (pp_comm_rank(k->world) == 0 && !c->quiet)
        printf("checkpoint %s/step-%lld: %s (training stalled %.3f s)\n", root, (long long)step,
               async ? "saving in the background" : "saved", stall);
    return PP_OK;
}

/* A save that did not commit (why): an error when it must (fatal: the last save) or when
 * the directory is no longer this job's; otherwise a warning, and training goes on. */
static pp_status save_failed(train_ckpt *k, pp_status st, const pp_error *why, int fatal, pp_error *err)
{
    if (st == PP_OK) return PP_OK;
    pp_error lost = {0};
    if (pp_ckpt_lock_check(k->cfg->save_dir, k->run_id, &lost) != PP_OK) {   /* no use trying again */
        if (err) *err = lost;
        return lost.status;
    }
    if (fatal || st == PP_ERR_NOMEM) {
        if (err) {
            *err = *why;
            size_t n = strlen(err->msg);
            snprintf(err->msg + n, sizeof err->msg - n, "; the checkpoints before it and `latest` are as they were");
        }
        return st;
    }
    k->failed_saves++;
    pp_log(PP_LOG_WARN, "%s. `latest` and the checkpoints before it are as they were; training goes on and the next "
           "save tries again", why->msg);
    return PP_OK;
}

/* Step's checkpoint to root with a writer of one save (run id id), committed on every
 * rank before it returns (collective). */
static pp_status save_once(train_ckpt *k, const char *root, const char *id, int keep, int64_t step, pp_error *err)
{
    pp_ckpt_writer_options o = {.root = root, .run_id = id, .keep = keep};
    pp_ckpt_writer *w = NULL;
    PP_CHECK(pp_ckpt_writer_create(&o, &w, err));
    pp_status st = save(k, w, root, 0, step, err);
    if (st == PP_OK) st = pp_ckpt_writer_wait(w, err);
    pp_ckpt_writer_destroy(w);
    PP_CHECK(st);
    /* rank 0 has committed once it is here: then every rank may read the checkpoint */
    return pp_comm_barrier(k->world, err);
}

static int same_dir(const char *a, const char *b)
{
    struct stat x, y;
    return a && b && stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

pp_status train_ckpt_save_to(train_ckpt *k, const char *root, int64_t step, pp_error *err)
{
    if (k->writer && (!strcmp(root, k->cfg->save_dir) || same_dir(root, k->cfg->save_dir))) {   /* the job's own */
        pp_error why = {0};
        PP_CHECK(save_failed(k, pp_ckpt_writer_wait(k->writer, &why), &why, 1, err));
        return save_once(k, root, k->run_id, k->cfg->keep, step, err);
    }
    char id[32];
    pp_ckpt_lock *lock = NULL;
    PP_CHECK(run_id(k->world, id, sizeof id, err));
    PP_CHECK(lock_root(k, root, id, &lock, err));
    pp_status st = save_once(k, root, id, 0, step, err);
    pp_ckpt_lock_release(lock);
    return st;
}

pp_status train_ckpt_after_step(train_ckpt *k, int64_t step, pp_error *err)
{
    const pp_trainer_config *c = k->cfg;
    if (!k->writer || step == k->last_saved) return PP_OK;
    if (step != c->steps && (c->save_every <= 0 || step % c->save_every)) return PP_OK;
    pp_error why = {0};
    PP_CHECK(save_failed(k, pp_ckpt_writer_wait(k->writer, &why), &why, 0, err));   /* the save before */
    return save_failed(k, save(k, k->writer, c->save_dir, !c->save_sync, step, &why), &why, step == c->steps, err);
}

pp_status train_ckpt_save_now(train_ckpt *k, int64_t step, pp_error *err)
{
    pp_error why = {0};
    PP_CHECK(save_failed(k, pp_ckpt_writer_wait(k->writer, &why), &why, k->last_saved == step, err));
    if (k->last_saved == step) return pp_comm_barrier(k->world, err);
    return save_once(k, k->cfg->save_dir, k->run_id, k->cfg->keep, step, err);
}

pp_status train_ckpt_before_update(void *user, pp_error *err)
{
    train_ckpt *k = user;
    (void)err;
    k->stall_s += pp_ckpt_writer_wait_staged(k->writer);
    return PP_OK;
}

pp_status train_ckpt_finish(train_ckpt *k, pp_error *err)
{
    return pp_ckpt_writer_wait(k->writer, err);
}

void train_ckpt_free(train_ckpt *k)
{
    pp_ckpt_writer_destroy(k->writer);
    pp_ckpt_lock_release(k->lock);
    free(k->stages);
    free(k->index);
    memset(k, 0, sizeof *k);
}
