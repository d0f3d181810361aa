/* Attribute and input parsing of the indexing, padding, tiling, cumulative and extra
 * reduction ops (see op_args_index.h), shared by the cpu and cuda kernels. Constant inputs
 * (axis, k, pads, repeats) come through pp_args_ints: the tensor on the cpu, its host copy
 * on cuda. */
#include "op_args_index.h"

#include <string.h>

static int64_t prod(const int64_t *dims, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++) p *= dims[d];
    return p;
}

static pp_rows rows_at(const pp_tensor *x, int ax)
{
    return (pp_rows){prod(x->dims, 0, ax), x->dims[ax], prod(x->dims, ax + 1, x->rank)};
}

/* A scalar integer input k (required when dflt is INT64_MIN). */
static pp_status scalar_int(const pp_kernel_ctx *c, int k, const char *what, int64_t dflt, int64_t *v, pp_error *err)
{
    int64_t vals[1];
    int n;
    PP_CHECK(pp_args_ints(c, k, what, vals, &n, 1, err));
    if (n < 0 && dflt == INT64_MIN)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "input %d (%s) is missing", k, what);
    if (n == 0) return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "input %d (%s) is empty, expected one value", k, what);
    *v = n < 0 ? dflt : vals[0];
    return PP_OK;
}

pp_status pp_args_cumsum(const pp_kernel_ctx *c, const pp_tensor *x, pp_rows *r, int *exclusive, int *reverse,
                         pp_error *err)
{
    int64_t axis = 0, ex, rev;
    int ax = 0;
    PP_CHECK(scalar_int(c, 1, "axis", INT64_MIN, &axis, err));
    PP_CHECK(pp_args_axis(c, axis, x->rank, &ax, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "exclusive", 0, &ex, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "reverse", 0, &rev, c->node, err));
    *r = rows_at(x, ax);
    *exclusive = ex != 0;
    *reverse = rev != 0;
    return PP_OK;
}

pp_status pp_args_trilu(const pp_kernel_ctx *c, const pp_tensor *x, int64_t *rows, int64_t *cols, int64_t *k,
                        int *upper, pp_error *err)
{
    int64_t up;
    if (x->rank < 2) return pp_args_fail(c, PP_ERR_SHAPE, err, "input has rank %d, expected at least 2", x->rank);
    PP_CHECK(scalar_int(c, 1, "k", 0, k, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "upper", 1, &up, c->node, err));
    *rows = x->dims[x->rank - 2];
    *cols = x->dims[x->rank - 1];
    *upper = up != 0;
    return PP_OK;
}

pp_status pp_args_tile(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, pp_error *err)
{
    int64_t rep[PP_MAX_RANK];
    int n;
    PP_CHECK(pp_args_ints(c, 1, "repeats", rep, &n, PP_MAX_RANK, err));
    if (n != x->rank || y->rank != x->rank)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "%d repeats for an input of rank %d (output rank %d)", n,
                            x->rank, y->rank);
    for (int d = 0; d < x->rank; d++)
        if (rep[d] < 0 || y->dims[d] != x->dims[d] * rep[d])
            return pp_args_fail(c, PP_ERR_SHAPE, err, "dim %d: output %lld, input %lld repeated %lld times", d,
                                (long long)y->dims[d], (long long)x->dims[d], (long long)rep[d]);
    return PP_OK;
}

/* Pad's constant (input 2 from opset 11, else the attribute `value`), a float on the host. */
static pp_status pad_value(const pp_kernel_ctx *c, const pp_tensor *x, float *value, pp_error *err)
{
    *value = 0.f;
    if (c->opset < 11) return pp_attr_float(c->attrs, c->nattrs, "value", 0.f, value, c->node, err);
    if (c->nin < 3 || !c->in[2].data) return PP_OK;
    const pp_tensor *t = &c->in[2];
    const void *h;
    PP_CHECK(pp_args_host_input(c, 2, "constant_value", &h, err));
    if (t->dtype != x->dtype || pp_tensor_numel(t) != 1)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "input 2 (constant_value) must be one %s value",
                            pp_dtype_name(x->dtype));
    if (t->dtype == PP_DTYPE_F32) *value = *(const float *)h;
    else if (t->dtype == PP_DTYPE_I64) *value = (float)*(const int64_t *)h;
    else if (t->dtype == PP_DTYPE_I32) *value = (float)*(const int32_t *)h;
    else return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "constant_value of dtype %s", pp_dtype_name(t->dtype));
    return PP_OK;
}

pp_status pp_args_pad(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, int64_t *begin, int *mode,
                      float *value, pp_error *err)
{
    int64_t pads[2 * PP_MAX_RANK], axes[PP_MAX_RANK];
    int np = -1, na = -1;
    const char *m;
    if (c->opset < 11) {
        const int64_t *a;
        PP_CHECK(pp_attr_ints(c->attrs, c->nattrs, "pads", &a, &np, c->node, err));
        if (!a || np > 2 * PP_MAX_RANK) np = -1;
        else memcpy(pads, a, (size_t)np * sizeof *pads);
    } else {
        PP_CHECK(pp_args_ints(c, 1, "pads", pads, &np, 2 * PP_MAX_RANK, err));
        if (c->opset >= 18) PP_CHECK(pp_args_ints(c, 3, "axes", axes, &na, PP_MAX_RANK, err));
    }
    const int nax = na >= 0 ? na : x->rank;
    if (np != 2 * nax)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "%d pads for %d axes, expected %d", np, nax, 2 * nax);
    PP_CHECK(pp_attr_string(c->attrs, c->nattrs, "mode", "constant", &m, c->node, err));
    if (!strcmp(m, "constant")) *mode = PP_PAD_CONSTANT;
    else if (!strcmp(m, "reflect")) *mode = PP_PAD_REFLECT;
    else if (!strcmp(m, "edge")) *mode = PP_PAD_EDGE;
    else if (!strcmp(m, "wrap")) *mode = PP_PAD_WRAP;
    else return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "mode '%s' (constant, reflect, edge and wrap are)", m);
    int64_t end[PP_MAX_RANK] = {0};
    for (int d = 0; d < x->rank; d++) begin[d] = 0;
    for (int i = 0; i < nax; i++) {
        int ax = i;
        if (na >= 0) PP_CHECK(pp_args_axis(c, axes[i], x->rank, &ax, err));
        begin[ax] = pads[i];
        end[ax] = pads[nax + i];
    }
    if (y->rank != x->rank) return pp_args_fail(c, PP_ERR_SHAPE, err, "output rank %d, input %d", y->rank, x->rank);
    for (int d = 0; d < x->rank; d++) {
        if (y->dims[d] != x->dims[d] + begin[d] + end[d])
            return pp_args_fail(c, PP_ERR_SHAPE, err, "dim %d: output %lld, input %lld padded by %lld and %lld", d,
                                (long long)y->dims[d], (long long)x->dims[d], (long long)begin[d], (long long)end[d]);
        if (*mode != PP_PAD_CONSTANT && x->dims[d] == 0 && y->dims[d] > 0)
            return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "mode '%s' cannot pad the empty dim %d", m, d);
    }
    return pad_value(c, x, value, err);
}

static pp_status int_indices(const pp_kernel_ctx *c, const pp_tensor *idx, pp_error *err)
{
    if (idx->dtype != PP_DTYPE_I64 && idx->dtype != PP_DTYPE_I32)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "indices have dtype %s, expected int64 or int32",
                            pp_dtype_name(idx->dtype));
    return PP_OK;
}

pp_status pp_args_elements(const pp_kernel_ctx *c, const pp_tensor *data, const pp_tensor *idx, int *axis,
                           pp_error *err)
{
    PP_CHECK(int_indices(c, idx, err));
    PP_CHECK(pp_args_axis_attr(c, 0, data->rank, axis, err));
    if (idx->rank != data->rank)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "indices have rank %d, data %d: they must match", idx->rank,
                            data->rank);
    for (int d = 0; d < data->rank; d++)
        if (d != *axis && idx->dims[d] > data->dims[d])
            return pp_args_fail(c, PP_ERR_SHAPE, err, "indices dim %d is %lld, larger than data's %lld", d,
                                (long long)idx->dims[d], (long long)data->dims[d]);
    return PP_OK;
}

pp_status pp_args_nd(const pp_kernel_ctx *c, const pp_tensor *data, const pp_tensor *idx, pp_ix_nd *p,
                     pp_error *err)
{
    int64_t b = 0;
    PP_CHECK(int_indices(c, idx, err));
    if (c->op == PP_OP_GATHER_ND) PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "batch_dims", 0, &b, c->node, err));
    if (idx->rank < 1) return pp_args_fail(c, PP_ERR_SHAPE, err, "indices must have rank >= 1");
    const int64_t q = idx->dims[idx->rank - 1];
    if (b < 0 || b >= idx->rank || q < 1 || b + q > data->rank)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "indices' last dim %lld with batch_dims %lld does not fit data of "
                            "rank %d", (long long)q, (long long)b, data->rank);
    for (int d = 0; d < b; d++)
        if (idx->dims[d] != data->dims[d])
            return pp_args_fail(c, PP_ERR_SHAPE, err, "batch dim %d: indices %lld, data %lld", d,
                                (long long)idx->dims[d], (long long)data->dims[d]);
    p->q = (int)q;
    p->b = (int)b;
    p->per_batch = prod(idx->dims, (int)b, idx->rank - 1);
    p->batch_stride = prod(data->dims, (int)b, data->rank);
    p->slice = prod(data->dims, (int)(b + q), data->rank);
    for (int j = 0; j < p->q; j++) {
        p->dims[j] = data->dims[b + j];
        p->st[j] = prod(data->dims, (int)b + j + 1, data->rank);
    }
    return PP_OK;
}

pp_status pp_args_scatter_add(const pp_kernel_ctx *c, int *add, pp_error *err)
{
    const char *r;
    PP_CHECK(pp_attr_string(c->attrs, c->nattrs, "reduction", "none", &r, c->node, err));
    if (strcmp(r, "none") && strcmp(r, "add"))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "reduction '%s' (none and add are)", r);
    *add = !strcmp(r, "add");
    return PP_OK;
}

pp_status pp_args_red_more(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, pp_ix_red *p, int *kind,
                           pp_error *err)
{
    int reduced[PP_MAX_RANK], copy;
    PP_CHECK(pp_args_reduce(c, x, reduced, &copy, err));
    *p = pp_ix_red_of(x->rank, x->dims, reduced);
    *kind = c->op == PP_OP_REDUCE_MAX ? PP_RED_MAX : c->op == PP_OP_REDUCE_MIN ? PP_RED_MIN : PP_RED_PROD;
    if (p->nout != pp_tensor_numel(y))
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output has %lld elements, the reduction gives %lld",
                            (long long)pp_tensor_numel(y), (long long)p->nout);
    if (p->nred == 0 && *kind != PP_RED_PROD)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "reduces an empty set of values (no maximum or minimum)");
    return PP_OK;
}

pp_status pp_args_argmax(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, pp_rows *r, int *last,
                         pp_error *err)
{
    int64_t l;
    int ax;
    PP_CHECK(pp_args_axis_attr(c, 0, x->rank, &ax, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "select_last_index", 0, &l, c->node, err));
    *r = rows_at(x, ax);
    *last = l != 0;
    if (r->n == 0) return pp_args_fail(c, PP_ERR_SHAPE, err, "axis %d is empty: no maximum", ax);
    if (y->dtype != PP_DTYPE_I64 || pp_tensor_numel(y) != r->outer * r->inner)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output must be int64 with %lld elements",
                            (long long)(r->outer * r->inner));
    return PP_OK;
}

pp_status pp_args_topk(const pp_kernel_ctx *c, const pp_tensor *x, pp_rows *r, int64_t *k, int *largest,
                       pp_error *err)
{
    int64_t l;
    int ax;
    PP_CHECK(pp_args_axis_attr(c, -1, x->rank, &ax, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "largest", 1, &l, c->node, err));
    PP_CHECK(scalar_int(c, 1, "k", INT64_MIN, k, err));
    *r = rows_at(x, ax);
    *largest = l != 0;
    if (*k < 0 || *k > r->n)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "k = %lld for an axis of %lld elements", (long long)*k,
                            (long long)r->n);
    for (int o = 0; o < c->nout && o < 2; o++) {
        const pp_tensor *y = &c->out[o];
        if (y->rank != x->rank || y->dims[ax] != *k || pp_tensor_numel(y) != r->outer * *k * r->inner)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "output %d must be the input's shape with dim %d = %lld", o, ax,
                                (long long)*k);
    }
    if (c->nout > 1 && c->out[1].dtype != PP_DTYPE_I64)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output 1 (indices) has dtype %s, expected int64",
                            pp_dtype_name(c->out[1].dtype));
    return PP_OK;
}
