/* Value types: a ValueInfoProto's tensor type as dtype and shape, and the loader's second
 * thread, which faults in the pages of the graph's large arrays and then decodes the
 * value_info list while the main thread reads initializers and nodes (the plain entries
 * only; the main thread decodes the others as before). */
#include "load_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

pp_status load_type(pp_graph *g, const Onnx__ValueInfoProto *vi, pp_dtype *dtype, pp_shape *shape, pp_error *err)
{
    *dtype = PP_DTYPE_UNDEFINED;
    memset(shape, 0, sizeof *shape);
    shape->rank = -1;
    const char *name = vi->name;
    if (!vi->type) return PP_OK;
    if (vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "value '%s' is not a tensor (sequence, map, optional and "
                            "sparse types are not supported)", name);
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    if (tt->has_elem_type && tt->elem_type != 0) {
        *dtype = load_dtype(tt->elem_type);
        if (*dtype == PP_DTYPE_UNDEFINED)
            return pp_error_set(err, PP_ERR_UNSUPPORTED, "value '%s' has data type %d, which onnxpipe does not "
                                "support", name, (int)tt->elem_type);
    }
    if (!tt->shape) return PP_OK;
    if (tt->shape->n_dim > PP_MAX_RANK)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "value '%s' has rank %zu (at most %d supported)", name,
                            tt->shape->n_dim, PP_MAX_RANK);
    shape->rank = (int)tt->shape->n_dim;
    for (int i = 0; i < shape->rank; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        shape->dims[i] = -1;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (d->dim_value < 0)
                return pp_error_set(err, PP_ERR_PARSE, "value '%s' has negative dim %lld at axis %d", name,
                                    (long long)d->dim_value, i);
            shape->dims[i] = d->dim_value;
        } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
                   *d->dim_param) {
            if (!g) return PP_ERR_UNSUPPORTED;   /* the ahead thread leaves named dims to the main thread */
            if (!(shape->syms[i] = pp_graph_strdup(g, d->dim_param)))
                return PP_NOMEM(err);
        }
    }
    return PP_OK;
}

/* ---- the value_info list, decoded ahead --------------------------------- */

#define PUBLISH 256   /* entries decoded between two stores of `done` */

static void *ahead_alloc(void *data, size_t size) { return graph_alloc_uninit(data, size); }
static void ahead_free(void *data, void *p) { (void)data, (void)p; }

static void name_span(void *ctx, wire_span str) { *(wire_span *)ctx = str; }   /* the last, as protobuf-c */

/* Entry i as the main thread would read it, where it parses, has a name without NUL
 * bytes, a valid tensor type and no named dims; else ok = 0. */
static void decode(types_ahead *a, size_t i)
{
    type_rec *r = &a->recs[i];
    wire_span s = a->spans[i], name = {NULL, 0};
    r->ok = 0;
    graph_arena_reset(a->scratch);
    const Onnx__ValueInfoProto *vi = wire_value_info(s, &a->alloc);
    pp_dtype dt;
    pp_shape sh;
    if (!vi || !vi->name || !*vi->name || load_type(NULL, vi, &dt, &sh, NULL) != PP_OK ||
        sh.rank > TYPE_REC_RANK)
        return;
    wire_each_string(s, 1, 1, name_span, &name);   /* the name in the file, which outlives the load */
    if (!name.n || name.n > UINT32_MAX || memchr(name.p, 0, name.n)) return;
    r->name = (const char *)name.p;
    r->len = (uint32_t)name.n;
    r->dtype = (int8_t)dt;
    r->rank = (int8_t)sh.rank;
    for (int k = 0; k < sh.rank; k++) r->dims[k] = sh.dims[k];
    r->ok = 1;
}

/* Faults in region r's pages (the kernel zeroes them here instead of on the main
 * thread's first write); contents are not changed, so it may overlap the main thread's
 * writes, and a region the main thread has since moved is harmless. */
static void populate(graph_region r)
{
    uintptr_t page = 4096, b = ((uintptr_t)r.p + page - 1) & ~(page - 1), e = ((uintptr_t)r.p + r.n) & ~(page - 1);
    if (e > b) madvise((void *)b, e - b, MADV_POPULATE_WRITE);
}

static void *ahead_main(void *arg)
{
    types_ahead *a = arg;
    pthread_setname_np(pthread_self(), "pp-load-types");
    for (int i = 0; i < a->nfill && !atomic_load_explicit(&a->stop, memory_order_relaxed); i++) populate(a->fill[i]);
    for (size_t i = 0; i < a->n && !atomic_load_explicit(&a->stop, memory_order_relaxed); i++) {
        decode(a, i);
        if ((i + 1) % PUBLISH == 0 || i + 1 == a->n) atomic_store_explicit(&a->done, i + 1, memory_order_release);
    }
    return NULL;
}

void types_ahead_start(types_ahead *a, const wire_span *spans, size_t n, const graph_region *fill, int nfill)
{
    memset(a, 0, sizeof *a);
    for (int i = 0; i < nfill && a->nfill < (int)(sizeof a->fill / sizeof a->fill[0]); i++) a->fill[a->nfill++] = fill[i];
    if (n < 2 * PUBLISH && !a->nfill) return;   /* not worth a thread */
    a->spans = spans;
    a->n = n;
    atomic_init(&a->done, 0);
    atomic_init(&a->stop, 0);
    if (pp_graph_create("ahead", 0, &a->scratch, NULL) != PP_OK) return;
    a->alloc = (ProtobufCAllocator){ahead_alloc, ahead_free, a->scratch};
    if (!(a->recs = malloc((n + 1) * sizeof *a->recs)) || pthread_create(&a->thread, NULL, ahead_main, a) != 0) {
        free(a->recs);
        pp_graph_destroy(a->scratch);
        memset(a, 0, sizeof *a);
        return;
    }
    a->running = 1;
}

const type_rec *types_ahead_get(types_ahead *a, size_t i)
{
    if (!a->running || i >= atomic_load_explicit(&a->done, memory_order_acquire)) return NULL;
    return a->recs[i].ok ? &a->recs[i] : NULL;
}

void types_ahead_stop(types_ahead *a)
{
    if (a->running) {
        atomic_store_explicit(&a->stop, 1, memory_order_relaxed);
        pthread_join(a->thread, NULL);
        free(a->recs);
        pp_graph_destroy(a->scratch);
    }
    memset(a, 0, sizeof *a);
}
