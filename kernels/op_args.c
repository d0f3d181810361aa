/* Attribute parsing and argument checks shared by the cpu and cuda kernels of Softmax,
 * LogSoftmax and LayerNormalization (see op_args.h): one reading of the ONNX rules. */
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
