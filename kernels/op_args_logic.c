/* Arguments of the comparisons, logic and more elementwise ops, parsed once for the cpu and
 * cuda kernels (kernels/op_args_logic.h). */
#include "op_args_logic.h"

#include "op_args.h"

#include <math.h>
#include <onnxpipe/backend/kernels_backend.h>

/* The host copy of scalar input k of dtype `want`, or NULL when the input is omitted. */
static pp_status scalar_input(const pp_kernel_ctx *c, int k, const char *what, pp_dtype want, const void **v,
                              pp_error *err)
{
    *v = NULL;
    if (k >= c->nin || !c->in[k].data) return PP_OK;
    const pp_tensor *t = &c->in[k];
    const void *h;
    PP_CHECK(pp_args_host_input(c, k, what, &h, err));
    if (pp_tensor_numel(t) != 1)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "input %d (%s) has %lld values, expected a scalar", k, what,
                            (long long)pp_tensor_numel(t));
    if (t->dtype != want)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input %d (%s) has dtype %s, expected %s (x's)", k, what,
                            pp_dtype_name(t->dtype), pp_dtype_name(want));
    *v = h;
    return PP_OK;
}

pp_status pp_args_clip(const pp_kernel_ctx *c, float *lo, float *hi, pp_error *err)
{
    *lo = -INFINITY;
    *hi = INFINITY;
    if (c->opset < 11) {
        PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "min", -INFINITY, lo, c->node, err));
        return pp_attr_float(c->attrs, c->nattrs, "max", INFINITY, hi, c->node, err);
    }
    const void *l, *h;
    PP_CHECK(scalar_input(c, 1, "min", PP_DTYPE_F32, &l, err));
    PP_CHECK(scalar_input(c, 2, "max", PP_DTYPE_F32, &h, err));
    if (l) *lo = *(const float *)l;
    if (h) *hi = *(const float *)h;
    return PP_OK;
}

pp_status pp_args_clip_int(const pp_kernel_ctx *c, int64_t *lo, int64_t *hi, pp_error *err)
{
    const pp_dtype dt = c->in[0].dtype;
    const void *l, *h;
    PP_CHECK(scalar_input(c, 1, "min", dt, &l, err));
    PP_CHECK(scalar_input(c, 2, "max", dt, &h, err));
    *lo = !l ? INT64_MIN : dt == PP_DTYPE_I64 ? *(const int64_t *)l : *(const int32_t *)l;
    *hi = !h ? INT64_MAX : dt == PP_DTYPE_I64 ? *(const int64_t *)h : *(const int32_t *)h;
    return PP_OK;
}
