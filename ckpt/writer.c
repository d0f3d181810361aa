/* Saving: this rank's part of each of its stages is copied to host memory, then written
 * as one safetensors shard per (stage, replica) with a marker naming its tensors and
 * checksums, in a thread when async. Rank 0 then commits. With defer_copy (async, on
 * the cpu), the thread also makes the copy of parameters and optimizer state, which only the next optimizer
 * step changes: the trainer calls pp_ckpt_writer_wait_staged before it, so the copy
 * overlaps the next step's forward and backward (BatchNorm statistics, which a forward
 * changes, are copied before save returns). */
#include "ckpt_internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/stage_lib.h>

struct pp_ckpt_writer {
    pp_ckpt_writer_options opt;
    char *root, *run_id;
    pthread_t thread;
    int running;
    /* the save in flight */
    ck_shard *shards;
    int nshards;
    pp_ckpt_meta meta;          /* strings below are owned copies */
    char *model_path, *schedule, *trainer_json;
    uint64_t model_hash;
    int rank, expected, replicas;
    char *tmp, *final_dir;
    pp_status st;               /* the thread's result */
    pp_error err;
    /* host staging, kept from save to save (a fresh buffer costs its page faults each time) */
    char **hosts;
    size_t *caps;
    int nhosts;
    pthread_mutex_t lock;
    pthread_cond_t staged_cv;
    int staged;                 /* the save in flight no longer reads the stages */
};

static void free_shards(pp_ckpt_writer *w)
{
    for (int i = 0; i < w->nshards; i++) {
        for (int k = 0; k < w->shards[i].nitems; k++) {
            free(w->shards[i].items[k].name);
            free(w->shards[i].items[k].param);
        }
        free(w->shards[i].items);
    }
    free(w->shards);
    w->shards = NULL;
    w->nshards = 0;
    free(w->model_path), free(w->schedule), free(w->trainer_json), free(w->tmp), free(w->final_dir);
    w->model_path = w->schedule = w->trainer_json = w->tmp = w->final_dir = NULL;
}

pp_status pp_ckpt_writer_create(const pp_ckpt_writer_options *opt, pp_ckpt_writer **out, pp_error *err)
{
    *out = NULL;
    if (!opt->root || !opt->root[0] || !opt->run_id || !opt->run_id[0] || strchr(opt->run_id, '/') || opt->keep < 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "checkpoint writer: a root directory, a run id without '/' and "
                            "keep >= 0 are needed (keep %d)", opt->keep);
    pp_ckpt_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->root = pp_strdup(opt->root)) || !(w->run_id = pp_strdup(opt->run_id))) {
        pp_ckpt_writer_destroy(w);
        return PP_NOMEM(err);
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->staged_cv, NULL);
    w->staged = 1;
    w->opt = *opt;
    w->opt.root = w->root;
    w->opt.run_id = w->run_id;
    if (w->opt.timeout_s <= 0) w->opt.timeout_s = 600;
    *out = w;
    return PP_OK;
}

/* A stage's tensors in order (each parameter with its optimizer state, then buffers),
 * with device pointers, appended to items / src. */
typedef struct src_list {
    ck_item *items;
    const void **src;
    int *forward_writes;    /* a forward changes it (BatchNorm statistics): never deferred */
    int n, cap;
} src_list;

static pp_status add(src_list *l, const char *param, const char *state, pp_dtype dt, const pp_shape *shape,
                     const void *src, int64_t nbytes, int forward_writes, pp_error *err)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        ck_item *it = pp_realloc_array(l->items, (size_t)cap, sizeof *it);
        if (it) l->items = it;
        const void **s = pp_realloc_array(l->src, (size_t)cap, sizeof *s);
        if (s) l->src = s;
        int *f = pp_realloc_array(l->forward_writes, (size_t)cap, sizeof *f);
        if (f) l->forward_writes = f;
        if (!it || !s || !f) return pp_error_set(err, PP_ERR_NOMEM, "out of memory staging a checkpoint");
        l->cap = cap;
    }
    ck_item *it = &l->items[l->n];
    memset(it, 0, sizeof *it);
    size_t n = strlen(param) + (state ? strlen(state) + 2 : 1);
    it->name = malloc(n);
    it->param = pp_strdup(param);
    if (!it->name || !it->param) {
        free(it->name), free(it->param);
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory staging a checkpoint");
    }
    snprintf(it->name, n, state ? "%s.%s" : "%s", param, state);
    it->state = state;
    it->dtype = dt;
    it->shape = *shape;
    for (int d = 0; d < PP_MAX_RANK; d++) it->shape.syms[d] = NULL;
    it->nbytes = nbytes;
    l->forward_writes[l->n] = forward_writes;
    l->src[l->n++] = src;
    return PP_OK;
}

/* The names of the optimizer's state slots, as torch.optim calls them. */
static const char *state_name(const pp_optim_hparams *h, int slot)
{
    if (h->kind == PP_OPTIM_SGD) return "momentum";
    return slot == 0 ? "exp_avg" : "exp_avg_sq";
}

static int stores_param(const pp_ckpt_part *part, int stage, int value)
{
    for (int t = 0; t < part->partition->ntied; t++)
        if (part->partition->tied[t].value == value) return part->partition->tied[t].stages[0] == stage;
    return 1;
}

static pp_status list_stage(const pp_ckpt_part *part, int i, src_list *l, pp_error *err)
{
    pp_stage *s = part->stages[i];
    const pp_optim_hparams *h = pp_stage_optim(s);
    int slots = pp_stage_optim_slots(s);
    float *params = pp_stage_params(s), *state = pp_stage_optim_state(s);
    for (int k = 0; k < pp_stage_num_params(s); k++) {
        const pp_stage_param *p = pp_stage_param_at(s, k);
        if (!stores_param(part, part->stage_index[i], p->value)) continue;
        int64_t nb = p->numel * (int64_t)sizeof(float);
        PP_CHECK(add(l, p->name, NULL, PP_DTYPE_F32, &p->shape, params + p->offset, nb, 0, err));
        for (int j = 0; j < slots; j++)
            PP_CHECK(add(l, p->name, state_name(h, j), PP_DTYPE_F32, &p->shape,
                         state + (size_t)slots * (size_t)p->offset + (size_t)j * (size_t)p->numel, nb, 0, err));
    }
    for (int k = 0; k < pp_stage_num_buffers(s); k++) {
        pp_stage_buffer b;
        PP_CHECK(pp_stage_buffer_at(s, k, &b, err));
        PP_CHECK(add(l, b.name, NULL, b.dtype, &b.shape, b.data, (int64_t)b.nbytes, 1, err));
    }
    return PP_OK;
}

/* This replica's share of stage i: the items whose first byte falls in its 1/replicas of
 * the stage's bytes (buffers: replica 0), copied from the device into one host buffer. */
/* How a save gets the bytes it writes: copied before save returns; copied by the writer
 * thread (defer_copy); or read in place by a synchronous save on the cpu, whose buffers
 * are host memory that nothing changes until save returns (no copy at all). */
typedef enum { COPY_NOW, COPY_IN_THREAD, IN_PLACE } stage_mode;

static pp_status stage_shard(const pp_ckpt_part *part, int i, ck_shard *sh, char **host, size_t *cap, stage_mode mode,
                             pp_error *err)
{
    src_list l = {0};
    pp_status st;
    PP_CHECK_GOTO(list_stage(part, i, &l, err), st, done);
    int64_t total = 0, at = 0;
    for (int k = 0; k < l.n; k++) total += l.items[k].nbytes;
    sh->stage = part->stage_index[i];
    sh->replica = part->replica;
    sh->items = calloc((size_t)l.n + 1, sizeof *sh->items);
    if (!sh->items) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory staging a checkpoint");
        goto done;
    }
    int *mine = calloc((size_t)l.n + 1, sizeof *mine);
    for (int k = 0; mine && k < l.n; k++) {
        /* buffers differ between replicas (each its own batch statistics): replica 0's are
         * the ones kept, as export keeps them */
        mine[k] = l.forward_writes[k] ? part->replica == 0
                                      : total > 0 && (int)((__int128)at * part->replicas / total) == part->replica;
        at += l.items[k].nbytes;
        if (mine[k]) sh->bytes += l.items[k].nbytes;
    }
    if (mine && mode != IN_PLACE && *cap < (size_t)sh->bytes + 1) {
        free(*host);
        *cap = (*host = malloc((size_t)sh->bytes + 1)) ? (size_t)sh->bytes + 1 : 0;
    }
    sh->host = mine && mode != IN_PLACE ? *host : NULL;
    if (!mine || (mode != IN_PLACE && !sh->host)) {
        free(mine);
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory staging %lld checkpoint bytes", (long long)sh->bytes);
        goto done;
    }
    pp_device *dev = pp_stage_device(part->stages[i]);
    int64_t off = 0;
    st = PP_OK;
    for (int k = 0; k < l.n && st == PP_OK; k++) {
        if (!mine[k]) continue;
        ck_item *it = &sh->items[sh->nitems++];
        *it = l.items[k];
        l.items[k].name = l.items[k].param = NULL;      /* moved */
        it->offset = off;
        if (mode == IN_PLACE) {
            it->data = l.src[k];
        } else {
            it->data = sh->host + off;
            if (mode == COPY_IN_THREAD && !l.forward_writes[k]) it->src = l.src[k], it->dev = dev;
            else st = pp_device_copy_to_host(dev, sh->host + off, l.src[k], (size_t)it->nbytes, err);
        }
        off += it->nbytes;
    }
    free(mine);
done:
    for (int k = 0; k < l.n; k++) free(l.items[k].name), free(l.items[k].param);
    free(l.items);
    free((void *)l.src);
    free(l.forward_writes);
    return st;
}

/* This rank's shards and markers into the temporary directory, while the save directory
 * is still this job's. */
static pp_status write_shards(pp_ckpt_writer *w, pp_error *err)
{
    PP_CHECK(pp_ckpt_lock_check(w->root, w->run_id, err));
    for (int i = 0; i < w->nshards; i++) {
        ck_shard *sh = &w->shards[i];
        char base[40], name[64];
        snprintf(base, sizeof base, "shard-s%03d-r%03d", sh->stage, sh->replica);
        if (sh->nitems > 0) {
            snprintf(sh->file, sizeof sh->file, "%s.safetensors", base);
            char *path = ck_path("%s/%s", w->tmp, sh->file);
            if (!path) return PP_NOMEM(err);
            pp_status st = ck_shard_write(sh, path, w->meta.step, err);
            if (st != PP_OK) unlink(path);   /* what it wrote is of no use: give the space back */
            free(path);
            PP_CHECK(st);
        }
        /* the marker appears whole (rename) once its shard is durable */
        snprintf(name, sizeof name, "%s.json.part", base);
        char *part = ck_path("%s/%s", w->tmp, name);
        snprintf(name, sizeof name, "%s.json", base);
        char *marker = ck_path("%s/%s", w->tmp, name);
        pp_status st = part && marker ? ck_marker_write(sh, part, err) : PP_NOMEM(err);
        if (st == PP_OK) st = ck_rename(part, marker, err);
        free(part);
        free(marker);
        PP_CHECK(st);
    }
    return PP_OK;
}

/* Writes this rank's shards; one that fails leaves an empty `failed` marker, so rank 0
 * stops waiting for it at once. Rank 0 then commits. */
static pp_status write_job(pp_ckpt_writer *w, pp_error *err)
{
    pp_status st = write_shards(w, err);
    if (st != PP_OK) {
        char *failed = ck_path("%s/rank-%d.failed", w->tmp, w->rank);
        int fd = failed ? open(failed, O_WRONLY | O_CREAT, 0644) : -1;
        if (fd >= 0) close(fd);
        free(failed);
        /* rank 0 commits nothing: the temporary directory goes, while it is this job's */
        if (w->rank == 0 && pp_ckpt_lock_check(w->root, w->run_id, NULL) == PP_OK) ck_remove_tree(w->tmp, NULL);
        return st;
    }
    if (w->rank != 0) return PP_OK;
    ck_commit c = {.root = w->root, .tmp = w->tmp, .final_dir = w->final_dir, .expected = w->expected, .replicas = w->replicas,
                   .timeout_s = w->opt.timeout_s, .keep = w->opt.keep, .model_hash = w->model_hash, .meta = &w->meta,
                   .run_id = w->run_id};
    return ck_commit_run(&c, err);
}

/* The copies save left to the thread, then the stages are free again. */
static pp_status stage_deferred(pp_ckpt_writer *w, pp_error *err)
{
    pp_status st = PP_OK;
    for (int i = 0; i < w->nshards && st == PP_OK; i++)
        for (int k = 0; k < w->shards[i].nitems && st == PP_OK; k++) {
            ck_item *it = &w->shards[i].items[k];
            if (it->src) st = pp_device_copy_to_host(it->dev, w->shards[i].host + it->offset, it->src, (size_t)it->nbytes, err);
            it->src = NULL;
        }
    pthread_mutex_lock(&w->lock);
    w->staged = 1;
    pthread_cond_broadcast(&w->staged_cv);
    pthread_mutex_unlock(&w->lock);
    return st;
}

static void *thread_main(void *arg)
{
    pp_ckpt_writer *w = arg;
    w->st = stage_deferred(w, &w->err);
    if (w->st == PP_OK) w->st = write_job(w, &w->err);
    return NULL;
}

double pp_ckpt_writer_wait_staged(pp_ckpt_writer *w)
{
    if (!w) return 0;
    double t0 = pp_now();
    pthread_mutex_lock(&w->lock);
    while (!w->staged) pthread_cond_wait(&w->staged_cv, &w->lock);
    pthread_mutex_unlock(&w->lock);
    return pp_now() - t0;
}

pp_status pp_ckpt_writer_wait(pp_ckpt_writer *w, pp_error *err)
{
    if (!w || !w->running) return PP_OK;
    pthread_join(w->thread, NULL);
    w->running = 0;
    if (w->st == PP_OK) return PP_OK;
    if (err) *err = w->err;
    pp_error_prefix(err, "checkpoint step %lld: ", (long long)w->meta.step);
    return w->st;
}

static pp_status copy_meta(pp_ckpt_writer *w, const pp_ckpt_part *part, const pp_ckpt_meta *m, pp_error *err)
{
    w->meta = *m;
    w->model_path = pp_strdup(m->model_path ? m->model_path : "");
    w->schedule = pp_strdup(m->schedule ? m->schedule : "");
    w->trainer_json = m->trainer_json ? pp_strdup(m->trainer_json) : NULL;
    char name[64];
    snprintf(name, sizeof name, "step-%lld", (long long)m->step);
    w->final_dir = ck_path("%s/%s", w->root, name);
    w->tmp = ck_path("%s/%s.tmp-%s", w->root, name, w->run_id);
    if (!w->model_path || !w->schedule || (m->trainer_json && !w->trainer_json) || !w->final_dir || !w->tmp)
        return PP_NOMEM(err);
    w->meta.model_path = w->model_path;
    w->meta.schedule = w->schedule;
    w->meta.trainer_json = w->trainer_json;
    w->model_hash = pp_graph_model_hash(part->partition->graph);
    w->rank = part->rank;
    w->replicas = part->replicas;
    w->expected = part->partition->nstages * part->replicas;
    return PP_OK;
}

pp_status pp_ckpt_writer_save(pp_ckpt_writer *w, const pp_ckpt_part *part, const pp_ckpt_meta *meta,
                              double *stall_s, pp_error *err)
{
    double t0 = pp_now();
    if (stall_s) *stall_s = 0;
    PP_CHECK(pp_ckpt_writer_wait(w, err));
    free_shards(w);
    if (part->replicas < 1 || part->replica < 0 || part->replica >= part->replicas || part->nstages < 1)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "checkpoint: replica %d of %d and %d stages: need 0 <= replica < "
                            "replicas and at least one stage", part->replica, part->replicas, part->nstages);
    PP_CHECK(copy_meta(w, part, meta, err));
    w->shards = calloc((size_t)part->nstages, sizeof *w->shards);
    if (!w->shards) return PP_NOMEM(err);
    w->nshards = part->nstages;
    if (w->nhosts < part->nstages) {
        char **h = pp_realloc_array(w->hosts, (size_t)part->nstages, sizeof *h);
        if (h) w->hosts = h;
        size_t *c = pp_realloc_array(w->caps, (size_t)part->nstages, sizeof *c);
        if (c) w->caps = c;
        if (!h || !c) return PP_NOMEM(err);
        for (int i = w->nhosts; i < part->nstages; i++) w->hosts[i] = NULL, w->caps[i] = 0;
        w->nhosts = part->nstages;
    }
    /* only host memory is read from another thread (a GPU copy runs on the trainer's
     * stream), and read in place */
    int cpu = (pp_device_caps(pp_stage_device(part->stages[0])) & PP_DEVICE_CAP_HOST_MEMORY) != 0;
    stage_mode mode = !w->opt.async && cpu ? IN_PLACE : w->opt.async && w->opt.defer_copy && cpu ? COPY_IN_THREAD : COPY_NOW;
    for (int i = 0; i < part->nstages; i++)
        PP_CHECK(stage_shard(part, i, &w->shards[i], &w->hosts[i], &w->caps[i], mode, err));
    pp_log(PP_LOG_DEBUG, "checkpoint step %lld: staged in %.3f s", (long long)meta->step, pp_now() - t0);
    PP_CHECK(ck_mkdir(w->root, err));
    PP_CHECK(pp_ckpt_lock_check(w->root, w->run_id, err));
    PP_CHECK(ck_mkdir(w->tmp, err));
    w->st = PP_OK;
    pp_error_clear(&w->err);
    w->staged = 0;
    if (w->opt.async && pthread_create(&w->thread, NULL, thread_main, w) == 0) {
        w->running = 1;
        if (stall_s) *stall_s = pp_now() - t0;
        return PP_OK;
    }
    pp_status st = stage_deferred(w, err);
    if (st == PP_OK) st = write_job(w, err);
    if (st != PP_OK) pp_error_prefix(err, "checkpoint step %lld: ", (long long)meta->step);
    if (stall_s) *stall_s = pp_now() - t0;
    return st;
}

void pp_ckpt_writer_destroy(pp_ckpt_writer *w)
{
    if (!w) return;
    pp_ckpt_writer_wait(w, NULL);
    free_shards(w);
    for (int i = 0; i < w->nhosts; i++) free(w->hosts[i]);
    free(w->hosts);
    free(w->caps);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->staged_cv);
    free(w->root);
    free(w->run_id);
    free(w);
}

pp_status pp_ckpt_save(const char *root, const char *run_id, const pp_ckpt_part *part, const pp_ckpt_meta *meta,
                       pp_error *err)
{
    pp_ckpt_writer_options o = {.root = root, .run_id = run_id};
    pp_ckpt_writer *w = NULL;
    PP_CHECK(pp_ckpt_writer_create(&o, &w, err));
    pp_status st = pp_ckpt_writer_save(w, part, meta, NULL, err);
    pp_ckpt_writer_destroy(w);
    return st;
}
