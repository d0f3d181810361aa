/* Attribute parsing and argument checks shared by the cpu and cuda kernels (see
 * op_args.h): axes, Transpose's perm, Gather, Softmax and LayerNormalization, read once. */
#include "op_args.h"

#include <stdarg.h>
#include <stdio.h>

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

static int64_t prod(const int64_t *dims, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++) p *= dims[d];
    return p;
}

pp_status pp_args_softmax(const pp_kernel_ctx *c, const pp_tensor *x, pp_rows *r, pp_error *err)
{
    int64_t axis;
    int ax;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "axis", c->opset < 13 ? 1 : -1, &axis, c->node, err));
    PP_CHECK(pp_args_axis(c, axis, x->rank, &ax, err));
    const int end = c->opset < 13 ? x->rank : ax + 1;
    *r = (pp_rows){prod(x->dims, 0, ax), prod(x->dims, ax, end), prod(x->dims, end, x->rank)};
    return PP_OK;
}

pp_status pp_args_layernorm(const pp_kernel_ctx *c, pp_ln_args *a, pp_error *err)
{
    const pp_tensor *x = &c->in[0];
    int64_t axis, stash;
    int ax;
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
