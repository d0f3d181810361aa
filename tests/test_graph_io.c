/* Graph I/O: save -> load round trips compared field by field, typed-field and external
 * initializers, malformed models with their messages, and subgraph extraction.
 * `test_graph_io --roundtrip IN OUT [--external]` loads IN and saves OUT (used by
 * tests/test_graph_save.sh to check our output with onnx.checker and onnxruntime). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <onnx/onnx.pb-c.h>
#include <onnxpipe/graph_ir.h>

#include "graph_internal.h"

/* Keep Constant nodes as built and allow the symbolic batch dim to stay unbound. */
static const pp_graph_options load_opt = {.no_fold = 1, .allow_unknown_dims = 1};

static char tmp_dir[256];

static void fill(void *p, size_t n, unsigned seed)
{
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)((seed = seed * 1103515245u + 12345u) >> 16);
}

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", tmp_dir, name);
    return p;
}

#define OK(call)                                                       \
    do {                                                               \
        pp_error e_ = {0};                                             \
        pp_status s_ = (call);                                         \
        if (s_ != PP_OK) fail_msg("%s: %s", #call, e_.msg);            \
    } while (0)

/* ---- a graph with every attribute kind ---------------------------------- */

static float w_data[4 * 3], b_data[3], c_data[3];
static int64_t i64_data[5];
static uint16_t f16_data[6];
static uint8_t bool_data[7];
static float big_data[128 * 128], mid_data[300];   /* 64 KiB (unpacked into the graph arena) and 1200 B */

static pp_graph *build_all_kinds(void)
{
    pp_graph *g;
    pp_error e = {0};
    assert_int_equal(pp_graph_create("all_kinds", 17, &g, &e), PP_OK);
    g->producer_name = pp_graph_strdup(g, "test_graph_io");
    assert_int_equal(pp_graph_add_opset(g, "com.example", 3, &e), PP_OK);
    fill(w_data, sizeof w_data, 1);
    fill(b_data, sizeof b_data, 2);
    fill(i64_data, sizeof i64_data, 3);
    fill(f16_data, sizeof f16_data, 4);
    for (int i = 0; i < 7; i++) bool_data[i] = (uint8_t)(i % 2);
    for (int i = 0; i < 3; i++) c_data[i] = 0.25f * (float)(i + 1);
    for (int i = 0; i < 12; i++) w_data[i] = (float)i / 7.0f;   /* finite floats */
    for (int i = 0; i < 3; i++) b_data[i] = -(float)i;
    pp_shape x = {.rank = 2, .dims = {-1, 4}, .syms = {"batch", NULL}};
    assert_int_equal(pp_graph_add_input(g, "x", PP_DTYPE_F32, &x, &e), PP_OK);
    pp_shape ws = pp_shape_make(2, (int64_t[]){4, 3}), bs = pp_shape_make(1, (int64_t[]){3});
    assert_int_equal(pp_graph_add_initializer(g, "W", PP_DTYPE_F32, &ws, w_data, sizeof w_data, 0, &e), PP_OK);
    assert_int_equal(pp_graph_add_initializer(g, "B", PP_DTYPE_F32, &bs, b_data, sizeof b_data, 1, &e), PP_OK);
    pp_shape s5 = pp_shape_make(1, (int64_t[]){5}), s23 = pp_shape_make(2, (int64_t[]){2, 3});
    pp_shape s7 = pp_shape_make(1, (int64_t[]){7});
    OK(pp_graph_add_initializer(g, "unused_i64", PP_DTYPE_I64, &s5, i64_data, sizeof i64_data, 1, &e_));
    OK(pp_graph_add_initializer(g, "unused_f16", PP_DTYPE_F16, &s23, f16_data, sizeof f16_data, 1, &e_));
    OK(pp_graph_add_initializer(g, "unused_bool", PP_DTYPE_BOOL, &s7, bool_data, sizeof bool_data, 1, &e_));
    fill(mid_data, sizeof mid_data, 6);
    fill(big_data, sizeof big_data, 7);
    pp_shape s300 = pp_shape_make(1, (int64_t[]){300}), s64 = pp_shape_make(2, (int64_t[]){128, 128});
    OK(pp_graph_add_initializer(g, "mid", PP_DTYPE_F32, &s300, mid_data, sizeof mid_data, 0, &e_));
    OK(pp_graph_add_initializer(g, "big", PP_DTYPE_F32, &s64, big_data, sizeof big_data, 0, &e_));
    int id;
    OK(pp_graph_add_node(g, "Gemm", "", "gemm", (const char *[]){"x", "W", "B"}, 3, (const char *[]){"h"}, 1, &id, &e_));
    OK(pp_graph_set_attr_float(g, id, "alpha", 0.5f, &e_));
    OK(pp_graph_set_attr_int(g, id, "transB", 0, &e_));
    OK(pp_graph_add_node(g, "Gelu", "", "gelu", (const char *[]){"h"}, 1, (const char *[]){"gl"}, 1, &id, &e_));
    OK(pp_graph_set_attr_string(g, id, "approximate", "tanh", &e_));
    OK(pp_graph_add_node(g, "Transpose", NULL, NULL, (const char *[]){"gl"}, 1, (const char *[]){"t"}, 1, &id, &e_));
    OK(pp_graph_set_attr_ints(g, id, "perm", (const int64_t[]){1, 0}, 2, &e_));
    OK(pp_graph_add_node(g, "Constant", "", "const_c", NULL, 0, (const char *[]){"c"}, 1, &id, &e_));
    pp_const_tensor ct = {PP_DTYPE_F32, pp_shape_make(2, (int64_t[]){3, 1}), c_data, sizeof c_data};
    OK(pp_graph_set_attr_tensor(g, id, "value", &ct, &e_));
    OK(pp_graph_add_node(g, "Mul", "", "mul", (const char *[]){"t", "c"}, 2, (const char *[]){"m"}, 1, &id, &e_));
    OK(pp_graph_add_node(g, "Relu", "", "relu", (const char *[]){"m"}, 1, (const char *[]){"y"}, 1, &id, &e_));
    /* attributes Relu ignores, so their round trip does not depend on folding Constant nodes */
    const char *tags[] = {"first", "", "third"};
    pp_attr sa = {.name = "onnxpipe_tags", .type = PP_ATTR_STRINGS, .strings = tags, .n = 3};
    OK(pp_graph_set_attr(g, id, &sa, &e_));
    OK(pp_graph_set_attr_floats(g, id, "onnxpipe_floats", (const float[]){0.5f, -1e-3f, 7.0f}, 3, &e_));
    pp_const_tensor it = {PP_DTYPE_I64, pp_shape_make(1, (int64_t[]){5}), i64_data, sizeof i64_data};
    OK(pp_graph_set_attr_tensor(g, id, "onnxpipe_tensor", &it, &e_));
    OK(pp_graph_add_node(g, "Constant", "", "const_f", NULL, 0, (const char *[]){"cf"}, 1, &id, &e_));
    OK(pp_graph_set_attr_floats(g, id, "value_floats", (const float[]){1.5f, -2.0f}, 2, &e_));
    pp_shape ys = {.rank = 2, .dims = {3, -1}, .syms = {NULL, "batch"}};
    OK(pp_graph_add_output(g, "y", PP_DTYPE_F32, &ys, &e_));
    OK(pp_graph_add_output(g, "cf", PP_DTYPE_F32, NULL, &e_));
    /* an intermediate type, so value_info is written and read back */
    pp_value *h = &g->values[pp_graph_find_value(g, "h")];
    h->dtype = PP_DTYPE_F32;
    h->shape = (pp_shape){.rank = 2, .dims = {-1, 3}, .syms = {"batch", NULL}};
    OK(pp_graph_finalize(g, &load_opt, &e_));
    return g;
}

static void assert_shape_same(const pp_shape *a, const pp_shape *b, const char *what)
{
    if (a->rank != b->rank) fail_msg("%s: rank %d vs %d", what, a->rank, b->rank);
    for (int i = 0; i < a->rank; i++) {
        if (a->dims[i] != b->dims[i]) fail_msg("%s: dim %d differs", what, i);
        if (!a->syms[i] != !b->syms[i] || (a->syms[i] && strcmp(a->syms[i], b->syms[i])))
            fail_msg("%s: symbolic dim %d differs", what, i);
    }
}

static void assert_attr_same(const pp_attr *a, const pp_attr *b)
{
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->type, b->type);
    switch (a->type) {
    case PP_ATTR_FLOAT: assert_true(a->f == b->f); break;
    case PP_ATTR_INT: assert_int_equal(a->i, b->i); break;
    case PP_ATTR_STRING: assert_string_equal(a->s, b->s); break;
    case PP_ATTR_TENSOR:
        assert_int_equal(a->t.dtype, b->t.dtype);
        assert_shape_same(&a->t.shape, &b->t.shape, a->name);
        assert_int_equal(a->t.nbytes, b->t.nbytes);
        assert_memory_equal(a->t.data, b->t.data, a->t.nbytes);
        break;
    case PP_ATTR_FLOATS:
        assert_int_equal(a->n, b->n);
        assert_memory_equal(a->floats, b->floats, (size_t)a->n * sizeof(float));
        break;
    case PP_ATTR_INTS:
        assert_int_equal(a->n, b->n);
        assert_memory_equal(a->ints, b->ints, (size_t)a->n * sizeof(int64_t));
        break;
    case PP_ATTR_STRINGS:
        assert_int_equal(a->n, b->n);
        for (int i = 0; i < a->n; i++) assert_string_equal(a->strings[i], b->strings[i]);
        break;
    default: fail_msg("unexpected attribute type %d", a->type);
    }
}

static const char *value_name(const pp_graph *g, int v) { return v >= 0 ? g->values[v].name : ""; }

/* Compares two graphs by names (ids may differ); returns the bytes of initializers compared. */
static size_t assert_graph_same(const pp_graph *a, const pp_graph *b)
{
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->opset, b->opset);
    assert_int_equal(a->ir_version, b->ir_version);
    assert_int_equal(a->nopsets, b->nopsets);
    for (int i = 0; i < a->nopsets; i++) {
        int found = 0;
        for (int k = 0; k < b->nopsets; k++)
            found |= !strcmp(a->opsets[i].domain, b->opsets[k].domain) && a->opsets[i].version == b->opsets[k].version;
        if (!found) fail_msg("opset '%s' lost", a->opsets[i].domain);
    }
    assert_int_equal(a->nnodes, b->nnodes);
    for (int i = 0; i < a->nnodes; i++) {
        const pp_node *x = &a->nodes[i], *y = &b->nodes[i];
        assert_string_equal(x->name, y->name);
        assert_string_equal(x->op_type, y->op_type);
        assert_string_equal(x->domain, y->domain);
        assert_int_equal(x->ninputs, y->ninputs);
        assert_int_equal(x->noutputs, y->noutputs);
        for (int k = 0; k < x->ninputs; k++) assert_string_equal(value_name(a, x->inputs[k]), value_name(b, y->inputs[k]));
        for (int k = 0; k < x->noutputs; k++)
            assert_string_equal(value_name(a, x->outputs[k]), value_name(b, y->outputs[k]));
        assert_int_equal(x->nattrs, y->nattrs);
        for (int k = 0; k < x->nattrs; k++) assert_attr_same(&x->attrs[k], &y->attrs[k]);
    }
    assert_int_equal(a->ninits, b->ninits);
    size_t bytes = 0;
    for (int i = 0; i < a->ninits; i++) {
        const pp_initializer *x = &a->inits[i];
        const pp_const_tensor *y = pp_graph_const(b, pp_graph_find_value(b, a->values[x->value].name));
        assert_non_null(y);
        assert_int_equal(x->t.dtype, y->dtype);
        assert_shape_same(&x->t.shape, &y->shape, a->values[x->value].name);
        assert_int_equal(x->t.nbytes, y->nbytes);
        assert_memory_equal(x->t.data, y->data, x->t.nbytes);
        bytes += x->t.nbytes;
    }
    assert_int_equal(a->ninputs, b->ninputs);
    assert_int_equal(a->noutputs, b->noutputs);
    for (int i = 0; i < a->nvalues; i++) {
        const pp_value *x = &a->values[i];
        int k = pp_graph_find_value(b, x->name);
        if (x->producer < 0 && x->kind == PP_VALUE_NODE && !x->nconsumers && !x->is_output) continue;
        if (k < 0) fail_msg("value '%s' lost", x->name);
        const pp_value *y = &b->values[k];
        assert_int_equal(x->kind, y->kind);
        assert_int_equal(x->is_output, y->is_output);
        assert_int_equal(x->dtype, y->dtype);
        assert_shape_same(&x->shape, &y->shape, x->name);
    }
    return bytes;
}

static void test_roundtrip_all_kinds(void **state)
{
    (void)state;
    pp_graph *g = build_all_kinds(), *l = NULL;
    OK(pp_graph_save(g, tmp_path("all.onnx"), NULL, &e_));
    OK(pp_graph_load(tmp_path("all.onnx"), &load_opt, &l, &e_));
    assert_string_equal(l->producer_name, "test_graph_io");
    assert_string_equal(l->path, tmp_path("all.onnx"));
    size_t bytes = assert_graph_same(g, l);
    struct stat sb;
    assert_int_not_equal(stat(tmp_path("all.onnx.data"), &sb), 0);   /* small: all inline */
    unsigned kinds = 0;
    for (int i = 0; i < l->nnodes; i++)
        for (int k = 0; k < l->nodes[i].nattrs; k++) kinds |= 1u << l->nodes[i].attrs[k].type;
    assert_int_equal(__builtin_popcount(kinds), 7);
    printf("round trip: %d nodes, 7 attribute kinds, %d initializers (%zu bytes) byte-exact, max diff 0\n",
           l->nnodes, l->ninits, bytes);
    pp_graph_destroy(l);
    pp_graph_destroy(g);
}

/* ---- hand-made ModelProtos ---------------------------------------------- */

typedef struct proto_model {
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto os;
    Onnx__OperatorSetIdProto *osp[1];
    Onnx__NodeProto node;
    Onnx__NodeProto *nodep[1];
    char *node_in[1], *node_out[1];
    Onnx__ValueInfoProto in, out;
    Onnx__ValueInfoProto *inp[1], *outp[1];
    Onnx__TypeProto type;
    Onnx__TypeProto__Tensor tt;
    Onnx__TensorProto *inits[16];
} proto_model;

/* A valid model: y = Relu(x), x float with no shape; initializers added by the caller. */
static void proto_init(proto_model *p)
{
    memset(p, 0, sizeof *p);
    p->m = (Onnx__ModelProto)ONNX__MODEL_PROTO__INIT;
    p->g = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
    p->os = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
    p->node = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    p->in = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    p->out = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    p->type = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    p->tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    p->m.has_ir_version = 1;
    p->m.ir_version = 8;
    p->m.n_opset_import = 1;
    p->m.opset_import = p->osp;
    p->osp[0] = &p->os;
    p->os.domain = "";
    p->os.has_version = 1;
    p->os.version = 17;
    p->m.graph = &p->g;
    p->g.name = "hand_made";
    p->g.n_node = 1;
    p->g.node = p->nodep;
    p->nodep[0] = &p->node;
    p->node.op_type = "Relu";
    p->node.name = "relu";
    p->node.n_input = p->node.n_output = 1;
    p->node.input = p->node_in;
    p->node.output = p->node_out;
    p->node_in[0] = "x";
    p->node_out[0] = "y";
    p->tt.has_elem_type = 1;
    p->tt.elem_type = 1;
    p->type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    p->type.tensor_type = &p->tt;
    p->in.name = "x";
    p->in.type = &p->type;
    p->out.name = "y";
    p->out.type = &p->type;
    p->g.n_input = p->g.n_output = 1;
    p->g.input = p->inp;
    p->g.output = p->outp;
    p->inp[0] = &p->in;
    p->outp[0] = &p->out;
    p->g.initializer = p->inits;
}

static uint8_t *proto_pack(const proto_model *p, size_t *len)
{
    *len = onnx__model_proto__get_packed_size(&p->m);
    uint8_t *buf = malloc(*len ? *len : 1);
    assert_non_null(buf);
    assert_int_equal(onnx__model_proto__pack(&p->m, buf), *len);
    return buf;
}

static pp_status proto_load(const proto_model *p, const char *base_dir, pp_graph **g, pp_error *e)
{
    size_t len;
    uint8_t *buf = proto_pack(p, &len);
    pp_status st = pp_graph_load_buffer(buf, len, base_dir, &load_opt, g, e);
    free(buf);
    return st;
}

static Onnx__TensorProto tensor_init(const char *name, int dtype, int rank, int64_t *dims)
{
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    t.name = (char *)name;
    t.has_data_type = 1;
    t.data_type = dtype;
    t.n_dims = (size_t)rank;
    t.dims = dims;
    return t;
}

static void test_typed_fields(void **state)
{
    (void)state;
    proto_model p;
    proto_init(&p);
    int64_t d3[] = {3}, d2[] = {2};
    float f32[] = {1.5f, -2.25f, 3.0f};
    int32_t i8[] = {-128, 0, 127}, u8[] = {0, 200, 255}, bl[] = {1, 0, 1}, f16[] = {0x3c00, 0xc000, 0x7bff};
    int32_t bf16[] = {0x3f80, 0xbf80, 0x4049}, i16[] = {-32768, 5, 32767}, i32[] = {-7, 1 << 30, 0};
    int64_t i64[] = {-(1ll << 40), 9, 1ll << 62};
    double f64[] = {0.1, -1e300, 3.0};
    uint64_t u32[] = {0, 4000000000u}, u64[] = {1ull << 63, 42};
    Onnx__TensorProto t[] = {
        tensor_init("f32", PP_DTYPE_F32, 1, d3), tensor_init("i8", PP_DTYPE_I8, 1, d3),
        tensor_init("u8", PP_DTYPE_U8, 1, d3),   tensor_init("bool", PP_DTYPE_BOOL, 1, d3),
        tensor_init("f16", PP_DTYPE_F16, 1, d3), tensor_init("bf16", PP_DTYPE_BF16, 1, d3),
        tensor_init("i16", PP_DTYPE_I16, 1, d3), tensor_init("i32", PP_DTYPE_I32, 1, d3),
        tensor_init("i64", PP_DTYPE_I64, 1, d3), tensor_init("f64", PP_DTYPE_F64, 1, d3),
        tensor_init("u32", PP_DTYPE_U32, 1, d2), tensor_init("u64", PP_DTYPE_U64, 1, d2),
    };
    t[0].n_float_data = 3, t[0].float_data = f32;
    int32_t *i32s[] = {i8, u8, bl, f16, bf16, i16, i32};
    for (int k = 0; k < 7; k++) t[1 + k].n_int32_data = 3, t[1 + k].int32_data = i32s[k];
    t[8].n_int64_data = 3, t[8].int64_data = i64;
    t[9].n_double_data = 3, t[9].double_data = f64;
    t[10].n_uint64_data = 2, t[10].uint64_data = u32;
    t[11].n_uint64_data = 2, t[11].uint64_data = u64;
    p.g.n_initializer = 12;
    for (int k = 0; k < 12; k++) p.inits[k] = &t[k];
    pp_graph *g = NULL;
    OK(proto_load(&p, NULL, &g, &e_));
    /* expected packed little-endian bytes, written out independently */
    int8_t e_i8[] = {-128, 0, 127};
    uint8_t e_u8[] = {0, 200, 255}, e_bl[] = {1, 0, 1};
    uint16_t e_f16[] = {0x3c00, 0xc000, 0x7bff}, e_bf16[] = {0x3f80, 0xbf80, 0x4049};
    int16_t e_i16[] = {-32768, 5, 32767};
    uint32_t e_u32[] = {0, 4000000000u};
    struct { const char *name; const void *data; size_t n; } want[] = {
        {"f32", f32, 12}, {"i8", e_i8, 3}, {"u8", e_u8, 3}, {"bool", e_bl, 3}, {"f16", e_f16, 6},
        {"bf16", e_bf16, 6}, {"i16", e_i16, 6}, {"i32", i32, 12}, {"i64", i64, 24}, {"f64", f64, 24},
        {"u32", e_u32, 8}, {"u64", u64, 16},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const pp_const_tensor *c = pp_graph_const(g, pp_graph_find_value(g, want[k].name));
        assert_non_null(c);
        assert_int_equal(c->nbytes, want[k].n);
        assert_memory_equal(c->data, want[k].data, want[k].n);
    }
    printf("typed fields: 12 dtypes converted to packed bytes, byte-exact\n");
    pp_graph_destroy(g);
}

/* ---- external data ------------------------------------------------------ */

static int in_mmap(const pp_graph *g, const void *p, size_t *offset)
{
    for (int i = 0; i < g->store->nmmaps; i++) {
        const uint8_t *a = g->store->mmaps[i].addr;
        if ((const uint8_t *)p >= a && (const uint8_t *)p < a + g->store->mmaps[i].len) {
            *offset = (size_t)((const uint8_t *)p - a);
            return 1;
        }
    }
    return 0;
}

static void test_external_roundtrip(void **state)
{
    (void)state;
    pp_graph *g = build_all_kinds(), *l = NULL;
    pp_graph_save_options so = {.force_external = 1};
    OK(pp_graph_save(g, tmp_path("ext.onnx"), &so, &e_));
    struct stat sb;
    assert_int_equal(stat(tmp_path("ext.onnx.data"), &sb), 0);
    OK(pp_graph_load(tmp_path("ext.onnx"), &load_opt, &l, &e_));
    size_t bytes = assert_graph_same(g, l);
    int external = 0;
    for (int i = 0; i < l->ninits; i++) {
        size_t off;
        int mapped = in_mmap(l, l->inits[i].t.data, &off);
        assert_int_equal(mapped, l->inits[i].t.nbytes >= 1024);
        if (mapped) assert_int_equal(off % 4096, 0);
        external += mapped;
    }
    pp_graph_destroy(l);
    /* a threshold below the model's weights sends the big ones out too; none when above */
    so = (pp_graph_save_options){.external_threshold = 1 << 16};
    remove(tmp_path("thr.onnx.data"));
    OK(pp_graph_save(g, tmp_path("thr.onnx"), &so, &e_));
    assert_int_equal(stat(tmp_path("thr.onnx.data"), &sb), 0);
    so.external_threshold = 1 << 17;
    OK(pp_graph_save(g, tmp_path("inline.onnx"), &so, &e_));
    assert_int_not_equal(stat(tmp_path("inline.onnx.data"), &sb), 0);
    assert_int_equal(external, 2);
    printf("external data: %zu bytes byte-exact, %d initializers >= 1 KiB point into the mmap at 4 KiB-aligned "
           "offsets\n", bytes, external);
    pp_graph_destroy(g);
}

static void test_external_bad(void **state)
{
    (void)state;
    FILE *f = fopen(tmp_path("small.bin"), "wb");
    assert_non_null(f);
    fwrite("0123456789abcdef", 1, 16, f);
    fclose(f);
    struct { const char *loc, *offset, *length, *expect; pp_status st; const char *base; } cases[] = {
        {"../evil.bin", "0", "64", "leaves the model's directory", PP_ERR_PARSE, tmp_dir},
        {"sub/../../evil.bin", "0", "64", "leaves the model's directory", PP_ERR_PARSE, tmp_dir},
        {"/etc/passwd", "0", "64", "is absolute", PP_ERR_PARSE, tmp_dir},
        {"small.bin", "0", "64", "beyond the end of 'small.bin'", PP_ERR_PARSE, tmp_dir},
        {"small.bin", "18446744073709551615", "64", "beyond the end", PP_ERR_PARSE, tmp_dir},
        {"small.bin", "x", "64", "offset 'x' is not a number", PP_ERR_PARSE, tmp_dir},
        {"small.bin", "0", "12", "has length 12", PP_ERR_PARSE, tmp_dir},
        {"missing.bin", "0", "64", "cannot open external data file", PP_ERR_IO, tmp_dir},
        {"small.bin", "0", "64", "no base directory", PP_ERR_INVALID_ARG, NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        proto_model p;
        proto_init(&p);
        int64_t dims[] = {16};
        Onnx__TensorProto t = tensor_init("ext_w", PP_DTYPE_F32, 1, dims);
        Onnx__StringStringEntryProto e[3] = {ONNX__STRING_STRING_ENTRY_PROTO__INIT, ONNX__STRING_STRING_ENTRY_PROTO__INIT,
                                             ONNX__STRING_STRING_ENTRY_PROTO__INIT};
        Onnx__StringStringEntryProto *ep[3] = {&e[0], &e[1], &e[2]};
        e[0].key = "location", e[0].value = (char *)cases[k].loc;
        e[1].key = "offset", e[1].value = (char *)cases[k].offset;
        e[2].key = "length", e[2].value = (char *)cases[k].length;
        t.has_data_location = 1;
        t.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        t.n_external_data = 3;
        t.external_data = ep;
        p.g.n_initializer = 1;
        p.inits[0] = &t;
        pp_graph *g = NULL;
        pp_error err = {0};
        pp_status st = proto_load(&p, cases[k].base, &g, &err);
        printf("  external '%s' offset %s: %s\n", cases[k].loc, cases[k].offset, err.msg);
        assert_null(g);
        assert_int_equal(st, cases[k].st);
        assert_non_null(strstr(err.msg, cases[k].expect));
        assert_non_null(strstr(err.msg, "ext_w"));
    }
}

/* ---- malformed models --------------------------------------------------- */

typedef void (*mutate_fn)(proto_model *p, Onnx__TensorProto *t);

static void m_negative_dim(proto_model *p, Onnx__TensorProto *t) { (void)p; t->dims[0] = -3; }
static void m_overflow(proto_model *p, Onnx__TensorProto *t)
{
    (void)p;
    t->n_dims = 3;
    t->dims[0] = t->dims[1] = t->dims[2] = 1ll << 30;
}
static void m_size(proto_model *p, Onnx__TensorProto *t) { (void)p; t->raw_data.len = 7; }
static void m_rank(proto_model *p, Onnx__TensorProto *t) { (void)p; t->n_dims = 9; }
static void m_dtype(proto_model *p, Onnx__TensorProto *t) { (void)p; t->data_type = 14; }
static void m_typed_count(proto_model *p, Onnx__TensorProto *t)
{
    (void)p;
    static float two[2];
    t->has_raw_data = 0;
    t->n_float_data = 2;
    t->float_data = two;
}
static void m_no_graph(proto_model *p, Onnx__TensorProto *t) { (void)t; p->m.graph = NULL; }
static void m_empty_op(proto_model *p, Onnx__TensorProto *t) { (void)t; p->node.op_type = ""; }
static void m_old_opset(proto_model *p, Onnx__TensorProto *t) { (void)t; p->os.version = 11; }
static void m_value_rank(proto_model *p, Onnx__TensorProto *t) { (void)t; p->tt.elem_type = 15; }
static void m_two_producers(proto_model *p, Onnx__TensorProto *t)
{
    (void)t;
    static Onnx__NodeProto n2;
    n2 = p->node;
    n2.name = "relu2";
    static Onnx__NodeProto *nodes[2];
    p->g.n_node = 2;
    nodes[0] = &p->node, nodes[1] = &n2;
    p->g.node = nodes;
}
static void m_graph_attr(proto_model *p, Onnx__TensorProto *t)
{
    (void)t;
    static Onnx__AttributeProto a = ONNX__ATTRIBUTE_PROTO__INIT;
    static Onnx__GraphProto body = ONNX__GRAPH_PROTO__INIT;
    static Onnx__AttributeProto *ap[1] = {&a};
    a.name = "then_branch";
    a.has_type = 1;
    a.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    a.g = &body;
    p->node.n_attribute = 1;
    p->node.attribute = ap;
}

static void m_huge_input(proto_model *p, Onnx__TensorProto *t)
{
    (void)t;
    static Onnx__TensorShapeProto shape = ONNX__TENSOR_SHAPE_PROTO__INIT;
    static Onnx__TensorShapeProto__Dimension d = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    static Onnx__TensorShapeProto__Dimension *dims[2] = {&d, &d};
    d.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d.dim_value = 1ll << 40;
    shape.n_dim = 2;
    shape.dim = dims;
    static Onnx__TypeProto type;
    static Onnx__TypeProto__Tensor tt;
    type = p->type, tt = p->tt;
    tt.shape = &shape;
    type.tensor_type = &tt;
    p->in.type = &type;
}
/* A terminal escape (clear screen), a title-setting OSC and an invalid byte in the names;
 * valid UTF-8 (the é) stays as it is. */
static void m_escape_names(proto_model *p, Onnx__TensorProto *t)
{
    (void)t;
    p->node.name = "re\x1b[2Jlu\xff\xc3\xa9";
    p->node.op_type = "Foo\x1b]0;pwned\x07";
}

static void test_malformed(void **state)
{
    (void)state;
    struct { const char *what; mutate_fn fn; pp_status st; const char *expect; } cases[] = {
        {"negative dim", m_negative_dim, PP_ERR_PARSE, "initializer 'w' has negative dim -3"},
        {"dims overflow", m_overflow, PP_ERR_SHAPE,
         "initializer 'w': shape [1073741824, 1073741824, 1073741824] of float32 holds more than 128 TiB"},
        {"input dim 2^40", m_huge_input, PP_ERR_SHAPE,
         "graph input 'x': shape [1099511627776, 1099511627776] of float32 holds more than 128 TiB"},
        {"ESC in names", m_escape_names, PP_ERR_UNSUPPORTED,
         "node 're\\x1b[2Jlu\\xff\xc3\xa9': op Foo\\x1b]0;pwned\\x07 (domain 'ai.onnx') is not supported"},
        {"data size", m_size, PP_ERR_PARSE, "7 bytes of raw_data for 4 elements"},
        {"rank 9", m_rank, PP_ERR_UNSUPPORTED, "rank 9"},
        {"complex dtype", m_dtype, PP_ERR_UNSUPPORTED, "data type 14"},
        {"typed count", m_typed_count, PP_ERR_PARSE, "2 values in float_data for 4 elements"},
        {"no graph", m_no_graph, PP_ERR_PARSE, "holds no graph"},
        {"empty op_type", m_empty_op, PP_ERR_PARSE, "has no op_type"},
        {"opset 11", m_old_opset, PP_ERR_UNSUPPORTED, "opset 11"},
        {"value dtype", m_value_rank, PP_ERR_UNSUPPORTED, "value 'x' has data type 15"},
        {"two producers", m_two_producers, PP_ERR_PARSE, "produced by both"},
        {"graph attribute", m_graph_attr, PP_ERR_UNSUPPORTED, "node 'relu' (Relu): attribute 'then_branch' is a graph"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        proto_model p;
        proto_init(&p);
        int64_t dims[PP_MAX_RANK + 1] = {4, 1, 1, 1, 1, 1, 1, 1, 1};
        float w[4] = {1, 2, 3, 4};
        Onnx__TensorProto t = tensor_init("w", PP_DTYPE_F32, 1, dims);
        t.has_raw_data = 1;
        t.raw_data = (ProtobufCBinaryData){sizeof w, (uint8_t *)w};
        p.g.n_initializer = 1;
        p.inits[0] = &t;
        cases[k].fn(&p, &t);
        pp_graph *g = NULL;
        pp_error err = {0};
        pp_status st = proto_load(&p, NULL, &g, &err);
        printf("  %-16s -> %s: %s\n", cases[k].what, pp_status_string(st), err.msg);
        assert_null(g);
        assert_int_equal(st, cases[k].st);
        if (!strstr(err.msg, cases[k].expect)) fail_msg("expected '%s' in '%s'", cases[k].expect, err.msg);
        for (const unsigned char *c = (const unsigned char *)err.msg; *c; c++)
            if (*c < 0x20 || *c == 0x7f || *c == 0xff) fail_msg("byte 0x%02x in the message '%s'", *c, err.msg);
    }
}

static void test_bad_files(void **state)
{
    (void)state;
    pp_graph *g = NULL;
    pp_error err = {0};
    assert_int_equal(pp_graph_load(tmp_path("does-not-exist.onnx"), NULL, &g, &err), PP_ERR_IO);
    assert_non_null(strstr(err.msg, "does-not-exist.onnx"));
    FILE *f = fopen(tmp_path("empty.onnx"), "wb");
    fclose(f);
    assert_int_equal(pp_graph_load(tmp_path("empty.onnx"), NULL, &g, &err), PP_ERR_PARSE);
    assert_non_null(strstr(err.msg, "is empty"));
    f = fopen(tmp_path("text.onnx"), "wb");
    fputs("this is a text file, not a protobuf\n", f);
    fclose(f);
    assert_int_not_equal(pp_graph_load(tmp_path("text.onnx"), NULL, &g, &err), PP_OK);
    assert_non_null(strstr(err.msg, "text.onnx"));
    printf("  text file: %s\n", err.msg);
    /* a truncated model */
    pp_graph *full = build_all_kinds();
    OK(pp_graph_save(full, tmp_path("trunc.onnx"), NULL, &e_));
    pp_graph_destroy(full);
    struct stat sb;
    assert_int_equal(stat(tmp_path("trunc.onnx"), &sb), 0);
    assert_int_equal(truncate(tmp_path("trunc.onnx"), sb.st_size - 5), 0);
    assert_int_equal(pp_graph_load(tmp_path("trunc.onnx"), NULL, &g, &err), PP_ERR_PARSE);
    assert_non_null(strstr(err.msg, "protobuf parse failed"));
    printf("  truncated: %s\n", err.msg);
    assert_null(g);
}

/* ---- extraction --------------------------------------------------------- */

/* x -> MatMul(W1) -> a -> Relu -> b -> MatMul(W2) -> c; d = Add(b, c) */
static void test_extract(void **state)
{
    (void)state;
    pp_graph *g, *s0 = NULL, *s1 = NULL, *l = NULL;
    static float w1[4 * 4], w2[4 * 4];
    for (int i = 0; i < 16; i++) w1[i] = (float)i, w2[i] = (float)-i;
    pp_error e = {0};
    assert_int_equal(pp_graph_create("dag", 17, &g, &e), PP_OK);
    pp_shape xs = pp_shape_make(2, (int64_t[]){2, 4}), ws = pp_shape_make(2, (int64_t[]){4, 4});
    OK(pp_graph_add_input(g, "x", PP_DTYPE_F32, &xs, &e_));
    OK(pp_graph_add_initializer(g, "W1", PP_DTYPE_F32, &ws, w1, sizeof w1, 0, &e_));
    OK(pp_graph_add_initializer(g, "W2", PP_DTYPE_F32, &ws, w2, sizeof w2, 0, &e_));
    OK(pp_graph_add_node(g, "MatMul", "", "mm1", (const char *[]){"x", "W1"}, 2, (const char *[]){"a"}, 1, NULL, &e_));
    OK(pp_graph_add_node(g, "Relu", "", "relu", (const char *[]){"a"}, 1, (const char *[]){"b"}, 1, NULL, &e_));
    OK(pp_graph_add_node(g, "MatMul", "", "mm2", (const char *[]){"b", "W2"}, 2, (const char *[]){"c"}, 1, NULL, &e_));
    OK(pp_graph_add_node(g, "Add", "", "add", (const char *[]){"b", "c"}, 2, (const char *[]){"d"}, 1, NULL, &e_));
    OK(pp_graph_add_output(g, "d", PP_DTYPE_F32, &xs, &e_));
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].shape.rank < 0) g->values[v].dtype = PP_DTYPE_F32, g->values[v].shape = xs;
    OK(pp_graph_finalize(g, NULL, &e_));
    int b = pp_graph_find_value(g, "b"), d = pp_graph_find_value(g, "d");
    OK(pp_graph_extract(g, (const int[]){0, 1}, 2, (const int[]){b}, 1, "stage-0", &s0, &e_));
    OK(pp_graph_extract(g, (const int[]){2, 3}, 2, (const int[]){d, b}, 2, "stage-1", &s1, &e_));
    /* stage 0: x in, W1, b out */
    assert_string_equal(s0->name, "stage-0");
    assert_int_equal(s0->nnodes, 2);
    assert_int_equal(s0->ninputs, 1);
    assert_string_equal(s0->values[s0->inputs[0]].name, "x");
    assert_int_equal(s0->ninits, 1);
    assert_string_equal(s0->values[s0->inits[0].value].name, "W1");
    assert_ptr_equal(s0->inits[0].t.data, w1);   /* borrowed, not copied */
    assert_int_equal(s0->noutputs, 1);
    assert_string_equal(s0->values[s0->outputs[0]].name, "b");
    assert_true(pp_shape_equal(&s0->values[s0->outputs[0]].shape, &xs));
    assert_true(s0->values[pp_graph_find_value(s0, "W1")].is_param);
    /* stage 1: b in (read twice, listed once), W2, outputs d and the pass-through b */
    assert_int_equal(s1->nnodes, 2);
    assert_string_equal(s1->nodes[0].name, "mm2");
    assert_int_equal(s1->ninputs, 1);
    assert_string_equal(s1->values[s1->inputs[0]].name, "b");
    assert_int_equal(s1->values[s1->inputs[0]].dtype, PP_DTYPE_F32);
    assert_true(pp_shape_equal(&s1->values[s1->inputs[0]].shape, &xs));
    assert_int_equal(s1->ninits, 1);
    assert_ptr_equal(s1->inits[0].t.data, w2);
    assert_int_equal(s1->noutputs, 2);
    assert_string_equal(s1->values[s1->outputs[0]].name, "d");
    assert_true(pp_shape_equal(&s1->values[pp_graph_find_value(s1, "c")].shape, &xs));
    /* a stage saves and loads like any model */
    OK(pp_graph_save(s1, tmp_path("stage-1.onnx"), NULL, &e_));
    OK(pp_graph_load(tmp_path("stage-1.onnx"), &load_opt, &l, &e_));
    assert_graph_same(s1, l);
    pp_graph *bad = NULL;
    pp_error err = {0};
    assert_int_equal(pp_graph_extract(g, (const int[]){0, 9}, 2, NULL, 0, "bad", &bad, &err), PP_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "node id 9 out of range"));
    assert_null(bad);
    printf("extract: stage-0 {x} -> {b} with W1, stage-1 {b} -> {d, b} with W2; borrowed data; saved and "
           "reloaded equal\n");
    pp_graph_destroy(l);
    pp_graph_destroy(s0);
    pp_graph_destroy(s1);
    pp_graph_destroy(g);
}

static int roundtrip_main(int argc, char **argv)
{
    pp_graph *g = NULL;
    pp_error err = {0};
    pp_graph_save_options so = {.force_external = argc > 4 && !strcmp(argv[4], "--external")};
    if (pp_graph_load(argv[2], NULL, &g, &err) != PP_OK || pp_graph_save(g, argv[3], &so, &err) != PP_OK) {
        fprintf(stderr, "test_graph_io: error: %s\n", err.msg);
        pp_graph_destroy(g);
        return 1;
    }
    printf("loaded %s (%d nodes, %d initializers), saved %s%s\n", argv[2], g->nnodes, g->ninits, argv[3],
           so.force_external ? " with external data" : "");
    pp_graph_destroy(g);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "--roundtrip")) return roundtrip_main(argc, argv);
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_graph_io.XXXXXX");
    if (!mkdtemp(tmp_dir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_all_kinds), cmocka_unit_test(test_typed_fields),
        cmocka_unit_test(test_external_roundtrip),  cmocka_unit_test(test_external_bad),
        cmocka_unit_test(test_malformed),           cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_extract),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
    return rc;
}
