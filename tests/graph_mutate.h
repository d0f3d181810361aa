/* Structural mutations of an ONNX model, for the loader's fuzz test (tests/test_graph_fuzz.c)
 * and its libFuzzer target (tests/fuzz/fuzz_load.c): renamed inputs, dangling reads,
 * duplicated producers, cycles, wrong opsets, bad attribute types, external data in and
 * outside the model's folder, huge or negative dims, odd int64 constants, escape bytes in
 * names, shuffled, deleted or retyped nodes, a reader of a weight copied a dozen times.
 * The model is unpacked by protobuf-c into an arena that the caller resets per case; a
 * mutation says what the loader must answer when it is the only one applied (a status
 * and a piece of the message), or nothing. */
#ifndef PP_TEST_GRAPH_MUTATE_H
#define PP_TEST_GRAPH_MUTATE_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnx/onnx.pb-c.h>
#include <onnxpipe/core.h>

/* ---- an arena for unpacked messages and what the mutations add ---------------------- */

typedef struct mut_arena {
    uint8_t *base;
    size_t used, cap;
    int full;   /* an allocation did not fit: the case is skipped */
} mut_arena;

static void *mut_alloc(void *data, size_t n)
{
    mut_arena *a = data;
    n = (n + 15) & ~(size_t)15;
    if (n > a->cap - a->used) {
        a->full = 1;
        return NULL;
    }
    void *p = a->base + a->used;
    a->used += n;
    return p;
}

static void mut_free(void *data, void *p) { (void)data, (void)p; }   /* reset per case */

static void *mut_dup(mut_arena *a, const void *p, size_t n)
{
    void *d = mut_alloc(a, n ? n : 1);
    if (d && n) memcpy(d, p, n);
    return d;
}

static char *mut_printf(mut_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *mut_printf(mut_arena *a, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return mut_dup(a, buf, strlen(buf) + 1);
}

/* ---- what one mutation does ---------------------------------------------------------- */

#define EXPECT_ANY (-1)     /* any status (several outcomes are right) */
#define EXPECT_ERROR (-2)   /* some error */

typedef struct mut_expect {
    int status;             /* a pp_status, EXPECT_ANY or EXPECT_ERROR */
    const char *msg;        /* a piece of the error message, or NULL */
} mut_expect;

/* The model folder of a case and the files the external-data mutation points at. */
typedef struct mut_ctx {
    mut_arena *arena;
    uint64_t (*rng)(void);
    const char *dir;        /* where the case's model is written; NULL: no files (libFuzzer) */
    const char *abs_data;   /* an absolute path to a data file inside dir */
} mut_ctx;

/* Applies the mutation, sets *e and returns a short description, or returns NULL when it
 * does not apply to this model. */
typedef const char *(*mutation_fn)(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e);

static uint64_t mut_pick(mut_ctx *c, uint64_t n) { return n ? c->rng() % n : 0; }

static int node_reads(const Onnx__NodeProto *n, const char *name)
{
    for (size_t k = 0; k < n->n_input; k++)
        if (n->input[k] && !strcmp(n->input[k], name)) return 1;
    return 0;
}

static int graph_reads(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; i < g->n_node; i++)
        if (node_reads(g->node[i], name)) return 1;
    return 0;
}

/* A random node with at least one non-empty input and one output, or -1. */
static long pick_node(mut_ctx *c, const Onnx__GraphProto *g)
{
    for (int tries = 0; tries < 16 && g->n_node; tries++) {
        size_t i = mut_pick(c, g->n_node);
        const Onnx__NodeProto *n = g->node[i];
        if (n->n_input && n->input[0] && *n->input[0] && n->n_output && n->output[0] && *n->output[0])
            return (long)i;
    }
    return -1;
}

/* ---- the mutations ------------------------------------------------------------------- */

static const char *m_rename_input(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    Onnx__GraphProto *g = m->graph;
    if (!g->n_input) return NULL;
    Onnx__ValueInfoProto *vi = g->input[mut_pick(c, g->n_input)];
    int used = vi->name && graph_reads(g, vi->name);
    vi->name = mut_printf(c->arena, "renamed_%s", vi->name ? vi->name : "");
    *e = used ? (mut_expect){PP_ERR_PARSE, "which no node produces"} : (mut_expect){EXPECT_ANY, NULL};
    return "renamed graph input";
}

static const char *m_dangling_read(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    long i = pick_node(c, m->graph);
    if (i < 0) return NULL;
    Onnx__NodeProto *n = m->graph->node[i];
    n->input = mut_dup(c->arena, n->input, n->n_input * sizeof *n->input);
    n->input[0] = "made_by_nobody";
    *e = (mut_expect){PP_ERR_PARSE, "reads 'made_by_nobody', which no node produces"};
    return "node input renamed";
}

static const char *m_two_producers(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    Onnx__GraphProto *g = m->graph;
    long i = pick_node(c, g), j = pick_node(c, g);
    if (i < 0 || j < 0 || i == j) return NULL;
    Onnx__NodeProto *b = g->node[j];
    b->output = mut_dup(c->arena, b->output, b->n_output * sizeof *b->output);
    b->output[0] = g->node[i]->output[0];
    *e = (mut_expect){PP_ERR_PARSE, "is produced by both node"};
    return "duplicated producer";
}

/* A node reads its own output, or that of a node reading its output: a cycle either way. */
static const char *m_cycle(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    Onnx__GraphProto *g = m->graph;
    long i = pick_node(c, g);
    if (i < 0) return NULL;
    Onnx__NodeProto *n = g->node[i];
    const char *from = n->output[0];
    if (mut_pick(c, 2))
        for (size_t j = 0; j < g->n_node; j++)
            if (node_reads(g->node[j], n->output[0]) && g->node[j]->n_output && g->node[j]->output[0] &&
                *g->node[j]->output[0]) {
                from = g->node[j]->output[0];
                break;
            }
    n->input = mut_dup(c->arena, n->input, n->n_input * sizeof *n->input);
    n->input[mut_pick(c, n->n_input)] = (char *)from;
    *e = (mut_expect){PP_ERR_PARSE, "the graph has a cycle through node"};
    return "cycle";
}

static const char *m_opset(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    static const int64_t versions[] = {11, 1, 0, -3, 12, 22, 1000, INT64_MAX, INT64_MIN};
    Onnx__OperatorSetIdProto *ai = NULL;
    for (size_t i = 0; i < m->n_opset_import; i++)
        if (!m->opset_import[i]->domain || !*m->opset_import[i]->domain) ai = m->opset_import[i];
    if (!ai) return NULL;
    if (!mut_pick(c, 5)) {
        ai->domain = "ai.onnx.ml";
        *e = (mut_expect){PP_ERR_PARSE, "the model imports no ai.onnx opset"};
        return "no ai.onnx opset";
    }
    int64_t v = versions[mut_pick(c, sizeof versions / sizeof versions[0])];
    ai->has_version = 1;
    ai->version = v;
    *e = v < 13 ? (mut_expect){PP_ERR_UNSUPPORTED, "onnxpipe reads opsets 13-23"} : (mut_expect){EXPECT_ANY, NULL};
    return "wrong opset";
}

static const char *m_attr_type(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    Onnx__GraphProto *g = m->graph;
    for (int tries = 0; tries < 16 && g->n_node; tries++) {
        Onnx__NodeProto *n = g->node[mut_pick(c, g->n_node)];
        if (!n->n_attribute) continue;
        Onnx__AttributeProto *a = n->attribute[mut_pick(c, n->n_attribute)];
        static const int types[] = {1, 2, 3, 4, 6, 7, 8, 5, 0, 99, -1, 11};
        int t = types[mut_pick(c, sizeof types / sizeof types[0])];
        a->has_type = 1;
        a->type = (Onnx__AttributeProto__AttributeType)t;
        if (t == 5) *e = (mut_expect){PP_ERR_UNSUPPORTED, "is a graph; control flow"};
        else if (t == 4 && !a->t) *e = (mut_expect){PP_ERR_PARSE, "has no tensor"};
        else if (t <= 0 || t > 8) *e = (mut_expect){PP_ERR_UNSUPPORTED, "which onnxpipe does not support"};
        else *e = (mut_expect){EXPECT_ANY, NULL};   /* an attribute onnxpipe never reads may have any type */
        return "attribute type";
    }
    return NULL;
}

/* One initializer's raw bytes go to a file beside the model, and its external_data points
 * at that file or somewhere it must not. */
static const char *m_external(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    Onnx__GraphProto *g = m->graph;
    if (!c->dir || !g->n_initializer) return NULL;
    Onnx__TensorProto *t = g->initializer[mut_pick(c, g->n_initializer)];
    if (!t->has_raw_data || t->raw_data.len < 4) return NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/w.bin", c->dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(t->raw_data.data, 1, t->raw_data.len, f) != t->raw_data.len) {
        if (f) fclose(f);
        return NULL;
    }
    fclose(f);
    size_t len = t->raw_data.len;
    const char *loc = "w.bin", *off = "0", *length = mut_printf(c->arena, "%zu", len), *what;
    int kind = (int)mut_pick(c, 14);
    switch (kind) {
    case 0: what = "external data beside the model"; *e = (mut_expect){PP_OK, NULL}; break;
    case 1: loc = "./w.bin"; what = "external data as ./w.bin"; *e = (mut_expect){PP_OK, NULL}; break;
    case 2: loc = "link_in.bin"; what = "external data through a link inside"; *e = (mut_expect){PP_OK, NULL}; break;
    case 3: loc = c->abs_data; what = "external data at an absolute path"; break;
    case 4: loc = "../outside.bin"; what = "external data in ../"; break;
    case 5: loc = "sub/../../outside.bin"; what = "external data in sub/../../"; break;
    case 6: loc = "sub/../w.bin"; what = "external data through sub/.."; break;
    case 7: loc = "link_out.bin"; what = "external data through a link to outside"; break;
    case 8: off = mut_printf(c->arena, "%zu", len + 8); what = "external data past the end"; break;
    case 9: length = mut_printf(c->arena, "%zu", len + 4); what = "external data length"; break;
    case 10: off = "12x"; what = "external data offset not a number"; break;
    case 11: loc = NULL; what = "external data without a location"; break;
    case 12: loc = "nope.bin"; what = "external data file missing"; break;
    default: loc = "sub"; what = "external data in a folder"; break;
    }
    if (kind >= 3 && kind <= 7)
        *e = (mut_expect){PP_ERR_PARSE, kind == 7 ? "lies outside the model's directory"
                                                  : "is absolute or leaves the model's directory"};
    else if (kind == 8) *e = (mut_expect){PP_ERR_PARSE, "lies beyond the end"};
    else if (kind == 9) *e = (mut_expect){PP_ERR_PARSE, "has length"};
    else if (kind == 10) *e = (mut_expect){PP_ERR_PARSE, "is not a number"};
    else if (kind == 11) *e = (mut_expect){PP_ERR_PARSE, "has external data without a location"};
    else if (kind == 12) *e = (mut_expect){PP_ERR_IO, "cannot open external data file"};
    else if (kind == 13) *e = (mut_expect){PP_ERR_IO, "is not a regular file"};
    const char *keys[3] = {"location", "offset", "length"}, *vals[3] = {loc, off, length};
    Onnx__StringStringEntryProto **kv = mut_alloc(c->arena, 3 * sizeof *kv);
    if (!kv) return NULL;
    size_t nkv = 0;
    for (int k = 0; k < 3; k++) {
        if (!vals[k]) continue;
        Onnx__StringStringEntryProto *p = mut_alloc(c->arena, sizeof *p);
        if (!p) return NULL;
        *p = (Onnx__StringStringEntryProto)ONNX__STRING_STRING_ENTRY_PROTO__INIT;
        p->key = (char *)keys[k];
        p->value = (char *)vals[k];
        kv[nkv++] = p;
    }
    t->has_raw_data = 0;
    t->raw_data = (ProtobufCBinaryData){0, NULL};
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    t->n_external_data = nkv;
    t->external_data = kv;
    return what;
}

static const int64_t odd_values[] = {(int64_t)1 << 40, (int64_t)1 << 47, (int64_t)1 << 62, INT64_MAX, 0, -7,
                                     INT64_MIN, -1, 3};
#define NODD ((uint64_t)(sizeof odd_values / sizeof odd_values[0]))

static const char *m_dim(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    Onnx__GraphProto *g = m->graph;
    int64_t v = odd_values[mut_pick(c, NODD)];
    *e = (mut_expect){EXPECT_ANY, NULL};
    if (mut_pick(c, 2) && g->n_initializer) {   /* an initializer's dims no longer fit its data */
        Onnx__TensorProto *t = g->initializer[mut_pick(c, g->n_initializer)];
        if (!t->n_dims) return NULL;
        t->dims = mut_dup(c->arena, t->dims, t->n_dims * sizeof *t->dims);
        t->dims[mut_pick(c, t->n_dims)] = v;
        if (v < 0) *e = (mut_expect){PP_ERR_PARSE, "has negative dim"};
        else if (v == INT64_MAX) *e = (mut_expect){PP_ERR_SHAPE, "holds more than 128 TiB"};
        else if (v != 3) *e = (mut_expect){EXPECT_ERROR, NULL};
        return "initializer dim";
    }
    if (!g->n_input) return NULL;
    Onnx__ValueInfoProto *vi = g->input[mut_pick(c, g->n_input)];
    if (!vi->type || !vi->type->tensor_type || !vi->type->tensor_type->shape ||
        !vi->type->tensor_type->shape->n_dim)
        return NULL;
    Onnx__TensorShapeProto *s = vi->type->tensor_type->shape;
    Onnx__TensorShapeProto__Dimension *d = s->dim[mut_pick(c, s->n_dim)];
    d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d->dim_value = v;
    if (v < 0) *e = (mut_expect){PP_ERR_PARSE, "has negative dim"};
    else if (v == INT64_MAX) *e = (mut_expect){PP_ERR_SHAPE, "holds more than 128 TiB"};
    return "graph input dim";
}

/* An element of an int64 constant (a Reshape shape, Slice bounds, Gather indices, an
 * exporter's Constant) becomes an odd value. */
static const char *m_int_value(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    Onnx__GraphProto *g = m->graph;
    Onnx__TensorProto *cand[64];
    int n = 0;
    for (size_t i = 0; i < g->n_initializer && n < 64; i++) cand[n++] = g->initializer[i];
    for (size_t i = 0; i < g->n_node && n < 64; i++)
        for (size_t a = 0; a < g->node[i]->n_attribute && n < 64; a++)
            if (g->node[i]->attribute[a]->t) cand[n++] = g->node[i]->attribute[a]->t;
    for (int tries = 0; tries < 16 && n; tries++) {
        Onnx__TensorProto *t = cand[mut_pick(c, (uint64_t)n)];
        if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || !t->has_raw_data || t->raw_data.len < 8) continue;
        uint8_t *d = mut_dup(c->arena, t->raw_data.data, t->raw_data.len);
        if (!d) return NULL;
        int64_t v = odd_values[mut_pick(c, NODD)];
        memcpy(d + 8 * mut_pick(c, t->raw_data.len / 8), &v, sizeof v);
        t->raw_data.data = d;
        *e = (mut_expect){EXPECT_ANY, NULL};
        return "int64 constant value";
    }
    return NULL;
}

/* A node name and a value name (all its uses) with terminal escapes and bytes that are
 * not UTF-8: the model still loads, and no message or table may print them raw. */
static const char *m_escape_names(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    Onnx__GraphProto *g = m->graph;
    long i = pick_node(c, g);
    if (i < 0) return NULL;
    Onnx__NodeProto *n = g->node[i];
    n->name = mut_printf(c->arena, "\x1b[2J\x1b]0;pwned\x07%s\xff\xc3", n->name ? n->name : "");
    const char *old = n->output[0];
    char *new = mut_printf(c->arena, "%s\x1b[31m\x9b\xe2\x80\xae", old);
    for (size_t j = 0; j < g->n_node; j++) {
        Onnx__NodeProto *x = g->node[j];
        x->input = mut_dup(c->arena, x->input, x->n_input * sizeof *x->input);
        x->output = mut_dup(c->arena, x->output, x->n_output * sizeof *x->output);
        for (size_t k = 0; k < x->n_input; k++)
            if (x->input[k] && !strcmp(x->input[k], old)) x->input[k] = new;
        for (size_t k = 0; k < x->n_output; k++)
            if (x->output[k] && !strcmp(x->output[k], old)) x->output[k] = new;
    }
    Onnx__ValueInfoProto **lists[2] = {g->output, g->value_info};
    size_t counts[2] = {g->n_output, g->n_value_info};
    for (int l = 0; l < 2; l++)
        for (size_t k = 0; k < counts[l]; k++)
            if (lists[l][k]->name && !strcmp(lists[l][k]->name, old)) lists[l][k]->name = new;
    *e = (mut_expect){PP_OK, NULL};
    return "escape bytes in names";
}

static const char *m_shuffle(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    Onnx__GraphProto *g = m->graph;
    if (g->n_node < 2) return NULL;
    g->node = mut_dup(c->arena, g->node, g->n_node * sizeof *g->node);
    for (size_t i = g->n_node - 1; i > 0; i--) {
        size_t j = mut_pick(c, i + 1);
        Onnx__NodeProto *t = g->node[i];
        g->node[i] = g->node[j];
        g->node[j] = t;
    }
    *e = (mut_expect){PP_OK, NULL};
    return "nodes shuffled";
}

static const char *m_delete_node(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    Onnx__GraphProto *g = m->graph;
    if (g->n_node < 2) return NULL;
    size_t i = mut_pick(c, g->n_node);
    g->node = mut_dup(c->arena, g->node, g->n_node * sizeof *g->node);
    memmove(&g->node[i], &g->node[i + 1], (g->n_node - i - 1) * sizeof *g->node);
    g->n_node--;
    *e = (mut_expect){EXPECT_ANY, NULL};
    return "node deleted";
}

static const char *m_op_type(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    static const char *const ops[] = {"Relu", "MatMul", "Add", "Reshape", "Concat", "Gather", "Softmax", "Conv",
                                      "Split", "Transpose", "LayerNormalization", "Range", "Expand", "Slice",
                                      "Gemm", "MaxPool", "ConstantOfShape", "Where", "Foo", ""};
    Onnx__GraphProto *g = m->graph;
    if (!g->n_node) return NULL;
    Onnx__NodeProto *n = g->node[mut_pick(c, g->n_node)];
    size_t k = mut_pick(c, sizeof ops / sizeof ops[0]);
    n->op_type = (char *)ops[k];
    if (!strcmp(ops[k], "Foo")) *e = (mut_expect){PP_ERR_UNSUPPORTED, "op Foo (domain 'ai.onnx') is not supported"};
    else if (!*ops[k]) *e = (mut_expect){PP_ERR_PARSE, "has no op_type"};
    else *e = (mut_expect){EXPECT_ANY, NULL};
    return "op type";
}

static const char *m_domain(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    Onnx__GraphProto *g = m->graph;
    if (!g->n_node) return NULL;
    g->node[mut_pick(c, g->n_node)]->domain = "com.microsoft";
    *e = (mut_expect){PP_ERR_UNSUPPORTED, "(domain 'com.microsoft') is not supported"};
    return "node domain";
}

static const char *m_dtype(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    static const int types[] = {0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 14, 16, 17, 99, -4};
    Onnx__GraphProto *g = m->graph;
    if (!g->n_initializer) return NULL;
    Onnx__TensorProto *t = g->initializer[mut_pick(c, g->n_initializer)];
    t->has_data_type = 1;
    t->data_type = types[mut_pick(c, sizeof types / sizeof types[0])];
    *e = (mut_expect){EXPECT_ANY, NULL};
    return "initializer dtype";
}

/* A node loses its last input or gains one more (the graph's first input). */
static const char *m_arity(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    Onnx__GraphProto *g = m->graph;
    long i = pick_node(c, g);
    if (i < 0) return NULL;
    Onnx__NodeProto *n = g->node[i];
    char **in = mut_alloc(c->arena, (n->n_input + 1) * sizeof *in);
    if (!in) return NULL;
    memcpy(in, n->input, n->n_input * sizeof *in);
    if (mut_pick(c, 2) && n->n_input > 0) n->n_input--;
    else in[n->n_input++] = g->n_input ? g->input[0]->name : n->input[0];
    n->input = in;
    *e = (mut_expect){EXPECT_ANY, NULL};
    return "node arity";
}

/* A node reading an initializer is copied 8 to 12 times, each copy's outputs renamed and
 * its first made a graph output: a parameter read by more nodes than the partition table
 * names (report_params.c read past its 8 readers here). */
static const char *m_fan_out(Onnx__ModelProto *m, mut_ctx *c, mut_expect *e)
{
    Onnx__GraphProto *g = m->graph;
    long at = -1;
    for (int tries = 0; tries < 16 && at < 0 && g->n_initializer; tries++) {
        const char *w = g->initializer[mut_pick(c, g->n_initializer)]->name;
        for (size_t i = 0; w && i < g->n_node && at < 0; i++)
            if (node_reads(g->node[i], w) && g->node[i]->n_output && g->node[i]->output[0]) at = (long)i;
    }
    if (at < 0) return NULL;
    const size_t copies = 8 + mut_pick(c, 5);
    Onnx__NodeProto **nodes = mut_alloc(c->arena, (g->n_node + copies) * sizeof *nodes);
    Onnx__ValueInfoProto **outs = mut_alloc(c->arena, (g->n_output + copies) * sizeof *outs);
    if (!nodes || !outs) return NULL;
    memcpy(nodes, g->node, g->n_node * sizeof *nodes);
    memcpy(outs, g->output, g->n_output * sizeof *outs);
    const Onnx__NodeProto *orig = g->node[at];
    for (size_t k = 0; k < copies; k++) {
        Onnx__NodeProto *n = mut_dup(c->arena, orig, sizeof *orig);
        Onnx__ValueInfoProto *vi = mut_alloc(c->arena, sizeof *vi);
        char **o = mut_alloc(c->arena, orig->n_output * sizeof *o);
        if (!n || !vi || !o) return NULL;
        for (size_t j = 0; j < orig->n_output; j++)
            o[j] = orig->output[j] && *orig->output[j] ? mut_printf(c->arena, "fan%zu_%s", k, orig->output[j]) : "";
        n->output = o;
        n->name = mut_printf(c->arena, "fan%zu_%s", k, orig->name ? orig->name : "");
        onnx__value_info_proto__init(vi);
        vi->name = o[0];
        nodes[g->n_node + k] = n;
        outs[g->n_output + k] = vi;
    }
    g->node = nodes, g->n_node += copies;
    g->output = outs, g->n_output += copies;
    *e = (mut_expect){EXPECT_ANY, NULL};
    return "fanned-out reader";
}

static const struct { const char *name; mutation_fn fn; } mutations[] = {
    {"rename_input", m_rename_input}, {"dangling_read", m_dangling_read}, {"two_producers", m_two_producers},
    {"cycle", m_cycle},               {"opset", m_opset},                 {"attr_type", m_attr_type},
    {"external", m_external},         {"dim", m_dim},                     {"int_value", m_int_value},
    {"escape_names", m_escape_names}, {"shuffle", m_shuffle},             {"delete_node", m_delete_node},
    {"op_type", m_op_type},           {"domain", m_domain},               {"dtype", m_dtype},
    {"arity", m_arity},               {"fan_out", m_fan_out},
};
#define NMUTATIONS ((int)(sizeof mutations / sizeof mutations[0]))

#endif
