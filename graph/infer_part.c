/* Shape arithmetic known in part while dims are unbound (a preview, train's first load): the
 * small tensors the exporters compute from Shape (a Reshape's target, a Pad's pads, a Slice's
 * ends) evaluated element by element, each element known or not, a named dim carried where it
 * moves through unchanged. So Reshape(x, Concat(Shape(x)[:2], [C])) keeps C, and its batch and
 * sequence names, where batch and sequence are not bound. The shape rules read these values
 * through infer_const_ints (every element known) and infer_part_ints (some). */
#include "infer.h"

#include <math.h>
#include <string.h>

#define INFER_PART_INPUTS 16   /* a Concat of more inputs is not followed */

static int small_numel(const pp_shape *s)
{
    int64_t n = pp_shape_numel(s);
    return n >= 0 && n <= INFER_PART_MAX ? (int)n : -1;
}

/* The value's elements as far as known: a small constant, or a part computed before. */
static int part_get(const infer_ctx *c, int value, infer_part *p)
{
    if (value < 0) return 0;
    const pp_const_tensor *t = infer_const(c, value);
    if (t) {
        int n = small_numel(&t->shape);
        if (n < 0 || !pp_dtype_size(t->dtype) || t->dtype == PP_DTYPE_STRING) return 0;
        p->n = n;
        for (int i = 0; i < n; i++) p->v[i] = const_f64(t, i), p->sym[i] = NULL;
        return 1;
    }
    if (!c->part_of || c->part_of[value] < 0) return 0;
    *p = c->parts[c->part_of[value]];
    return 1;
}

int infer_part_ints(const infer_ctx *c, int value, int64_t *vals, const char **syms, int max)
{
    infer_part p;
    pp_dtype dt = value >= 0 ? c->g->values[value].dtype : PP_DTYPE_UNDEFINED;
    if ((dt != PP_DTYPE_I64 && dt != PP_DTYPE_I32) || !part_get(c, value, &p) || p.n > max) return -1;
    for (int i = 0; i < p.n; i++) {
        vals[i] = isnan(p.v[i]) ? INFER_UNKNOWN : infer_i64(p.v[i]);
        if (syms) syms[i] = p.sym[i];
    }
    return p.n;
}

int infer_part_shape(const infer_ctx *c, int value, pp_shape *s)
{
    int64_t v[PP_MAX_RANK];
    const char *sym[PP_MAX_RANK];
    int n = infer_part_ints(c, value, v, sym, PP_MAX_RANK);
    if (n < 0) return 0;
    *s = pp_shape_make(0, NULL);
    s->rank = n;
    for (int i = 0; i < n; i++) {
        s->dims[i] = v[i] == INFER_UNKNOWN || v[i] < 0 ? -1 : v[i];
        s->syms[i] = v[i] == INFER_UNKNOWN ? sym[i] : NULL;
    }
    return 1;
}

static pp_status part_store(infer_ctx *c, int value, const infer_part *p, pp_error *err)
{
    if (!c->part_of) {
        c->part_of = pp_malloc(((size_t)c->g->nvalues + 1) * sizeof *c->part_of);
        if (!c->part_of) return PP_NOMEM(err);
        memset(c->part_of, 0xff, ((size_t)c->g->nvalues + 1) * sizeof *c->part_of);
    }
    if (c->nparts == c->parts_cap) {
        int cap = c->parts_cap ? 2 * c->parts_cap : 16;
        infer_part *q = pp_realloc_array(c->parts, (size_t)cap, sizeof *q);
        if (!q) return PP_NOMEM(err);
        c->parts = q;
        c->parts_cap = cap;
    }
    c->parts[c->nparts] = *p;
    c->part_of[value] = c->nparts++;
    return PP_OK;
}

/* ---- which input element each output element copies --------------------------- */

static void unravel(const pp_shape *s, int64_t i, int64_t *idx)
{
    for (int d = s->rank - 1; d >= 0; d--) {
        idx[d] = s->dims[d] ? i % s->dims[d] : 0;
        i = s->dims[d] ? i / s->dims[d] : 0;
    }
}

static int64_t ravel(const pp_shape *s, const int64_t *idx)
{
    int64_t i = 0;
    for (int d = 0; d < s->rank; d++) i = i * s->dims[d] + idx[d];
    return i;
}

/* For the data-movement ops: output element i is element at[i] of input from[i]. 0 when
 * the op is not one, or what it needs (indices, the slice's bounds) is not known. */
static pp_status sources(const infer_ctx *c, const pp_node *n, const pp_shape *os, int cnt, int *from, int64_t *at,
                         int *ok, pp_error *err)
{
    *ok = infer_has_input(n, 0);
    if (!*ok) return PP_OK;
    const pp_shape *x = infer_shape_of(c, n, 0);
    int64_t o[PP_MAX_RANK], in[PP_MAX_RANK];
    switch (n->op) {
    case PP_OP_RESHAPE: case PP_OP_FLATTEN: case PP_OP_SQUEEZE: case PP_OP_UNSQUEEZE: case PP_OP_IDENTITY:
        for (int i = 0; i < cnt; i++) from[i] = 0, at[i] = i;
        return PP_OK;
    case PP_OP_TRANSPOSE: {
        const int64_t *perm;
        int np;
        PP_CHECK(pp_attr_ints(n->attrs, n->nattrs, "perm", &perm, &np, n->name, err));
        for (int i = 0; i < cnt; i++) {
            unravel(os, i, o);
            for (int d = 0; d < os->rank; d++) in[perm ? perm[d] : os->rank - 1 - d] = o[d];
            from[i] = 0, at[i] = ravel(x, in);
        }
        return PP_OK;
    }
    case PP_OP_EXPAND:
        for (int i = 0; i < cnt; i++) {
            unravel(os, i, o);
            for (int d = 0; d < x->rank; d++) in[d] = x->dims[d] == 1 ? 0 : o[d + os->rank - x->rank];
            from[i] = 0, at[i] = ravel(x, in);
        }
        return PP_OK;
    case PP_OP_SLICE: {
        int64_t start[PP_MAX_RANK], step[PP_MAX_RANK];
        pp_shape plan;
        PP_CHECK(infer_slice_plan(c, n, x, start, step, &plan, err));
        for (int i = 0; i < cnt; i++) {
            unravel(os, i, o);
            for (int d = 0; d < x->rank; d++) in[d] = start[d] + o[d] * step[d];
            from[i] = 0, at[i] = ravel(x, in);
        }
        return PP_OK;
    }
    case PP_OP_CONCAT: case PP_OP_GATHER: {
        int64_t axis;
        PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "axis", 0, &axis, n->name, err));
        int ax = (int)(axis < 0 ? axis + (n->op == PP_OP_CONCAT ? os->rank : x->rank) : axis);
        int64_t idx[INFER_PART_MAX];
        int nidx = 0, ir = 0;
        if (n->op == PP_OP_GATHER) {
            ir = infer_shape_of(c, n, 1)->rank;
            nidx = infer_part_ints(c, n->inputs[1], idx, NULL, INFER_PART_MAX);
            *ok = nidx >= 0;
            for (int j = 0; j < nidx; j++)
                *ok &= idx[j] != INFER_UNKNOWN && idx[j] >= -x->dims[ax] && idx[j] < x->dims[ax];
            if (!*ok) return PP_OK;
        }
        for (int i = 0; i < cnt; i++) {
            unravel(os, i, o);
            if (n->op == PP_OP_CONCAT) {
                int k = 0;
                int64_t off = o[ax];
                while (k < n->ninputs - 1 && off >= infer_shape_of(c, n, k)->dims[ax])
                    off -= infer_shape_of(c, n, k++)->dims[ax];
                memcpy(in, o, sizeof o);
                in[ax] = off;
                from[i] = k, at[i] = ravel(infer_shape_of(c, n, k), in);
                continue;
            }
            int64_t j = idx[ravel(infer_shape_of(c, n, 1), o + ax)];
            for (int d = 0; d < x->rank; d++) in[d] = d < ax ? o[d] : d == ax ? (j < 0 ? j + x->dims[ax] : j)
                                                                               : o[d - 1 + ir];
            from[i] = 0, at[i] = ravel(x, in);
        }
        return PP_OK;
    }
    default:
        *ok = 0;
        return PP_OK;
    }
}

/* ---- evaluation ---------------------------------------------------------------- */

static int is_float_dtype(pp_dtype dt)
{
    return dt == PP_DTYPE_F32 || dt == PP_DTYPE_F64 || dt == PP_DTYPE_F16 || dt == PP_DTYPE_BF16;
}

/* Shape(x, start, end): x's dims, unknown ones by their names. */
static void part_shape(const infer_ctx *c, const pp_node *n, infer_part *out)
{
    const pp_shape *x = infer_shape_of(c, n, 0);
    int64_t s = infer_shape_start(n, x->rank);
    for (int i = 0; i < out->n; i++) {
        out->v[i] = x->dims[s + i] >= 0 ? (double)x->dims[s + i] : NAN;
        out->sym[i] = x->dims[s + i] >= 0 ? NULL : x->syms[s + i];
    }
}

/* The elementwise ops of the folder (binary, comparisons, unary), Cast and Where: an element
 * is known where the elements it reads are (Where: its condition, or both branches equal). */
static pp_status part_elementwise(const infer_ctx *c, const pp_node *n, const pp_shape *os, infer_part *out,
                                  int *ok, pp_error *err)
{
    const pp_op_info *op = pp_op_get(n->op);
    const int unary = op->fold == fold_unary, where = n->op == PP_OP_WHERE, cast = n->op == PP_OP_CAST;
    const int nin = where ? 3 : unary || cast ? 1 : 2;
    if (!where && !cast && !unary && op->fold != fold_binary) return *ok = 0, PP_OK;
    infer_part in[3];
    const pp_shape *sh[3];
    int fl = 0;
    for (int k = 0; k < nin; k++) {
        if (!infer_has_input(n, k) || !part_get(c, n->inputs[k], &in[k])) return *ok = 0, PP_OK;
        sh[k] = infer_shape_of(c, n, k);
        fl |= k >= where && is_float_dtype(infer_dtype_of(c, n, k));
    }
    pp_dtype odt = c->odt[0];
    infer_iter it;
    iter_init(&it, os, sh, nin);
    for (int i = 0; i < out->n; i++, iter_next(&it)) {
        double a = in[0].v[it.off[0]], r = NAN;
        const char *sym = NULL;
        if (where) {
            double x = in[1].v[it.off[1]], y = in[2].v[it.off[2]];
            int pick = isnan(a) ? (!isnan(x) && x == y ? 1 : 0) : (a != 0 ? 1 : 2);
            if (pick) r = in[pick].v[it.off[pick]], sym = in[pick].sym[it.off[pick]];
        } else if (cast) {
            sym = is_float_dtype(odt) ? NULL : in[0].sym[it.off[0]];
            r = isnan(a) || is_float_dtype(odt) ? a : odt == PP_DTYPE_BOOL ? a != 0 : trunc(a);
        } else {
            double b = unary ? 0 : in[1].v[it.off[1]];
            int known = 1;
            if (!isnan(a) && !isnan(b)) PP_CHECK(fold_element(n, fl, unary, a, b, &r, &known, err));
            if (!known) r = NAN;
        }
        out->v[i] = r;
        out->sym[i] = isnan(r) ? sym : NULL;
    }
    *ok = 1;
    return PP_OK;
}

pp_status infer_part_node(infer_ctx *c, const pp_node *n, pp_error *err)
{
    if (n->noutputs != 1 || n->outputs[0] < 0 || infer_const(c, n->outputs[0])) return PP_OK;
    const pp_shape *os = &c->os[0];
    infer_part out = {.n = small_numel(os)};
    int ok = 1;
    if (out.n < 0) return PP_OK;
    if (n->op == PP_OP_SHAPE) {
        part_shape(c, n, &out);
    } else if (n->op == PP_OP_CONSTANT_OF_SHAPE) {
        const pp_attr *v = pp_attr_find(n->attrs, n->nattrs, "value");
        for (int i = 0; i < out.n; i++) out.v[i] = v ? const_f64(&v->t, 0) : 0, out.sym[i] = NULL;
    } else {
        int from[INFER_PART_MAX];
        int64_t at[INFER_PART_MAX];
        PP_CHECK(sources(c, n, os, out.n, from, at, &ok, err));
        if (!ok) {
            PP_CHECK(part_elementwise(c, n, os, &out, &ok, err));
        } else {
            infer_part in[INFER_PART_INPUTS];
            for (int k = 0; k < n->ninputs && k < INFER_PART_INPUTS && ok; k++)
                ok = (n->op != PP_OP_CONCAT && k > 0) || part_get(c, n->inputs[k], &in[k]);
            for (int i = 0; ok && i < out.n; i++) {
                ok = from[i] < INFER_PART_INPUTS && at[i] >= 0 && at[i] < in[from[i]].n;
                if (ok) out.v[i] = in[from[i]].v[at[i]], out.sym[i] = in[from[i]].sym[at[i]];
            }
        }
    }
    return ok ? part_store(c, n->outputs[0], &out, err) : PP_OK;
}
