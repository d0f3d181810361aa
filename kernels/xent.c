/* SoftmaxCrossEntropyLoss call checks shared by the cpu and cuda kernels. */
#include "xent.h"

#include <string.h>

static pp_status bad(const pp_kernel_ctx *c, pp_status st, pp_error *err, const char *what, long long a, long long b)
{
    return pp_error_set(err, st, "node '%s' (SoftmaxCrossEntropyLoss): %s %lld, expected %lld", c->node, what, a, b);
}

pp_status pp_xent_setup(const pp_kernel_ctx *c, pp_xent *e, pp_error *err)
{
    const pp_tensor *s = &c->in[0], *lab = &c->in[1];
    const char *red;
    memset(e, 0, sizeof *e);
    PP_CHECK(pp_attr_string(c->attrs, c->nattrs, "reduction", "mean", &red, c->node, err));
    e->has_ignore = pp_attr_find(c->attrs, c->nattrs, "ignore_index") != NULL;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "ignore_index", 0, &e->ignore, c->node, err));
    if (!strcmp(red, "none")) e->reduction = PP_XENT_NONE;
    else if (!strcmp(red, "sum")) e->reduction = PP_XENT_SUM;
    else if (!strcmp(red, "mean")) e->reduction = PP_XENT_MEAN;
    else
        return pp_error_set(err, PP_ERR_UNSUPPORTED,
                            "node '%s' (SoftmaxCrossEntropyLoss): reduction '%s' (expected none, sum or mean)", c->node,
                            red);
    if (s->rank < 2) return bad(c, PP_ERR_SHAPE, err, "scores have rank", s->rank, 2);
    e->n = s->dims[0];
    e->c = s->dims[1];
    e->d = 1;
    for (int k = 2; k < s->rank; k++) e->d *= s->dims[k];
    if (lab->dtype != PP_DTYPE_I64 && lab->dtype != PP_DTYPE_I32)
        return pp_error_set(err, PP_ERR_UNSUPPORTED,
                            "node '%s' (SoftmaxCrossEntropyLoss): labels have dtype %s, expected int64 or int32",
                            c->node, pp_dtype_name(lab->dtype));
    e->lab64 = lab->dtype == PP_DTYPE_I64;
    if (pp_tensor_numel(lab) != e->n * e->d)
        return bad(c, PP_ERR_SHAPE, err, "labels have elements (N x d1..dk of the scores)", pp_tensor_numel(lab),
                   e->n * e->d);
    if (c->nin > 2 && c->in[2].data) {
        if (pp_tensor_numel(&c->in[2]) != e->c)
            return bad(c, PP_ERR_SHAPE, err, "weights have elements (C)", pp_tensor_numel(&c->in[2]), e->c);
        e->weighted = 1;
    }
    return PP_OK;
}

size_t pp_xent_aux_bytes(const pp_kernel_ctx *c)
{
    pp_xent e;
    return pp_xent_setup(c, &e, NULL) == PP_OK ? (2 * (size_t)(e.n * e.d) + 1) * sizeof(float) : 0;
}
