/* Reading ahead for the training job: while step k runs, a thread reads what this rank's
 * stages will be fed in step k+1 (and the global batch of labels the loss weighs) into a
 * ring of two steps' host buffers, so a feed is a copy. The bytes are pp_sampler_read's,
 * so a run is the same with or without it (PP_PREFETCH=0 reads at each feed instead); and
 * the job's feed, which copies from it or reads the sampler's samples now. */
#include "job_internal.h"
#include <onnxpipe/env.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

typedef struct pf_array {
    const pp_dataset_array *a;
    int64_t first, count;       /* places first .. first+count-1 of each global batch */
    char *buf[2];               /* [count x a->sample_bytes] per ring slot (slot: step % 2); a step
                                   of a shorter bucket fills the front */
} pf_array;

struct train_prefetch {
    const pp_dataset *d;
    pp_sampler smp;
    int64_t last;               /* the run's last step: none past it is read ahead */
    pf_array *arrays;
    int narrays;
    pthread_t thread;
    int running;
    pthread_mutex_t mu;         /* guards what follows */
    pthread_cond_t cv;
    int64_t want;               /* the step being fed: the thread reads it, then the next */
    int64_t next;               /* the step the thread reads next (or reads now) */
    int64_t gen;                /* bumped when the feed asks out of order: the read in flight is dropped */
    _Atomic int64_t held[2];    /* the step each slot holds; 0: none (being written). Written under mu */
    double span[2][2];          /* each slot's read, start and end (pp_now) */
    pp_status st[2];            /* each slot's read: its failure is the feed's of that step */
    pp_error err[2];
    int stop;
};

static void *reader(void *arg)
{
    train_prefetch *p = arg;
    pthread_setname_np(pthread_self(), "pp-prefetch");
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->next != p->want && !(p->next == p->want + 1 && p->next <= p->last))
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop) break;
        int64_t step = p->next, gen = p->gen;
        int slot = (int)(step & 1);
        atomic_store(&p->held[slot], 0);
        pthread_mutex_unlock(&p->mu);
        double t0 = pp_now();
        pp_status st = PP_OK;
        for (int i = 0; i < p->narrays && st == PP_OK; i++) {
            const pf_array *x = &p->arrays[i];
            st = pp_sampler_read(&p->smp, p->d, x->a, step, x->first, x->count, x->buf[slot], &p->err[slot]);
        }
        double t1 = pp_now();
        pthread_mutex_lock(&p->mu);
        if (gen != p->gen) continue;   /* the feed went elsewhere meanwhile */
        p->st[slot] = st;
        atomic_store(&p->held[slot], step);
        p->span[slot][0] = t0, p->span[slot][1] = t1;
        p->next = step + 1;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Places first .. first+count-1 of a wanted: widened to cover both when a is there already. */
static pp_status want_array(train_prefetch *p, const pp_dataset_array *a, int64_t first, int64_t count, pp_error *err)
{
    int i = 0;
    while (i < p->narrays && p->arrays[i].a != a) i++;
    if (i == p->narrays) {
        pf_array *more = pp_realloc_array(p->arrays, (size_t)i + 1, sizeof *more);
        if (!more) return PP_NOMEM(err);
        p->arrays = more;
        p->arrays[p->narrays++] = (pf_array){.a = a, .first = first, .count = count};
        return PP_OK;
    }
    pf_array *x = &p->arrays[i];
    int64_t lo = first < x->first ? first : x->first, hi = first + count > x->first + x->count ? first + count
                                                                                                : x->first + x->count;
    x->first = lo, x->count = hi - lo;
    return PP_OK;
}

/* What the stages of drv are fed from d (their data inputs, this replica's places), and the
 * global batch of the labels a mean loss is weighed by (train.c's weigh_loss). */
static pp_status find_arrays(train_prefetch *p, pp_driver *drv, int64_t first, int64_t count, int64_t batch,
                             pp_error *err)
{
    for (int k = 0; k < pp_driver_num_stages(drv); k++) {
        pp_stage *s = pp_driver_stage(drv, k);
        for (int i = 0; i < pp_stage_num_inputs(s); i++) {
            const pp_stage_port *port = pp_stage_input(s, i);
            const pp_dataset_array *a = port->is_data ? pp_dataset_find(p->d, port->name) : NULL;
            if (a) PP_CHECK(want_array(p, a, first, count, err));
        }
        pp_loss_labels l;
        const pp_dataset_array *a = pp_stage_loss_labels(s, &l, NULL) == PP_OK ? pp_dataset_find(p->d, l.labels) : NULL;
        if (a && a->dtype == PP_DTYPE_I64) PP_CHECK(want_array(p, a, 0, batch, err));
    }
    return PP_OK;
}

pp_status train_prefetch_open(const pp_dataset *d, const pp_sampler *smp, pp_driver *drv, int64_t first,
                              int64_t count, int64_t first_step, int64_t last_step, train_prefetch **out,
                              pp_error *err)
{
    *out = NULL;
    const char *env = pp_env_get("PP_PREFETCH");
    if (env && !strcmp(env, "0")) return PP_OK;
    train_prefetch *p = calloc(1, sizeof *p);
    if (!p) return PP_NOMEM(err);
    *p = (train_prefetch){.d = d, .smp = *smp, .last = last_step, .want = first_step, .next = first_step};
    pp_status st = find_arrays(p, drv, first, count, smp->batch, err);
    for (int i = 0; st == PP_OK && i < p->narrays; i++)
        for (int k = 0; k < 2; k++)
            if (!(p->arrays[i].buf[k] = malloc((size_t)p->arrays[i].count * p->arrays[i].a->sample_bytes)))
                st = pp_error_set(err, PP_ERR_NOMEM, "out of memory for reading '%s' of dataset '%s' ahead",
                                  p->arrays[i].a->name, pp_dataset_path(d));
    if (st != PP_OK || p->narrays == 0) {   /* a rank no stage of which reads the data */
        train_prefetch_close(p);
        return st;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    int rc = pthread_create(&p->thread, NULL, reader, p);
    if (rc != 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        train_prefetch_close(p);
        return pp_error_set(err, PP_ERR_IO, "cannot start the thread that reads dataset '%s' ahead (%s); "
                            "set PP_PREFETCH=0 to read at each microbatch", pp_dataset_path(d), strerror(rc));
    }
    p->running = 1;
    *out = p;
    return PP_OK;
}

/* Until the thread holds step in slot (asking for it when the feed went out of order). */
static void wait_for(train_prefetch *p, int64_t step, int slot)
{
    pthread_mutex_lock(&p->mu);
    if (p->want != step) {
        p->want = step;
        if (atomic_load(&p->held[slot]) != step && p->next != step) p->next = step, p->gen++;   /* out of order: read it now */
        pthread_cond_broadcast(&p->cv);
    }
    while (atomic_load(&p->held[slot]) != step) pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

pp_status train_prefetch_get(train_prefetch *p, int64_t step, const pp_dataset_array *a, int64_t offset,
                             int64_t count, const void **out, pp_error *err)
{
    const pf_array *x = p->arrays;
    *out = NULL;
    while (x < p->arrays + p->narrays && x->a != a) x++;
    if (x == p->arrays + p->narrays || offset < x->first || offset + count > x->first + x->count) return PP_OK;
    int slot = (int)(step & 1);
    size_t bytes = pp_dataset_sample_bytes(a, pp_sampler_len(&p->smp, p->d, step));   /* at the step's length */
    const void *at = x->buf[slot] + (size_t)(offset - x->first) * bytes;
    if (p->want != step || atomic_load(&p->held[slot]) != step) wait_for(p, step, slot);   /* only the feed writes want */
    if (p->st[slot] != PP_OK) {
        if (err) *err = p->err[slot];
        return p->st[slot];
    }
    *out = at;
    return PP_OK;
}

int train_prefetch_done(train_prefetch *p, int64_t step, double *t_start, double *t_end)
{
    int slot = (int)(step & 1);
    pthread_mutex_lock(&p->mu);
    int held = atomic_load(&p->held[slot]) == step;
    if (held) *t_start = p->span[slot][0], *t_end = p->span[slot][1];
    if (p->want == step) {   /* the next step is fed next: its slot's neighbour may be refilled */
        p->want = step + 1;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return held;
}

void train_prefetch_close(train_prefetch *p)
{
    if (!p) return;
    if (p->running) {
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->thread, NULL);
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
    }
    for (int i = 0; i < p->narrays; i++) free(p->arrays[i].buf[0]), free(p->arrays[i].buf[1]);
    free(p->arrays);
    free(p);
}

pp_status train_feed_dataset(const pp_dataset *d, const pp_sampler *smp, train_prefetch *pf, int64_t step,
                             const pp_trainer_feed *f, pp_error *err)
{
    for (int i = 0; i < f->ninputs; i++) {
        const pp_trainer_input *p = &f->inputs[i];
        const pp_dataset_array *a = pp_dataset_find(d, p->name);
        size_t bytes = a ? pp_dataset_sample_bytes(a, pp_sampler_len(smp, d, step)) : 0;   /* the step's length */
        if (!a || bytes * (size_t)f->samples != p->nbytes)   /* train_check_data said why before step 1 */
            return pp_error_set(err, PP_ERR_SHAPE, "dataset '%s' has no array '%s' of %zu bytes per sample",
                                pp_dataset_path(d), p->name, p->nbytes / (size_t)(f->samples > 0 ? f->samples : 1));
        const void *ahead = NULL;
        if (pf) PP_CHECK(train_prefetch_get(pf, step, a, f->offset, f->samples, &ahead, err));
        if (ahead) memcpy(p->data, ahead, p->nbytes);
        else PP_CHECK(pp_sampler_read(smp, d, a, step, f->offset, f->samples, p->data, err));
    }
    return PP_OK;
}
