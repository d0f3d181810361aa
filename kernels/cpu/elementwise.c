/* cpu elementwise arithmetic and activations: broadcasting binary ops (Add Sub Mul Div
 * Pow) and unary ops (Sqrt Neg Reciprocal Relu LeakyRelu Sigmoid Tanh Erf Gelu Identity),
 * forward and backward; the per-element math comes from element.h. */
#include "broadcast.h"
#include "cpu_math.h"
#include "element.h"

#include <string.h>

pp_status pp_cpu_want_dtype(const pp_kernel_ctx *c, int i, pp_dtype want, int optional, pp_error *err)
{
    if (i >= c->nin || !c->in[i].data) {
        if (optional) return PP_OK;
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "input %d is missing", i);
    }
    if (c->in[i].dtype != want)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input %d has dtype %s, expected %s", i,
                            pp_dtype_name(c->in[i].dtype), pp_dtype_name(want));
    return PP_OK;
}

pp_status pp_cpu_want_inputs(const pp_kernel_ctx *c, int nmin, int nmax, pp_error *err)
{
    if (c->nin < nmin || c->nin > nmax)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "%d inputs, expected %d to %d", c->nin, nmin, nmax);
    return PP_OK;
}

/* ---------------- binary ops with broadcasting ---------------- */

typedef enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_POW } bin_op;

/* backward: an input may be absent (a factor kept only for a gradient nobody asked for) */
static pp_status binary_prepare(const pp_kernel_ctx *c, pp_bcast *b, int backward, pp_error *err)
{
    PP_CHECK(pp_cpu_want_inputs(c, 2, 2, err));
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, backward, err));
    PP_CHECK(pp_cpu_want_dtype(c, 1, PP_DTYPE_F32, backward, err));
    const pp_tensor *ins[2] = {&c->in[0], &c->in[1]};
    return pp_bcast_init(b, &c->out[0], ins, 2, c->node, err);
}

/* y[row] = EXPR(x0, x1), with the three stride patterns written out so the common ones
 * (same shape, scalar on either side) vectorise. */
#define BIN_ROWS(EXPR)                                                                  \
    for (int64_t r = 0; r < b.rows; r++) {                                              \
        int64_t off[2];                                                                 \
        pp_bcast_row(&b, r, off);                                                       \
        const float *pa = A + off[0], *pb = B + off[1];                                 \
        float *py = Y + r * b.inner;                                                    \
        if (b.inner_stride[0] && b.inner_stride[1]) {                                   \
            for (int64_t j = 0; j < b.inner; j++) { float x0 = pa[j], x1 = pb[j]; py[j] = (EXPR); } \
        } else if (b.inner_stride[0]) {                                                 \
            const float x1 = pb[0];                                                     \
            for (int64_t j = 0; j < b.inner; j++) { float x0 = pa[j]; py[j] = (EXPR); } \
        } else if (b.inner_stride[1]) {                                                 \
            const float x0 = pa[0];                                                     \
            for (int64_t j = 0; j < b.inner; j++) { float x1 = pb[j]; py[j] = (EXPR); } \
        } else {                                                                        \
            const float x0 = pa[0], x1 = pb[0];                                         \
            for (int64_t j = 0; j < b.inner; j++) py[j] = (EXPR);                       \
        }                                                                               \
    }

static pp_status binary_forward(const pp_kernel_ctx *c, bin_op op, pp_error *err)
{
    pp_bcast b = {0};
    PP_CHECK(binary_prepare(c, &b, 0, err));
    const float *A = c->in[0].data, *B = c->in[1].data;
    float *Y = c->out[0].data;
    switch (op) {
    case BIN_ADD: BIN_ROWS(x0 + x1); break;
    case BIN_SUB: BIN_ROWS(x0 - x1); break;
    case BIN_MUL: BIN_ROWS(x0 * x1); break;
    case BIN_DIV: BIN_ROWS(x0 / x1); break;
    case BIN_POW: BIN_ROWS(pp_el_pow(x0, x1)); break;
    }
    return PP_OK;
}

/* G[which] += gy * DEXPR(x0, x1), summed over the dims input `which` is broadcast along.
 * An input backward did not keep (NULL: the registry's saves_for_other) reads as zeros. */
#define BIN_GRAD(DEXPR)                                                                 \
    for (int64_t r = 0; r < b.rows; r++) {                                              \
        int64_t off[2];                                                                 \
        pp_bcast_row(&b, r, off);                                                       \
        static const float unkept = 0.f;                                                \
        const float *pa = A ? A + off[0] : &unkept, *pb = B ? B + off[1] : &unkept;    \
        const float *pg = GY + r * b.inner;                                             \
        const int64_t sa = A ? b.inner_stride[0] : 0, sb = B ? b.inner_stride[1] : 0;  \
        float *gr = G + off[which];                                                     \
        if (b.inner_stride[which]) {                                                    \
            for (int64_t j = 0; j < b.inner; j++) {                                     \
                float x0 = pa[j * sa], x1 = pb[j * sb];                                 \
                (void)x0, (void)x1;                                                     \
                gr[j] += pg[j] * (DEXPR);                                               \
            }                                                                           \
        } else {                                                                        \
            double acc = 0.0;                                                           \
            for (int64_t j = 0; j < b.inner; j++) {                                     \
                float x0 = pa[j * sa], x1 = pb[j * sb];                                 \
                (void)x0, (void)x1;                                                     \
                acc += pg[j] * (DEXPR);                                                 \
            }                                                                           \
            gr[0] += (float)acc;                                                        \
        }                                                                               \
    }

static pp_status binary_backward(const pp_kernel_ctx *c, bin_op op, const pp_tensor *grad_out,
                                 pp_tensor *grad_in, pp_error *err)
{
    if (!grad_out[0].data) return PP_OK;
    if (op == BIN_ADD || op == BIN_SUB) {
        if (grad_in[0].data)
            PP_CHECK(pp_bcast_reduce_add(&grad_in[0], &grad_out[0], 1.f, c->grad_fresh & 1, c->node, err));
        if (grad_in[1].data)
            PP_CHECK(pp_bcast_reduce_add(&grad_in[1], &grad_out[0], op == BIN_ADD ? 1.f : -1.f, c->grad_fresh >> 1 & 1,
                                         c->node, err));
        return PP_OK;
    }
    pp_bcast b = {0};
    PP_CHECK(binary_prepare(c, &b, 1, err));
    const float *A = c->in[0].data, *B = c->in[1].data, *GY = grad_out[0].data;
    for (int which = 0; which < 2; which++) {
        float *G = grad_in[which].data;
        if (!G) continue;
        if (c->grad_fresh >> which & 1) memset(G, 0, (size_t)pp_tensor_nbytes(&grad_in[which]));
        switch (op * 2 + which) {
        case BIN_MUL * 2: BIN_GRAD(x1); break;
        case BIN_MUL * 2 + 1: BIN_GRAD(x0); break;
        case BIN_DIV * 2: BIN_GRAD(1.f / x1); break;
        case BIN_DIV * 2 + 1: BIN_GRAD(-x0 / (x1 * x1)); break;
        case BIN_POW * 2: BIN_GRAD(pp_el_pow_grad_base(x0, x1)); break;
        case BIN_POW * 2 + 1: BIN_GRAD(pp_el_pow_grad_exp(x0, pp_el_pow(x0, x1))); break;
        default: break;
        }
    }
    return PP_OK;
}

#define BINARY_KERNEL(lower, OP)                                                        \
    PP_FWD(pp_cpu_##lower##_forward) { return binary_forward(c, OP, err); }             \
    PP_BWD(pp_cpu_##lower##_backward) { return binary_backward(c, OP, grad_out, grad_in, err); }
BINARY_KERNEL(add, BIN_ADD)
BINARY_KERNEL(sub, BIN_SUB)
BINARY_KERNEL(mul, BIN_MUL)
BINARY_KERNEL(div, BIN_DIV)
BINARY_KERNEL(pow, BIN_POW)

/* ---------------- unary ops ---------------- */

typedef enum { UN_SQRT, UN_NEG, UN_RECIP, UN_RELU, UN_LEAKY, UN_SIGMOID, UN_TANH, UN_ERF, UN_GELU,
               UN_GELU_TANH, UN_IDENTITY } un_op;

/* The op, with LeakyRelu's alpha and Gelu's form read from the attributes. */
static pp_status unary_prepare(const pp_kernel_ctx *c, un_op *op, float *alpha, pp_error *err)
{
    PP_CHECK(pp_cpu_want_inputs(c, 1, 1, err));
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, 0, err));
    if (pp_tensor_numel(&c->in[0]) != pp_tensor_numel(&c->out[0]))
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (%s): output has %lld elements, input %lld", c->node,
                            c->op_type, (long long)pp_tensor_numel(&c->out[0]), (long long)pp_tensor_numel(&c->in[0]));
    *alpha = 0.f;
    if (*op == UN_LEAKY) PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "alpha", 0.01f, alpha, c->node, err));
    if (*op == UN_GELU) {
        const char *approx;
        PP_CHECK(pp_attr_string(c->attrs, c->nattrs, "approximate", "none", &approx, c->node, err));
        if (!strcmp(approx, "tanh")) *op = UN_GELU_TANH;
        else if (strcmp(approx, "none"))
            return pp_error_set(err, PP_ERR_UNSUPPORTED,
                                "node '%s' (Gelu): approximate='%s' is not supported (use 'none' or 'tanh')",
                                c->node, approx);
    }
    return PP_OK;
}

/* The activation loops (erf, tanh, GELU: rationals and exp per element) are bound by
 * arithmetic, not memory: PP_CPU_CLONES (cpu_math.h). */
#define UN_LOOP(EXPR) for (int64_t i = 0; i < n; i++) { float x = X[i]; Y[i] = (EXPR); }

PP_CPU_CLONES static pp_status unary_forward(const pp_kernel_ctx *c, un_op op, pp_error *err)
{
    float alpha;
    PP_CHECK(unary_prepare(c, &op, &alpha, err));
    const float *X = c->in[0].data;
    float *Y = c->out[0].data;
    int64_t n = pp_tensor_numel(&c->in[0]);
    switch (op) {
    case UN_SQRT: UN_LOOP(sqrtf(x)); break;
    case UN_NEG: UN_LOOP(-x); break;
    case UN_RECIP: UN_LOOP(1.f / x); break;
    case UN_RELU: UN_LOOP(pp_el_relu(x)); break;
    case UN_LEAKY: UN_LOOP(pp_el_leaky_relu(x, alpha)); break;
    case UN_SIGMOID: UN_LOOP(pp_el_sigmoid(x)); break;
    case UN_TANH: UN_LOOP(pp_el_tanh(x)); break;
    case UN_ERF: UN_LOOP(pp_el_erf(x)); break;
    case UN_GELU: UN_LOOP(pp_el_gelu(x)); break;
    case UN_GELU_TANH: UN_LOOP(pp_el_gelu_tanh(x)); break;
    case UN_IDENTITY: break;
    }
    return PP_OK;
}

/* GX += GY * DEXPR, where DEXPR reads x (the saved input) or y (the saved output);
 * GX = 0 + GY * DEXPR when it is fresh (the same rounding, GX not read). */
#define UN_GRAD(DEXPR)                                                                  \
    if (fresh)                                                                          \
        for (int64_t i = 0; i < n; i++) { GX[i] = 0.f + GY[i] * (DEXPR); }              \
    else                                                                                \
        for (int64_t i = 0; i < n; i++) { GX[i] += GY[i] * (DEXPR); }

PP_CPU_CLONES static pp_status unary_backward(const pp_kernel_ctx *c, un_op op, const pp_tensor *grad_out,
                                pp_tensor *grad_in, pp_error *err)
{
    float *GX = grad_in[0].data;
    const float *GY = grad_out[0].data;
    if (!GX || !GY) return PP_OK;
    float alpha = 0.f;
    if (op == UN_LEAKY) PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "alpha", 0.01f, &alpha, c->node, err));
    if (op == UN_GELU) {
        const char *approx;
        PP_CHECK(pp_attr_string(c->attrs, c->nattrs, "approximate", "none", &approx, c->node, err));
        if (!strcmp(approx, "tanh")) op = UN_GELU_TANH;
    }
    const float *X = c->in[0].data, *Y = c->out[0].data;
    int64_t n = pp_tensor_numel(&grad_in[0]);
    const int fresh = c->grad_fresh & 1;
    switch (op) {
    case UN_SQRT: UN_GRAD(0.5f / Y[i]); break;
    case UN_NEG: UN_GRAD(-1.f); break;
    case UN_RECIP: UN_GRAD(-Y[i] * Y[i]); break;
    case UN_RELU: UN_GRAD(Y[i] > 0.f ? 1.f : 0.f); break;
    case UN_LEAKY: UN_GRAD(pp_el_leaky_relu_grad(X[i], alpha)); break;
    case UN_SIGMOID: UN_GRAD(pp_el_sigmoid_grad_y(Y[i])); break;
    case UN_TANH: UN_GRAD(pp_el_tanh_grad_y(Y[i])); break;
    case UN_ERF: UN_GRAD(pp_el_erf_grad(X[i])); break;
    case UN_GELU: UN_GRAD(pp_el_gelu_grad_xy(X[i], Y[i])); break;
    case UN_GELU_TANH: UN_GRAD(pp_el_gelu_tanh_grad(X[i])); break;
    case UN_IDENTITY: UN_GRAD(1.f); break;
    }
    return PP_OK;
}

#define UNARY_KERNEL(lower, OP)                                                         \
    PP_FWD(pp_cpu_##lower##_forward) { return unary_forward(c, OP, err); }              \
    PP_BWD(pp_cpu_##lower##_backward) { return unary_backward(c, OP, grad_out, grad_in, err); }
UNARY_KERNEL(sqrt, UN_SQRT)
UNARY_KERNEL(neg, UN_NEG)
UNARY_KERNEL(reciprocal, UN_RECIP)
UNARY_KERNEL(relu, UN_RELU)
UNARY_KERNEL(leaky_relu, UN_LEAKY)
UNARY_KERNEL(sigmoid, UN_SIGMOID)
UNARY_KERNEL(tanh, UN_TANH)
UNARY_KERNEL(erf, UN_ERF)
UNARY_KERNEL(gelu, UN_GELU)

/* Identity copies any dtype; its gradient passes through (float only). */
PP_FWD(pp_cpu_identity_forward)
{
    PP_CHECK(pp_cpu_want_inputs(c, 1, 1, err));
    if (c->in[0].dtype != c->out[0].dtype || pp_tensor_nbytes(&c->in[0]) != pp_tensor_nbytes(&c->out[0]))
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (Identity): output dtype/size differs from the input",
                            c->node);
    return pp_device_copy(c->dev, c->out[0].data, c->in[0].data, pp_tensor_nbytes(&c->in[0]), err);
}
PP_BWD(pp_cpu_identity_backward) { return unary_backward(c, UN_IDENTITY, grad_out, grad_in, err); }
