/* ReduceSum and ReduceMean on the cpu. Axes come from the attribute (ReduceSum opset < 13,
 * ReduceMean opset < 18) or from the optional int64 input 1; keepdims only changes the
 * output shape, which the caller gives. Empty axes reduce everything unless
 * noop_with_empty_axes, which makes the op a copy. */
#include "cpu_math.h"
#include "nn_util.h"
#include "op_args.h"

#include <string.h>

/* In input coordinates: the output's stride per input dim (0 on reduced dims), and
 * the scale applied to every term (1, or 1/count for the mean). */
typedef struct red_plan {
    int64_t out_st[PP_MAX_RANK];
    float alpha;
} red_plan;

static pp_status plan(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, red_plan *p, pp_error *err)
{
    const int mean = c->op == PP_OP_REDUCE_MEAN;
    int reduced[PP_MAX_RANK], copy;   /* a copy: nothing is reduced */
    PP_CHECK(pp_args_reduce(c, x, reduced, &copy, err));
    int64_t kdims[PP_MAX_RANK], count = 1;
    for (int k = 0; k < x->rank; k++) {
        kdims[k] = reduced[k] ? 1 : x->dims[k];
        if (reduced[k]) count *= x->dims[k];
    }
    if (nn_prod(kdims, 0, x->rank) != pp_tensor_numel(y))
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output has %lld elements, the reduction gives %lld",
                       (long long)pp_tensor_numel(y), (long long)nn_prod(kdims, 0, x->rank));
    nn_strides(x->rank, kdims, p->out_st);
    for (int k = 0; k < x->rank; k++)
        if (reduced[k]) p->out_st[k] = 0;
    p->alpha = mean && count > 0 ? 1.0f / (float)count : 1.0f;
    return PP_OK;
}

pp_status pp_cpu_reduce_forward(const pp_kernel_ctx *c, pp_error *err)
{
    const pp_tensor *x = &c->in[0];
    red_plan p;
    int64_t x_st[PP_MAX_RANK];
    PP_CHECK(plan(c, x, &c->out[0], &p, err));
    nn_strides(x->rank, x->dims, x_st);
    memset(c->out[0].data, 0, pp_tensor_nbytes(&c->out[0]));
    nn_add_strided(c->out[0].data, p.out_st, x->data, x_st, x->dims, x->rank, p.alpha);
    return PP_OK;
}

pp_status pp_cpu_reduce_backward(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, pp_error *err)
{
    if (!gin[0].data || !gout[0].data) return PP_OK;
    const pp_tensor *x = &c->in[0];
    red_plan p;
    int64_t x_st[PP_MAX_RANK];
    PP_CHECK(plan(c, x, &gout[0], &p, err));
    nn_strides(x->rank, x->dims, x_st);
    nn_add_strided(gin[0].data, x_st, gout[0].data, p.out_st, x->dims, x->rank, p.alpha);
    return PP_OK;
}
