/* Attribute parsing and argument checks shared by the cpu and cuda kernels (see
 * op_args.h): axes, constant int inputs, Transpose's perm, Gather, Slice, the reductions,
 * Softmax and LayerNormalization, read once. */
#include "op_args.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <onnxpipe/backend/device_backend.h>

pp_status pp_args_fail(const pp_kernel_ctx *c, pp_status st, pp_error *err, const char *fmt, ...)
{
    char msg[PP_ERROR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pp_error_set(err, st, "node '%s' (%s): %s", c->node ? c->node : "?", c->op_type ? c->op_type : "?", msg);
}

pp_status pp_args_axis(const pp_kernel_ctx *c, int64_t axis, int rank, int *out, pp_error *err)
{
    if (axis < -rank || axis >= rank)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "axis %lld out of range [%d, %d] for an input of rank %d",
                            (long long)axis, -rank, rank - 1, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return PP_OK;
}

pp_status pp_args_axis_attr(const pp_kernel_ctx *c, int64_t dflt, int rank, int *axis, pp_error *err)
{
    int64_t a;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "axis", dflt, &a, c->node, err));
    if (dflt == INT64_MIN && !pp_attr_find(c->attrs, c->nattrs, "axis"))
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "attribute 'axis' is required");
    return pp_args_axis(c, a, rank, axis, err);
}

pp_status pp_args_perm(const pp_kernel_ctx *c, int rank, int64_t *perm, pp_error *err)
{
    const int64_t *p;
    int n, seen[PP_MAX_RANK] = {0};
    PP_CHECK(pp_attr_ints(c->attrs, c->nattrs, "perm", &p, &n, c->node, err));
    if (p && n != rank)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "perm has %d entries for an input of rank %d", n, rank);
    for (int k = 0; k < rank; k++) {
        perm[k] = p ? p[k] : rank - 1 - k;
        if (perm[k] < 0 || perm[k] >= rank || seen[perm[k]])
            return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "perm[%d] = %lld is not a permutation of 0..%d", k,
                                (long long)perm[k], rank - 1);
        seen[perm[k]] = 1;
    }
    return PP_OK;
}

pp_status pp_args_gather(const pp_kernel_ctx *c, const pp_tensor *data, const pp_tensor *indices, int *axis,
                         pp_error *err)
{
    PP_CHECK(pp_args_axis_attr(c, 0, data->rank, axis, err));
    if (indices->dtype != PP_DTYPE_I64 && indices->dtype != PP_DTYPE_I32)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "indices have dtype %s, expected int64 or int32",
                            pp_dtype_name(indices->dtype));
    return PP_OK;
}

pp_status pp_args_host_input(const pp_kernel_ctx *c, int k, const char *what, const void **h, pp_error *err)
{
    const pp_tensor *t = &c->in[k];
    *h = pp_device_caps(c->dev) & PP_DEVICE_CAP_HOST_MEMORY ? t->data : c->host_in ? c->host_in[k] : NULL;
    if (!*h)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input %d (%s) must be a constant known at plan time: "
                            "the %s kernel reads it from the host copy in pp_kernel_ctx.host_in, which is missing",
                            k, what, c->dev ? pp_device_kind_name(c->dev->kind) : "?");
    return PP_OK;
}

pp_status pp_args_ints(const pp_kernel_ctx *c, int k, const char *what, int64_t *vals, int *n, int max,
                       pp_error *err)
{
    *n = -1;
    if (k >= c->nin || !c->in[k].data) return PP_OK;
    const pp_tensor *t = &c->in[k];
    const void *h;
    PP_CHECK(pp_args_host_input(c, k, what, &h, err));
    const int64_t cnt = pp_tensor_numel(t);
    if (t->dtype != PP_DTYPE_I64 && t->dtype != PP_DTYPE_I32)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input %d (%s) has dtype %s, expected int64 or int32", k,
                            what, pp_dtype_name(t->dtype));
    if (cnt > max)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "input %d (%s) has %lld values, at most %d allowed", k,
                            what, (long long)cnt, max);
    for (int64_t i = 0; i < cnt; i++)
        vals[i] = t->dtype == PP_DTYPE_I64 ? ((const int64_t *)h)[i] : ((const int32_t *)h)[i];
    *n = (int)cnt;
    return PP_OK;
}

/* The first `count` values of attribute `name` into vals (at most PP_MAX_RANK); *n = -1
 * when it is absent. */
static pp_status attr_ints(const pp_kernel_ctx *c, const char *name, int64_t *vals, int *n, pp_error *err)
{
    const int64_t *a;
    PP_CHECK(pp_attr_ints(c->attrs, c->nattrs, name, &a, n, c->node, err));
    if (*n > PP_MAX_RANK)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "%d %s, at most %d", *n, name, PP_MAX_RANK);
    if (!a) *n = -1;
    else memcpy(vals, a, (size_t)*n * sizeof *vals);
    return PP_OK;
}

pp_status pp_args_slice(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, int64_t *start,
                        int64_t *step, int64_t *count, pp_error *err)
{
    int64_t starts[PP_MAX_RANK], ends[PP_MAX_RANK], axes[PP_MAX_RANK], steps[PP_MAX_RANK];
    int ns, ne, na = -1, nt = -1;
    if (c->opset < 10) {
        PP_CHECK(attr_ints(c, "starts", starts, &ns, err));
        PP_CHECK(attr_ints(c, "ends", ends, &ne, err));
        PP_CHECK(attr_ints(c, "axes", axes, &na, err));
    } else {
        PP_CHECK(pp_args_ints(c, 1, "starts", starts, &ns, PP_MAX_RANK, err));
        PP_CHECK(pp_args_ints(c, 2, "ends", ends, &ne, PP_MAX_RANK, err));
        PP_CHECK(pp_args_ints(c, 3, "axes", axes, &na, PP_MAX_RANK, err));
        PP_CHECK(pp_args_ints(c, 4, "steps", steps, &nt, PP_MAX_RANK, err));
    }
    if (ns < 0 || ns != ne || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err,
                            "starts (%d), ends (%d), axes (%d) and steps (%d) differ in length", ns, ne, na, nt);
    if (y->rank != x->rank)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output has rank %d, input %d", y->rank, x->rank);
    for (int d = 0; d < x->rank; d++) {
        start[d] = 0;
        step[d] = 1;
        count[d] = x->dims[d];
    }
    for (int i = 0; i < ns; i++) {
        int ax = 0;
        PP_CHECK(pp_args_axis(c, na >= 0 ? axes[i] : i, x->rank, &ax, err));
        const int64_t st = nt >= 0 ? steps[i] : 1;
        if (st == 0) return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "steps[%d] is 0", i);
        count[ax] = pp_slice_axis(x->dims[ax], starts[i], ends[i], st, &start[ax]);
        step[ax] = st;
    }
    for (int d = 0; d < x->rank; d++)
        if (count[d] != y->dims[d])
            return pp_args_fail(c, PP_ERR_SHAPE, err, "output dim %d is %lld, the slice gives %lld", d,
                                (long long)y->dims[d], (long long)count[d]);
    return PP_OK;
}

pp_status pp_args_reduce(const pp_kernel_ctx *c, const pp_tensor *x, int *reduced, int *copy, pp_error *err)
{
    const int attr_form = c->op == PP_OP_REDUCE_SUM ? c->opset < 13 : c->opset < 18;
    int64_t axes[PP_MAX_RANK], noop = 0;
    int naxes;
    if (attr_form) {
        PP_CHECK(attr_ints(c, "axes", axes, &naxes, err));
    } else {
        PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "noop_with_empty_axes", 0, &noop, c->node, err));
        PP_CHECK(pp_args_ints(c, 1, "axes", axes, &naxes, PP_MAX_RANK, err));
    }
    if (naxes < 0) naxes = 0;
    if (naxes > x->rank)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "%d axes for an input of rank %d", naxes, x->rank);
    *copy = naxes == 0 && noop;
    for (int d = 0; d < x->rank; d++) reduced[d] = naxes == 0 && !noop;
    for (int i = 0; i < naxes; i++) {
        int ax = 0;
        PP_CHECK(pp_args_axis(c, axes[i], x->rank, &ax, err));
        reduced[ax] = 1;
    }
    return PP_OK;
}

static int64_t prod(const int64_t *dims, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++) p *= dims[d];
    return p;
}

pp_status pp_args_softmax(const pp_kernel_ctx *c, const pp_tensor *x, pp_rows *r, int *causal, pp_error *err)
{
    int64_t axis, cz;
    int ax = 0;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "axis", c->opset < 13 ? 1 : -1, &axis, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "causal", 0, &cz, c->node, err));
    PP_CHECK(pp_args_axis(c, axis, x->rank, &ax, err));
    const int end = c->opset < 13 ? x->rank : ax + 1;
    *r = (pp_rows){prod(x->dims, 0, ax), prod(x->dims, ax, end), prod(x->dims, end, x->rank)};
    *causal = cz != 0;
    if (*causal && c->op != PP_OP_SOFTMAX)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "attribute causal is Softmax's only");
    if (*causal && (ax != x->rank - 1 || x->rank < 2 || x->dims[x->rank - 2] != x->dims[x->rank - 1]))
        return pp_args_fail(c, PP_ERR_SHAPE, err, "a causal Softmax runs over the last axis of square blocks, "
                            "not axis %d of an input of rank %d (last dims %lld x %lld)", ax, x->rank,
                            (long long)(x->rank > 1 ? x->dims[x->rank - 2] : 1),
                            (long long)(x->rank > 0 ? x->dims[x->rank - 1] : 1));
    return PP_OK;
}

pp_status pp_args_layernorm(const pp_kernel_ctx *c, pp_ln_args *a, pp_error *err)
{
    const pp_tensor *x = &c->in[0];
    int64_t axis, stash;
    int ax = 0;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "axis", -1, &axis, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "stash_type", 1, &stash, c->node, err));
    PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "epsilon", 1e-5f, &a->eps, c->node, err));
    PP_CHECK(pp_args_axis(c, axis, x->rank, &ax, err));
    if (stash != 1)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "stash_type %lld is not supported (only 1, float32)",
                            (long long)stash);
    a->m = prod(x->dims, 0, ax);
    a->d = prod(x->dims, ax, x->rank);
    for (int k = 1; k < 3 && k < c->nin; k++)
        if (c->in[k].data && pp_tensor_numel(&c->in[k]) != a->d)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "input %d (%s) has %lld elements, expected %lld (the "
                                "normalised dims)", k, k == 1 ? "Scale" : "B", (long long)pp_tensor_numel(&c->in[k]),
                                (long long)a->d);
    for (int k = 1; k < 3 && k < c->nout; k++)
        if (c->out[k].data && pp_tensor_numel(&c->out[k]) != a->m)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "output %d has %lld elements, expected %lld (one per row)", k,
                                (long long)pp_tensor_numel(&c->out[k]), (long long)a->m);
    return PP_OK;
}

size_t pp_args_layernorm_aux(const pp_kernel_ctx *c)
{
    pp_ln_args a;
    return pp_args_layernorm(c, &a, NULL) == PP_OK ? 2 * (size_t)a.m * sizeof(float) : 0;
}
