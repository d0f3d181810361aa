/* cpu comparisons (Equal...), Where, Cast and Dropout: comparison and selection with broadcasting, dtype
 * conversion, and Dropout whose mask comes from a counter-based RNG keyed by
 * (seed, step, microbatch, node) and the element index, so any rank draws the same mask
 * and backward recomputes it instead of storing it. */
#include "broadcast.h"
#include "cpu_math.h"
#include <onnxpipe/element_ops.h>

#include <string.h>

/* ---------------- comparisons (kernels/element_ops.h) ---------------- */

/* y = PRED(a, b) over the broadcast rows, for one element type T */
#define CMP_ROWS(T, PRED)                                                               \
    for (int64_t r = 0; r < bc.rows; r++) {                                             \
        int64_t off[2];                                                                 \
        pp_bcast_row(&bc, r, off);                                                      \
        const T *pa = (const T *)c->in[0].data + off[0], *pb = (const T *)c->in[1].data + off[1]; \
        uint8_t *py = Y + r * bc.inner;                                                 \
        for (int64_t j = 0; j < bc.inner; j++) {                                        \
            const T a = pa[j * bc.inner_stride[0]], b = pb[j * bc.inner_stride[1]];     \
            py[j] = (PRED);                                                             \
        }                                                                               \
    }
#define CMP_TYPES(PRED)                                                                 \
    switch (dt) {                                                                       \
    case PP_DTYPE_F32: CMP_ROWS(float, PRED); break;                                    \
    case PP_DTYPE_I64: CMP_ROWS(int64_t, PRED); break;                                  \
    case PP_DTYPE_I32: CMP_ROWS(int32_t, PRED); break;                                  \
    case PP_DTYPE_BOOL: CMP_ROWS(uint8_t, PRED); break;                                 \
    default:                                                                            \
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err,                                 \
                            "dtype %s is not supported (float32, int64, int32, bool)", pp_dtype_name(dt)); \
    }

PP_FWD(pp_cpu_compare_forward)
{
    PP_CHECK(pp_cpu_want_inputs(c, 2, 2, err));
    pp_dtype dt = c->in[0].dtype;
    PP_CHECK(pp_cpu_want_dtype(c, 1, dt, 0, err));
    if (c->out[0].dtype != PP_DTYPE_BOOL)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "output dtype %s, expected bool",
                            pp_dtype_name(c->out[0].dtype));
    pp_bcast bc = {0};
    const pp_tensor *ins[2] = {&c->in[0], &c->in[1]};
    PP_CHECK(pp_bcast_init(&bc, &c->out[0], ins, 2, c->node, err));
    uint8_t *Y = c->out[0].data;
    switch (c->op) {
#define CMP_CASE(ID, PRED) case PP_OP_##ID: CMP_TYPES(PRED); break;
    PP_EL_COMPARE_LIST(CMP_CASE)
#undef CMP_CASE
    default: return pp_args_fail(c, PP_ERR_INTERNAL, err, "no element function (kernels/element_ops.h)");
    }
    return PP_OK;
}

/* ---------------- Where(cond, X, Y) ---------------- */

static pp_status where_plan(const pp_kernel_ctx *c, const pp_tensor *y, pp_bcast *b, pp_error *err)
{
    PP_CHECK(pp_cpu_want_inputs(c, 3, 3, err));
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_BOOL, 0, err));
    const pp_tensor *ins[3] = {&c->in[0], &c->in[1], &c->in[2]};
    return pp_bcast_init(b, y, ins, 3, c->node, err);
}

#define WHERE_ROWS(T)                                                                   \
    for (int64_t r = 0; r < b.rows; r++) {                                              \
        int64_t off[3];                                                                 \
        pp_bcast_row(&b, r, off);                                                       \
        const uint8_t *pc = C + off[0];                                                 \
        const T *px = (const T *)c->in[1].data + off[1], *py = (const T *)c->in[2].data + off[2]; \
        T *po = (T *)c->out[0].data + r * b.inner;                                      \
        for (int64_t j = 0; j < b.inner; j++)                                           \
            po[j] = pc[j * b.inner_stride[0]] ? px[j * b.inner_stride[1]] : py[j * b.inner_stride[2]]; \
    }

PP_FWD(pp_cpu_where_forward)
{
    pp_bcast b = {0};
    PP_CHECK(where_plan(c, &c->out[0], &b, err));
    PP_CHECK(pp_cpu_want_dtype(c, 2, c->in[1].dtype, 0, err));
    const uint8_t *C = c->in[0].data;
    switch (pp_dtype_size(c->in[1].dtype)) { /* selection only moves bytes */
    case 1: WHERE_ROWS(uint8_t); break;
    case 2: WHERE_ROWS(uint16_t); break;
    case 4: WHERE_ROWS(uint32_t); break;
    case 8: WHERE_ROWS(uint64_t); break;
    default:
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' (Where): dtype %s is not supported", c->node,
                            pp_dtype_name(c->in[1].dtype));
    }
    return PP_OK;
}

/* dX += cond ? dY : 0 and dY_in += cond ? 0 : dY, reduced over broadcast dims */
PP_BWD(pp_cpu_where_backward)
{
    if (!grad_out[0].data) return PP_OK;
    pp_bcast b = {0};
    PP_CHECK(where_plan(c, &grad_out[0], &b, err));
    const uint8_t *C = c->in[0].data;
    const float *GY = grad_out[0].data;
    for (int which = 1; which <= 2; which++) {
        float *G = grad_in[which].data;
        if (!G) continue;
        uint8_t take = which == 1;
        for (int64_t r = 0; r < b.rows; r++) {
            int64_t off[3];
            pp_bcast_row(&b, r, off);
            const uint8_t *pc = C + off[0];
            const float *pg = GY + r * b.inner;
            int64_t sc = b.inner_stride[0], sg = b.inner_stride[which];
            float *gr = G + off[which];
            for (int64_t j = 0; j < b.inner; j++)
                if ((pc[j * sc] != 0) == take) gr[j * sg] += pg[j];
        }
    }
    return PP_OK;
}

/* ---------------- Cast ---------------- */

PP_FWD(pp_cpu_cast_forward)
{
    PP_CHECK(pp_cpu_want_inputs(c, 1, 1, err));
    pp_dtype from = c->in[0].dtype, to = c->out[0].dtype;
    int64_t to_attr;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "to", to, &to_attr, c->node, err));
    if (to_attr != (int64_t)to)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "node '%s' (Cast): attribute to=%lld but the output is %s",
                            c->node, (long long)to_attr, pp_dtype_name(to));
    if (!pp_el_cast_supported(from) || !pp_el_cast_supported(to))
        return pp_error_set(err, PP_ERR_UNSUPPORTED,
                            "node '%s' (Cast): %s -> %s is not supported (float32, float64, bfloat16, float16, "
                            "int64, int32, bool)", c->node, pp_dtype_name(from), pp_dtype_name(to));
    const void *X = c->in[0].data;
    void *Y = c->out[0].data;
    int64_t n = pp_tensor_numel(&c->in[0]);
    if (from == to) return pp_device_copy(c->dev, Y, X, pp_tensor_nbytes(&c->in[0]), err);
    for (int64_t i = 0; i < n; i++) pp_el_cast(from, to, X, Y, i);
    return PP_OK;
}

/* float32 input: dx += dy converted back to float32; other inputs have no gradient */
PP_BWD(pp_cpu_cast_backward)
{
    float *GX = grad_in[0].data;
    const void *GY = grad_out[0].data;
    if (!GX || !GY) return PP_OK;
    pp_dtype gt = grad_out[0].dtype;
    if (!pp_dtype_is_float(gt) || !pp_el_cast_supported(gt))
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' (Cast): no gradient through a %s output", c->node,
                            pp_dtype_name(gt));
    int64_t n = pp_tensor_numel(&grad_in[0]);
    if (gt == PP_DTYPE_F32) {   /* float32 to float32 (exporters' Cast(x, to=FLOAT)): a sum that vectorises */
        const float *gy = GY;
        for (int64_t i = 0; i < n; i++) GX[i] += gy[i];
        return PP_OK;
    }
    for (int64_t i = 0; i < n; i++) GX[i] += (float)pp_el_cast_read(gt, GY, i);
    return PP_OK;
}

/* ---------------- Dropout ---------------- */

/* Keep probability and whether this call drops at all. */
static pp_status dropout_plan(const pp_kernel_ctx *c, float *ratio, int *drop, pp_error *err)
{
    PP_CHECK(pp_cpu_want_inputs(c, 1, 3, err));
    PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "ratio", 0.5f, ratio, c->node, err));
    if (c->nin > 1 && c->in[1].data) {
        if (c->in[1].dtype == PP_DTYPE_F32) *ratio = *(const float *)c->in[1].data;
        else if (c->in[1].dtype == PP_DTYPE_F64) *ratio = (float)*(const double *)c->in[1].data;
        else
            return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' (Dropout): ratio has dtype %s, expected float",
                                c->node, pp_dtype_name(c->in[1].dtype));
    }
    if (!(*ratio >= 0.f && *ratio <= 1.f))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "node '%s' (Dropout): ratio %g is outside [0, 1]", c->node,
                            (double)*ratio);
    int mode = 1; /* without a training_mode input the stage's mode decides */
    if (c->nin > 2 && c->in[2].data) {
        PP_CHECK(pp_cpu_want_dtype(c, 2, PP_DTYPE_BOOL, 0, err));
        mode = *(const uint8_t *)c->in[2].data != 0;
    }
    *drop = c->training && mode && *ratio > 0.f;
    return PP_OK;
}

PP_FWD(pp_cpu_dropout_forward)
{
    float ratio;
    int drop;
    PP_CHECK(dropout_plan(c, &ratio, &drop, err));
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, 0, err));
    const float *X = c->in[0].data;
    float *Y = c->out[0].data;
    uint8_t *mask = c->nout > 1 ? c->out[1].data : NULL;
    int64_t n = pp_tensor_numel(&c->in[0]);
    if (!drop) {
        if (Y != X) memcpy(Y, X, (size_t)n * sizeof *Y);
        if (mask) memset(mask, 1, (size_t)n);
        return PP_OK;
    }
    uint64_t key = pp_el_rng_key(c->rng.seed, c->rng.step, c->rng.node);
    uint64_t base = pp_el_rng_base(c->rng.sample, c->rng.samples, n);
    float scale = ratio < 1.f ? 1.f / (1.f - ratio) : 0.f;
    for (int64_t i = 0; i < n; i++) {
        int keep = pp_el_rng_uniform(key, base + (uint64_t)i) >= ratio;
        Y[i] = keep ? X[i] * scale : 0.f;
        if (mask) mask[i] = (uint8_t)keep;
    }
    return PP_OK;
}

/* Recomputes the mask from ctx->rng, which must be the forward call's. */
PP_BWD(pp_cpu_dropout_backward)
{
    float *GX = grad_in[0].data;
    const float *GY = grad_out[0].data;
    if (!GX || !GY) return PP_OK;
    float ratio;
    int drop;
    PP_CHECK(dropout_plan(c, &ratio, &drop, err));
    int64_t n = pp_tensor_numel(&grad_in[0]);
    if (!drop) {
        for (int64_t i = 0; i < n; i++) GX[i] += GY[i];
        return PP_OK;
    }
    uint64_t key = pp_el_rng_key(c->rng.seed, c->rng.step, c->rng.node);
    uint64_t base = pp_el_rng_base(c->rng.sample, c->rng.samples, n);
    float scale = ratio < 1.f ? 1.f / (1.f - ratio) : 0.f;
    for (int64_t i = 0; i < n; i++)
        if (pp_el_rng_uniform(key, base + (uint64_t)i) >= ratio) GX[i] += GY[i] * scale;
    return PP_OK;
}
