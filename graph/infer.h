/* Private to graph/: the inference context, the shape rules and constant evaluators
 * the op registry (graph/ops.c) points at, and helpers the rules share. */
#ifndef PP_GRAPH_INFER_H
#define PP_GRAPH_INFER_H

#include "graph_internal.h"
#include <onnxpipe/core_util.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>

/* A small tensor known in part (graph/infer_part.c): the shape arithmetic of a model whose
 * dims are not bound. */
#define INFER_PART_MAX 16                 /* elements: shape vectors, pads */
#define INFER_UNKNOWN INT64_MIN           /* an element infer_part_ints does not know */
typedef struct infer_part {
    int n;                                /* elements */
    double v[INFER_PART_MAX];             /* NAN where not known */
    const char *sym[INFER_PART_MAX];      /* the named dim an unknown element is, or NULL */
} infer_part;

/* An element of a part as int64: beyond int64's range it is its end (INT64_MAX, Slice's "to
 * the end", reads back as itself). */
static inline int64_t infer_i64(double v)
{
    return v >= 9223372036854775807.0 ? INT64_MAX : v <= -9223372036854775807.0 ? -INT64_MAX : (int64_t)v;
}

struct pp_infer_ctx {
    pp_graph *g;
    const pp_graph_options *opt;
    pp_shape *os;           /* shapes of the current node's outputs, filled by a shape rule */
    pp_dtype *odt;          /* their dtypes */
    pp_const_tensor *fold_out;  /* outputs of the node being folded */
    int max_outputs;        /* capacity of os / odt / fold_out */
    /* Constants computed without folding (opt->no_fold): value -> index in consts, or -1. */
    int *side;
    pp_const_tensor *consts;
    int nconsts, consts_cap;
    /* Per value: 1 when a gradient flows from it to a graph output (computed lazily). */
    unsigned char *grad_live;
    /* Values known in part (allow_unknown_dims): value -> index in parts, or -1. */
    int *part_of;
    infer_part *parts;
    int nparts, parts_cap;
    pp_jvalue *params_meta;     /* the model's "onnxpipe.parameters", parsed (NULL: none) */
};
typedef struct pp_infer_ctx infer_ctx;

/* Fills c->os[k] / c->odt[k] for every output slot of node n. */
typedef pp_status (*infer_shape_fn)(infer_ctx *c, const pp_node *n, pp_error *err);
/* Computes the data of the node's outputs from constant inputs. out[k] already has
 * dtype, shape, nbytes and a zeroed buffer; *done = 0 when the dtypes are not handled. */
typedef pp_status (*infer_fold_fn)(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done,
                                   pp_error *err);

/* ---- helpers (graph/infer_util.c) ------------------------------------------ */

/* Constant data of a value: an initializer or a no_fold side constant; NULL otherwise. */
const pp_const_tensor *infer_const(const infer_ctx *c, int value);
const pp_shape *infer_shape_of(const infer_ctx *c, const pp_node *n, int k);
pp_dtype infer_dtype_of(const infer_ctx *c, const pp_node *n, int k);
/* 1 when input k is given (not omitted and within ninputs). */
int infer_has_input(const pp_node *n, int k);

/* Sets err to "node 'name' (Op): <message>" and returns st. */
pp_status infer_fail(const pp_node *n, pp_status st, pp_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Checks that input k is present and has a known rank (at least min_rank). */
pp_status infer_need(const infer_ctx *c, const pp_node *n, int k, int min_rank, pp_error *err);
/* Normalizes axis (may be negative) into [0, rank). */
pp_status infer_axis(const pp_node *n, int64_t axis, int rank, int *out, pp_error *err);

/* Element i of a constant as int64 / double, whatever its dtype. */
int64_t const_i64(const pp_const_tensor *t, int64_t i);
double const_f64(const pp_const_tensor *t, int64_t i);
/* Stores v as element i of a tensor of dtype dt. */
void const_store(pp_dtype dt, void *data, int64_t i, double f, int64_t iv);

/* Reads integer input k (int64 or int32, at most max elements) into vals. When it is
 * not constant: with opt->allow_unknown_dims *known = 0 and *nvals = its length
 * (or -1), otherwise an error naming the node and `what` ("shape", "axes", ...). */
pp_status infer_const_ints(const infer_ctx *c, const pp_node *n, int k, const char *what,
                           int64_t *vals, int *nvals, int max, int *known, pp_error *err);
/* Axes from attribute `name` if present, else from input k (opset-dependent form);
 * *nvals = 0 when neither is given. */
pp_status infer_axes(const infer_ctx *c, const pp_node *n, const char *name, int k,
                     int64_t *vals, int *nvals, int *known, pp_error *err);

/* The elements of integer value `value` as far as they are known (a constant, or shape
 * arithmetic known in part): vals[i], INFER_UNKNOWN where not known (syms[i] then the named
 * dim it is, or NULL; syms may be NULL). The count, or -1 when none of it is known or it has
 * more than max elements. */
int infer_part_ints(const infer_ctx *c, int value, int64_t *vals, const char **syms, int max);
/* The same as a shape (unknown elements -1, with their names): 0 when none of it is known. */
int infer_part_shape(const infer_ctx *c, int value, pp_shape *s);
/* Records what is known of node n's output when it did not fold (graph/infer_part.c). */
pp_status infer_part_node(infer_ctx *c, const pp_node *n, pp_error *err);

/* Multidirectional (numpy) broadcast of a and b; unknown dims (-1) carry through. */
pp_status infer_broadcast(const pp_node *n, const pp_shape *a, const pp_shape *b, pp_shape *out,
                          pp_error *err);
/* 1 when b broadcasts to a's shape (bc: the broadcast): equal to a wherever a's dim is known;
 * where it is not (dims unbound), bc has b's size for it, and the bound load checks it. */
int infer_fits(const pp_node *n, const pp_shape *a, const pp_shape *b, pp_shape *bc);
/* Output k = shape and dtype of input i. */
void infer_copy(infer_ctx *c, const pp_node *n, int k, int i);
/* An all-unknown shape of the given rank (allow_unknown_dims). */
pp_shape infer_unknown(int rank);

/* Slice plan of node n on input shape `in`: per axis the first index and step,
 * and the output shape. */
pp_status infer_slice_plan(const infer_ctx *c, const pp_node *n, const pp_shape *in,
                           int64_t *start, int64_t *step, pp_shape *out, pp_error *err);

/* First dim that Shape(start=, end=) reports, for an input of this rank. */
int64_t infer_shape_start(const pp_node *n, int rank);

/* Walks the elements of a row-major output of shape dims, keeping for each operand
 * the element offset off[k] = sum idx[d] * strides[k][d] (+ its base). */
typedef struct infer_iter {
    int rank, nops;
    int64_t dims[PP_MAX_RANK], idx[PP_MAX_RANK];
    int64_t strides[3][PP_MAX_RANK];
    int64_t off[3];
} infer_iter;
/* Operand k broadcast (numpy rules) against out; strides in elements. */
void iter_init(infer_iter *it, const pp_shape *out, const pp_shape *const *ops, int nops);
void iter_next(infer_iter *it);

/* ---- shape rules ----------------------------------------------------------- */
/* graph/infer_math.c */
pp_status shape_unary(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_binary(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_compare(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_where(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_cast(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_softmax(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_dropout(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_matmul(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_gemm(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_layernorm(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_reduce(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_sce_loss(infer_ctx *c, const pp_node *n, pp_error *err);
/* graph/infer_layout.c */
pp_status shape_reshape(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_flatten(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_transpose(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_squeeze(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_unsqueeze(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_split(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_slice(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_concat(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_gather(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_expand(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_const_of_shape(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_shape(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_range(infer_ctx *c, const pp_node *n, pp_error *err);
/* graph/infer_conv.c */
pp_status shape_conv(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_pool(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_global_pool(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_batchnorm(infer_ctx *c, const pp_node *n, pp_error *err);
/* comparisons, logic, more elementwise functions */
/* graph/infer_logic.c */
pp_status shape_variadic(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_logic(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_predicate(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_mod(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_prelu(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_swiglu(infer_ctx *c, const pp_node *n, pp_error *err);

/* indexing, scatter, padding, tiling, cumulative sums, more reductions */
/* graph/infer_index.c */
pp_status shape_tile(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_pad(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_gather_elements(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_gather_nd(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_argmax(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_topk(infer_ctx *c, const pp_node *n, pp_error *err);

/* normalisation, attention, rotary embedding, resampling, einsum */
/* graph/infer_nn_more.c */
pp_status shape_norm_rows(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_rope(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_attention(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_resize(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_einsum(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status shape_skip_norm(infer_ctx *c, const pp_node *n, pp_error *err);

/* ---- constant evaluators (graph/fold.c, graph/fold_math.c) ------------------------- */
pp_status fold_copy(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_transpose(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_split(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_slice(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_concat(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_gather(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_expand(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_const_of_shape(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_shape(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_range(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_cast(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_unary(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_binary(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_where(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
/* One element of node n's binary op or comparison (unary: its unary op) on a and b, as
 * fold_binary and fold_unary compute it (fl: floats, in float32; else int64); *ok = 0 where
 * the op has no such function or an integer divisor is 0. */
pp_status fold_element(const pp_node *n, int fl, int unary, double a, double b, double *r, int *ok, pp_error *err);

/* folders: comparisons, logic, more elementwise functions (graph/fold_logic.c) */
pp_status fold_predicate(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_minmax(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_clip(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);

/* folders: indexing, scatter, padding, tiling, cumulative sums, more reductions */
/* graph/fold_index.c: CumSum, Trilu, Tile, Pad, GatherElements, GatherND, ScatterND, ScatterElements */
pp_status fold_index(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
/* graph/fold_reduce_more.c: ReduceMax, ReduceMin, ReduceProd; ArgMax */
pp_status fold_reduce_more(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status fold_argmax(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);

/* folders: normalisation, attention, rotary embedding, resampling, einsum */

/* fold-only ops, shape rules and folders (graph/fold_only.c): Size, NonZero */
pp_status shape_size(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status fold_size(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);
pp_status shape_nonzero(infer_ctx *c, const pp_node *n, pp_error *err);
pp_status fold_nonzero(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err);

#endif
