/* Shape and tensor helpers, and typed attribute getters with errors that name the node. */
#include <onnxpipe/tensor.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int64_t pp_shape_numel(const pp_shape *s)
{
    if (s->rank < 0) return -1;
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        if (s->dims[i] < 0) return -1;
        n *= s->dims[i];
    }
    return n;
}

pp_status pp_shape_check_size(const pp_shape *s, pp_dtype dt, pp_error *err, const char *what_fmt, ...)
{
    size_t es = pp_dtype_size(dt);
    int64_t bytes = es ? (int64_t)es : 1;
    int over = 0;   /* zero dims are left out: a product taken in any order must fit */
    for (int i = 0; i < s->rank && i < PP_MAX_RANK && !over; i++)
        if (s->dims[i] > 0) over = __builtin_mul_overflow(bytes, s->dims[i], &bytes) || bytes > PP_MAX_TENSOR_BYTES;
    if (!over) return PP_OK;
    char what[512], sb[256];
    va_list ap;
    va_start(ap, what_fmt);
    vsnprintf(what, sizeof what, what_fmt, ap);
    va_end(ap);
    return pp_error_set(err, PP_ERR_SHAPE,
                        "%s: shape %s of %s holds more than 128 TiB, the most onnxpipe takes for one tensor; "
                        "a dim in the model (or one bound with --batch / --dim) is wrong",
                        what, pp_shape_format(s, sb, sizeof sb), pp_dtype_name(dt));
}

const char *pp_shape_format(const pp_shape *s, char *buf, size_t len)
{
    if (s->rank < 0) {
        snprintf(buf, len, "[?]");
        return buf;
    }
    size_t k = 0;
    k += (size_t)snprintf(buf + k, len - k, "[");
    for (int i = 0; i < s->rank && k < len; i++) {
        const char *sep = i ? ", " : "";
        if (s->dims[i] >= 0) k += (size_t)snprintf(buf + k, len - k, "%s%lld", sep, (long long)s->dims[i]);
        else if (s->syms[i]) k += (size_t)snprintf(buf + k, len - k, "%s%s", sep, s->syms[i]);
        else k += (size_t)snprintf(buf + k, len - k, "%s?", sep);
    }
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

int pp_shape_equal(const pp_shape *a, const pp_shape *b)
{
    if (a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

pp_shape pp_shape_make(int rank, const int64_t *dims)
{
    pp_shape s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    for (int i = 0; i < rank && i < PP_MAX_RANK; i++) s.dims[i] = dims[i];
    return s;
}

int64_t pp_tensor_numel(const pp_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->dims[i];
    return n;
}

size_t pp_tensor_nbytes(const pp_tensor *t)
{
    return (size_t)pp_tensor_numel(t) * pp_dtype_size(t->dtype);
}

const pp_attr *pp_attr_find(const pp_attr *attrs, int nattrs, const char *name)
{
    for (int i = 0; i < nattrs; i++)
        if (!strcmp(attrs[i].name, name)) return &attrs[i];
    return NULL;
}

static pp_status wrong_type(const pp_attr *a, const char *want, const char *node, pp_error *err)
{
    return pp_error_set(err, PP_ERR_PARSE, "node '%s': attribute '%s' has type %d, expected %s",
                        node ? node : "?", a->name, (int)a->type, want);
}

pp_status pp_attr_int(const pp_attr *attrs, int nattrs, const char *name, int64_t dflt,
                      int64_t *out, const char *node, pp_error *err)
{
    const pp_attr *a = pp_attr_find(attrs, nattrs, name);
    *out = dflt;
    if (!a) return PP_OK;
    if (a->type != PP_ATTR_INT) return wrong_type(a, "int", node, err);
    *out = a->i;
    return PP_OK;
}

pp_status pp_attr_float(const pp_attr *attrs, int nattrs, const char *name, float dflt,
                        float *out, const char *node, pp_error *err)
{
    const pp_attr *a = pp_attr_find(attrs, nattrs, name);
    *out = dflt;
    if (!a) return PP_OK;
    if (a->type == PP_ATTR_INT) { *out = (float)a->i; return PP_OK; }
    if (a->type != PP_ATTR_FLOAT) return wrong_type(a, "float", node, err);
    *out = a->f;
    return PP_OK;
}

pp_status pp_attr_string(const pp_attr *attrs, int nattrs, const char *name, const char *dflt,
                         const char **out, const char *node, pp_error *err)
{
    const pp_attr *a = pp_attr_find(attrs, nattrs, name);
    *out = dflt;
    if (!a) return PP_OK;
    if (a->type != PP_ATTR_STRING) return wrong_type(a, "string", node, err);
    *out = a->s;
    return PP_OK;
}

pp_status pp_attr_ints(const pp_attr *attrs, int nattrs, const char *name,
                       const int64_t **out, int *n, const char *node, pp_error *err)
{
    const pp_attr *a = pp_attr_find(attrs, nattrs, name);
    *out = NULL;
    *n = 0;
    if (!a) return PP_OK;
    if (a->type != PP_ATTR_INTS) return wrong_type(a, "ints", node, err);
    *out = a->ints;
    *n = a->n;
    return PP_OK;
}
