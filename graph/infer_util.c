/* Helpers shared by the shape rules and constant evaluators: reading inputs and
 * constant integer lists, axes, broadcasting, typed element access, errors. */
#include "infer.h"

#include <stdarg.h>
#include <string.h>

const pp_const_tensor *infer_const(const infer_ctx *c, int value)
{
    if (value < 0) return NULL;
    const pp_value *v = &c->g->values[value];
    if (v->init >= 0) return &c->g->inits[v->init].t;
    if (c->side && c->side[value] >= 0) return &c->consts[c->side[value]];
    return NULL;
}

int infer_has_input(const pp_node *n, int k)
{
    return k < n->ninputs && n->inputs[k] >= 0;
}

const pp_shape *infer_shape_of(const infer_ctx *c, const pp_node *n, int k)
{
    return &c->g->values[n->inputs[k]].shape;
}

pp_dtype infer_dtype_of(const infer_ctx *c, const pp_node *n, int k)
{
    return c->g->values[n->inputs[k]].dtype;
}

pp_status infer_fail(const pp_node *n, pp_status st, pp_error *err, const char *fmt, ...)
{
    if (!err) return st;
    char msg[PP_ERROR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pp_error_set(err, st, "node '%s' (%s): %s", n->name, n->op_type, msg);
}

pp_status infer_need(const infer_ctx *c, const pp_node *n, int k, int min_rank, pp_error *err)
{
    if (!infer_has_input(n, k))
        return infer_fail(n, PP_ERR_PARSE, err, "input %d is missing", k);
    const pp_value *v = &c->g->values[n->inputs[k]];
    if (v->shape.rank < 0)
        return infer_fail(n, PP_ERR_SHAPE, err, "input %d ('%s') has an unknown shape", k, v->name);
    if (v->shape.rank < min_rank)
        return infer_fail(n, PP_ERR_SHAPE, err, "input %d ('%s') has rank %d, expected at least %d",
                          k, v->name, v->shape.rank, min_rank);
    return PP_OK;
}

pp_status infer_axis(const pp_node *n, int64_t axis, int rank, int *out, pp_error *err)
{
    if (axis < -rank || axis >= (rank ? rank : 1))
        return infer_fail(n, PP_ERR_SHAPE, err, "axis %lld out of range for rank %d",
                          (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return PP_OK;
}

int64_t const_i64(const pp_const_tensor *t, int64_t i)
{
    const void *d = t->data;
    switch (t->dtype) {
    case PP_DTYPE_I64: return ((const int64_t *)d)[i];
    case PP_DTYPE_I32: return ((const int32_t *)d)[i];
    case PP_DTYPE_I16: return ((const int16_t *)d)[i];
    case PP_DTYPE_I8: return ((const int8_t *)d)[i];
    case PP_DTYPE_U8: case PP_DTYPE_BOOL: return ((const uint8_t *)d)[i];
    case PP_DTYPE_U16: return ((const uint16_t *)d)[i];
    case PP_DTYPE_U32: return ((const uint32_t *)d)[i];
    case PP_DTYPE_U64: return (int64_t)((const uint64_t *)d)[i];
    case PP_DTYPE_F32: return (int64_t)((const float *)d)[i];
    case PP_DTYPE_F64: return (int64_t)((const double *)d)[i];
    default: return 0;
    }
}

double const_f64(const pp_const_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case PP_DTYPE_F32: return ((const float *)t->data)[i];
    case PP_DTYPE_F64: return ((const double *)t->data)[i];
    default: return (double)const_i64(t, i);
    }
}

void const_store(pp_dtype dt, void *d, int64_t i, double f, int64_t iv)
{
    switch (dt) {
    case PP_DTYPE_F32: ((float *)d)[i] = (float)f; break;
    case PP_DTYPE_F64: ((double *)d)[i] = f; break;
    case PP_DTYPE_I64: ((int64_t *)d)[i] = iv; break;
    case PP_DTYPE_I32: ((int32_t *)d)[i] = (int32_t)iv; break;
    case PP_DTYPE_I16: ((int16_t *)d)[i] = (int16_t)iv; break;
    case PP_DTYPE_I8: ((int8_t *)d)[i] = (int8_t)iv; break;
    case PP_DTYPE_U8: ((uint8_t *)d)[i] = (uint8_t)iv; break;
    case PP_DTYPE_BOOL: ((uint8_t *)d)[i] = iv != 0; break;
    case PP_DTYPE_U16: ((uint16_t *)d)[i] = (uint16_t)iv; break;
    case PP_DTYPE_U32: ((uint32_t *)d)[i] = (uint32_t)iv; break;
    case PP_DTYPE_U64: ((uint64_t *)d)[i] = (uint64_t)iv; break;
    default: break;
    }
}

pp_status infer_const_ints(const infer_ctx *c, const pp_node *n, int k, const char *what,
                           int64_t *vals, int *nvals, int max, int *known, pp_error *err)
{
    *known = 1;
    *nvals = 0;
    if (!infer_has_input(n, k)) return infer_fail(n, PP_ERR_PARSE, err, "the %s input is missing", what);
    const pp_value *v = &c->g->values[n->inputs[k]];
    const pp_const_tensor *t = infer_const(c, n->inputs[k]);
    if (!t) {
        int np = infer_part_ints(c, n->inputs[k], vals, NULL, max), all = np >= 0;
        for (int i = 0; i < np; i++) all &= vals[i] != INFER_UNKNOWN;
        if (all && v->shape.rank <= 1) {   /* shape arithmetic known in full, dims unbound */
            *nvals = np;
            return PP_OK;
        }
        if (!c->opt->allow_unknown_dims)
            return pp_error_set(err, PP_ERR_SHAPE,
                                "%s input of %s '%s' is not constant after folding; export with static "
                                "shapes or bind dims (--batch N, --dim NAME=N)", what, n->op_type, n->name);
        *known = 0;
        *nvals = v->shape.rank == 1 ? (int)v->shape.dims[0] : (v->shape.rank == 0 ? 1 : -1);
        if (*nvals > max) *nvals = -1;
        return PP_OK;
    }
    if (t->dtype != PP_DTYPE_I64 && t->dtype != PP_DTYPE_I32)
        return infer_fail(n, PP_ERR_SHAPE, err, "%s input '%s' has dtype %s, expected int64", what, v->name,
                          pp_dtype_name(t->dtype));
    int64_t cnt = pp_shape_numel(&t->shape);
    if (t->shape.rank > 1 || cnt > max)
        return infer_fail(n, PP_ERR_SHAPE, err, "%s input '%s' must be a 1-D list of at most %d values",
                          what, v->name, max);
    for (int64_t i = 0; i < cnt; i++) vals[i] = const_i64(t, i);
    *nvals = (int)cnt;
    return PP_OK;
}

pp_status infer_axes(const infer_ctx *c, const pp_node *n, const char *name, int k,
                     int64_t *vals, int *nvals, int *known, pp_error *err)
{
    const int64_t *a;
    int na;
    *known = 1;
    PP_CHECK(pp_attr_ints(n->attrs, n->nattrs, name, &a, &na, n->name, err));
    if (a) {
        if (na > PP_MAX_RANK) return infer_fail(n, PP_ERR_SHAPE, err, "%d %s, at most %d", na, name, PP_MAX_RANK);
        memcpy(vals, a, (size_t)na * sizeof *vals);
        *nvals = na;
        return PP_OK;
    }
    *nvals = 0;
    if (!infer_has_input(n, k)) return PP_OK;
    return infer_const_ints(c, n, k, name, vals, nvals, PP_MAX_RANK, known, err);
}

static void fmt_pair(const pp_shape *a, const pp_shape *b, char *buf, size_t len)
{
    char sa[256], sb[256];
    snprintf(buf, len, "%s and %s", pp_shape_format(a, sa, sizeof sa), pp_shape_format(b, sb, sizeof sb));
}

pp_status infer_broadcast(const pp_node *n, const pp_shape *a, const pp_shape *b, pp_shape *out,
                          pp_error *err)
{
    pp_shape r;
    memset(&r, 0, sizeof r);
    r.rank = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r.rank; i++) {
        int ia = i - (r.rank - a->rank), ib = i - (r.rank - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        const char *sa = ia >= 0 ? a->syms[ia] : NULL, *sb = ib >= 0 ? b->syms[ib] : NULL;
        if (da == db || db == 1) {
            r.dims[i] = da;
            r.syms[i] = sa;
        } else if (da == 1) {
            r.dims[i] = db;
            r.syms[i] = sb;
        } else if (da < 0 || db < 0) {
            r.dims[i] = da < 0 ? db : da;  /* the known one (> 1), which the unknown must equal */
            r.syms[i] = da < 0 ? sb : sa;
        } else {
            char buf[600];
            fmt_pair(a, b, buf, sizeof buf);
            return infer_fail(n, PP_ERR_SHAPE, err, "shapes do not broadcast: %s", buf);
        }
    }
    *out = r;
    return PP_OK;
}

int infer_fits(const pp_node *n, const pp_shape *a, const pp_shape *b, pp_shape *bc)
{
    if (infer_broadcast(n, a, b, bc, NULL) != PP_OK || bc->rank != a->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] >= 0 && bc->dims[i] != a->dims[i]) return 0;
    return 1;
}

void infer_copy(infer_ctx *c, const pp_node *n, int k, int i)
{
    const pp_value *v = &c->g->values[n->inputs[i]];
    c->os[k] = v->shape;
    c->odt[k] = v->dtype;
}

pp_shape infer_unknown(int rank)
{
    pp_shape s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    for (int i = 0; i < rank && i < PP_MAX_RANK; i++) s.dims[i] = -1;
    return s;
}
