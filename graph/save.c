/* Writing a pp_graph as an ONNX ModelProto through protobuf-c. Large models put their
 * initializers into PATH.data (external data, 4 KiB-aligned offsets); both files are
 * written to temporaries and renamed into place. Folded constants go back as Constant
 * nodes, tied copies (copy_of) as the initializers the file had. */
#include "graph_internal.h"

#include <onnx/onnx.pb-c.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <onnxpipe/graph_ir.h>

#define EXTERNAL_MIN_BYTES 1024            /* smaller initializers stay inline */
#define EXTERNAL_ALIGN 4096                /* offsets in the data file */
#define PROTOBUF_LIMIT 2000000000LL        /* a ModelProto must stay below 2 GiB */

/* The protobuf structs are built in a scratch graph's arena (zeroed, freed at once). */
typedef struct saver {
    const pp_graph *g;
    pp_graph *scratch;
    const char *data_location;   /* basename of PATH.data, when external */
    FILE *data;                  /* the data file being written, or NULL */
    const char *data_path;       /* its temporary name, for messages */
    uint64_t data_off;           /* bytes written to it so far */
} saver;

#define NEW(S, T, init) new_msg((S), sizeof(T), &(T)init)
static void *new_msg(saver *S, size_t size, const void *init)
{
    void *p = pp_graph_alloc(S->scratch, size);
    if (p) memcpy(p, init, size);
    return p;
}

static void *new_array(saver *S, size_t n, size_t size)
{
    return pp_graph_alloc(S->scratch, (n ? n : 1) * size);
}

static char *dup_str(saver *S, const char *s) { return (char *)pp_graph_strdup(S->scratch, s ? s : ""); }

static Onnx__TensorShapeProto *shape_proto(saver *S, const pp_shape *sh)
{
    Onnx__TensorShapeProto *sp = NEW(S, Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT);
    if (!sp || !(sp->dim = new_array(S, (size_t)sh->rank, sizeof *sp->dim))) return NULL;
    sp->n_dim = (size_t)sh->rank;
    for (int i = 0; i < sh->rank; i++) {
        Onnx__TensorShapeProto__Dimension *d =
            NEW(S, Onnx__TensorShapeProto__Dimension, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT);
        if (!(sp->dim[i] = d)) return NULL;
        if (sh->dims[i] >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = sh->dims[i];
        } else if (sh->syms[i]) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = (char *)sh->syms[i];
        }
    }
    return sp;
}

static Onnx__ValueInfoProto *value_info(saver *S, int v)
{
    const pp_value *val = &S->g->values[v];
    Onnx__ValueInfoProto *vi = NEW(S, Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT);
    if (!vi) return NULL;
    vi->name = (char *)val->name;
    if (val->dtype == PP_DTYPE_UNDEFINED) return vi;
    Onnx__TypeProto *tp = NEW(S, Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
    Onnx__TypeProto__Tensor *tt = NEW(S, Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);
    if (!tp || !tt) return NULL;
    tt->has_elem_type = 1;
    tt->elem_type = (int32_t)val->dtype;
    if (val->shape.rank >= 0 && !(tt->shape = shape_proto(S, &val->shape))) return NULL;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->type = tp;
    return vi;
}

static Onnx__StringStringEntryProto *entry(saver *S, const char *key, const char *value)
{
    Onnx__StringStringEntryProto *e = NEW(S, Onnx__StringStringEntryProto, ONNX__STRING_STRING_ENTRY_PROTO__INIT);
    if (e) {
        e->key = (char *)key;
        e->value = dup_str(S, value);
    }
    return e && e->value ? e : NULL;
}

/* Appends t's bytes to the data file at the next aligned offset and points tp at them. */
static pp_status write_external(saver *S, const pp_const_tensor *t, Onnx__TensorProto *tp, pp_error *err)
{
    static const uint8_t zeros[EXTERNAL_ALIGN];
    uint64_t pad = (EXTERNAL_ALIGN - S->data_off % EXTERNAL_ALIGN) % EXTERNAL_ALIGN;
    if ((pad && fwrite(zeros, 1, pad, S->data) != pad) || fwrite(t->data, 1, t->nbytes, S->data) != t->nbytes)
        return pp_error_set(err, PP_ERR_IO, "cannot write '%s': %s", S->data_path, strerror(errno));
    char off[32], len[32];
    snprintf(off, sizeof off, "%llu", (unsigned long long)(S->data_off + pad));
    snprintf(len, sizeof len, "%zu", t->nbytes);
    S->data_off += pad + t->nbytes;
    tp->n_external_data = 3;
    if (!(tp->external_data = new_array(S, 3, sizeof *tp->external_data)) ||
        !(tp->external_data[0] = entry(S, "location", S->data_location)) ||
        !(tp->external_data[1] = entry(S, "offset", off)) || !(tp->external_data[2] = entry(S, "length", len)))
        return PP_NOMEM(err);
    tp->has_data_location = 1;
    tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    return PP_OK;
}

/* A tensor as raw_data (borrowing t's bytes), or as external data when S->data is open
 * and the tensor is large enough. */
static pp_status tensor_proto(saver *S, const pp_const_tensor *t, const char *name, int may_externalize,
                              Onnx__TensorProto **out, pp_error *err)
{
    Onnx__TensorProto *tp = NEW(S, Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
    if (!tp || !(tp->dims = new_array(S, (size_t)t->shape.rank, sizeof *tp->dims)))
        return PP_NOMEM(err);
    tp->name = (char *)name;
    tp->n_dims = (size_t)t->shape.rank;
    memcpy(tp->dims, t->shape.dims, tp->n_dims * sizeof *tp->dims);
    tp->has_data_type = 1;
    tp->data_type = (int32_t)t->dtype;
    *out = tp;
    if (may_externalize && S->data && t->nbytes >= EXTERNAL_MIN_BYTES) return write_external(S, t, tp, err);
    tp->has_raw_data = 1;
    tp->raw_data.len = t->nbytes;
    tp->raw_data.data = (uint8_t *)t->data;
    return PP_OK;
}

static pp_status attr_proto(saver *S, const pp_attr *a, Onnx__AttributeProto **out, pp_error *err)
{
    Onnx__AttributeProto *ap = NEW(S, Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
    if (!ap) return PP_NOMEM(err);
    ap->name = (char *)a->name;
    ap->has_type = 1;
    ap->type = (Onnx__AttributeProto__AttributeType)a->type;
    switch (a->type) {
    case PP_ATTR_FLOAT: ap->has_f = 1; ap->f = a->f; break;
    case PP_ATTR_INT: ap->has_i = 1; ap->i = a->i; break;
    case PP_ATTR_STRING:
        ap->has_s = 1;
        ap->s = (ProtobufCBinaryData){strlen(a->s), (uint8_t *)a->s};
        break;
    case PP_ATTR_TENSOR: PP_CHECK(tensor_proto(S, &a->t, NULL, 0, &ap->t, err)); break;
    case PP_ATTR_FLOATS: ap->n_floats = (size_t)a->n; ap->floats = (float *)a->floats; break;
    case PP_ATTR_INTS: ap->n_ints = (size_t)a->n; ap->ints = (int64_t *)a->ints; break;
    case PP_ATTR_STRINGS:
        if (!(ap->strings = new_array(S, (size_t)a->n, sizeof *ap->strings)))
            return PP_NOMEM(err);
        ap->n_strings = (size_t)a->n;
        for (int i = 0; i < a->n; i++)
            ap->strings[i] = (ProtobufCBinaryData){strlen(a->strings[i]), (uint8_t *)a->strings[i]};
        break;
    default:
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "attribute '%s' has type %d, which cannot be saved",
                            a->name, (int)a->type);
    }
    *out = ap;
    return PP_OK;
}

static pp_status node_proto(saver *S, const pp_node *n, Onnx__NodeProto **out, pp_error *err)
{
    const pp_graph *g = S->g;
    Onnx__NodeProto *np = NEW(S, Onnx__NodeProto, ONNX__NODE_PROTO__INIT);
    if (!np || !(np->input = new_array(S, (size_t)n->ninputs, sizeof(char *))) ||
        !(np->output = new_array(S, (size_t)n->noutputs, sizeof(char *))) ||
        !(np->attribute = new_array(S, (size_t)n->nattrs, sizeof *np->attribute)))
        return PP_NOMEM(err);
    np->name = (char *)n->name;
    np->op_type = (char *)n->op_type;
    np->domain = (char *)n->domain;
    np->n_input = (size_t)n->ninputs;
    np->n_output = (size_t)n->noutputs;
    for (int k = 0; k < n->ninputs; k++) np->input[k] = (char *)(n->inputs[k] >= 0 ? g->values[n->inputs[k]].name : "");
    for (int k = 0; k < n->noutputs; k++)
        np->output[k] = (char *)(n->outputs[k] >= 0 ? g->values[n->outputs[k]].name : "");
    np->n_attribute = (size_t)n->nattrs;
    for (int k = 0; k < n->nattrs; k++) {
        pp_status st = attr_proto(S, &n->attrs[k], &np->attribute[k], err);
        if (st != PP_OK) return pp_error_prefix(err, "node '%s' (%s): ", n->name, n->op_type);
    }
    *out = np;
    return PP_OK;
}

/* A folded initializer as the Constant node that makes it. */
static pp_status constant_proto(saver *S, const pp_initializer *in, Onnx__NodeProto **out, pp_error *err)
{
    const char *name = S->g->values[in->value].name;
    Onnx__NodeProto *np = NEW(S, Onnx__NodeProto, ONNX__NODE_PROTO__INIT);
    Onnx__AttributeProto *ap = NEW(S, Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
    char node_name[256];
    snprintf(node_name, sizeof node_name, "Constant_%s", name);
    if (!np || !ap || !(np->output = new_array(S, 1, sizeof(char *))) ||
        !(np->attribute = new_array(S, 1, sizeof *np->attribute)) || !(np->name = dup_str(S, node_name)))
        return PP_NOMEM(err);
    np->op_type = "Constant";
    np->domain = "";
    np->n_output = 1;
    np->output[0] = (char *)name;
    ap->name = "value";
    ap->has_type = 1;
    ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    PP_CHECK(tensor_proto(S, &in->t, NULL, 0, &ap->t, err));
    np->n_attribute = 1;
    np->attribute[0] = ap;
    *out = np;
    return PP_OK;
}

/* A tied copy (copy_of: the output of the Identity or Transpose node n made at load) as the
 * initializer the file had: its parameter's data, transposed where n is a Transpose. */
static pp_status copy_proto(saver *S, const pp_node *n, Onnx__TensorProto **out, pp_error *err)
{
    const pp_graph *g = S->g;
    const pp_value *v = &g->values[n->outputs[0]];
    pp_const_tensor t = g->inits[g->values[n->inputs[0]].init].t;
    if (n->op == PP_OP_TRANSPOSE) {
        const int64_t rows = t.shape.dims[0], cols = t.shape.dims[1];
        const size_t es = pp_dtype_size(t.dtype);
        char *d = pp_graph_alloc(S->scratch, t.nbytes + 1);
        if (!d) return PP_NOMEM(err);
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                memcpy(d + (size_t)(j * rows + i) * es, (const char *)t.data + (size_t)(i * cols + j) * es, es);
        t.data = d;
    }
    t.shape = v->shape;
    return tensor_proto(S, &t, v->name, 1, out, err);
}

static int is_copy(const pp_graph *g, const pp_node *n)
{
    return n->noutputs == 1 && n->outputs[0] >= 0 && g->values[n->outputs[0]].copy_of;
}

static pp_status graph_proto(saver *S, Onnx__GraphProto *gp, pp_error *err)
{
    const pp_graph *g = S->g;
    gp->name = (char *)(g->name ? g->name : "graph");
    gp->node = new_array(S, (size_t)g->nnodes + (size_t)g->ninits, sizeof *gp->node);
    gp->initializer = new_array(S, (size_t)g->ninits + (size_t)g->nnodes, sizeof *gp->initializer);
    gp->input = new_array(S, (size_t)g->ninputs, sizeof *gp->input);
    gp->output = new_array(S, (size_t)g->noutputs, sizeof *gp->output);
    gp->value_info = new_array(S, (size_t)g->nvalues, sizeof *gp->value_info);
    if (!gp->node || !gp->initializer || !gp->input || !gp->output || !gp->value_info) goto oom;
    /* Folded constants go back as Constant nodes: as initializers they would be read
     * back as weights and trained. */
    for (int i = 0; i < g->ninits; i++) {
        const pp_initializer *in = &g->inits[i];
        if (g->values[in->value].folded) PP_CHECK(constant_proto(S, in, &gp->node[gp->n_node++], err));
    }
    for (int i = 0; i < g->nnodes; i++)
        if (!is_copy(g, &g->nodes[i])) PP_CHECK(node_proto(S, &g->nodes[i], &gp->node[gp->n_node++], err));
    for (int i = 0; i < g->ninits; i++) {
        const pp_initializer *in = &g->inits[i];
        if (g->values[in->value].folded) continue;
        PP_CHECK(tensor_proto(S, &in->t, g->values[in->value].name, 1, &gp->initializer[gp->n_initializer++], err));
    }
    for (int i = 0; i < g->nnodes; i++)
        if (is_copy(g, &g->nodes[i])) PP_CHECK(copy_proto(S, &g->nodes[i], &gp->initializer[gp->n_initializer++], err));
    for (int i = 0; i < g->ninputs; i++) {
        if (g->values[g->inputs[i]].init >= 0) continue;
        if (!(gp->input[gp->n_input++] = value_info(S, g->inputs[i]))) goto oom;
    }
    for (int i = 0; i < g->noutputs; i++)
        if (!(gp->output[gp->n_output++] = value_info(S, g->outputs[i]))) goto oom;
    /* intermediate values whose type is known, so tools need not re-infer them */
    for (int v = 0; v < g->nvalues; v++) {
        const pp_value *val = &g->values[v];
        if (val->kind != PP_VALUE_NODE || val->is_output || val->producer < 0 || val->dtype == PP_DTYPE_UNDEFINED ||
            val->shape.rank < 0)
            continue;
        if (!(gp->value_info[gp->n_value_info++] = value_info(S, v))) goto oom;
    }
    return PP_OK;
oom:
    return pp_error_set(err, PP_ERR_NOMEM, "out of memory saving the graph");
}

/* A ProtobufCBuffer that streams the packed model to a FILE through a 1 MiB buffer
 * (protobuf-c appends field by field); large appends (tensor bytes) go straight through. */
#define WRITE_BUF (1 << 20)
typedef struct file_buffer {
    ProtobufCBuffer base;
    FILE *f;
    int failed;
    size_t used;
    uint8_t *buf;   /* WRITE_BUF bytes */
} file_buffer;

static void file_flush(file_buffer *fb)
{
    if (!fb->failed && fb->used && fwrite(fb->buf, 1, fb->used, fb->f) != fb->used) fb->failed = 1;
    fb->used = 0;
}

static void file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    file_buffer *fb = (file_buffer *)b;
    if (fb->used + len > WRITE_BUF) file_flush(fb);
    if (len >= WRITE_BUF) {
        if (!fb->failed && fwrite(data, 1, len, fb->f) != len) fb->failed = 1;
        return;
    }
    memcpy(fb->buf + fb->used, data, len);
    fb->used += len;
}

/* fclose with its error, then rename tmp -> path (or remove tmp on failure). */
static pp_status finish_file(FILE *f, int failed, const char *tmp, const char *path, pp_error *err)
{
    int bad = failed || fflush(f) != 0 || fsync(fileno(f)) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad || rename(tmp, path) != 0) {
        if (!bad) e = errno;
        remove(tmp);
        return pp_error_set(err, PP_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    return PP_OK;
}

static FILE *open_tmp(const char *path, char *tmp, size_t len, pp_error *err)
{
    snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) pp_error_set(err, PP_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
    return f;
}

pp_status pp_graph_save(const pp_graph *g, const char *path, const pp_graph_save_options *opt, pp_error *err)
{
    static const pp_graph_save_options defaults = {0};
    if (!opt) opt = &defaults;
    saver S = {.g = g};
    pp_status st = PP_OK;
    size_t plen = strlen(path) + 32;
    char *model_tmp = malloc(plen), *data_tmp = malloc(plen), *data_path = malloc(plen);
    FILE *mf = NULL;
    if (!model_tmp || !data_tmp || !data_path) {
        st = PP_NOMEM(err);
        goto done;
    }
    PP_CHECK_GOTO(pp_graph_create("scratch", 1, &S.scratch, err), st, done);
    int64_t total = 0, limit = opt->external_threshold > 0 ? opt->external_threshold : PROTOBUF_LIMIT;
    for (int i = 0; i < g->ninits; i++) total += (int64_t)g->inits[i].t.nbytes;
    for (int i = 0; i < g->nnodes; i++)
        if (is_copy(g, &g->nodes[i])) total += (int64_t)g->inits[g->values[g->nodes[i].inputs[0]].init].t.nbytes;
    if (opt->force_external || total > limit) {
        snprintf(data_path, plen, "%s.data", path);
        const char *slash = strrchr(data_path, '/');
        S.data_location = slash ? slash + 1 : data_path;
        S.data_path = data_tmp;
        if (!(S.data = open_tmp(data_path, data_tmp, plen, err))) {
            st = err ? err->status : PP_ERR_IO;
            goto done;
        }
    }

    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto gp = ONNX__GRAPH_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = g->ir_version > 0 ? g->ir_version : 8;
    m.producer_name = (char *)(g->producer_name && *g->producer_name ? g->producer_name : "onnxpipe");
    m.graph = &gp;
    if (!(m.opset_import = new_array(&S, (size_t)g->nopsets, sizeof *m.opset_import))) goto oom;
    for (int i = 0; i < g->nopsets; i++) {
        Onnx__OperatorSetIdProto *os = NEW(&S, Onnx__OperatorSetIdProto, ONNX__OPERATOR_SET_ID_PROTO__INIT);
        if (!(m.opset_import[m.n_opset_import++] = os)) goto oom;
        os->domain = (char *)g->opsets[i].domain;
        os->has_version = 1;
        os->version = g->opsets[i].version;
    }
    if (g->nmeta && !(m.metadata_props = new_array(&S, (size_t)g->nmeta, sizeof *m.metadata_props))) goto oom;
    for (int i = 0; i < g->nmeta; i++) {
        Onnx__StringStringEntryProto *e = NEW(&S, Onnx__StringStringEntryProto, ONNX__STRING_STRING_ENTRY_PROTO__INIT);
        if (!(m.metadata_props[m.n_metadata_props++] = e)) goto oom;
        e->key = (char *)g->meta[i].key;
        e->value = (char *)g->meta[i].value;
    }
    PP_CHECK_GOTO(graph_proto(&S, &gp, err), st, done);
    if (S.data) {
        FILE *df = S.data;
        S.data = NULL;
        PP_CHECK_GOTO(finish_file(df, 0, data_tmp, data_path, err), st, done);
    }
    if (!(mf = open_tmp(path, model_tmp, plen, err))) {
        st = err ? err->status : PP_ERR_IO;
        goto done;
    }
    file_buffer fb = {{file_append}, mf, 0, 0, malloc(WRITE_BUF)};
    if (!fb.buf) goto oom;
    onnx__model_proto__pack_to_buffer(&m, &fb.base);
    file_flush(&fb);
    free(fb.buf);
    st = finish_file(mf, fb.failed, model_tmp, path, err);
    mf = NULL;
    goto done;
oom:
    st = pp_error_set(err, PP_ERR_NOMEM, "out of memory saving the graph");
done:
    if (S.data) {
        fclose(S.data);
        remove(data_tmp);
    }
    if (mf) {
        fclose(mf);
        remove(model_tmp);
    }
    if (st != PP_OK) pp_error_prefix(err, "while saving '%s': ", path);
    pp_graph_destroy(S.scratch);
    free(model_tmp);
    free(data_tmp);
    free(data_path);
    return st;
}
