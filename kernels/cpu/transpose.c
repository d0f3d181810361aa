/* Transpose on the cpu: out[i0..] = in[i at perm], walked with strides (nn_util.c merges
 * contiguous dims, so [B,T,H,D] -> [B,H,T,D] copies rows of D, and tiles a swap of the
 * innermost dim). Backward adds (or, fresh, copies) the output gradient through the same
 * strides. */
#include "cpu_math.h"
#include "nn_util.h"
#include "op_args.h"

/* src_st[k]: the input stride of output dim k */
static pp_status plan(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, int64_t *src_st,
                      pp_error *err)
{
    const int n = x->rank;
    int64_t x_st[PP_MAX_RANK], p[PP_MAX_RANK];
    PP_CHECK(pp_args_perm(c, n, p, err));
    if (y->rank != n)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output has rank %d, expected %d", y->rank, n);
    nn_strides(x->rank, x->dims, x_st);
    for (int k = 0; k < n; k++) {
        if (y->dims[k] != x->dims[p[k]])
            return pp_args_fail(c, PP_ERR_SHAPE, err, "output dim %d is %lld, expected input dim %lld = %lld", k,
                           (long long)y->dims[k], (long long)p[k], (long long)x->dims[p[k]]);
        src_st[k] = x_st[p[k]];
    }
    return PP_OK;
}

pp_status pp_cpu_transpose_forward(const pp_kernel_ctx *c, pp_error *err)
{
    const pp_tensor *x = &c->in[0], *y = &c->out[0];
    int64_t src_st[PP_MAX_RANK];
    PP_CHECK(plan(c, x, y, src_st, err));
    nn_fill_output(y, x->data, src_st, pp_dtype_size(x->dtype));
    return PP_OK;
}

pp_status pp_cpu_transpose_backward(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin,
                                    pp_error *err)
{
    if (!gin[0].data || !gout[0].data) return PP_OK;
    const pp_tensor *gy = &gout[0];
    int64_t src_st[PP_MAX_RANK], y_st[PP_MAX_RANK];
    PP_CHECK(plan(c, &gin[0], gy, src_st, err));
    nn_strides(gy->rank, gy->dims, y_st);
    if (c->grad_fresh & 1)   /* assigned: a copy through the same strides */
        nn_copy_strided(gin[0].data, src_st, gy->data, y_st, gy->dims, gy->rank, sizeof(float));
    else
        nn_add_strided(gin[0].data, src_st, gy->data, y_st, gy->dims, gy->rank, 1.0f);
    return PP_OK;
}
