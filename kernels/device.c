/* Device creation through the backend list (kernels/backends.c) and the checked
 * wrappers around a backend's vtable, which keep the device's memory counters (bytes by
 * category, current and peak, from a table of the live pointers) and its call counters
 * (allocations, host reads and writes, synchronisations), and refuse what a graph capture
 * cannot hold. */
#include <onnxpipe/backend/device_backend.h>
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/kernels.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A live allocation; the table is sorted by pointer (tens per stage, plus transients). */
typedef struct mem_entry {
    uintptr_t p;
    size_t n;
    pp_mem_category c;
} mem_entry;

struct pp_device_mem {
    pthread_mutex_t lock;
    mem_entry *e;
    size_t n, cap;
    pp_device_memory_stats st;
    atomic_llong allocs, frees, host_reads, host_writes, syncs;   /* pp_device_counters */
    int capturing;          /* between pp_device_capture_begin and _end */
    void *work;             /* pp_device_work: the largest size reserved */
    size_t work_size;
};

/* Counts one call (no counters: a device made without pp_device_create). */
#define COUNT(d, field) \
    do { if ((d)->mem) atomic_fetch_add_explicit(&(d)->mem->field, 1, memory_order_relaxed); } while (0)

/* What a graph cannot record: the host waiting for the device, or new memory. */
static pp_status refuse_in_capture(const pp_device *d, const char *what, pp_error *err)
{
    if (!d->mem || !d->mem->capturing) return PP_OK;
    return pp_error_set(err, PP_ERR_UNSUPPORTED, "%s device: %s while capturing a graph (a graph replays device work "
                        "only; this step runs eagerly)", pp_device_kind_name(d->kind), what);
}

static const char *const category_names[PP_MEM_CATEGORY_COUNT] = {"params", "grads",   "optimizer", "stash",
                                                                  "scratch", "comm", "other"};

const char *pp_mem_category_name(pp_mem_category c)
{
    return (int)c >= 0 && c < PP_MEM_CATEGORY_COUNT ? category_names[c] : "unknown";
}

/* The first entry at or after p. */
static size_t mem_find(const struct pp_device_mem *m, uintptr_t p)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->e[mid].p < p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Records a new allocation; 0 when the table cannot grow. Under m->lock. */
static int mem_add(struct pp_device_mem *m, void *ptr, size_t n, pp_mem_category c)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        mem_entry *e = pp_realloc_array(m->e, cap, sizeof *e);
        if (!e) return 0;
        m->e = e;
        m->cap = cap;
    }
    uintptr_t p = (uintptr_t)ptr;
    size_t k = mem_find(m, p);
    memmove(&m->e[k + 1], &m->e[k], (m->n - k) * sizeof *m->e);
    m->e[k] = (mem_entry){p, n, c};
    m->n++;
    pp_device_memory_stats *s = &m->st;
    s->current[c] += (int64_t)n;
    s->current_total += (int64_t)n;
    s->live++;
    if (s->current[c] > s->peak[c]) s->peak[c] = s->current[c];
    if (s->current_total > s->peak_total) s->peak_total = s->current_total;
    return 1;
}

/* Forgets p (not found: memory the counters never saw). Under m->lock. */
static void mem_remove(struct pp_device_mem *m, void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    size_t k = mem_find(m, p);
    if (k == m->n || m->e[k].p != p) return;
    m->st.current[m->e[k].c] -= (int64_t)m->e[k].n;
    m->st.current_total -= (int64_t)m->e[k].n;
    m->st.live--;
    memmove(&m->e[k], &m->e[k + 1], (m->n - k - 1) * sizeof *m->e);
    m->n--;
}

pp_device_kind pp_device_get_kind(const pp_device *d)
{
    return d->kind;
}

const char *pp_device_kind_name(pp_device_kind kind)
{
    switch (kind) {
    case PP_DEVICE_CPU: return "cpu";
    case PP_DEVICE_CUDA: return "cuda";
    default: return "unknown";
    }
}

pp_status pp_device_create(pp_device_kind kind, int index, pp_device **out, pp_error *err)
{
    *out = NULL;
    if ((int)kind < 0 || kind >= PP_DEVICE_KIND_COUNT)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "device kind %d out of range", (int)kind);
    const pp_backend *b = pp_backend_get(kind);
    if (!b)
        return pp_error_set(err, PP_ERR_UNSUPPORTED,
                            "the %s backend is not compiled into this build of onnxpipe; rebuild with it or "
                            "use --device cpu", pp_device_kind_name(kind));
    PP_CHECK(b->create(index, out, err));
    struct pp_device_mem *m = calloc(1, sizeof *m);
    if (!m || pthread_mutex_init(&m->lock, NULL)) {
        free(m);
        pp_device_destroy(*out);
        *out = NULL;
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory for the %s device's memory counters",
                            pp_device_kind_name(kind));
    }
    (*out)->mem = m;
    return PP_OK;
}

pp_device_kind pp_device_auto(int index, pp_error *why)
{
    pp_device *d = NULL;
    pp_error e = {0};
    if (pp_device_create(PP_DEVICE_CUDA, index, &d, &e) == PP_OK) {
        pp_device_destroy(d);
        return PP_DEVICE_CUDA;
    }
    if (why) *why = e;
    return PP_DEVICE_CPU;
}

pp_status pp_device_choose(const char *name, int index, pp_device_kind *kind, pp_error *why, pp_error *err)
{
    if (!name || !strcmp(name, "auto")) *kind = pp_device_auto(index, why);
    else if (!strcmp(name, "cpu")) *kind = PP_DEVICE_CPU;
    else if (!strcmp(name, "cuda")) *kind = PP_DEVICE_CUDA;
    else return pp_error_set(err, PP_ERR_INVALID_ARG, "--device '%s': use auto, cpu or cuda", name);
    return PP_OK;
}

void pp_device_destroy(pp_device *d)
{
    if (!d) return;
    if (d->mem && d->mem->work) d->i->free(d, d->mem->work);
    if (d->mem) {
        pthread_mutex_destroy(&d->mem->lock);
        free(d->mem->e);
        free(d->mem);
        d->mem = NULL;
    }
    if (d->i->destroy) d->i->destroy(d);
}

pp_status pp_device_alloc_as(pp_device *d, pp_mem_category c, size_t nbytes, void **out, pp_error *err)
{
    *out = NULL;
    if ((int)c < 0 || c >= PP_MEM_CATEGORY_COUNT)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "memory category %d out of range (0..%d)", (int)c,
                            PP_MEM_CATEGORY_COUNT - 1);
    PP_CHECK(refuse_in_capture(d, "an allocation", err));
    PP_CHECK(d->i->alloc(d, nbytes, out, err));
    COUNT(d, allocs);
    if (!d->mem) return PP_OK;
    pthread_mutex_lock(&d->mem->lock);
    int ok = mem_add(d->mem, *out, nbytes, c);
    pthread_mutex_unlock(&d->mem->lock);
    if (ok) return PP_OK;
    d->i->free(d, *out);
    *out = NULL;
    return pp_error_set(err, PP_ERR_NOMEM, "%s device: out of host memory counting %zu bytes of %s",
                        pp_device_kind_name(d->kind), nbytes, pp_mem_category_name(c));
}

pp_status pp_device_alloc(pp_device *d, size_t nbytes, void **out, pp_error *err)
{
    return pp_device_alloc_as(d, PP_MEM_SCRATCH, nbytes, out, err);
}

void pp_device_free(pp_device *d, void *p)
{
    if (!p) return;
    COUNT(d, frees);
    if (d->mem) {
        pthread_mutex_lock(&d->mem->lock);
        mem_remove(d->mem, p);
        pthread_mutex_unlock(&d->mem->lock);
    }
    d->i->free(d, p);
}

void pp_device_memory(pp_device *d, pp_device_memory_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!d->mem) return;
    pthread_mutex_lock(&d->mem->lock);
    *out = d->mem->st;
    pthread_mutex_unlock(&d->mem->lock);
}

void pp_device_memory_reset_peak(pp_device *d)
{
    if (!d->mem) return;
    pthread_mutex_lock(&d->mem->lock);
    pp_device_memory_stats *s = &d->mem->st;
    memcpy(s->peak, s->current, sizeof s->peak);
    s->peak_total = s->current_total;
    pthread_mutex_unlock(&d->mem->lock);
}

pp_status pp_device_copy_from_host(pp_device *d, void *dst, const void *src_host, size_t n, pp_error *err)
{
    if (!n) return PP_OK;
    PP_CHECK(refuse_in_capture(d, "a copy from the host", err));
    COUNT(d, host_writes);
    return d->i->copy_from_host(d, dst, src_host, n, err);
}

pp_status pp_device_copy_to_host(pp_device *d, void *dst_host, const void *src, size_t n, pp_error *err)
{
    if (!n) return PP_OK;
    PP_CHECK(refuse_in_capture(d, "a read into the host", err));
    COUNT(d, host_reads);
    return d->i->copy_to_host(d, dst_host, src, n, err);
}

pp_status pp_device_copy(pp_device *d, void *dst, const void *src, size_t n, pp_error *err)
{
    return n && dst != src ? d->i->copy(d, dst, src, n, err) : PP_OK;
}

pp_status pp_device_memset(pp_device *d, void *p, int value, size_t n, pp_error *err)
{
    return n ? d->i->memset(d, p, value, n, err) : PP_OK;
}

pp_status pp_device_synchronize(pp_device *d, pp_error *err)
{
    PP_CHECK(refuse_in_capture(d, "a synchronisation", err));
    COUNT(d, syncs);
    return d->i->synchronize ? d->i->synchronize(d, err) : PP_OK;
}

pp_status pp_device_work_reserve(pp_device *d, size_t n, pp_error *err)
{
    if (!d->mem) return pp_error_set(err, PP_ERR_INVALID_ARG, "work memory needs a device from pp_device_create");
    if (n <= d->mem->work_size) return PP_OK;
    pp_device_free(d, d->mem->work);   /* in the device's work order: nothing queued still uses it after this */
    d->mem->work = NULL;
    d->mem->work_size = 0;
    PP_CHECK(pp_device_alloc_as(d, PP_MEM_SCRATCH, n, &d->mem->work, err));
    d->mem->work_size = n;
    return PP_OK;
}

void *pp_device_work(const pp_device *d, size_t *size)
{
    *size = d->mem ? d->mem->work_size : 0;
    return d->mem ? d->mem->work : NULL;
}

void pp_device_get_counters(pp_device *d, pp_device_counters *out)
{
    memset(out, 0, sizeof *out);
    if (!d->mem) return;
    struct pp_device_mem *m = d->mem;
    *out = (pp_device_counters){atomic_load(&m->allocs), atomic_load(&m->frees), atomic_load(&m->host_reads),
                                atomic_load(&m->host_writes), atomic_load(&m->syncs)};
}

/* ---- timers and graphs: optional hooks, checked here ---- */

static pp_status no_hook(const pp_device *d, const char *what, pp_error *err)
{
    return pp_error_set(err, PP_ERR_UNSUPPORTED, "the %s device has no %s", pp_device_kind_name(d->kind), what);
}

pp_status pp_device_timer_create(pp_device *d, void **timer, pp_error *err)
{
    *timer = NULL;
    return d->i->timer_create ? d->i->timer_create(d, timer, err) : no_hook(d, "timers", err);
}

void pp_device_timer_destroy(pp_device *d, void *timer)
{
    if (timer && d->i->timer_destroy) d->i->timer_destroy(d, timer);
}

pp_status pp_device_timer_record(pp_device *d, void *timer, pp_error *err)
{
    return d->i->timer_record ? d->i->timer_record(d, timer, err) : no_hook(d, "timers", err);
}

pp_status pp_device_timer_elapsed(pp_device *d, void *from, void *to, double *seconds, pp_error *err)
{
    *seconds = 0;
    return d->i->timer_elapsed ? d->i->timer_elapsed(d, from, to, seconds, err) : no_hook(d, "timers", err);
}

pp_status pp_device_capture_begin(pp_device *d, pp_error *err)
{
    if (!d->i->capture_begin || !d->mem) return no_hook(d, "graphs", err);
    if (d->mem->capturing) return pp_error_set(err, PP_ERR_INVALID_ARG, "a graph capture is already under way");
    PP_CHECK(d->i->capture_begin(d, err));
    d->mem->capturing = 1;
    return PP_OK;
}

pp_status pp_device_capture_end(pp_device *d, void **graph, pp_error *err)
{
    *graph = NULL;
    if (!d->mem || !d->mem->capturing)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "no graph capture is under way");
    d->mem->capturing = 0;
    return d->i->capture_end(d, graph, err);
}

int pp_device_capturing(const pp_device *d) { return d->mem && d->mem->capturing; }

pp_status pp_device_graph_launch(pp_device *d, void *graph, pp_error *err)
{
    return d->i->graph_launch ? d->i->graph_launch(d, graph, err) : no_hook(d, "graphs", err);
}

void pp_device_graph_destroy(pp_device *d, void *graph)
{
    if (graph && d->i->graph_destroy) d->i->graph_destroy(d, graph);
}
