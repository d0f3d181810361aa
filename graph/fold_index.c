/* Constant evaluation of the indexing ops in exporters' mask and position chains: CumSum
 * (position ids), Trilu (causal masks), Tile, Pad, GatherElements, GatherND and the
 * scatters, on any element type. Which element goes where is kernels/index_ops.h's, the
 * same index math the kernels run; CumSum is their row scan (float32, int64, int32). */
#include "infer.h"

#include <onnxpipe/index_ops.h>

#include <string.h>

typedef struct fold_io {
    const pp_const_tensor *x;   /* input 0 */
    char *y;                    /* output 0's bytes */
    size_t es;                  /* bytes per element */
    int64_t ny;                 /* output elements */
} fold_io;

static pp_ix ix_of(const pp_shape *s) { return pp_ix_of(s->rank, s->dims); }

static void move(const fold_io *io, int64_t dst, int64_t src)
{
    memcpy(io->y + (size_t)dst * io->es, (const char *)io->x->data + (size_t)src * io->es, io->es);
}

/* An optional scalar integer input k (dflt when omitted). */
static pp_status scalar_in(infer_ctx *c, const pp_node *n, int k, const char *what, int64_t dflt, int64_t *v,
                           pp_error *err)
{
    int64_t vals[1];
    int nv, known;
    *v = dflt;
    if (!infer_has_input(n, k)) return PP_OK;
    PP_CHECK(infer_const_ints(c, n, k, what, vals, &nv, 1, &known, err));
    if (nv != 1) return infer_fail(n, PP_ERR_SHAPE, err, "%s must be one value", what);
    *v = vals[0];
    return PP_OK;
}

static int64_t attr_i(const pp_node *n, const char *name, int64_t dflt)
{
    const pp_attr *a = pp_attr_find(n->attrs, n->nattrs, name);
    return a && a->type == PP_ATTR_INT ? a->i : dflt;
}

/* CumSum in the element type, by the kernels' row scan; *done stays 0 for other types */
static pp_status cumsum(infer_ctx *c, const pp_node *n, const fold_io *io, int *done, pp_error *err)
{
    int64_t axis;
    int ax;
    PP_CHECK(scalar_in(c, n, 1, "axis", 0, &axis, err));
    PP_CHECK(infer_axis(n, axis, io->x->shape.rank, &ax, err));
    const pp_shape *s = &io->x->shape;
    const int ex = attr_i(n, "exclusive", 0) != 0, rev = attr_i(n, "reverse", 0) != 0;
    const pp_dtype dt = io->x->dtype;
    if (dt != PP_DTYPE_F32 && dt != PP_DTYPE_I64 && dt != PP_DTYPE_I32) return PP_OK;
    int64_t inner = 1, len = s->dims[ax];
    for (int d = ax + 1; d < s->rank; d++) inner *= s->dims[d];
    for (int64_t r = 0; len && r < io->ny / len; r++) {
        const int64_t b = (r / inner) * len * inner + r % inner;
        if (dt == PP_DTYPE_F32)
            pp_ix_cumsum_f32((float *)io->y + b, (const float *)io->x->data + b, len, inner, ex, rev, 0);
        else if (dt == PP_DTYPE_I64)
            pp_ix_cumsum_i64((int64_t *)io->y + b, (const int64_t *)io->x->data + b, len, inner, ex, rev, 0);
        else
            pp_ix_cumsum_i32((int32_t *)io->y + b, (const int32_t *)io->x->data + b, len, inner, ex, rev, 0);
    }
    *done = 1;
    return PP_OK;
}

static pp_status pad(infer_ctx *c, const pp_node *n, const fold_io *io, const pp_shape *ys, pp_error *err)
{
    int64_t pads[2 * PP_MAX_RANK], axes[PP_MAX_RANK], begin[PP_MAX_RANK] = {0};
    int np = 0, na = -1, known;
    PP_CHECK(infer_axes(c, n, "pads", 1, pads, &np, &known, err));
    if (infer_has_input(n, 3)) PP_CHECK(infer_const_ints(c, n, 3, "axes", axes, &na, PP_MAX_RANK, &known, err));
    const int nax = na >= 0 ? na : io->x->shape.rank;
    for (int i = 0; i < nax; i++) {
        int ax = i;
        if (na >= 0) PP_CHECK(infer_axis(n, axes[i], io->x->shape.rank, &ax, err));
        begin[ax] = pads[i];
    }
    const pp_attr *m = pp_attr_find(n->attrs, n->nattrs, "mode");
    const char *ms = m && m->type == PP_ATTR_STRING ? m->s : "constant";
    const int mode = !strcmp(ms, "reflect") ? PP_PAD_REFLECT : !strcmp(ms, "edge") ? PP_PAD_EDGE
                   : !strcmp(ms, "wrap") ? PP_PAD_WRAP : PP_PAD_CONSTANT;
    if (mode == PP_PAD_CONSTANT && strcmp(ms, "constant"))
        return infer_fail(n, PP_ERR_UNSUPPORTED, err, "mode '%s' (constant, reflect, edge and wrap are)", ms);
    const pp_const_tensor *cv = infer_has_input(n, 2) ? infer_const(c, n->inputs[2]) : NULL;
    const pp_attr *va = pp_attr_find(n->attrs, n->nattrs, "value");
    const double f = cv ? const_f64(cv, 0) : va && va->type == PP_ATTR_FLOAT ? va->f : 0.0;
    const int64_t iv = cv ? const_i64(cv, 0) : (int64_t)f;
    const pp_ix xi = ix_of(&io->x->shape), yi = ix_of(ys);
    for (int64_t i = 0; i < io->ny; i++) {
        const int64_t s = pp_ix_pad_src(&xi, &yi, begin, mode, i);
        if (s >= 0) move(io, i, s);
        else const_store(io->x->dtype, io->y, i, f, iv);
    }
    return PP_OK;
}

/* Index value j of idx wrapped into [0, dim), else an error. */
static pp_status index_at(const pp_node *n, const pp_const_tensor *idx, int64_t j, int64_t dim, int64_t *v,
                          pp_error *err)
{
    const int64_t raw = const_i64(idx, j);
    *v = pp_ix_wrap(raw, dim);
    if (*v < 0)
        return infer_fail(n, PP_ERR_SHAPE, err, "index %lld out of range for a dim of %lld", (long long)raw,
                          (long long)dim);
    return PP_OK;
}

/* GatherElements (scatter 0) or ScatterElements (scatter 1, add: reduction add). */
static pp_status elements(const pp_node *n, const fold_io *io, const pp_const_tensor *idx,
                          const pp_const_tensor *upd, pp_error *err)
{
    const pp_shape *s = &io->x->shape;
    int64_t axis = attr_i(n, "axis", 0);
    int ax;
    PP_CHECK(infer_axis(n, axis, s->rank, &ax, err));
    if (idx->shape.rank != s->rank) return infer_fail(n, PP_ERR_SHAPE, err, "indices and data differ in rank");
    const pp_ix di = ix_of(s), ii = ix_of(&idx->shape);
    const pp_attr *r = pp_attr_find(n->attrs, n->nattrs, "reduction");
    const int add = r && r->type == PP_ATTR_STRING && !strcmp(r->s, "add");
    for (int64_t j = 0; j < pp_shape_numel(&idx->shape); j++) {
        int64_t v;
        PP_CHECK(index_at(n, idx, j, s->dims[ax], &v, err));
        const int64_t e = pp_ix_elements_dst(&di, &ii, ax, v, j);
        if (!upd) move(io, j, e);
        else if (!add) memcpy(io->y + (size_t)e * io->es, (const char *)upd->data + (size_t)j * io->es, io->es);
        else const_store(io->x->dtype, io->y, e, const_f64(io->x, e) + const_f64(upd, j),
                         const_i64(io->x, e) + const_i64(upd, j));
    }
    return PP_OK;
}

/* GatherND (upd NULL) or ScatterND. */
static pp_status nd(const pp_node *n, const fold_io *io, const pp_const_tensor *idx, const pp_const_tensor *upd,
                    pp_error *err)
{
    const pp_shape *s = &io->x->shape;
    const int64_t b = upd ? 0 : attr_i(n, "batch_dims", 0), q = idx->shape.dims[idx->shape.rank - 1];
    if (q < 1 || b < 0 || b + q > s->rank)
        return infer_fail(n, PP_ERR_SHAPE, err, "indices' last dim %lld does not fit data of rank %d", (long long)q,
                          s->rank);
    pp_ix_nd p;
    p.q = (int)q;
    p.b = (int)b;
    p.per_batch = p.batch_stride = p.slice = 1;
    for (int d = (int)b; d < idx->shape.rank - 1; d++) p.per_batch *= idx->shape.dims[d];
    for (int d = (int)b; d < s->rank; d++) p.batch_stride *= s->dims[d];
    for (int d = (int)(b + q); d < s->rank; d++) p.slice *= s->dims[d];
    int64_t st = p.slice;
    for (int j = (int)q - 1; j >= 0; j--) {
        p.dims[j] = s->dims[b + j];
        p.st[j] = st;
        st *= p.dims[j];
    }
    const pp_attr *r = pp_attr_find(n->attrs, n->nattrs, "reduction");
    const int add = r && r->type == PP_ATTR_STRING && !strcmp(r->s, "add");
    const int64_t ntup = pp_shape_numel(&idx->shape) / q;
    for (int64_t t = 0; t < ntup; t++) {
        int64_t ind[PP_MAX_RANK];
        for (int j = 0; j < q; j++) ind[j] = const_i64(idx, t * q + j);
        const int64_t base = pp_ix_nd_base(&p, t, ind);
        if (base < 0) return infer_fail(n, PP_ERR_SHAPE, err, "index tuple %lld is out of range", (long long)t);
        for (int64_t e = 0; e < p.slice; e++) {
            const int64_t k = t * p.slice + e;
            if (!upd) move(io, k, base + e);
            else if (!add) memcpy(io->y + (size_t)(base + e) * io->es, (const char *)upd->data + (size_t)k * io->es,
                                  io->es);
            else const_store(io->x->dtype, io->y, base + e, const_f64(io->x, base + e) + const_f64(upd, k),
                             const_i64(io->x, base + e) + const_i64(upd, k));
        }
    }
    return PP_OK;
}

pp_status fold_index(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    const fold_io io = {infer_const(c, n->inputs[0]), (char *)out->data, pp_dtype_size(out->dtype),
                        pp_shape_numel(&out->shape)};
    const pp_const_tensor *in1 = infer_has_input(n, 1) ? infer_const(c, n->inputs[1]) : NULL;
    const pp_const_tensor *in2 = infer_has_input(n, 2) ? infer_const(c, n->inputs[2]) : NULL;
    const pp_ix xi = ix_of(&io.x->shape), yi = ix_of(&out->shape);
    if (n->op == PP_OP_SCATTER_ND || n->op == PP_OP_SCATTER_ELEMENTS)
        memcpy(io.y, io.x->data, out->nbytes);
    switch (n->op) {
    case PP_OP_CUM_SUM: return cumsum(c, n, &io, done, err);
    case PP_OP_TRILU: {
        int64_t k;
        PP_CHECK(scalar_in(c, n, 1, "k", 0, &k, err));
        const int upper = attr_i(n, "upper", 1) != 0;
        if (xi.rank < 2) return infer_fail(n, PP_ERR_SHAPE, err, "input has rank %d, expected at least 2", xi.rank);
        const int64_t rows = xi.dims[xi.rank - 2], cols = xi.dims[xi.rank - 1];
        for (int64_t i = 0; i < io.ny; i++)
            if (pp_ix_trilu_keep(i, rows, cols, k, upper)) move(&io, i, i);
        break;
    }
    case PP_OP_TILE:
        for (int64_t i = 0; i < io.ny; i++) move(&io, i, pp_ix_tile_src(&xi, &yi, i));
        break;
    case PP_OP_PAD: PP_CHECK(pad(c, n, &io, &out->shape, err)); break;
    case PP_OP_GATHER_ELEMENTS: PP_CHECK(elements(n, &io, in1, NULL, err)); break;
    case PP_OP_SCATTER_ELEMENTS: PP_CHECK(elements(n, &io, in1, in2, err)); break;
    case PP_OP_GATHER_ND: PP_CHECK(nd(n, &io, in1, NULL, err)); break;
    case PP_OP_SCATTER_ND: PP_CHECK(nd(n, &io, in1, in2, err)); break;
    default: return PP_OK;
    }
    *done = 1;
    return PP_OK;
}
