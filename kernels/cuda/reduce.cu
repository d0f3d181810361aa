/* cuda ReduceSum / ReduceMean (launch.c's pp_cu_reduce plan), as kernels/cpu/reduce.c. */
#include "cuda_internal.h"
#include "nn_cuda.h"
#include "reduce.cuh"

#include <string.h>

/* ---------------- ReduceSum / ReduceMean ---------------- */

/* reduced[d] for x's dims; *copy when noop_with_empty_axes and no axes */
static pp_status reduce_axes(const pp_kernel_ctx *c, int *reduced, int *copy, pp_error *err)
{
    const pp_tensor *x = &c->in[0];
    const int mean = c->op == PP_OP_REDUCE_MEAN;
    int64_t axes[PP_MAX_RANK], noop;
    int naxes = 0;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "noop_with_empty_axes", 0, &noop, c->node, err));
    if (mean ? c->opset < 18 : c->opset < 13) {
        const int64_t *a;
        PP_CHECK(pp_attr_ints(c->attrs, c->nattrs, "axes", &a, &naxes, c->node, err));
        if (naxes > x->rank) return pp_cu_bad(c, err, PP_ERR_SHAPE, "%d axes for rank %d", naxes, x->rank);
        memcpy(axes, a, (size_t)naxes * sizeof *a);
    } else {
        PP_CHECK(pp_cu_host_ints(c, 1, "axes", axes, &naxes, PP_MAX_RANK, err));
        if (naxes < 0) naxes = 0;
    }
    *copy = naxes == 0 && noop;
    for (int d = 0; d < x->rank; d++) reduced[d] = naxes == 0;
    for (int i = 0; i < naxes; i++) {
        if (axes[i] < -x->rank || axes[i] >= x->rank)
            return pp_cu_bad(c, err, PP_ERR_INVALID_ARG, "axis %lld out of range for rank %d", (long long)axes[i], x->rank);
        reduced[axes[i] < 0 ? axes[i] + x->rank : axes[i]] = 1;
    }
    return PP_OK;
}

PP_CU_FWD(pp_cu_reduce_forward)
{
    const pp_tensor *x = &c->in[0];
    int red[PP_MAX_RANK], copy = 0;
    PP_CHECK(reduce_axes(c, red, &copy, err));
    if (copy) return pp_device_copy(c->dev, c->out[0].data, x->data, pp_tensor_nbytes(x), err);
    pp_cu_reduce r;
    pp_cu_reduce_init(&r, x->rank, x->dims, red);
    PP_CHECK(pp_device_memset(c->dev, c->out[0].data, 0, pp_tensor_nbytes(&c->out[0]), err));
    const float scale = c->op == PP_OP_REDUCE_MEAN && r.nred ? 1.f / (float)r.nred : 1.f;
    return pp_cu_reduce_launch(c, &r, (const float *)x->data, (float *)c->out[0].data, scale, err);
}

/* dx += scale * dy broadcast back over the reduced dims */
PP_CU_BWD(pp_cu_reduce_backward)
{
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    const pp_tensor *x = &grad_in[0];
    int red[PP_MAX_RANK], copy = 0;
    PP_CHECK(reduce_axes(c, red, &copy, err));
    pp_tensor dy = grad_out[0];
    int64_t nred = 1;
    dy.rank = x->rank;
    for (int d = 0; d < x->rank; d++) {
        dy.dims[d] = red[d] && !copy ? 1 : x->dims[d];
        nred *= red[d] && !copy ? x->dims[d] : 1;
    }
    const float scale = c->op == PP_OP_REDUCE_MEAN && nred ? 1.f / (float)nred : 1.f;
    return pp_cu_broadcast_add(c, x, &dy, scale, err);
}
