/* Reading an ONNX ModelProto into a pp_graph: opsets, nodes with their attributes,
 * value types and initializers (graph/load_tensor.c). Elements are decoded one at a
 * time (graph/load_wire.c; protobuf-c for the unusual ones). Every malformed input
 * becomes an error naming what is wrong. */
#include "load_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/graph_ir.h>

static void *unpack_alloc(void *data, size_t size)
{
    loader *L = data;
    if (size < BIG_ALLOC) {
        void *p = graph_alloc_uninit(L->cur, size);   /* protobuf-c initialises what it unpacks */
        L->oom |= !p;
        return p;
    }
    if (L->nbig == L->big_cap) {
        int cap = L->big_cap ? 2 * L->big_cap : 16;
        const void **b = pp_realloc_array(L->big, (size_t)cap, sizeof *b);
        if (!b) return L->oom = 1, NULL;
        L->big = b;
        L->big_cap = cap;
    }
    void *p = pp_graph_alloc(L->g, size);
    if (p) L->big[L->nbig++] = p;
    L->oom |= !p;
    return p;
}

static void unpack_free(void *data, void *p) { (void)data, (void)p; }   /* arenas free at once */

/* A NUL-terminated copy of a protobuf bytes field, owned by the graph. */
static char *graph_cstr(pp_graph *g, ProtobufCBinaryData b)
{
    char *s = pp_graph_alloc(g, b.len + 1);
    if (s && b.len) memcpy(s, b.data, b.len);
    return s;
}

/* ---- attributes, nodes ---------------------------------------------------- */

static pp_status load_attr(loader *L, int node_id, const Onnx__AttributeProto *ap, pp_error *err)
{
    pp_graph *g = L->g;
    const pp_node *n = &g->nodes[node_id];
    pp_attr a;
    memset(&a, 0, sizeof a);
    a.name = ap->name;
    if (!a.name || !*a.name)
        return pp_error_set(err, PP_ERR_PARSE, "node '%s' (%s) has an attribute without a name", n->name, n->op_type);
    a.type = ap->has_type ? (pp_attr_type)ap->type : PP_ATTR_UNDEFINED;
    size_t count = 0;
    switch (a.type) {
    case PP_ATTR_FLOAT: a.f = ap->f; break;
    case PP_ATTR_INT: a.i = ap->i; break;
    case PP_ATTR_STRING:
        if (!(a.s = graph_cstr(g, ap->s))) return PP_NOMEM(err);
        break;
    case PP_ATTR_TENSOR:
        if (!ap->t)
            return pp_error_set(err, PP_ERR_PARSE, "node '%s' (%s): tensor attribute '%s' has no tensor",
                                n->name, n->op_type, a.name);
        char label[512];
        snprintf(label, sizeof label, "node '%s' (%s), attribute '%s'", n->name, n->op_type, a.name);
        PP_CHECK(load_tensor(L, ap->t, label, &a.t, err));
        break;
    case PP_ATTR_FLOATS: count = ap->n_floats; a.floats = ap->floats; break;
    case PP_ATTR_INTS: count = ap->n_ints; a.ints = ap->ints; break;
    case PP_ATTR_STRINGS: {
        count = ap->n_strings;
        const char **s = pp_graph_alloc(g, (count ? count : 1) * sizeof *s);
        if (!s) return PP_NOMEM(err);
        for (size_t i = 0; i < count; i++)
            if (!(s[i] = graph_cstr(g, ap->strings[i]))) return PP_NOMEM(err);
        a.strings = s;
        break;
    }
    case PP_ATTR_GRAPH:
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' (%s): attribute '%s' is a graph; control flow "
                            "(If, Loop, Scan) is not supported", n->name, n->op_type, a.name);
    default:
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' (%s): attribute '%s' has type %d, which onnxpipe "
                            "does not support", n->name, n->op_type, a.name, (int)a.type);
    }
    if (count > INT_MAX)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s': attribute '%s' has too many values", n->name, a.name);
    a.n = (int)count;
    pp_status st = pp_graph_set_attr(g, node_id, &a, err);
    if (st != PP_OK) pp_error_prefix(err, "node '%s' (%s): ", n->name, n->op_type);
    return st;
}

static pp_status load_node(loader *L, const Onnx__NodeProto *np, pp_error *err)
{
    if (np->n_input > INT_MAX || np->n_output > INT_MAX)
        return pp_error_set(err, PP_ERR_PARSE, "node '%s' has too many inputs or outputs", load_str_or(np->name, ""));
    int id;
    PP_CHECK(pp_graph_add_node(L->g, np->op_type, np->domain, np->name, (const char *const *)np->input,
                               (int)np->n_input, (const char *const *)np->output, (int)np->n_output, &id, err));
    for (size_t i = 0; i < np->n_attribute; i++) PP_CHECK(load_attr(L, id, np->attribute[i], err));
    return PP_OK;
}

/* ---- the model ---------------------------------------------------------- */

static pp_status check_name(const Onnx__ValueInfoProto *vi, const char *role, size_t i, pp_error *err)
{
    if (vi->name && *vi->name) return PP_OK;
    return pp_error_set(err, PP_ERR_PARSE, "graph %s %zu has no name", role, i);
}

/* The graph's repeated fields. */
typedef enum { EL_NODE, EL_INIT, EL_INPUT, EL_OUTPUT, EL_VALUE_INFO } el_kind;

static size_t count(const loader *L, el_kind k)
{
    const Onnx__GraphProto *gp = L->gp;
    const wire_graph *w = &L->wg;
    switch (k) {
    case EL_NODE: return gp ? gp->n_node : w->n_node;
    case EL_INIT: return gp ? gp->n_initializer : w->n_init;
    case EL_INPUT: return gp ? gp->n_input : w->n_input;
    case EL_OUTPUT: return gp ? gp->n_output : w->n_output;
    default: return gp ? gp->n_value_info : w->n_value_info;
    }
}

/* Element i of kind k; from the wire it is valid until the next call. NULL when it does
 * not parse (L->oom tells whether memory ran out). */
static const void *element(loader *L, el_kind k, size_t i)
{
    const Onnx__GraphProto *gp = L->gp;
    if (gp) {
        const void *const *arr[] = {(const void *const *)gp->node, (const void *const *)gp->initializer,
                                    (const void *const *)gp->input, (const void *const *)gp->output,
                                    (const void *const *)gp->value_info};
        return arr[k][i];
    }
    const wire_span *spans[] = {L->wg.node, L->wg.init, L->wg.input, L->wg.output, L->wg.value_info};
    graph_arena_reset(L->elem);
    L->cur = L->elem;
    wire_span s = spans[k][i];
    const void *e;
    switch (k) {
    case EL_NODE:
        if (!(e = wire_node(s, &L->alloc))) e = onnx__node_proto__unpack(&L->alloc, s.n, s.p);
        break;
    case EL_INIT:
        if (!(e = wire_tensor(s, &L->alloc))) e = onnx__tensor_proto__unpack(&L->alloc, s.n, s.p);
        break;
    default:
        if (!(e = wire_value_info(s, &L->alloc))) e = onnx__value_info_proto__unpack(&L->alloc, s.n, s.p);
        break;
    }
    L->cur = L->scratch;
    return e;
}

/* The message for a model that did not parse (the same wherever the fault lies). */
static pp_status parse_error(loader *L, pp_error *err)
{
    L->parse_failed = 1;
    return L->oom ? pp_error_set(err, PP_ERR_NOMEM, "out of memory reading '%s'", L->what)
                  : pp_error_set(err, PP_ERR_PARSE, "'%s' is not a valid ONNX model (protobuf parse failed); "
                                 "is it truncated?", L->what);
}

/* 1 if every element parses: a model that does not parse is reported as such before any
 * other fault, as when protobuf-c unpacked it whole. */
static int elements_parse(loader *L)
{
    for (el_kind k = EL_NODE; k <= EL_VALUE_INFO; k++)
        for (size_t i = 0; i < count(L, k); i++)
            if (!element(L, k, i)) return 0;
    return 1;
}

/* var = element i of kind k, or return the parse error (in load_graph). */
#define ELEMENT(var, L, k, i)                                                    \
    do {                                                                         \
        if (!((var) = element((L), (k), (i)))) return parse_error((L), err);     \
    } while (0)

#define LOOKAHEAD 8   /* elements decoded ahead, so that their names' table slots are fetched early */

typedef struct elem_slot {
    const void *elem;      /* the decoded node or tensor, or NULL */
    size_t used;           /* bytes of buf handed out */
    max_align_t buf[64];   /* what the decoder allocates (1 KiB) */
} elem_slot;

static void *slot_alloc(void *data, size_t size)
{
    elem_slot *s = data;
    size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (size > sizeof s->buf - s->used) return NULL;
    void *p = (char *)s->buf + s->used;
    s->used += size;
    return p;
}

/* Initializer or node j decoded into its slot of the ring (NULL where the wire decoder
 * does not take it or it does not fit: element() decodes it in its turn), and the table
 * slots of the values it makes prefetched (their insertion is otherwise a cache miss). */
static void decode_ahead(loader *L, elem_slot *ring, el_kind k, size_t j)
{
    if (L->gp || j >= count(L, k)) return;
    elem_slot *s = &ring[j % LOOKAHEAD];
    ProtobufCAllocator a = {slot_alloc, unpack_free, s};
    s->used = 0;
    if (k == EL_INIT) {
        const Onnx__TensorProto *t = wire_tensor(L->wg.init[j], &a);
        if (t && t->name) graph_prefetch_value(L->g, t->name);
        s->elem = t;
    } else {
        const Onnx__NodeProto *n = wire_node(L->wg.node[j], &a);
        for (size_t o = 0; n && o < n->n_output; o++) graph_prefetch_value(L->g, n->output[o]);
        s->elem = n;
    }
}

/* Element i of kind k (EL_INIT or EL_NODE) from the ring, or decoded now; the next one
 * LOOKAHEAD ahead goes into the ring once the caller is done with this one. */
#define ELEMENT_AHEAD(var, L, ring, k, i)                                    \
    do {                                                                     \
        (var) = (L)->gp ? NULL : (ring)[(i) % LOOKAHEAD].elem;               \
        if (!(var)) ELEMENT(var, L, k, i);                                   \
    } while (0)

/* "initializer '<name>'" in buf[cap], cut as snprintf cuts it (without its cost per
 * initializer). */
static const char *init_label(char *buf, size_t cap, const char *name)
{
    static const char head[] = "initializer '";
    size_t h = sizeof head - 1, n = strlen(name), total = h + n + 1;
    size_t len = total < cap ? total : cap - 1;   /* cap > h */
    memcpy(buf, head, h);
    memcpy(buf + h, name, len - h < n ? len - h : n);
    if (len == total) buf[len - 1] = '\'';
    buf[len] = '\0';
    return buf;
}

/* The value named as r says, or -1; tried first as the one after `prev` (value_info
 * usually lists values in the order nodes made them). */
static int ahead_value(const pp_graph *g, const type_rec *r, int prev)
{
    if (prev >= 0 && prev + 1 < g->nvalues) {
        const char *name = g->values[prev + 1].name;
        if (!strncmp(name, r->name, r->len) && !name[r->len]) return prev + 1;
    }
    return graph_find_value_n(g, r->name, r->len);
}

/* Room for about one new value per initializer, input, node and output; the
 * graph's large arrays that this fills go to *fill. */
static void reserve(loader *L, graph_region *fill, int max, int *nfill)
{
    size_t nodes = count(L, EL_NODE), inits = count(L, EL_INIT);
    size_t values = inits + count(L, EL_INPUT) + nodes + count(L, EL_OUTPUT);
    graph_reserve(L->g, nodes, values, inits);
    *nfill = graph_big_arrays(L->g, nodes, values, inits, fill, max);
}

static pp_status load_graph(loader *L, const Onnx__GraphProto *gp, pp_error *err)
{
    pp_graph *g = L->g;
    pp_dtype dt;
    pp_shape sh;
    const Onnx__ValueInfoProto *vi;
    elem_slot ring[LOOKAHEAD];
    for (size_t j = 0; j < LOOKAHEAD; j++) decode_ahead(L, ring, EL_INIT, j);
    for (size_t i = 0; i < count(L, EL_INIT); i++) {
        const Onnx__TensorProto *tp;
        ELEMENT_AHEAD(tp, L, ring, EL_INIT, i);
        if (!tp->name || !*tp->name) return pp_error_set(err, PP_ERR_PARSE, "initializer %zu has no name", i);
        pp_const_tensor t;
        char label[512];
        PP_CHECK(load_tensor(L, tp, init_label(label, sizeof label, tp->name), &t, err));
        PP_CHECK(pp_graph_add_initializer(g, tp->name, t.dtype, &t.shape, t.data, t.nbytes, 0, err));
        decode_ahead(L, ring, EL_INIT, i + LOOKAHEAD);
    }
    if (gp->n_sparse_initializer)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "sparse initializers are not supported");
    for (size_t i = 0; i < count(L, EL_INPUT); i++) {
        ELEMENT(vi, L, EL_INPUT, i);
        PP_CHECK(check_name(vi, "input", i, err));
        int v = pp_graph_find_value(g, vi->name);
        if (v >= 0 && g->values[v].init >= 0) continue;   /* an initializer listed as input (IR < 4 style) */
        PP_CHECK(load_type(g, vi, &dt, &sh, err));
        PP_CHECK(pp_graph_add_input(g, vi->name, dt, &sh, err));
    }
    for (size_t j = 0; j < LOOKAHEAD; j++) decode_ahead(L, ring, EL_NODE, j);
    for (size_t i = 0; i < count(L, EL_NODE); i++) {
        const Onnx__NodeProto *np;
        ELEMENT_AHEAD(np, L, ring, EL_NODE, i);
        PP_CHECK(load_node(L, np, err));
        decode_ahead(L, ring, EL_NODE, i + LOOKAHEAD);
    }
    for (size_t i = 0; i < count(L, EL_OUTPUT); i++) {
        ELEMENT(vi, L, EL_OUTPUT, i);
        PP_CHECK(check_name(vi, "output", i, err));
        PP_CHECK(load_type(g, vi, &dt, &sh, err));
        PP_CHECK(pp_graph_add_output(g, vi->name, dt, sh.rank >= 0 ? &sh : NULL, err));
    }
    /* value_info: types of intermediate values; inference recomputes and checks them */
    int v = -1;
    for (size_t i = 0; i < count(L, EL_VALUE_INFO); i++) {
        const type_rec *r = types_ahead_get(&L->ahead, i);
        if (r) {
            v = ahead_value(g, r, v);
            if (v < 0 || g->values[v].init >= 0) continue;
            if (r->dtype != PP_DTYPE_UNDEFINED) g->values[v].dtype = r->dtype;
            if (r->rank >= 0) {
                pp_shape *sh_v = &g->values[v].shape;
                memset(sh_v, 0, sizeof *sh_v);
                sh_v->rank = r->rank;
                memcpy(sh_v->dims, r->dims, (size_t)r->rank * sizeof *r->dims);
            }
            continue;
        }
        ELEMENT(vi, L, EL_VALUE_INFO, i);
        PP_CHECK(check_name(vi, "value_info", i, err));
        v = pp_graph_find_value(g, vi->name);
        if (v < 0 || g->values[v].init >= 0) continue;
        PP_CHECK(load_type(g, vi, &dt, &sh, err));
        if (dt != PP_DTYPE_UNDEFINED) g->values[v].dtype = dt;
        if (sh.rank >= 0) g->values[v].shape = sh;
    }
    return PP_OK;
}

/* The ai.onnx opset version (13..23 are what onnxpipe implements). */
static pp_status model_opset(const Onnx__ModelProto *m, int64_t *opset, pp_error *err)
{
    int found = 0;   /* a version of its own, not -1: a file may say any number */
    *opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = load_str_or(m->opset_import[i]->domain, "");
        if (!*d || !strcmp(d, "ai.onnx")) *opset = m->opset_import[i]->version, found = 1;
    }
    if (!found)
        return pp_error_set(err, PP_ERR_PARSE, "the model imports no ai.onnx opset");
    if (*opset < 13)
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "the model uses ai.onnx opset %lld; onnxpipe reads opsets "
                            "13-23 (convert it with onnx.version_converter.convert_version(model, 17))",
                            (long long)*opset);
    if (*opset > 23)
        pp_log(PP_LOG_WARN, "model uses ai.onnx opset %lld; onnxpipe is tested with opsets 13-23",
               (long long)*opset);
    return PP_OK;
}

/* Opsets, names and the graph, once the model-level messages are unpacked. */
static pp_status load_parts(loader *L, const Onnx__ModelProto *m, const Onnx__GraphProto *gp, pp_error *err)
{
    int64_t opset;
    PP_CHECK(model_opset(m, &opset, err));
    L->g->name = pp_graph_strdup(L->g, load_str_or(gp->name, "graph"));
    L->g->ir_version = m->has_ir_version ? m->ir_version : 8;
    L->g->producer_name = pp_graph_strdup(L->g, load_str_or(m->producer_name, ""));
    for (size_t i = 0; i < m->n_opset_import; i++)
        PP_CHECK(pp_graph_add_opset(L->g, load_str_or(m->opset_import[i]->domain, ""), m->opset_import[i]->version,
                                    err));
    for (size_t i = 0; i < m->n_metadata_props; i++)
        if (m->metadata_props[i]->key)
            PP_CHECK(pp_graph_set_metadata(L->g, m->metadata_props[i]->key,
                                           load_str_or(m->metadata_props[i]->value, ""), err));
    return load_graph(L, gp, err);
}

/* what: the file (model_path) or "<buffer>", for messages. */
static pp_status load_model(const void *buf, size_t len, const char *base_dir, const char *what,
                            const char *model_path, const pp_graph_options *opt, pp_graph **out, pp_error *err)
{
    *out = NULL;
    if (len == 0) return pp_error_set(err, PP_ERR_PARSE, "'%s' is empty, not an ONNX model", what);
    loader L = {.base_dir = base_dir, .model_path = model_path, .what = what};
    pp_status st = PP_OK;
    uint8_t *rest = NULL;
    size_t rest_len = 0;
    PP_CHECK_GOTO(pp_graph_create("graph", 0, &L.g, err), st, done);
    PP_CHECK_GOTO(pp_graph_create("unpack", 0, &L.scratch, err), st, done);
    PP_CHECK_GOTO(pp_graph_create("element", 0, &L.elem, err), st, done);
    L.cur = L.scratch;
    L.alloc = (ProtobufCAllocator){unpack_alloc, unpack_free, &L};
    /* the graph's elements stay on the wire until read; odd files are unpacked whole */
    int split = wire_split_model(buf, len, &rest, &rest_len, &L.wg);
    const Onnx__ModelProto *m = NULL;
    const Onnx__GraphProto *gp = NULL;
    if (split >= 0) m = onnx__model_proto__unpack(&L.alloc, split ? rest_len : len, split ? rest : buf);
    if (m) gp = split ? onnx__graph_proto__unpack(&L.alloc, L.wg.rest_len, L.wg.rest) : m->graph;
    L.oom |= split < 0;
    if (!m || (split && !gp)) {
        st = parse_error(&L, err);
        goto done;
    }
    if (!gp) {
        st = pp_error_set(err, PP_ERR_PARSE, "'%s' holds no graph; is it an ONNX model?", what);
        goto done;
    }
    L.gp = split ? NULL : gp;
    graph_region fill[5];
    int nfill;
    reserve(&L, fill, 5, &nfill);
    if (split) types_ahead_start(&L.ahead, L.wg.value_info, L.wg.n_value_info, fill, nfill);
    st = load_parts(&L, m, gp, err);
    if (st != PP_OK && !L.parse_failed && split && !elements_parse(&L)) st = parse_error(&L, err);
    if (st != PP_OK) goto fail;
    /* the unpacked messages (in the scratch arenas) are not needed by finalize */
    types_ahead_stop(&L.ahead);
    pp_graph_destroy(L.scratch);
    pp_graph_destroy(L.elem);
    L.scratch = L.elem = NULL;
    wire_graph_free(&L.wg);
    PP_CHECK_GOTO(pp_graph_finalize(L.g, opt, err), st, fail);
    *out = L.g;
    L.g = NULL;
fail:
    if (st != PP_OK && !L.parse_failed) pp_error_prefix(err, "while loading '%s': ", what);
done:
    types_ahead_stop(&L.ahead);
    pp_graph_destroy(L.g);
    pp_graph_destroy(L.scratch);
    pp_graph_destroy(L.elem);
    wire_graph_free(&L.wg);
    free(rest);
    free(L.big);
    free(L.files);
    return st;
}

pp_status pp_graph_load_buffer(const void *buf, size_t len, const char *base_dir,
                               const pp_graph_options *opt, pp_graph **out, pp_error *err)
{
    return load_model(buf, len, base_dir, "<buffer>", NULL, opt, out, err);
}

pp_status pp_graph_load(const char *path, const pp_graph_options *opt, pp_graph **out, pp_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        pp_status st = pp_error_set(err, PP_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return st;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return pp_error_set(err, PP_ERR_IO, "'%s' is not a regular file", path);
    }
    size_t len = (size_t)sb.st_size;
    void *buf = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (buf == MAP_FAILED) return pp_error_set(err, PP_ERR_IO, "cannot mmap '%s': %s", path, strerror(errno));
    /* external data is relative to the model's directory */
    char *dir = pp_strdup(path);
    if (!dir) {
        if (buf) munmap(buf, len);
        return PP_NOMEM(err);
    }
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    pp_status st = load_model(buf, len, dir, path, path, opt, out, err);
    if (st == PP_OK && !((*out)->path = pp_graph_strdup(*out, path))) {
        pp_graph_destroy(*out);
        *out = NULL;
        st = PP_NOMEM(err);
    }
    free(dir);
    if (buf) munmap(buf, len);
    return st;
}
