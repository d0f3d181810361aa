/* Expand on the cpu: the input broadcast (numpy rules, right-aligned) to the output shape
 * the caller gives; backward sums the output gradient over the broadcast dims. */
#include "cpu_math.h"
#include "nn_util.h"

/* src_st: the input's stride per output dim, 0 where it broadcasts. */
static pp_status plan(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, int64_t *src_st,
                      pp_error *err)
{
    int64_t x_st[PP_MAX_RANK];
    if (x->rank > y->rank)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "input rank %d is above the output rank %d", x->rank, y->rank);
    nn_strides(x->rank, x->dims, x_st);
    const int lead = y->rank - x->rank;
    for (int k = 0; k < y->rank; k++) {
        const int64_t xd = k < lead ? 1 : x->dims[k - lead];
        if (xd != 1 && xd != y->dims[k])
            return pp_args_fail(c, PP_ERR_SHAPE, err, "input dim %d (%lld) does not broadcast to output dim %d (%lld)",
                           k - lead, (long long)xd, k, (long long)y->dims[k]);
        src_st[k] = xd == 1 ? 0 : x_st[k - lead];
    }
    return PP_OK;
}

pp_status pp_cpu_expand_forward(const pp_kernel_ctx *c, pp_error *err)
{
    const pp_tensor *x = &c->in[0], *y = &c->out[0];
    int64_t src_st[PP_MAX_RANK];
    PP_CHECK(plan(c, x, y, src_st, err));
    nn_fill_output(y, x->data, src_st, pp_dtype_size(x->dtype));
    return PP_OK;
}

pp_status pp_cpu_expand_backward(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, pp_error *err)
{
    if (!gin[0].data || !gout[0].data) return PP_OK;
    const pp_tensor *gy = &gout[0];
    int64_t src_st[PP_MAX_RANK], y_st[PP_MAX_RANK];
    PP_CHECK(plan(c, &gin[0], gy, src_st, err));
    nn_strides(gy->rank, gy->dims, y_st);
    nn_add_strided(gin[0].data, src_st, gy->data, y_st, gy->dims, gy->rank, 1.0f);
    return PP_OK;
}
