/* Shapes, tensors and attributes: the vocabulary that graph, kernels and stage share.
 * Kept in core so that kernels need not know the graph IR (DESIGN.md arrows). */
#ifndef ONNXPIPE_TENSOR_H
#define ONNXPIPE_TENSOR_H

#include <onnxpipe/core.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PP_MAX_RANK 8

/* A shape; rank -1 when unknown. A dim is -1 when unknown; syms[i] names a
 * symbolic dim (ONNX dim_param, e.g. "batch") and is owned by whoever owns the shape. */
typedef struct pp_shape {
    int rank;
    int64_t dims[PP_MAX_RANK];
    const char *syms[PP_MAX_RANK];
} pp_shape;

/* The largest tensor onnxpipe takes: 2^47 bytes (128 TiB, the user address space of a
 * machine with 48-bit virtual addresses); a larger shape is a wrong dim, not a model.
 * Every shape is checked against it once on the way in (initializers and graph inputs
 * when loaded or built, node outputs when inferred), so that element and byte counts
 * fit in int64 with room to spare everywhere after. */
#define PP_MAX_TENSOR_BYTES ((int64_t)1 << 47)

/* PP_OK when the known non-zero dims of s (an unknown one counts as 1) of dtype dt (1 byte
 * per element when undefined) hold at most PP_MAX_TENSOR_BYTES; else PP_ERR_SHAPE, with a
 * message naming the tensor (what_fmt and its arguments, formatted only then: "graph input
 * '%s'"), its shape and the limit. Local; thread-safe. */
PP_API pp_status pp_shape_check_size(const pp_shape *s, pp_dtype dt, pp_error *err, const char *what_fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Elements of a fully known shape; -1 if any dim (or the rank) is unknown. Local; thread-safe. */
PP_API int64_t pp_shape_numel(const pp_shape *s);
/* "[8, 128, 256]" with symbolic names where a dim is unbound, written into buf (the caller's), which it
 * returns; pp_shape_equal compares; pp_shape_make returns a shape by value. Local; thread-safe. */
PP_API const char *pp_shape_format(const pp_shape *s, char *buf, size_t len);
PP_API int pp_shape_equal(const pp_shape *a, const pp_shape *b);
PP_API pp_shape pp_shape_make(int rank, const int64_t *dims);

/* A dense row-major tensor in some device's memory. data may be NULL for an
 * omitted optional input. */
typedef struct pp_tensor {
    pp_dtype dtype;
    int rank;
    int64_t dims[PP_MAX_RANK];
    void *data;
} pp_tensor;

/* Elements and bytes of t. Local; thread-safe. */
PP_API int64_t pp_tensor_numel(const pp_tensor *t);
PP_API size_t pp_tensor_nbytes(const pp_tensor *t);

/* A constant tensor (an initializer, a Constant's value): host memory, packed
 * little-endian, possibly pointing into an mmapped file. */
typedef struct pp_const_tensor {
    pp_dtype dtype;
    pp_shape shape;     /* always fully known */
    const void *data;
    size_t nbytes;
} pp_const_tensor;

/* ONNX AttributeProto.AttributeType numbers. */
typedef enum {
    PP_ATTR_UNDEFINED = 0,
    PP_ATTR_FLOAT = 1,
    PP_ATTR_INT = 2,
    PP_ATTR_STRING = 3,
    PP_ATTR_TENSOR = 4,
    PP_ATTR_GRAPH = 5,
    PP_ATTR_FLOATS = 6,
    PP_ATTR_INTS = 7,
    PP_ATTR_STRINGS = 8,
} pp_attr_type;

typedef struct pp_attr {
    const char *name;
    pp_attr_type type;
    float f;                    /* FLOAT */
    int64_t i;                  /* INT */
    const char *s;              /* STRING, NUL-terminated */
    int n;                      /* element count of FLOATS / INTS / STRINGS */
    const float *floats;
    const int64_t *ints;
    const char *const *strings;
    pp_const_tensor t;          /* TENSOR */
} pp_attr;

/* Attribute lookup on a list; NULL when absent. The getters return the default
 * when the attribute is absent and fill err (naming `node`) if it has the wrong type. What they return
 * points into attrs (or is dflt). Local; thread-safe. */
PP_API const pp_attr *pp_attr_find(const pp_attr *attrs, int nattrs, const char *name);
PP_API pp_status pp_attr_int(const pp_attr *attrs, int nattrs, const char *name, int64_t dflt,
                             int64_t *out, const char *node, pp_error *err);
PP_API pp_status pp_attr_float(const pp_attr *attrs, int nattrs, const char *name, float dflt,
                               float *out, const char *node, pp_error *err);
PP_API pp_status pp_attr_string(const pp_attr *attrs, int nattrs, const char *name, const char *dflt,
                                const char **out, const char *node, pp_error *err);
/* INTS: *out points into the attribute (or is NULL with *n = 0 when absent). Local; thread-safe. */
PP_API pp_status pp_attr_ints(const pp_attr *attrs, int nattrs, const char *name,
                              const int64_t **out, int *n, const char *node, pp_error *err);

/* One axis of an ONNX Slice of a dim of size dim (step != 0, negative steps included):
 * start and end made non-negative and clamped as the spec says; *first is the first index
 * taken, the result the count of elements. Shape inference and the cpu and cuda kernels
 * all slice with it. */
static inline int64_t pp_slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first)
{
    *first = 0;
    if (dim <= 0) return 0;
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    const int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? dim : dim - 1;
    start = start < 0 ? 0 : start > hi ? hi : start;
    end = end < lo ? lo : end > hi ? hi : end;
    *first = start;
    const int64_t span = step > 0 ? end - start : start - end;
    if (span <= 0) return 0;
    return step == INT64_MIN ? 1 : (span - 1) / (step > 0 ? step : -step) + 1;
}

#ifdef __cplusplus
}
#endif
#endif
