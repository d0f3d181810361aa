/* The ONNX wire format read directly (see load_wire.h): splitting a model into element
 * spans and decoding plain nodes, value types and raw-data tensors into the same structs
 * protobuf-c builds. Every decoder is stricter than protobuf-c and gives up (NULL / 0)
 * on anything outside its subset, so protobuf-c stays the judge of odd input. */
#include "load_wire.h"

#include <stdlib.h>
#include <string.h>

typedef struct reader {
    const uint8_t *p, *end;
} reader;

/* A varint of at most `max` bytes (5 for tags and lengths, as protobuf-c reads them). */
static int varint(reader *r, int max, uint64_t *v)
{
    if (r->p < r->end && *r->p < 0x80) {   /* one byte: most tags and lengths */
        *v = *r->p++;
        return 1;
    }
    uint64_t x = 0;
    for (int i = 0; i < max && r->p < r->end; i++) {
        uint8_t b = *r->p++;
        if ((i == 4 && max == 5 && b > 0x0f) || (i == 9 && b > 1)) return 0;   /* would overflow */
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return 1;
        }
    }
    return 0;
}

typedef struct field {
    uint32_t num;
    int type;        /* wire type: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
    uint64_t v;      /* type 0 */
    wire_span s;     /* type 2: the payload; otherwise the whole value */
    const uint8_t *start;   /* first byte of the tag */
} field;

/* The next field; 0 at the end, -1 on framing these readers do not take. */
static int next_field(reader *r, field *f)
{
    if (r->p == r->end) return 0;
    f->start = r->p;
    uint64_t tag, n;
    if (!varint(r, 5, &tag) || tag >> 3 == 0) return -1;
    f->num = (uint32_t)(tag >> 3);
    f->type = (int)(tag & 7);
    f->s.p = r->p;
    switch (f->type) {
    case 0: return varint(r, 10, &f->v) ? 1 : -1;
    case 1:
    case 5:
        n = f->type == 1 ? 8 : 4;
        break;
    case 2:
        if (!varint(r, 5, &n)) return -1;
        f->s.p = r->p;
        break;
    default: return -1;
    }
    if (n > (uint64_t)(r->end - r->p)) return -1;
    f->s.n = (size_t)n;
    r->p += n;
    return 1;
}

/* ---- splitting the model and the graph ----------------------------------- */

/* Appends the bytes of field f (tag included) to rest. */
static void keep(uint8_t *rest, size_t *len, const field *f, const reader *r)
{
    size_t n = (size_t)(r->p - f->start);
    memcpy(rest + *len, f->start, n);
    *len += n;
}

/* Counts (fill = 0) or records (fill = 1) the graph's repeated fields. */
static int scan_graph(wire_span g, wire_graph *wg, int fill)
{
    reader r = {g.p, g.p + g.n};
    field f;
    int k;
    size_t counts[5] = {0};
    wire_span *lists[5] = {wg->node, wg->init, wg->input, wg->output, wg->value_info};
    while ((k = next_field(&r, &f)) > 0) {
        int which = f.num == 1 ? 0 : f.num == 5 ? 1 : f.num == 11 ? 2 : f.num == 12 ? 3 : f.num == 13 ? 4 : -1;
        if (which < 0) {
            if (fill) keep(wg->rest, &wg->rest_len, &f, &r);
            continue;
        }
        if (f.type != 2) return 0;
        if (fill) lists[which][counts[which]] = f.s;
        counts[which]++;
    }
    if (k < 0) return 0;
    wg->n_node = counts[0], wg->n_init = counts[1], wg->n_input = counts[2];
    wg->n_output = counts[3], wg->n_value_info = counts[4];
    return 1;
}

void wire_graph_free(wire_graph *wg)
{
    free(wg->node);
    free(wg->init);
    free(wg->input);
    free(wg->output);
    free(wg->value_info);
    free(wg->rest);
    memset(wg, 0, sizeof *wg);
}

int wire_split_model(const uint8_t *buf, size_t len, uint8_t **rest, size_t *rest_len, wire_graph *wg)
{
    memset(wg, 0, sizeof *wg);
    *rest = NULL;
    *rest_len = 0;
    reader r = {buf, buf + len};
    field f;
    wire_span g = {NULL, 0};
    int k, ngraphs = 0;
    while ((k = next_field(&r, &f)) > 0)
        if (f.num == 7) {
            if (f.type != 2) return 0;
            g = f.s;
            ngraphs++;
        }
    if (k < 0 || ngraphs != 1 || !scan_graph(g, wg, 0)) return 0;
    wg->node = malloc((wg->n_node + 1) * sizeof *wg->node);
    wg->init = malloc((wg->n_init + 1) * sizeof *wg->init);
    wg->input = malloc((wg->n_input + 1) * sizeof *wg->input);
    wg->output = malloc((wg->n_output + 1) * sizeof *wg->output);
    wg->value_info = malloc((wg->n_value_info + 1) * sizeof *wg->value_info);
    wg->rest = malloc(g.n + 1);
    *rest = malloc(len - g.n + 1);
    if (!wg->node || !wg->init || !wg->input || !wg->output || !wg->value_info || !wg->rest || !*rest) {
        free(*rest);
        *rest = NULL;
        wire_graph_free(wg);
        return -1;
    }
    scan_graph(g, wg, 1);
    r = (reader){buf, buf + len};
    while (next_field(&r, &f) > 0)
        if (f.num != 7) keep(*rest, rest_len, &f, &r);
    return 1;
}

void wire_each_string(wire_span s, uint32_t a, uint32_t b, void (*fn)(void *ctx, wire_span str), void *ctx)
{
    reader r = {s.p, s.p + s.n};
    field f;
    while (next_field(&r, &f) > 0)
        if (f.type == 2 && (f.num == a || f.num == b)) fn(ctx, f.s);
}

/* ---- decoding elements --------------------------------------------------- */

static void *alloc(ProtobufCAllocator *a, size_t n) { return a->alloc(a->allocator_data, n ? n : 1); }

/* A NUL-terminated copy of a string field, as protobuf-c makes. */
static char *string(ProtobufCAllocator *a, wire_span s)
{
    char *c = alloc(a, s.n + 1);
    if (c) {
        memcpy(c, s.p, s.n);
        c[s.n] = '\0';
    }
    return c;
}

/* A NUL-terminated copy of s at *dst, which moves past it. */
static char *put_string(char **dst, wire_span s)
{
    char *c = *dst;
    memcpy(c, s.p, s.n);
    c[s.n] = '\0';
    *dst += s.n + 1;
    return c;
}

Onnx__NodeProto *wire_node(wire_span s, ProtobufCAllocator *a)
{
    reader r = {s.p, s.p + s.n};
    field f;
    int k;
    size_t nin = 0, nout = 0, bytes = 0;
    while ((k = next_field(&r, &f)) > 0) {
        if (f.type != 2 || (f.num != 1 && f.num != 2 && f.num != 3 && f.num != 4 && f.num != 6 && f.num != 7))
            return NULL;   /* attributes and anything else: protobuf-c */
        nin += f.num == 1;
        nout += f.num == 2;
        bytes += f.num == 6 ? 0 : f.s.n + 1;   /* doc_string is not read */
    }
    if (k < 0) return NULL;
    /* one block: the node, its input and output pointers, the strings */
    Onnx__NodeProto *n = alloc(a, sizeof *n + (nin + nout) * sizeof(char *) + bytes);
    if (!n) return NULL;
    onnx__node_proto__init(n);
    char **ptrs = (char **)(n + 1), *str = (char *)(ptrs + nin + nout);
    if (nin) n->input = ptrs;
    if (nout) n->output = ptrs + nin;
    r = (reader){s.p, s.p + s.n};
    while (next_field(&r, &f) > 0) {
        switch (f.num) {
        case 1: n->input[n->n_input++] = put_string(&str, f.s); break;
        case 2: n->output[n->n_output++] = put_string(&str, f.s); break;
        case 3: n->name = put_string(&str, f.s); break;
        case 4: n->op_type = put_string(&str, f.s); break;
        case 7: n->domain = put_string(&str, f.s); break;
        default: break;
        }
    }
    return n;
}

/* TensorShapeProto.Dimension into d: dim_value or dim_param, nothing else. */
static int dimension(wire_span s, ProtobufCAllocator *a, Onnx__TensorShapeProto__Dimension *d)
{
    reader r = {s.p, s.p + s.n};
    field f;
    int k, seen = 0;
    onnx__tensor_shape_proto__dimension__init(d);
    while ((k = next_field(&r, &f)) > 0) {
        if (seen++) return 0;
        if (f.num == 1 && f.type == 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = (int64_t)f.v;
        } else if (f.num == 2 && f.type == 2) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            if (!(d->dim_param = string(a, f.s))) return 0;
        } else {
            return 0;
        }
    }
    return k == 0;
}

static Onnx__TensorShapeProto *shape(wire_span s, ProtobufCAllocator *a)
{
    reader r = {s.p, s.p + s.n};
    field f;
    int k;
    size_t ndim = 0;
    while ((k = next_field(&r, &f)) > 0) {
        if (f.num != 1 || f.type != 2) return NULL;
        ndim++;
    }
    if (k < 0) return NULL;
    /* one block: the shape, its dim pointers, the dims */
    Onnx__TensorShapeProto *sh = alloc(a, sizeof *sh + ndim * (sizeof *sh->dim + sizeof **sh->dim));
    if (!sh) return NULL;
    onnx__tensor_shape_proto__init(sh);
    Onnx__TensorShapeProto__Dimension **ptrs = (Onnx__TensorShapeProto__Dimension **)(sh + 1);
    Onnx__TensorShapeProto__Dimension *dims = (Onnx__TensorShapeProto__Dimension *)(ptrs + ndim);
    if (ndim) sh->dim = ptrs;
    r = (reader){s.p, s.p + s.n};
    while (next_field(&r, &f) > 0) {
        if (!dimension(f.s, a, &dims[sh->n_dim])) return NULL;
        sh->dim[sh->n_dim] = &dims[sh->n_dim];
        sh->n_dim++;
    }
    return sh;
}

/* TypeProto holding only a tensor_type {elem_type, shape}, each field at most once. */
static Onnx__TypeProto *type(wire_span s, ProtobufCAllocator *a)
{
    reader r = {s.p, s.p + s.n};
    field f;
    int k;
    if (next_field(&r, &f) <= 0 || f.num != 1 || f.type != 2 || r.p != r.end) return NULL;
    Onnx__TypeProto *tp = alloc(a, sizeof *tp + sizeof(Onnx__TypeProto__Tensor));
    if (!tp) return NULL;
    Onnx__TypeProto__Tensor *tt = (Onnx__TypeProto__Tensor *)(tp + 1);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    r = (reader){f.s.p, f.s.p + f.s.n};
    while ((k = next_field(&r, &f)) > 0) {
        if (f.num == 1 && f.type == 0 && !tt->has_elem_type) {
            tt->has_elem_type = 1;
            tt->elem_type = (int32_t)(uint32_t)f.v;
        } else if (f.num == 2 && f.type == 2 && !tt->shape) {
            if (!(tt->shape = shape(f.s, a))) return NULL;
        } else {
            return NULL;
        }
    }
    return k < 0 ? NULL : tp;
}

Onnx__ValueInfoProto *wire_value_info(wire_span s, ProtobufCAllocator *a)
{
    reader r = {s.p, s.p + s.n};
    field f;
    int k;
    size_t bytes = 0;
    while ((k = next_field(&r, &f)) > 0) {
        if (f.type != 2 || f.num < 1 || f.num > 3) return NULL;
        bytes += f.num == 1 ? f.s.n + 1 : 0;
    }
    Onnx__ValueInfoProto *vi = k < 0 ? NULL : alloc(a, sizeof *vi + bytes);   /* and the names */
    if (!vi) return NULL;
    onnx__value_info_proto__init(vi);
    char *str = (char *)(vi + 1);
    r = (reader){s.p, s.p + s.n};
    while (next_field(&r, &f) > 0) {
        if (f.num == 1) {
            vi->name = put_string(&str, f.s);
        } else if (f.num == 2) {
            if (vi->type || !(vi->type = type(f.s, a))) return NULL;
        }
    }
    return vi;
}

/* The number of dims in a dims field (packed or one varint); 0 with *ok = 0 if malformed. */
static size_t count_dims(const field *f, int *ok)
{
    if (f->type == 0) return 1;
    reader d = {f->s.p, f->s.p + f->s.n};
    uint64_t v;
    size_t n = 0;
    while (d.p < d.end)
        if (!varint(&d, 10, &v)) return *ok = 0, 0;
        else n++;
    return n;
}

/* TensorProto with dims, data_type, name, raw_data and doc_string only. */
Onnx__TensorProto *wire_tensor(wire_span s, ProtobufCAllocator *a)
{
    reader r = {s.p, s.p + s.n};
    field f;
    int k, ok = 1, nraw = 0;
    size_t ndims = 0;
    while ((k = next_field(&r, &f)) > 0) {
        if (f.num == 1 && (f.type == 0 || f.type == 2)) ndims += count_dims(&f, &ok);
        else if (f.num == 9 && f.type == 2) nraw++;
        else if (!(f.num == 2 && f.type == 0) && !((f.num == 8 || f.num == 12) && f.type == 2)) return NULL;
    }
    Onnx__TensorProto *t = alloc(a, sizeof *t);
    if (k < 0 || !ok || nraw > 1 || !t) return NULL;
    onnx__tensor_proto__init(t);
    if (ndims && !(t->dims = alloc(a, ndims * sizeof *t->dims))) return NULL;
    r = (reader){s.p, s.p + s.n};
    while (next_field(&r, &f) > 0) {
        if (f.num == 1 && f.type == 0) {
            t->dims[t->n_dims++] = (int64_t)f.v;
        } else if (f.num == 1) {
            reader d = {f.s.p, f.s.p + f.s.n};
            uint64_t v;
            while (d.p < d.end && varint(&d, 10, &v)) t->dims[t->n_dims++] = (int64_t)v;
        } else if (f.num == 2) {
            t->has_data_type = 1;
            t->data_type = (int32_t)(uint32_t)f.v;
        } else if (f.num == 8) {
            if (!(t->name = string(a, f.s))) return NULL;
        } else if (f.num == 9) {
            /* protobuf-c copies the bytes through the allocator (large ones land in the graph) */
            uint8_t *d = f.s.n ? alloc(a, f.s.n) : NULL;
            if (f.s.n && !d) return NULL;
            if (d) memcpy(d, f.s.p, f.s.n);
            t->has_raw_data = 1;
            t->raw_data = (ProtobufCBinaryData){f.s.n, d};
        }
    }
    return t;
}
