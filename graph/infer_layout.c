/* Shape rules of the data-movement ops: Reshape, Flatten, Transpose, Squeeze,
 * Unsqueeze, Split, Slice, Concat, Gather, Expand, and the shape producers
 * ConstantOfShape, Shape and Range (whose shapes depend on constant inputs). */
#include "infer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

static pp_status shape_error(const pp_node *n, pp_error *err, const char *what, const pp_shape *a,
                             const pp_shape *b)
{
    char sa[256], sb[256];
    return infer_fail(n, PP_ERR_SHAPE, err, "%s: %s vs %s", what, pp_shape_format(a, sa, sizeof sa),
                      pp_shape_format(b, sb, sizeof sb));
}

/* r's dim at `skip` (a -1) from x's dims where not all are known: the unknown dims of x and
 * of r's others that are the same named dims cancel, so [batch, seq, 4, 8] to [batch, seq, -1]
 * gives 32, and [batch, seq, 32] to [batch, -1, 4, 8] gives seq (whatever batch and seq are). */
static void cancel_named(const pp_shape *x, pp_shape *r, int skip)
{
    int64_t px = 1, pr = 1;
    int used[PP_MAX_RANK] = {0}, left = -1;
    r->dims[skip] = -1;
    r->syms[skip] = NULL;
    for (int i = 0; i < r->rank; i++) {
        if (i == skip) continue;
        if (r->dims[i] >= 0) {
            pr *= r->dims[i];
            continue;
        }
        int j = 0;
        while (j < x->rank && (used[j] || x->dims[j] >= 0 || !r->syms[i] || !x->syms[j] ||
                               strcmp(x->syms[j], r->syms[i])))
            j++;
        if (j == x->rank) return;
        used[j] = 1;
    }
    for (int j = 0; j < x->rank; j++) {
        if (x->dims[j] >= 0) px *= x->dims[j];
        else if (!used[j] && (left >= 0 || !x->syms[j])) return;   /* two left, or one without a name */
        else if (!used[j]) left = j;
    }
    if (left < 0 && pr > 0 && px % pr == 0) r->dims[skip] = px / pr;
    if (left >= 0 && px == pr) r->syms[skip] = x->syms[left];
}

/* Reshape(data, shape): 0 copies the input dim (unless allowzero), -1 is inferred. */
pp_status shape_reshape(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t sh[PP_MAX_RANK], allowzero;
    int ns, known;
    PP_CHECK(infer_need(c, n, 0, 0, err));
    PP_CHECK(infer_const_ints(c, n, 1, "shape", sh, &ns, PP_MAX_RANK, &known, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "allowzero", 0, &allowzero, n->name, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    const char *syms[PP_MAX_RANK];
    c->odt[0] = infer_dtype_of(c, n, 0);
    if (!known) {   /* the target known in part (dims unbound): its unknown dims stay unknown */
        int np = infer_part_ints(c, n->inputs[1], sh, syms, PP_MAX_RANK);
        if (np < 0) {
            c->os[0] = infer_unknown(ns);
            return PP_OK;
        }
        ns = np;
    }
    pp_shape r = pp_shape_make(ns, sh);
    int infer_at = -1;
    int64_t prod = 1;
    for (int i = 0; i < ns; i++) {
        if (!known && sh[i] == INFER_UNKNOWN) {
            r.dims[i] = -1;
            r.syms[i] = syms[i];
            prod = -1;
            continue;
        }
        if (sh[i] == 0 && !allowzero) {
            if (i >= x->rank) return infer_fail(n, PP_ERR_SHAPE, err, "shape[%d] = 0 copies a dim the input lacks", i);
            r.dims[i] = x->dims[i];
            r.syms[i] = x->syms[i];
        } else if (sh[i] == -1) {
            if (infer_at >= 0) return infer_fail(n, PP_ERR_SHAPE, err, "shape has more than one -1");
            infer_at = i;
            continue;
        } else if (sh[i] < -1) {
            return infer_fail(n, PP_ERR_SHAPE, err, "shape[%d] = %lld is invalid", i, (long long)sh[i]);
        }
        if (prod >= 0 && r.dims[i] >= 0 && __builtin_mul_overflow(prod, r.dims[i], &prod))
            return shape_error(n, err, "cannot reshape (the target's dims overflow int64)", x, &r);
        if (r.dims[i] < 0) prod = -1;
    }
    int64_t total = pp_shape_numel(x);
    if (infer_at >= 0) {
        if (total < 0 || prod < 0) cancel_named(x, &r, infer_at);
        else if (prod == 0 || total % prod) return shape_error(n, err, "cannot reshape", x, &r);
        else r.dims[infer_at] = total / prod;
    } else if (total >= 0 && prod >= 0 && total != prod) {
        return shape_error(n, err, "cannot reshape", x, &r);
    }
    c->os[0] = r;
    return PP_OK;
}

/* Flatten(input) with axis in [-r, r] -> (prod(dims[:axis]), prod(dims[axis:])) */
pp_status shape_flatten(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t axis;
    PP_CHECK(infer_need(c, n, 0, 0, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "axis", 1, &axis, n->name, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    if (axis < -x->rank || axis > x->rank)
        return infer_fail(n, PP_ERR_SHAPE, err, "axis %lld out of range for rank %d", (long long)axis, x->rank);
    if (axis < 0) axis += x->rank;
    int64_t d[2] = {1, 1};
    for (int i = 0; i < x->rank; i++) {
        int64_t *p = &d[i >= axis];
        *p = (*p < 0 || x->dims[i] < 0) ? -1 : *p * x->dims[i];
    }
    c->os[0] = pp_shape_make(2, d);
    c->odt[0] = infer_dtype_of(c, n, 0);
    return PP_OK;
}

pp_status shape_transpose(infer_ctx *c, const pp_node *n, pp_error *err)
{
    const int64_t *perm;
    int np;
    PP_CHECK(infer_need(c, n, 0, 0, err));
    PP_CHECK(pp_attr_ints(n->attrs, n->nattrs, "perm", &perm, &np, n->name, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    if (perm && np != x->rank)
        return infer_fail(n, PP_ERR_SHAPE, err, "perm has %d entries for rank %d", np, x->rank);
    pp_shape r = *x;
    int seen[PP_MAX_RANK] = {0};
    for (int i = 0; i < x->rank; i++) {
        int64_t p = perm ? perm[i] : x->rank - 1 - i;
        if (p < 0 || p >= x->rank || seen[p]++)
            return infer_fail(n, PP_ERR_SHAPE, err, "perm is not a permutation of 0..%d", x->rank - 1);
        r.dims[i] = x->dims[p];
        r.syms[i] = x->syms[p];
    }
    c->os[0] = r;
    c->odt[0] = infer_dtype_of(c, n, 0);
    return PP_OK;
}

/* Squeeze(data, axes?): axes attribute before opset 13, input from 13; none: all 1s. */
pp_status shape_squeeze(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t axes[PP_MAX_RANK];
    int naxes, known, drop[PP_MAX_RANK] = {0};
    PP_CHECK(infer_need(c, n, 0, 0, err));
    PP_CHECK(infer_axes(c, n, "axes", 1, axes, &naxes, &known, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    c->odt[0] = infer_dtype_of(c, n, 0);
    if (!known) {
        c->os[0] = infer_unknown(naxes >= 0 ? x->rank - naxes : -1);
        return PP_OK;
    }
    for (int i = 0; i < naxes; i++) {
        int ax;
        PP_CHECK(infer_axis(n, axes[i], x->rank, &ax, err));
        if (x->dims[ax] != 1 && x->dims[ax] >= 0)
            return infer_fail(n, PP_ERR_SHAPE, err, "cannot squeeze axis %d of size %lld", ax,
                              (long long)x->dims[ax]);
        drop[ax] = 1;
    }
    pp_shape r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < x->rank; i++) {
        if (!naxes && x->dims[i] < 0 && !c->opt->allow_unknown_dims)
            return infer_fail(n, PP_ERR_SHAPE, err, "cannot squeeze without axes: dim %d is unknown", i);
        if (drop[i] || (!naxes && x->dims[i] == 1)) continue;
        r.dims[r.rank] = x->dims[i];
        r.syms[r.rank++] = x->syms[i];
    }
    c->os[0] = r;
    return PP_OK;
}

/* Unsqueeze(data, axes): axes refer to the output rank. */
pp_status shape_unsqueeze(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t axes[PP_MAX_RANK];
    int naxes, known, ins[PP_MAX_RANK] = {0};
    PP_CHECK(infer_need(c, n, 0, 0, err));
    PP_CHECK(infer_axes(c, n, "axes", 1, axes, &naxes, &known, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    c->odt[0] = infer_dtype_of(c, n, 0);
    if (!known) {
        c->os[0] = infer_unknown(naxes >= 0 ? x->rank + naxes : -1);
        return PP_OK;
    }
    if (!naxes) return infer_fail(n, PP_ERR_SHAPE, err, "no axes given");
    int rank = x->rank + naxes;
    if (rank > PP_MAX_RANK) return infer_fail(n, PP_ERR_UNSUPPORTED, err, "output rank %d > %d", rank, PP_MAX_RANK);
    for (int i = 0; i < naxes; i++) {
        int ax;
        PP_CHECK(infer_axis(n, axes[i], rank, &ax, err));
        if (ins[ax]++) return infer_fail(n, PP_ERR_SHAPE, err, "axis %d repeated", ax);
    }
    pp_shape r;
    memset(&r, 0, sizeof r);
    r.rank = rank;
    for (int i = 0, j = 0; i < rank; i++) {
        r.dims[i] = ins[i] ? 1 : x->dims[j];
        r.syms[i] = ins[i] ? NULL : x->syms[j];
        j += !ins[i];
    }
    c->os[0] = r;
    return PP_OK;
}

/* Split(input, split?): sizes from the split input (opset 13+) or attribute, else
 * num_outputs (opset 18: the last chunk may be smaller), else equal parts. */
pp_status shape_split(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t axis, nout;
    int ax, nsplit = 0, known = 1;
    PP_CHECK(infer_need(c, n, 0, 0, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "axis", 0, &axis, n->name, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "num_outputs", n->noutputs, &nout, n->name, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    PP_CHECK(infer_axis(n, axis, x->rank, &ax, err));
    if (nout != n->noutputs)
        return infer_fail(n, PP_ERR_SHAPE, err, "num_outputs = %lld but the node has %d outputs",
                          (long long)nout, n->noutputs);
    int64_t dim = x->dims[ax];
    int64_t *sizes = pp_malloc((size_t)n->noutputs * sizeof *sizes);
    if (!sizes) return PP_NOMEM(err);
    pp_status st = PP_OK;
    const int64_t *attr;
    int nattr;
    PP_CHECK_GOTO(pp_attr_ints(n->attrs, n->nattrs, "split", &attr, &nattr, n->name, err), st, done);
    if (attr) {
        nsplit = nattr;
        memcpy(sizes, attr, (size_t)(nattr < n->noutputs ? nattr : n->noutputs) * sizeof *sizes);
    } else if (infer_has_input(n, 1)) {
        PP_CHECK_GOTO(infer_const_ints(c, n, 1, "split", sizes, &nsplit, n->noutputs, &known, err), st, done);
    } else {
        nsplit = n->noutputs;
        int64_t chunk = dim < 0 ? -1 : (dim + nout - 1) / nout;
        if (dim >= 0 && dim % nout && !pp_attr_find(n->attrs, n->nattrs, "num_outputs")) {
            st = infer_fail(n, PP_ERR_SHAPE, err, "dim %lld does not split into %d equal parts",
                            (long long)dim, n->noutputs);
            goto done;
        }
        for (int k = 0; k < n->noutputs; k++)
            sizes[k] = dim < 0 ? -1 : (k < n->noutputs - 1 ? chunk : dim - chunk * (n->noutputs - 1));
    }
    if (known && nsplit != n->noutputs) {
        st = infer_fail(n, PP_ERR_SHAPE, err, "split has %d sizes for %d outputs", nsplit, n->noutputs);
        goto done;
    }
    int64_t sum = 0;
    for (int k = 0; k < n->noutputs && known; k++) sum = (sum < 0 || sizes[k] < 0) ? -1 : sum + sizes[k];
    if (known && dim >= 0 && sum >= 0 && sum != dim) {
        st = infer_fail(n, PP_ERR_SHAPE, err, "split sizes add up to %lld, the dim is %lld", (long long)sum,
                        (long long)dim);
        goto done;
    }
    for (int k = 0; k < n->noutputs; k++) {
        c->os[k] = *x;
        c->os[k].dims[ax] = known ? sizes[k] : -1;
        c->os[k].syms[ax] = NULL;
        c->odt[k] = infer_dtype_of(c, n, 0);
    }
done:
    free(sizes);
    return st;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

pp_status infer_slice_plan(const infer_ctx *c, const pp_node *n, const pp_shape *in,
                           int64_t *start, int64_t *step, pp_shape *out, pp_error *err)
{
    int64_t starts[PP_MAX_RANK], ends[PP_MAX_RANK], axes[PP_MAX_RANK], steps[PP_MAX_RANK];
    int ns, ne, na, nst, known, k2 = 1, k3 = 1, k4 = 1;
    PP_CHECK(infer_const_ints(c, n, 1, "starts", starts, &ns, PP_MAX_RANK, &known, err));
    PP_CHECK(infer_const_ints(c, n, 2, "ends", ends, &ne, PP_MAX_RANK, &k2, err));
    na = ns;
    for (int i = 0; i < ns; i++) axes[i] = i;
    if (infer_has_input(n, 3)) PP_CHECK(infer_const_ints(c, n, 3, "axes", axes, &na, PP_MAX_RANK, &k3, err));
    nst = ns;
    for (int i = 0; i < ns; i++) steps[i] = 1;
    if (infer_has_input(n, 4)) PP_CHECK(infer_const_ints(c, n, 4, "steps", steps, &nst, PP_MAX_RANK, &k4, err));
    *out = *in;
    for (int i = 0; i < in->rank; i++) {
        start[i] = 0;
        step[i] = 1;
    }
    if (!known || !k2 || !k3 || !k4) {
        *out = infer_unknown(in->rank);
        return PP_OK;
    }
    if (ne != ns || na != ns || nst != ns)
        return infer_fail(n, PP_ERR_SHAPE, err, "starts, ends, axes and steps have %d, %d, %d and %d entries",
                          ns, ne, na, nst);
    int seen[PP_MAX_RANK] = {0};
    for (int i = 0; i < ns; i++) {
        int ax;
        PP_CHECK(infer_axis(n, axes[i], in->rank, &ax, err));
        if (seen[ax]++) return infer_fail(n, PP_ERR_SHAPE, err, "axis %d repeated", ax);
        if (!steps[i]) return infer_fail(n, PP_ERR_SHAPE, err, "step 0 on axis %d", ax);
        int64_t d = in->dims[ax], s = starts[i], e = ends[i], st = steps[i];
        out->syms[ax] = NULL;
        if (d < 0) {
            out->dims[ax] = -1;
            continue;
        }
        out->dims[ax] = pp_slice_axis(d, s, e, st, &start[ax]);
        step[ax] = st;
    }
    return PP_OK;
}

/* Slice(data, starts, ends, axes?, steps?) */
pp_status shape_slice(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t start[PP_MAX_RANK], step[PP_MAX_RANK];
    PP_CHECK(infer_need(c, n, 0, 0, err));
    PP_CHECK(infer_slice_plan(c, n, infer_shape_of(c, n, 0), start, step, &c->os[0], err));
    c->odt[0] = infer_dtype_of(c, n, 0);
    return PP_OK;
}

pp_status shape_concat(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t axis;
    int ax;
    PP_CHECK(infer_need(c, n, 0, 0, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "axis", 0, &axis, n->name, err));
    if (!pp_attr_find(n->attrs, n->nattrs, "axis")) return infer_fail(n, PP_ERR_PARSE, err, "attribute axis is required");
    PP_CHECK(infer_axis(n, axis, x->rank, &ax, err));
    pp_shape r = *x;
    r.syms[ax] = NULL;
    for (int k = 1; k < n->ninputs; k++) {
        PP_CHECK(infer_need(c, n, k, 0, err));
        const pp_shape *y = infer_shape_of(c, n, k);
        int ok = y->rank == x->rank;
        for (int i = 0; ok && i < x->rank; i++)
            if (i != ax && r.dims[i] >= 0 && y->dims[i] >= 0 && r.dims[i] != y->dims[i]) ok = 0;
            else if (i != ax && r.dims[i] < 0) r.dims[i] = y->dims[i];
        if (!ok) return shape_error(n, err, "inputs differ outside the concat axis", x, y);
        r.dims[ax] = (r.dims[ax] < 0 || y->dims[ax] < 0) ? -1 : r.dims[ax] + y->dims[ax];
    }
    c->os[0] = r;
    c->odt[0] = infer_dtype_of(c, n, 0);
    return PP_OK;
}

/* Gather(data, indices) on axis: data.shape[:axis] + indices.shape + data.shape[axis+1:] */
pp_status shape_gather(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t axis;
    int ax;
    PP_CHECK(infer_need(c, n, 0, 1, err));
    PP_CHECK(infer_need(c, n, 1, 0, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "axis", 0, &axis, n->name, err));
    const pp_shape *x = infer_shape_of(c, n, 0), *idx = infer_shape_of(c, n, 1);
    PP_CHECK(infer_axis(n, axis, x->rank, &ax, err));
    pp_dtype it = infer_dtype_of(c, n, 1);
    if (it && it != PP_DTYPE_I64 && it != PP_DTYPE_I32)
        return infer_fail(n, PP_ERR_SHAPE, err, "indices have dtype %s, expected int64 or int32", pp_dtype_name(it));
    int rank = x->rank - 1 + idx->rank;
    if (rank > PP_MAX_RANK) return infer_fail(n, PP_ERR_UNSUPPORTED, err, "output rank %d > %d", rank, PP_MAX_RANK);
    pp_shape r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < ax; i++) r.dims[r.rank] = x->dims[i], r.syms[r.rank++] = x->syms[i];
    for (int i = 0; i < idx->rank; i++) r.dims[r.rank] = idx->dims[i], r.syms[r.rank++] = idx->syms[i];
    for (int i = ax + 1; i < x->rank; i++) r.dims[r.rank] = x->dims[i], r.syms[r.rank++] = x->syms[i];
    c->os[0] = r;
    c->odt[0] = infer_dtype_of(c, n, 0);
    return PP_OK;
}

/* Expand(input, shape): bidirectional broadcast of input's shape and the shape values. */
pp_status shape_expand(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t sh[PP_MAX_RANK];
    int ns, known;
    PP_CHECK(infer_need(c, n, 0, 0, err));
    PP_CHECK(infer_const_ints(c, n, 1, "shape", sh, &ns, PP_MAX_RANK, &known, err));
    c->odt[0] = infer_dtype_of(c, n, 0);
    pp_shape s = pp_shape_make(ns, sh);
    if (!known && !infer_part_shape(c, n->inputs[1], &s)) {
        const pp_shape *x = infer_shape_of(c, n, 0);
        c->os[0] = infer_unknown(ns < 0 ? -1 : (ns > x->rank ? ns : x->rank));
        return PP_OK;
    }
    return infer_broadcast(n, infer_shape_of(c, n, 0), &s, &c->os[0], err);
}

/* ConstantOfShape(shape) with value (a one-element tensor; default float 0). */
pp_status shape_const_of_shape(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t sh[PP_MAX_RANK];
    int ns, known;
    PP_CHECK(infer_const_ints(c, n, 0, "shape", sh, &ns, PP_MAX_RANK, &known, err));
    const pp_attr *v = pp_attr_find(n->attrs, n->nattrs, "value");
    if (v && (v->type != PP_ATTR_TENSOR || pp_shape_numel(&v->t.shape) != 1))
        return infer_fail(n, PP_ERR_PARSE, err, "attribute value must be a one-element tensor");
    c->odt[0] = v ? v->t.dtype : PP_DTYPE_F32;
    c->os[0] = known ? pp_shape_make(ns, sh) : infer_unknown(ns);
    if (!known) infer_part_shape(c, n->inputs[0], &c->os[0]);   /* in part, or all unknown */
    for (int i = 0; known && i < ns; i++)
        if (sh[i] < 0) return infer_fail(n, PP_ERR_SHAPE, err, "shape[%d] = %lld is negative", i, (long long)sh[i]);
    return PP_OK;
}

int64_t infer_shape_start(const pp_node *n, int rank)
{
    const pp_attr *a = pp_attr_find(n->attrs, n->nattrs, "start");
    int64_t s = a ? a->i : 0;
    return clamp(s < 0 ? s + rank : s, 0, rank);
}

/* Shape(data) with start/end (opset 15) -> 1-D int64 */
pp_status shape_shape(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t e;
    PP_CHECK(infer_need(c, n, 0, 0, err));
    int r = infer_shape_of(c, n, 0)->rank;
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "start", 0, &e, n->name, err));  /* type check */
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "end", r, &e, n->name, err));
    int64_t s = infer_shape_start(n, r);
    e = clamp(e < 0 ? e + r : e, 0, r);
    int64_t len = e > s ? e - s : 0;
    c->os[0] = pp_shape_make(1, &len);
    c->odt[0] = PP_DTYPE_I64;
    return PP_OK;
}

/* Range(start, limit, delta), all scalars: max(ceil((limit - start) / delta), 0) values. */
pp_status shape_range(infer_ctx *c, const pp_node *n, pp_error *err)
{
    const pp_const_tensor *t[3];
    for (int k = 0; k < 3; k++) {
        PP_CHECK(infer_need(c, n, k, 0, err));
        t[k] = infer_const(c, n->inputs[k]);
        if (!t[k] && !c->opt->allow_unknown_dims)
            return pp_error_set(err, PP_ERR_SHAPE,
                                "input %d of Range '%s' is not constant after folding; export with static "
                                "shapes or bind dims (--batch N, --dim NAME=N)", k, n->name);
    }
    c->odt[0] = infer_dtype_of(c, n, 0);
    if (!t[0] || !t[1] || !t[2]) {
        c->os[0] = infer_unknown(1);
        return PP_OK;
    }
    double s = const_f64(t[0], 0), l = const_f64(t[1], 0), d = const_f64(t[2], 0);
    if (d == 0) return infer_fail(n, PP_ERR_SHAPE, err, "delta is 0");
    double cnt = ceil((l - s) / d);
    int64_t len = cnt > 0 ? (int64_t)cnt : 0;
    c->os[0] = pp_shape_make(1, &len);
    return PP_OK;
}
