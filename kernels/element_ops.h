/* The elementwise ops' math, written once: the cpu loops (kernels/cpu/elementwise.c), the
 * cuda functors (kernels/cuda/ew_ops.cuh) and the constant folder (graph/fold_math.c) all
 * expand these lists, and the registry (graph/ops.c) takes from them what each gradient
 * reads of the forward (EL_IN / EL_OUT in include/onnxpipe/op_list.h). An op here runs on
 * the kernels named `unary` or `binary` in the op list: a new one is a row here and a row
 * there. The functions the rows call are element.h's. */
#ifndef PP_KERNELS_ELEMENT_OPS_H
#define PP_KERNELS_ELEMENT_OPS_H

#include <onnxpipe/op.h>

#include "element.h"

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
    U(IDENTITY, PP_EL_NONE, x, 1.f)

/* B(ID, forward of a and b, d/da, d/db): broadcasting float binary ops. */
#define PP_EL_BINARY_LIST(B)                                                                                          \
    B(ADD, a + b, 1.f, 1.f)                                                                                           \
    B(SUB, a - b, 1.f, -1.f)                                                                                          \
    B(MUL, a * b, b, a)                                                                                               \
    B(DIV, a / b, 1.f / b, -a / (b * b))                                                                              \
    B(POW, pp_el_pow(a, b), pp_el_pow_grad_base(a, b), pp_el_pow_grad_exp(a, pp_el_pow(a, b)))

/* C(ID, predicate of a and b): comparisons to bool, on any numeric type (a and b of one type). */
#define PP_EL_COMPARE_LIST(C) C(EQUAL, a == b)

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
    default: return PP_OK;
    }
}

#endif
