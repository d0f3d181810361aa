/* Gather on the cpu: data [outer, A, inner] with indices Q (int64 or int32, negative
 * counts from the end) gives [outer, Q, inner], one memcpy of inner elements per index.
 * Backward scatter-adds into the data gradient (embedding tables). */
#include "cpu_math.h"
#include "nn_util.h"
#include "op_args.h"

#include <string.h>

typedef struct gather_plan {
    int64_t outer, a, inner, q;
} gather_plan;

static pp_status plan(const pp_kernel_ctx *c, const pp_tensor *data, const pp_tensor *idx, const pp_tensor *y,
                      gather_plan *p, pp_error *err)
{
    int ax;
    PP_CHECK(pp_args_gather(c, data, idx, &ax, err));
    p->outer = nn_prod(data->dims, 0, ax);
    p->a = data->dims[ax];
    p->inner = nn_prod(data->dims, ax + 1, data->rank);
    p->q = pp_tensor_numel(idx);
    if (pp_tensor_numel(y) != p->outer * p->q * p->inner)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output has %lld elements, expected %lld",
                       (long long)pp_tensor_numel(y), (long long)(p->outer * p->q * p->inner));
    return PP_OK;
}

/* Index i of idx, checked and made non-negative. */
static pp_status index_at(const pp_kernel_ctx *c, const pp_tensor *idx, int64_t i, int64_t a, int64_t *out,
                          pp_error *err)
{
    int64_t v = idx->dtype == PP_DTYPE_I64 ? ((const int64_t *)idx->data)[i] : ((const int32_t *)idx->data)[i];
    if (v < -a || v >= a)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "index %lld (at position %lld) is out of range [%lld, %lld)",
                       (long long)v, (long long)i, (long long)-a, (long long)a);
    *out = v < 0 ? v + a : v;
    return PP_OK;
}

pp_status pp_cpu_gather_forward(const pp_kernel_ctx *c, pp_error *err)
{
    const pp_tensor *data = &c->in[0], *idx = &c->in[1];
    gather_plan p;
    PP_CHECK(plan(c, data, idx, &c->out[0], &p, err));
    const size_t es = pp_dtype_size(data->dtype), row = (size_t)p.inner * es;
    const char *src = data->data;
    char *dst = c->out[0].data;
    for (int64_t o = 0; o < p.outer; o++)
        for (int64_t q = 0; q < p.q; q++) {
            int64_t v = 0;
            PP_CHECK(index_at(c, idx, q, p.a, &v, err));
            memcpy(dst + (size_t)((o * p.q + q) * p.inner) * es, src + (size_t)((o * p.a + v) * p.inner) * es, row);
        }
    return PP_OK;
}

pp_status pp_cpu_gather_backward(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, pp_error *err)
{
    if (!gin[0].data || !gout[0].data) return PP_OK;
    const pp_tensor *idx = &c->in[1];
    gather_plan p;
    PP_CHECK(plan(c, &gin[0], idx, &gout[0], &p, err));
    float *gd = gin[0].data;
    const float *gy = gout[0].data;
    for (int64_t o = 0; o < p.outer; o++)
        for (int64_t q = 0; q < p.q; q++) {
            int64_t v = 0;
            PP_CHECK(index_at(c, idx, q, p.a, &v, err));
            nn_add(gd + (o * p.a + v) * p.inner, gy + (o * p.q + q) * p.inner, p.inner);
        }
    return PP_OK;
}
