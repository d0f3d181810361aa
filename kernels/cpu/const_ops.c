/* Shape, ConstantOfShape and Range on the cpu: forward only, and normally folded into
 * constants by graph/, but a node that survives (a dynamic shape) still runs. */
#include "cpu_math.h"
#include "nn_util.h"

#include <math.h>
#include <string.h>

/* Stores v (as double, or as int64 when the dtype is integral) as element i. */
static pp_status store(const pp_kernel_ctx *c, pp_tensor *t, int64_t i, double f, int64_t iv, pp_error *err)
{
    switch (t->dtype) {
    case PP_DTYPE_F32: ((float *)t->data)[i] = (float)f; break;
    case PP_DTYPE_F64: ((double *)t->data)[i] = f; break;
    case PP_DTYPE_I64: ((int64_t *)t->data)[i] = iv; break;
    case PP_DTYPE_I32: ((int32_t *)t->data)[i] = (int32_t)iv; break;
    case PP_DTYPE_BOOL:
    case PP_DTYPE_U8: ((uint8_t *)t->data)[i] = (uint8_t)iv; break;
    default:
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "output dtype %s is not supported", pp_dtype_name(t->dtype));
    }
    return PP_OK;
}

/* Element i of a scalar or tensor of any numeric dtype, as double and as int64. */
static pp_status load(const pp_kernel_ctx *c, pp_dtype dt, const void *data, int64_t i, double *f, int64_t *iv,
                      pp_error *err)
{
    switch (dt) {
    case PP_DTYPE_F32: *f = ((const float *)data)[i]; *iv = (int64_t)*f; break;
    case PP_DTYPE_F64: *f = ((const double *)data)[i]; *iv = (int64_t)*f; break;
    case PP_DTYPE_I64: *iv = ((const int64_t *)data)[i]; *f = (double)*iv; break;
    case PP_DTYPE_I32: *iv = ((const int32_t *)data)[i]; *f = (double)*iv; break;
    case PP_DTYPE_BOOL:
    case PP_DTYPE_U8: *iv = ((const uint8_t *)data)[i]; *f = (double)*iv; break;
    default:
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "dtype %s is not supported", pp_dtype_name(dt));
    }
    return PP_OK;
}

pp_status pp_cpu_shape_forward(const pp_kernel_ctx *c, pp_error *err)
{
    const int r = c->in[0].rank;
    int64_t start, end;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "start", 0, &start, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "end", r, &end, c->node, err));
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    const int64_t n = end > start ? end - start : 0;
    if (pp_tensor_numel(&c->out[0]) != n || c->out[0].dtype != PP_DTYPE_I64)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output holds %lld %s values, expected %lld int64",
                       (long long)pp_tensor_numel(&c->out[0]), pp_dtype_name(c->out[0].dtype), (long long)n);
    memcpy(c->out[0].data, c->in[0].dims + start, (size_t)n * sizeof(int64_t));
    return PP_OK;
}

pp_status pp_cpu_constant_of_shape_forward(const pp_kernel_ctx *c, pp_error *err)
{
    const pp_attr *a = pp_attr_find(c->attrs, c->nattrs, "value");
    double f = 0;
    int64_t iv = 0;
    if (a) {
        if (a->type != PP_ATTR_TENSOR || pp_shape_numel(&a->t.shape) != 1)
            return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "attribute 'value' must be a one-element tensor");
        PP_CHECK(load(c, a->t.dtype, a->t.data, 0, &f, &iv, err));
    }
    const int64_t n = pp_tensor_numel(&c->out[0]);
    for (int64_t i = 0; i < n; i++) PP_CHECK(store(c, &c->out[0], i, f, iv, err));
    return PP_OK;
}

pp_status pp_cpu_range_forward(const pp_kernel_ctx *c, pp_error *err)
{
    double f[3];
    int64_t iv[3];
    for (int k = 0; k < 3; k++) {
        if (pp_tensor_numel(&c->in[k]) != 1)
            return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "input %d must be a scalar", k);
        PP_CHECK(load(c, c->in[k].dtype, c->in[k].data, 0, &f[k], &iv[k], err));
    }
    if (f[2] == 0) return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "delta is 0");
    const int integral = c->out[0].dtype == PP_DTYPE_I64 || c->out[0].dtype == PP_DTYPE_I32;
    const double span = (f[1] - f[0]) / f[2];
    const int64_t n = span > 0 ? (int64_t)ceil(span) : 0;
    if (pp_tensor_numel(&c->out[0]) != n)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output has %lld elements, the range gives %lld",
                       (long long)pp_tensor_numel(&c->out[0]), (long long)n);
    for (int64_t i = 0; i < n; i++)
        PP_CHECK(store(c, &c->out[0], i, f[0] + (double)i * f[2], integral ? iv[0] + i * iv[2] : 0, err));
    return PP_OK;
}
