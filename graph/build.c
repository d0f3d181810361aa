/* Building a graph in code: the arena, the value-name table, and add_* calls that
 * the loader, the example generator and subgraph extraction all go through. */
#include "graph_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>

#define ARENA_BLOCK (1024 * 1024)
#define ARENA_BLOCK_MAX (64 * 1024 * 1024)
#define HUGE_MIN (4 * 1024 * 1024)

/* Asks for transparent huge pages over a large allocation (a hint: a large graph's
 * arrays and arena otherwise cost one page fault per 4 KiB). */
static void advise_huge(void *p, size_t n)
{
    if (n < HUGE_MIN) return;
    uintptr_t page = 4096, a = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + n) & ~(page - 1);
    if (e > a) madvise((void *)a, e - a, MADV_HUGEPAGE);
}

void *graph_alloc_uninit(pp_graph *g, size_t n)
{
    pp_graph_store *s = g->store;
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (!n) n = sizeof(max_align_t);
    arena_block *b = s->arena;
    if (!b || b->cap - b->used < n) {
        /* blocks double up to ARENA_BLOCK_MAX as the graph grows */
        size_t cap = b ? 2 * b->cap : ARENA_BLOCK;
        if (cap > ARENA_BLOCK_MAX) cap = ARENA_BLOCK_MAX;
        if (cap < n) cap = n;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        advise_huge(b, sizeof *b + cap);
        b->next = s->arena;
        b->used = 0;
        b->cap = cap;
        s->arena = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

void graph_arena_reset(pp_graph *g)
{
    arena_block *b = g->store->arena;
    if (!b) return;
    for (arena_block *o = b->next, *n; o; o = n) {
        n = o->next;
        free(o);
    }
    b->next = NULL;
    b->used = 0;
}

void *pp_graph_alloc(pp_graph *g, size_t n)
{
    void *p = graph_alloc_uninit(g, n);
    if (p) memset(p, 0, n);
    return p;
}

const char *pp_graph_strdup(pp_graph *g, const char *str)
{
    if (!str) return NULL;
    size_t n = strlen(str) + 1;
    char *d = graph_alloc_uninit(g, n);
    if (d) memcpy(d, str, n);
    return d;
}

pp_status pp_graph_create(const char *name, int64_t opset, pp_graph **out, pp_error *err)
{
    *out = NULL;
    pp_graph *g = calloc(1, sizeof *g);
    if (!g || !(g->store = calloc(1, sizeof *g->store))) {
        free(g);
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory creating graph");
    }
    g->name = pp_graph_strdup(g, name ? name : "graph");
    g->ir_version = 8;
    g->opset = opset;
    if (!g->name) goto oom;
    if (pp_graph_add_opset(g, "", opset, err) != PP_OK) goto oom;
    *out = g;
    return PP_OK;
oom:
    pp_graph_destroy(g);
    return pp_error_set(err, PP_ERR_NOMEM, "out of memory creating graph");
}

void pp_graph_destroy(pp_graph *g)
{
    if (!g) return;
    pp_graph_store *s = g->store;
    if (s) {
        for (int i = 0; i < s->nmmaps; i++) munmap(s->mmaps[i].addr, s->mmaps[i].len);
        free(s->mmaps);
        for (arena_block *b = s->arena, *n; b; b = n) {
            n = b->next;
            free(b);
        }
        free(s->name_slots);
        free(s->name_hash);
        free(s->consumers);
        free(s);
    }
    for (int i = 0; i < g->nnodes; i++) free(g->nodes[i].attrs);   /* inputs, outputs: arena */
    free(g->nodes);
    free(g->values);
    free(g->inits);
    free(g->inputs);
    free(g->outputs);
    free(g->opsets);
    free(g->meta);
    free(g);
}

pp_status graph_keep_mmap(pp_graph *g, void *addr, size_t len, pp_error *err)
{
    pp_graph_store *s = g->store;
    if (s->nmmaps == s->mmap_cap) {
        int cap = s->mmap_cap ? 2 * s->mmap_cap : 4;
        graph_mmap *m = pp_realloc_array(s->mmaps, (size_t)cap, sizeof *m);
        if (!m) return PP_NOMEM(err);
        s->mmaps = m;
        s->mmap_cap = cap;
    }
    s->mmaps[s->nmmaps++] = (graph_mmap){addr, len};
    return PP_OK;
}

/* Grows *arr (of `size`-byte items, *cap slots) to hold `need` items. The new slots are
 * not zeroed: every add_* call fills the item it appends. */
static int grow(void **arr, int *cap, int need, size_t size)
{
    if (need <= *cap) return 1;
    int c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *p = pp_realloc_array(*arr, (size_t)c, size);
    if (!p) return 0;
    advise_huge(p, (size_t)c * size);
    *arr = p;
    *cap = c;
    return 1;
}

/* FNV-1a over the n bytes of a name. */
static uint64_t hash_name(const void *name, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *c = name, *e = c + n; c < e; c++) h = (h ^ *c) * 1099511628211ull;
    return h;
}

static int rehash(pp_graph *g, int cap)
{
    struct name_slot *slots = calloc((size_t)cap, sizeof *slots);
    if (!slots) return 0;
    advise_huge(slots, (size_t)cap * sizeof *slots);
    for (int v = 0; v < g->nvalues; v++) {
        uint64_t full = g->store->name_hash[v], h = full & (uint64_t)(cap - 1);
        while (slots[h].name) h = (h + 1) & (uint64_t)(cap - 1);
        slots[h] = (struct name_slot){g->values[v].name, (uint32_t)v, (uint32_t)(full >> 32)};
    }
    free(g->store->name_slots);
    g->store->name_slots = slots;
    g->store->name_cap = cap;
    return 1;
}

void graph_prefetch_value(const pp_graph *g, const char *name)
{
    const pp_graph_store *s = g->store;
    if (s->name_cap) __builtin_prefetch(&s->name_slots[hash_name(name, strlen(name)) & (uint64_t)(s->name_cap - 1)]);
}

/* The slot holding the n-byte `name` (hash `full`), or the empty slot where it would go. */
static struct name_slot *find_slot(const pp_graph_store *s, const char *name, size_t n, uint64_t full)
{
    uint64_t mask = (uint64_t)(s->name_cap - 1), h = full & mask;
    uint32_t tag = (uint32_t)(full >> 32);
    for (struct name_slot *e; (e = &s->name_slots[h])->name; h = (h + 1) & mask)
        if (e->tag == tag && !strncmp(e->name, name, n) && !e->name[n]) return e;
    return &s->name_slots[h];
}

int graph_find_value_n(const pp_graph *g, const char *name, size_t n)
{
    const pp_graph_store *s = g->store;
    if (!s->name_cap) return -1;
    const struct name_slot *e = find_slot(s, name, n, hash_name(name, n));
    return e->name ? (int)e->id : -1;
}

int pp_graph_find_value(const pp_graph *g, const char *name)
{
    return name ? graph_find_value_n(g, name, strlen(name)) : -1;
}

int pp_value_last_reader(const pp_graph *g, int v)
{
    const pp_value *val = &g->values[v];
    int last = val->producer;
    for (int k = 0; last >= 0 && k < val->nconsumers; k++)
        if (val->consumers[k] > last) last = val->consumers[k];
    return last;
}

int graph_reserve(pp_graph *g, size_t nodes, size_t values, size_t inits)
{
    pp_graph_store *s = g->store;
    if (nodes > INT_MAX / 2 || values > INT_MAX / 4 || inits > INT_MAX / 2) return 0;
    int hash_cap = s->value_cap, cap = 64;
    while (cap < 2 * (int)values) cap *= 2;
    return grow((void **)&g->nodes, &s->node_cap, (int)nodes, sizeof *g->nodes) &&
           grow((void **)&g->values, &s->value_cap, (int)values, sizeof *g->values) &&
           grow((void **)&s->name_hash, &hash_cap, s->value_cap, sizeof *s->name_hash) &&
           grow((void **)&g->inits, &s->init_cap, (int)inits, sizeof *g->inits) &&
           (cap <= s->name_cap || rehash(g, cap));
}

#define RECENT 16   /* newest values checked before the table */

/* The value named `name` (hash `full`) if it is one of the RECENT newest values or the
 * one after the last value found in the table, else -1. Most node inputs are (an output
 * a few nodes back, the next weight), and their hashes are in cache where the table's
 * slots are not. */
static int recent_value(pp_graph *g, const char *name, uint64_t full)
{
    pp_graph_store *s = g->store;
    const uint64_t *h = s->name_hash;
    for (int v = g->nvalues - 1; v >= 0 && v >= g->nvalues - RECENT; v--)
        if (h[v] == full && !strcmp(g->values[v].name, name)) return v;
    int next = s->last_found + 1;
    if (next < g->nvalues && h[next] == full && !strcmp(g->values[next].name, name)) return s->last_found = next;
    return -1;
}

int graph_big_arrays(const pp_graph *g, size_t nodes, size_t values, size_t inits, graph_region *r, int max)
{
    const pp_graph_store *s = g->store;
    if (nodes > (size_t)s->node_cap) nodes = (size_t)s->node_cap;
    if (values > (size_t)s->value_cap) values = (size_t)s->value_cap;
    if (inits > (size_t)s->init_cap) inits = (size_t)s->init_cap;
    graph_region all[] = {
        {g->values, values * sizeof *g->values},
        {s->name_slots, (size_t)s->name_cap * sizeof *s->name_slots},
        {g->nodes, nodes * sizeof *g->nodes},
        {s->name_hash, values * sizeof *s->name_hash},
        {g->inits, inits * sizeof *g->inits},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0] && n < max; i++)
        if (all[i].p && all[i].n >= HUGE_MIN) r[n++] = all[i];
    return n;
}

int pp_graph_value(pp_graph *g, const char *name)
{
    pp_graph_store *s = g->store;
    size_t n = strlen(name);
    uint64_t full = hash_name(name, n);
    int found = recent_value(g, name, full);
    if (found >= 0) return found;
    if (s->name_cap) {
        struct name_slot *e = find_slot(s, name, n, full);
        if (e->name) return s->last_found = (int)e->id;
    }
    int hash_cap = s->value_cap;
    if (!grow((void **)&g->values, &s->value_cap, g->nvalues + 1, sizeof *g->values)) return -1;
    if (!grow((void **)&s->name_hash, &hash_cap, s->value_cap, sizeof *s->name_hash)) return -1;
    if (2 * (g->nvalues + 1) > s->name_cap && !rehash(g, s->name_cap ? 2 * s->name_cap : 64)) return -1;
    pp_value *v = &g->values[g->nvalues];
    memset(v, 0, sizeof *v);
    if (!(v->name = pp_graph_strdup(g, name))) return -1;
    v->shape.rank = -1;
    v->producer = -1;
    v->init = -1;
    int id = g->nvalues++;
    s->name_hash[id] = full;
    *find_slot(s, name, n, full) = (struct name_slot){v->name, (uint32_t)id, (uint32_t)(full >> 32)};
    return id;
}

/* Copies a shape's symbolic names into the graph. */
static pp_shape own_shape(pp_graph *g, const pp_shape *shape)
{
    pp_shape s;
    memset(&s, 0, sizeof s);
    s.rank = -1;
    if (!shape) return s;
    s = *shape;
    for (int i = 0; i < s.rank && i < PP_MAX_RANK; i++)
        if (s.syms[i]) s.syms[i] = pp_graph_strdup(g, s.syms[i]);
    return s;
}

static pp_status add_io(pp_graph *g, const char *name, pp_dtype dtype, const pp_shape *shape,
                        int **list, int *n, int *cap, pp_error *err)
{
    int v = pp_graph_value(g, name);
    if (v < 0 || !grow((void **)list, cap, *n + 1, sizeof **list))
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory adding '%s'", name);
    if (shape && shape->rank > PP_MAX_RANK)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "value '%s' has rank %d (at most %d supported)",
                            name, shape->rank, PP_MAX_RANK);
    for (int i = 0; i < *n; i++)
        if ((*list)[i] == v) return PP_OK;
    (*list)[(*n)++] = v;
    if (dtype != PP_DTYPE_UNDEFINED) g->values[v].dtype = dtype;
    if (shape) g->values[v].shape = own_shape(g, shape);
    return PP_OK;
}

pp_status pp_graph_add_input(pp_graph *g, const char *name, pp_dtype dtype, const pp_shape *shape,
                             pp_error *err)
{
    PP_CHECK(add_io(g, name, dtype, shape, &g->inputs, &g->ninputs, &g->store->input_cap, err));
    pp_value *v = &g->values[pp_graph_find_value(g, name)];
    if (v->kind != PP_VALUE_INITIALIZER) v->kind = PP_VALUE_INPUT;
    return PP_OK;
}

pp_status pp_graph_add_output(pp_graph *g, const char *name, pp_dtype dtype, const pp_shape *shape,
                              pp_error *err)
{
    PP_CHECK(add_io(g, name, dtype, shape, &g->outputs, &g->noutputs, &g->store->output_cap, err));
    g->values[pp_graph_find_value(g, name)].is_output = 1;
    return PP_OK;
}

pp_status pp_graph_add_initializer(pp_graph *g, const char *name, pp_dtype dtype, const pp_shape *shape,
                                   const void *data, size_t nbytes, int copy, pp_error *err)
{
    int v = pp_graph_value(g, name);
    if (v < 0) return pp_error_set(err, PP_ERR_NOMEM, "out of memory adding initializer '%s'", name);
    if (g->values[v].init >= 0)
        return pp_error_set(err, PP_ERR_PARSE, "initializer '%s' is defined twice", name);
    if (shape->rank > PP_MAX_RANK)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "initializer '%s' has rank %d (at most %d supported)",
                            name, shape->rank, PP_MAX_RANK);
    PP_CHECK(pp_shape_check_size(shape, dtype, err, "initializer '%s'", name));
    int64_t numel = pp_shape_numel(shape);
    size_t esize = pp_dtype_size(dtype);
    if (numel < 0 || !esize || (size_t)numel * esize != nbytes)
        return pp_error_set(err, PP_ERR_PARSE,
                            "initializer '%s' (%s): %zu bytes of data for %lld elements",
                            name, pp_dtype_name(dtype), nbytes, (long long)numel);
    if (!grow((void **)&g->inits, &g->store->init_cap, g->ninits + 1, sizeof *g->inits))
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory adding initializer '%s'", name);
    const void *d = data;
    if (copy) {
        void *c = pp_graph_alloc(g, nbytes);
        if (!c) return pp_error_set(err, PP_ERR_NOMEM, "out of memory copying initializer '%s'", name);
        if (nbytes) memcpy(c, data, nbytes);
        d = c;
    }
    pp_initializer *in = &g->inits[g->ninits];
    in->value = v;
    in->t.dtype = dtype;
    in->t.shape = own_shape(g, shape);
    in->t.data = d;
    in->t.nbytes = nbytes;
    pp_value *val = &g->values[v];
    val->kind = PP_VALUE_INITIALIZER;
    val->init = g->ninits++;
    val->dtype = dtype;
    val->shape = in->t.shape;
    return PP_OK;
}

pp_status graph_make_const(pp_graph *g, int value, const pp_const_tensor *t, pp_error *err)
{
    pp_value *v = &g->values[value];
    if (v->init >= 0) return pp_error_set(err, PP_ERR_INTERNAL, "value '%s' is already constant", v->name);
    v->producer = -1;
    v->kind = PP_VALUE_NODE;  /* pp_graph_add_initializer makes it INITIALIZER */
    PP_CHECK(pp_graph_add_initializer(g, v->name, t->dtype, &t->shape, t->data, t->nbytes, 1, err));
    g->values[value].folded = 1;
    return PP_OK;
}

/* A copy of an op type or domain, shared by the nodes that have the same one (a graph
 * has few distinct ones; ids and passes compare them as strings). */
static const char *intern(pp_graph *g, const char *str)
{
    const char **slot = &g->store->interned[hash_name(str, strlen(str)) % PP_INTERNED];
    if (!*slot || strcmp(*slot, str)) *slot = pp_graph_strdup(g, str);
    return *slot;
}

pp_status pp_graph_add_node(pp_graph *g, const char *op_type, const char *domain, const char *name,
                            const char *const *inputs, int ninputs,
                            const char *const *outputs, int noutputs,
                            int *node_id, pp_error *err)
{
    if (!op_type || !*op_type)
        return pp_error_set(err, PP_ERR_PARSE, "node %d ('%s') has no op_type", g->nnodes, name ? name : "");
    if (!grow((void **)&g->nodes, &g->store->node_cap, g->nnodes + 1, sizeof *g->nodes)) goto oom;
    pp_node *n = &g->nodes[g->nnodes];
    memset(n, 0, sizeof *n);
    char auto_name[128];
    if (!name || !*name) {
        snprintf(auto_name, sizeof auto_name, "%s_%d", op_type, g->nnodes);
        name = auto_name;
    }
    n->name = pp_graph_strdup(g, name);
    n->op_type = intern(g, op_type);
    n->domain = intern(g, domain && strcmp(domain, "ai.onnx") ? domain : "");
    n->op = pp_op_lookup(n->domain, op_type);   /* PP_OP_UNKNOWN is refused by pp_graph_finalize */
    /* the input and output ids, in the arena */
    n->inputs = graph_alloc_uninit(g, ((size_t)ninputs + (size_t)noutputs + 1) * sizeof *n->inputs);
    if (!n->name || !n->op_type || !n->domain || !n->inputs) goto oom;
    n->outputs = n->inputs + ninputs;
    for (int i = 0; i < ninputs; i++) {
        n->inputs[i] = (inputs[i] && *inputs[i]) ? pp_graph_value(g, inputs[i]) : -1;
        if (inputs[i] && *inputs[i] && n->inputs[i] < 0) goto oom;
    }
    for (int i = 0; i < noutputs; i++) {
        n->outputs[i] = (outputs[i] && *outputs[i]) ? pp_graph_value(g, outputs[i]) : -1;
        if (outputs[i] && *outputs[i] && n->outputs[i] < 0) goto oom;
    }
    n->ninputs = ninputs;
    n->noutputs = noutputs;
    if (node_id) *node_id = g->nnodes;
    g->nnodes++;
    return PP_OK;
oom:
    return pp_error_set(err, PP_ERR_NOMEM, "out of memory adding node '%s'", name ? name : op_type);
}

pp_status pp_graph_set_attr(pp_graph *g, int node_id, const pp_attr *a, pp_error *err)
{
    pp_node *n = &g->nodes[node_id];
    pp_attr *attrs = pp_realloc_array(n->attrs, (size_t)n->nattrs + 1, sizeof *attrs);
    if (!attrs) return PP_NOMEM(err);
    n->attrs = attrs;
    pp_attr c = *a;
    c.name = pp_graph_strdup(g, a->name);
    if (a->s) c.s = pp_graph_strdup(g, a->s);
    if (a->floats && a->n) {
        float *f = pp_graph_alloc(g, (size_t)a->n * sizeof *f);
        if (!f) return PP_NOMEM(err);
        memcpy(f, a->floats, (size_t)a->n * sizeof *f);
        c.floats = f;
    }
    if (a->ints && a->n) {
        int64_t *v = pp_graph_alloc(g, (size_t)a->n * sizeof *v);
        if (!v) return PP_NOMEM(err);
        memcpy(v, a->ints, (size_t)a->n * sizeof *v);
        c.ints = v;
    }
    if (a->strings && a->n) {
        const char **v = pp_graph_alloc(g, (size_t)a->n * sizeof *v);
        if (!v) return PP_NOMEM(err);
        for (int i = 0; i < a->n; i++) v[i] = pp_graph_strdup(g, a->strings[i]);
        c.strings = v;
    }
    if (a->type == PP_ATTR_TENSOR && a->t.nbytes) {
        void *d = pp_graph_alloc(g, a->t.nbytes);
        if (!d) return PP_NOMEM(err);
        memcpy(d, a->t.data, a->t.nbytes);
        c.t.data = d;
        c.t.shape = own_shape(g, &a->t.shape);
    }
    n->attrs[n->nattrs++] = c;
    return PP_OK;
}

pp_status pp_graph_set_attr_int(pp_graph *g, int node_id, const char *name, int64_t v, pp_error *err)
{
    pp_attr a = {.name = name, .type = PP_ATTR_INT, .i = v};
    return pp_graph_set_attr(g, node_id, &a, err);
}

pp_status pp_graph_set_attr_float(pp_graph *g, int node_id, const char *name, float v, pp_error *err)
{
    pp_attr a = {.name = name, .type = PP_ATTR_FLOAT, .f = v};
    return pp_graph_set_attr(g, node_id, &a, err);
}

pp_status pp_graph_set_attr_string(pp_graph *g, int node_id, const char *name, const char *v, pp_error *err)
{
    pp_attr a = {.name = name, .type = PP_ATTR_STRING, .s = v};
    return pp_graph_set_attr(g, node_id, &a, err);
}

pp_status pp_graph_set_attr_ints(pp_graph *g, int node_id, const char *name, const int64_t *v, int n,
                                 pp_error *err)
{
    pp_attr a = {.name = name, .type = PP_ATTR_INTS, .ints = v, .n = n};
    return pp_graph_set_attr(g, node_id, &a, err);
}

pp_status pp_graph_set_attr_floats(pp_graph *g, int node_id, const char *name, const float *v, int n,
                                   pp_error *err)
{
    pp_attr a = {.name = name, .type = PP_ATTR_FLOATS, .floats = v, .n = n};
    return pp_graph_set_attr(g, node_id, &a, err);
}

pp_status pp_graph_set_attr_tensor(pp_graph *g, int node_id, const char *name, const pp_const_tensor *t,
                                   pp_error *err)
{
    pp_attr a = {.name = name, .type = PP_ATTR_TENSOR, .t = *t};
    return pp_graph_set_attr(g, node_id, &a, err);
}

pp_status pp_graph_add_opset(pp_graph *g, const char *domain, int64_t version, pp_error *err)
{
    const char *d = domain && strcmp(domain, "ai.onnx") ? domain : "";
    for (int i = 0; i < g->nopsets; i++)
        if (!strcmp(g->opsets[i].domain, d)) {
            g->opsets[i].version = version;
            if (!*d) g->opset = version;
            return PP_OK;
        }
    if (!grow((void **)&g->opsets, &g->store->opset_cap, g->nopsets + 1, sizeof *g->opsets))
        return PP_NOMEM(err);
    g->opsets[g->nopsets++] = (pp_opset){pp_graph_strdup(g, d), version};
    if (!*d) g->opset = version;
    return PP_OK;
}

const char *pp_graph_metadata(const pp_graph *g, const char *key)
{
    for (int i = 0; i < g->nmeta; i++)
        if (!strcmp(g->meta[i].key, key)) return g->meta[i].value;
    return NULL;
}

pp_status pp_graph_set_metadata(pp_graph *g, const char *key, const char *value, pp_error *err)
{
    const char *v = pp_graph_strdup(g, value);
    if (!v) return PP_NOMEM(err);
    for (int i = 0; i < g->nmeta; i++)
        if (!strcmp(g->meta[i].key, key)) {
            g->meta[i].value = v;
            return PP_OK;
        }
    pp_graph_meta *m = realloc(g->meta, ((size_t)g->nmeta + 1) * sizeof *m);
    if (!m) return PP_NOMEM(err);
    g->meta = m;
    if (!(m[g->nmeta].key = pp_graph_strdup(g, key))) return PP_NOMEM(err);
    m[g->nmeta++].value = v;
    return PP_OK;
}

const pp_const_tensor *pp_graph_const(const pp_graph *g, int value)
{
    if (value < 0 || value >= g->nvalues || g->values[value].init < 0) return NULL;
    return &g->inits[g->values[value].init].t;
}

int pp_graph_find_node(const pp_graph *g, const char *name)
{
    for (int i = 0; i < g->nnodes; i++)
        if (!strcmp(g->nodes[i].name, name)) return i;
    return -1;
}
