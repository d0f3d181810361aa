/* The elementwise ops' math, written once: the cpu loops (kernels/cpu/elementwise.c), the
 * cuda functors (kernels/cuda/ew_ops.cuh) and the constant folder (graph/fold_math.c) all
 * expand these lists, and the registry (graph/ops.c) takes from them what each gradient
 * reads of the forward (EL_IN / EL_OUT in include/onnxpipe/backend/op_list.h). An op here runs on
 * the kernels named `unary` or `binary` in the op list: a new one is a row here and a row
 * there. The functions the rows call are element.h's. */
#ifndef PP_KERNELS_ELEMENT_OPS_H
#define PP_KERNELS_ELEMENT_OPS_H

#include <onnxpipe/backend/op.h>

#include <onnxpipe/element.h>

#include <string.h>

/* What a gradient factor reads of the forward: the input x, the output y, both, nothing. */
#define PP_EL_NONE 0
#define PP_EL_X 1
#define PP_EL_Y 2
#define PP_EL_XY 3

/* An op's attributes as the element functions take them (pp_el_params_read). */
typedef struct pp_el_params {
    float a, b;
} pp_el_params;

/* U(ID, reads, forward of x, gradient factor dy/dx of x and y), with p (pp_el_params) in
 * scope. The kernels compute dx += dy * factor. */
#define PP_EL_UNARY_LIST(U)                                                                                           \
    U(SQRT, PP_EL_Y, sqrtf(x), 0.5f / y)                                                                              \
    U(NEG, PP_EL_NONE, -x, -1.f)                                                                                      \
    U(RECIPROCAL, PP_EL_Y, 1.f / x, -y * y)                                                                           \
    U(RELU, PP_EL_Y, pp_el_relu(x), pp_el_relu_grad(y))                                                               \
    U(LEAKY_RELU, PP_EL_X, pp_el_leaky_relu(x, p.a), pp_el_leaky_relu_grad(x, p.a))                                   \
    U(SIGMOID, PP_EL_Y, pp_el_sigmoid(x), pp_el_sigmoid_grad_y(y))                                                    \
    U(TANH, PP_EL_Y, pp_el_tanh(x), pp_el_tanh_grad_y(y))                                                             \
    U(ERF, PP_EL_X, pp_el_erf(x), pp_el_erf_grad(x))                                                                  \
    /* p.a: 1 for approximate='tanh' */                                                                               \
    U(GELU, PP_EL_XY, p.a != 0.f ? pp_el_gelu_tanh(x) : pp_el_gelu(x),                                                \
      p.a != 0.f ? pp_el_gelu_tanh_grad(x) : pp_el_gelu_grad_xy(x, y))                                                \
    U(IDENTITY, PP_EL_NONE, x, 1.f)                                                                                  \
    /* comparisons, logic, more elementwise functions */                                                              \
    U(ABS, PP_EL_X, fabsf(x), pp_el_sign(x))                                                                          \
    U(SIGN, PP_EL_NONE, pp_el_sign(x), 0.f)                                                                           \
    U(EXP, PP_EL_Y, expf(x), y)                                                                                       \
    U(LOG, PP_EL_X, logf(x), 1.f / x)                                                                                 \
    U(SIN, PP_EL_X, sinf(x), cosf(x))                                                                                 \
    U(COS, PP_EL_X, cosf(x), -sinf(x))                                                                                \
    U(FLOOR, PP_EL_NONE, floorf(x), 0.f)                                                                              \
    U(CEIL, PP_EL_NONE, ceilf(x), 0.f)                                                                                \
    U(ROUND, PP_EL_NONE, pp_el_round(x), 0.f)                                                                         \
    U(SOFTPLUS, PP_EL_X, pp_el_softplus(x), pp_el_sigmoid(x))                                                         \
    /* p.a: alpha */                                                                                                  \
    U(ELU, PP_EL_X, pp_el_elu(x, p.a), pp_el_elu_grad(x, p.a))                                                        \
    U(HARD_SWISH, PP_EL_X, pp_el_hard_swish(x), pp_el_hard_swish_grad(x))                                             \
    /* p.a: alpha */                                                                                                  \
    U(SWISH, PP_EL_X, pp_el_swish(x, p.a), pp_el_swish_grad(x, p.a))                                                  \
    /* p.a, p.b: alpha, beta */                                                                                       \
    U(HARD_SIGMOID, PP_EL_X, pp_el_hard_sigmoid(x, p.a, p.b), pp_el_hard_sigmoid_grad(x, p.a, p.b))                   \
    U(MISH, PP_EL_X, pp_el_mish(x), pp_el_mish_grad(x))

/* B(ID, forward of a and b, d/da, d/db): broadcasting float binary ops. */
#define PP_EL_BINARY_LIST(B)                                                                                          \
    B(ADD, a + b, 1.f, 1.f)                                                                                           \
    B(SUB, a - b, 1.f, -1.f)                                                                                          \
    B(MUL, a * b, b, a)                                                                                               \
    B(DIV, a / b, 1.f / b, -a / (b * b))                                                                              \
    B(POW, pp_el_pow(a, b), pp_el_pow_grad_base(a, b), pp_el_pow_grad_exp(a, pp_el_pow(a, b)))                        \
    /* comparisons, logic, more elementwise functions */                                                              \
    B(MAX, pp_el_max(a, b), pp_el_max_grad(a, b), pp_el_max_grad(b, a))                                               \
    B(MIN, pp_el_min(a, b), pp_el_min_grad(a, b), pp_el_min_grad(b, a))                                               \
    /* fmod=1, the only form ONNX allows on floats (graph/infer_logic.c checks) */                                    \
    B(MOD, fmodf(a, b), 1.f, pp_el_fmod_grad_b(a, b))                                                                 \
    /* b: the slope, broadcast to a (unidirectional: graph/infer_logic.c checks) */                                   \
    B(PRELU, pp_el_prelu(a, b), pp_el_prelu_grad_x(a, b), pp_el_prelu_grad_slope(a))

/* I(ID, result of int64 a and b): the binary ops on int64 / int32 tensors (shape chains that do not
 * fold under dynamic shapes), for the `binary` kernels' integer path and the folder; p in scope
 * (pp_el_params_read). An op of the binary list without a row here takes floats only. */
#define PP_EL_INT_LIST(I)                                                                                             \
    I(ADD, pp_el_iadd(a, b))                                                                                          \
    I(SUB, pp_el_isub(a, b))                                                                                          \
    I(MUL, pp_el_imul(a, b))                                                                                          \
    I(DIV, pp_el_idiv(a, b))                                                                                          \
    I(POW, pp_el_ipow(a, b))                                                                                          \
    /* comparisons, logic, more elementwise functions */                                                              \
    I(MAX, a > b ? a : b)                                                                                             \
    I(MIN, a < b ? a : b)                                                                                             \
    /* p.a: the fmod attribute */                                                                                     \
    I(MOD, pp_el_imod(a, b, p.a != 0.f))

/* J(ID, result of int64 x): the unary ops on int64 / int32 tensors (the `unary` kernels' integer
 * path and the folder); an op of the unary list without a row here takes floats only. */
#define PP_EL_INT_UNARY_LIST(J)                                                                                       \
    J(NEG, pp_el_isub(0, x))                                                                                          \
    J(RELU, x > 0 ? x : 0)                                                                                            \
    /* comparisons, logic, more elementwise functions */                                                              \
    J(ABS, x < 0 ? pp_el_isub(0, x) : x)                                                                              \
    J(SIGN, (int64_t)(x > 0) - (int64_t)(x < 0))

/* C(ID, predicate of a and b): comparisons to bool, on any numeric type (a and b of one type);
 * And, Or, Xor are the same on bool (0 / 1) inputs, which their shape rule asks for. */
#define PP_EL_COMPARE_LIST(C)                                                                                         \
    C(EQUAL, a == b)                                                                                                  \
    /* comparisons, logic, more elementwise functions */                                                              \
    C(LESS, a < b)                                                                                                    \
    C(LESS_OR_EQUAL, a <= b)                                                                                          \
    C(GREATER, a > b)                                                                                                 \
    C(GREATER_OR_EQUAL, a >= b)                                                                                       \
    C(AND, a && b)                                                                                                    \
    C(OR, a || b)                                                                                                     \
    C(XOR, (a != 0) != (b != 0))

/* P(ID, input dtype, predicate of x): one input to bool, on the kernels named `predicate` (x is
 * the element as a float, 0 / 1 for bool), with p (pp_el_params) in scope. */
#define PP_EL_PREDICATE_LIST(P)                                                                                       \
    P(NOT, PP_DTYPE_BOOL, x == 0.f)                                                                                   \
    P(IS_NAN, PP_DTYPE_F32, pp_el_isnan(x))                                                                           \
    /* p.a, p.b: detect_positive, detect_negative */                                                                  \
    P(IS_INF, PP_DTYPE_F32, pp_el_isinf(x, p.a, p.b))

/* PP_EL_READS_<ID>: the reads column as a constant, for the registry. */
#define PP_EL_READS_(ID, reads, ...) PP_EL_READS_##ID = (reads),
enum { PP_EL_UNARY_LIST(PP_EL_READS_) };
#undef PP_EL_READS_

/* The attributes of op as its element functions take them; an unsupported value is an
 * error naming the node. Host only. */
static inline pp_status pp_el_params_read(pp_op op, const pp_attr *attrs, int nattrs, const char *node,
                                          pp_el_params *p, pp_error *err)
{
    p->a = p->b = 0.f;
    switch (op) {
    case PP_OP_LEAKY_RELU: return pp_attr_float(attrs, nattrs, "alpha", 0.01f, &p->a, node, err);
    case PP_OP_GELU: {
        const char *approx;
        PP_CHECK(pp_attr_string(attrs, nattrs, "approximate", "none", &approx, node, err));
        if (strcmp(approx, "none") && strcmp(approx, "tanh"))
            return pp_error_set(err, PP_ERR_UNSUPPORTED,
                                "node '%s' (Gelu): approximate='%s' is not supported (use 'none' or 'tanh')", node,
                                approx);
        p->a = !strcmp(approx, "tanh");
        return PP_OK;
    }
    /* comparisons, logic, more elementwise functions */
    case PP_OP_ELU: return pp_attr_float(attrs, nattrs, "alpha", 1.f, &p->a, node, err);
    case PP_OP_SWISH: return pp_attr_float(attrs, nattrs, "alpha", 1.f, &p->a, node, err);
    case PP_OP_HARD_SIGMOID:
        PP_CHECK(pp_attr_float(attrs, nattrs, "alpha", 0.2f, &p->a, node, err));
        return pp_attr_float(attrs, nattrs, "beta", 0.5f, &p->b, node, err);
    case PP_OP_MOD: {
        int64_t fmod;
        PP_CHECK(pp_attr_int(attrs, nattrs, "fmod", 0, &fmod, node, err));
        p->a = fmod != 0;
        return PP_OK;
    }
    case PP_OP_IS_INF: {
        int64_t pos, neg;
        PP_CHECK(pp_attr_int(attrs, nattrs, "detect_positive", 1, &pos, node, err));
        PP_CHECK(pp_attr_int(attrs, nattrs, "detect_negative", 1, &neg, node, err));
        p->a = pos != 0;
        p->b = neg != 0;
        return PP_OK;
    }
    default: return PP_OK;
    }
}

#endif
