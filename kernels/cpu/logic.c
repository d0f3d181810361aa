/* cpu predicates (Not, IsNaN, IsInf: one input to bool, kernels/element_ops.h's predicate list),
 * the integer paths of the `unary` and `binary` kernels (its integer lists), variadic Max / Min,
 * and Clip, whose bounds are inputs
 * (kernels/op_args_logic.c) and whose element functions are element.h's. */
#include "logic.h"

#include "broadcast.h"
#include "cpu_math.h"
#include <onnxpipe/element_ops.h>
#include "op_args_logic.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/backend/kernels_backend.h>

/* ---------------- predicates (kernels/element_ops.h) ---------------- */

#define PRED_LOOP(T, EXPR)                                                              \
    for (int64_t i = 0; i < n; i++) {                                                   \
        const float x = (float)((const T *)c->in[0].data)[i];                           \
        Y[i] = (EXPR) != 0;                                                             \
    }

PP_FWD(pp_cpu_predicate_forward)
{
    PP_CHECK(pp_cpu_want_inputs(c, 1, 1, err));
    if (c->out[0].dtype != PP_DTYPE_BOOL || pp_tensor_numel(&c->out[0]) != pp_tensor_numel(&c->in[0]))
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output is %s with %lld elements, expected bool with %lld",
                            pp_dtype_name(c->out[0].dtype), (long long)pp_tensor_numel(&c->out[0]),
                            (long long)pp_tensor_numel(&c->in[0]));
    pp_el_params p;
    PP_CHECK(pp_el_params_read(c->op, c->attrs, c->nattrs, c->node, &p, err));
    const int64_t n = pp_tensor_numel(&c->in[0]);
    uint8_t *Y = c->out[0].data;
    switch (c->op) {
#define PRED_CASE(ID, DT, EXPR)                                                         \
    case PP_OP_##ID:                                                                    \
        PP_CHECK(pp_cpu_want_dtype(c, 0, DT, 0, err));                                  \
        if ((DT) == PP_DTYPE_BOOL) PRED_LOOP(uint8_t, EXPR) else PRED_LOOP(float, EXPR) \
        break;
    PP_EL_PREDICATE_LIST(PRED_CASE)
#undef PRED_CASE
    default: return pp_args_fail(c, PP_ERR_INTERNAL, err, "no element function (kernels/element_ops.h)");
    }
    (void)p;
    return PP_OK;
}

/* ---------------- unary ops on integers (kernels/element_ops.h) ---------------- */

#define INT_LOOP(T, EXPR)                                                               \
    for (int64_t i = 0; i < n; i++) {                                                   \
        const int64_t x = ((const T *)c->in[0].data)[i];                                \
        ((T *)c->out[0].data)[i] = (T)(EXPR);                                           \
    }

pp_status pp_cpu_unary_int_forward(const pp_kernel_ctx *c, pp_error *err)
{
    PP_CHECK(pp_cpu_want_inputs(c, 1, 1, err));
    const pp_dtype dt = c->in[0].dtype;
    const int64_t n = pp_tensor_numel(&c->in[0]);
    if (c->out[0].dtype != dt || pp_tensor_numel(&c->out[0]) != n)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output is %s with %lld elements, expected %s with %lld",
                            pp_dtype_name(c->out[0].dtype), (long long)pp_tensor_numel(&c->out[0]),
                            pp_dtype_name(dt), (long long)n);
    switch (c->op) {
#define INT_CASE(ID, EXPR)                                                              \
    case PP_OP_##ID:                                                                    \
        if (dt == PP_DTYPE_I64) INT_LOOP(int64_t, EXPR) else INT_LOOP(int32_t, EXPR)    \
        break;
    PP_EL_INT_UNARY_LIST(INT_CASE)
#undef INT_CASE
    default: return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "integer inputs are not supported (float32 only)");
    }
    return PP_OK;
}

/* ---------------- binary ops on integers (kernels/element_ops.h) ---------------- */

#define INT_ROWS(T, EXPR)                                                               \
    for (int64_t r = 0; r < bc.rows; r++) {                                             \
        int64_t off[2];                                                                 \
        pp_bcast_row(&bc, r, off);                                                      \
        const T *pa = (const T *)c->in[0].data + off[0], *pb = (const T *)c->in[1].data + off[1]; \
        T *py = (T *)c->out[0].data + r * bc.inner;                                     \
        for (int64_t j = 0; j < bc.inner; j++) {                                        \
            const int64_t a = pa[j * bc.inner_stride[0]], b = pb[j * bc.inner_stride[1]]; \
            py[j] = (T)(EXPR);                                                          \
        }                                                                               \
    }

pp_status pp_cpu_binary_int_forward(const pp_kernel_ctx *c, pp_error *err)
{
    PP_CHECK(pp_cpu_want_inputs(c, 2, 2, err));
    const pp_dtype dt = c->in[0].dtype;
    PP_CHECK(pp_cpu_want_dtype(c, 1, dt, 0, err));
    if (c->out[0].dtype != dt)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "output dtype %s, expected the inputs' %s",
                            pp_dtype_name(c->out[0].dtype), pp_dtype_name(dt));
    pp_el_params p;
    PP_CHECK(pp_el_params_read(c->op, c->attrs, c->nattrs, c->node, &p, err));
    pp_bcast bc = {0};
    const pp_tensor *ins[2] = {&c->in[0], &c->in[1]};
    PP_CHECK(pp_bcast_init(&bc, &c->out[0], ins, 2, c->node, err));
    switch (c->op) {
#define INT_CASE(ID, EXPR)                                                              \
    case PP_OP_##ID:                                                                    \
        if (dt == PP_DTYPE_I64) INT_ROWS(int64_t, EXPR) else INT_ROWS(int32_t, EXPR)    \
        break;
    PP_EL_INT_LIST(INT_CASE)
#undef INT_CASE
    default: return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "integer inputs are not supported (float32 only)");
    }
    (void)p;
    return PP_OK;
}

/* ---------------- Max / Min of 1 or more than 2 inputs ---------------- */

/* ONNX's variadic form (PyTorch's exporters write 2 inputs, which the binary loops run): y is
 * max(x0, x0) broadcast, then max(y, x_k) in place, with the binary kernel. The gradient of an
 * element goes to the inputs equal to y there, split equally among them: for 2 inputs that is
 * torch.maximum's rule, and for more the same equal split (chained torch.maximum would give a
 * tie of three 1/4, 1/4, 1/2 by the order of the chain). */
pp_status pp_cpu_minmax_forward(const pp_kernel_ctx *c, pp_error *err)
{
    if (c->nin < 1) return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "no inputs, expected 1 or more");
    for (int k = 0; k < c->nin; k++) PP_CHECK(pp_cpu_want_dtype(c, k, PP_DTYPE_F32, 0, err));
    pp_tensor in2[2] = {c->in[0], c->in[0]};
    pp_kernel_ctx two = *c;
    two.in = in2;
    two.nin = 2;
    PP_CHECK(pp_cpu_binary_forward(&two, err));
    in2[0] = c->out[0];
    for (int k = 1; k < c->nin; k++) {
        in2[1] = c->in[k];
        PP_CHECK(pp_cpu_binary_forward(&two, err));
    }
    return PP_OK;
}

/* f(k, idx, off_k, xk): over every element idx of y and input k's element xk at offset off_k */
#define EACH_OF_INPUT(k, BODY)                                                          \
    do {                                                                                \
        pp_bcast b = {0};                                                               \
        const pp_tensor *one[1] = {&c->in[k]};                                          \
        PP_CHECK_GOTO(pp_bcast_init(&b, &yt, one, 1, c->node, err), st, done);          \
        const float *X = c->in[k].data;                                                 \
        for (int64_t r = 0; r < b.rows; r++) {                                          \
            int64_t off[1];                                                             \
            pp_bcast_row(&b, r, off);                                                   \
            for (int64_t j = 0; j < b.inner; j++) {                                     \
                const int64_t idx = r * b.inner + j, xo = off[0] + j * b.inner_stride[0]; \
                const float xk = X[xo];                                                 \
                BODY;                                                                   \
            }                                                                           \
        }                                                                               \
    } while (0)

/* Recomputes y (backward keeps no output), counts the inputs equal to it, and adds
 * dy / count to each of them. */
pp_status pp_cpu_minmax_backward(const pp_kernel_ctx *c, const pp_tensor *grad_out, pp_tensor *grad_in,
                                 pp_error *err)
{
    if (!grad_out[0].data) return PP_OK;
    pp_status st = PP_OK;
    const int64_t n = pp_tensor_numel(&grad_out[0]);
    pp_tensor yt = grad_out[0];
    float *Y = malloc(((size_t)n + 1) * sizeof *Y), *count = calloc((size_t)n + 1, sizeof *count);
    const float *GY = grad_out[0].data;
    if (!Y || !count) {
        st = PP_NOMEM(err);
        goto done;
    }
    yt.dtype = PP_DTYPE_F32;
    yt.data = Y;
    pp_kernel_ctx fwd = *c;
    fwd.out = &yt;
    fwd.nout = 1;
    PP_CHECK_GOTO(pp_cpu_minmax_forward(&fwd, err), st, done);
    for (int k = 0; k < c->nin; k++) EACH_OF_INPUT(k, count[idx] += xk == Y[idx]);
    for (int k = 0; k < c->nin; k++) {
        float *G = grad_in[k].data;
        if (!G) continue;
        if (c->grad_fresh >> k & 1) memset(G, 0, pp_tensor_nbytes(&grad_in[k]));
        EACH_OF_INPUT(k, if (xk == Y[idx]) G[xo] += GY[idx] / count[idx]);
    }
done:
    free(Y);
    free(count);
    return st;
}
#undef EACH_OF_INPUT

/* ---------------- Clip(x, min?, max?) ---------------- */

static pp_status clip_prepare(const pp_kernel_ctx *c, float *lo, float *hi, pp_error *err)
{
    PP_CHECK(pp_cpu_want_inputs(c, 1, 3, err));
    return pp_args_clip(c, lo, hi, err);
}

/* float32, and int64 / int32 (shape chains that do not fold) */
PP_FWD(pp_cpu_clip_forward)
{
    PP_CHECK(pp_cpu_want_inputs(c, 1, 3, err));
    const pp_dtype dt = c->in[0].dtype;
    const int64_t n = pp_tensor_numel(&c->in[0]);
    if (c->out[0].dtype != dt || pp_tensor_numel(&c->out[0]) != n)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "output is %s with %lld elements, expected %s with %lld",
                            pp_dtype_name(c->out[0].dtype), (long long)pp_tensor_numel(&c->out[0]),
                            pp_dtype_name(dt), (long long)n);
    if (dt == PP_DTYPE_I64 || dt == PP_DTYPE_I32) {
        int64_t lo, hi;
        PP_CHECK(pp_args_clip_int(c, &lo, &hi, err));
        if (dt == PP_DTYPE_I64) INT_LOOP(int64_t, pp_el_iclip(x, lo, hi)) else INT_LOOP(int32_t, pp_el_iclip(x, lo, hi))
        return PP_OK;
    }
    float lo, hi;
    PP_CHECK(clip_prepare(c, &lo, &hi, err));
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, 0, err));
    const float *X = c->in[0].data;
    float *Y = c->out[0].data;
    for (int64_t i = 0; i < n; i++) Y[i] = pp_el_clip(X[i], lo, hi);
    return PP_OK;
}

/* dx += dy where min <= x <= max */
PP_BWD(pp_cpu_clip_backward)
{
    float *GX = grad_in[0].data;
    const float *GY = grad_out[0].data, *X = c->in[0].data;
    if (!GX || !GY) return PP_OK;
    float lo, hi;
    PP_CHECK(clip_prepare(c, &lo, &hi, err));
    const int64_t n = pp_tensor_numel(&grad_in[0]);
    for (int64_t i = 0; i < n; i++) GX[i] += GY[i] * pp_el_clip_grad(X[i], lo, hi);
    return PP_OK;
}
