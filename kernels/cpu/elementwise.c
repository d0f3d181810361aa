/* cpu elementwise arithmetic and activations: the broadcasting binary ops and the unary
 * ops of kernels/element_ops.h (one `binary` and one `unary` kernel, switching on the op),
 * forward and backward, and Identity. */
#include "broadcast.h"
#include "cpu_math.h"
#include <onnxpipe/element_ops.h>
#include "logic.h"   /* the integer paths, variadic Max / Min */

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

/* backward: an input may be absent (a factor kept only for a gradient nobody asked for) */
static pp_status binary_prepare(const pp_kernel_ctx *c, pp_bcast *bc, int backward, pp_error *err)
{
    PP_CHECK(pp_cpu_want_inputs(c, 2, 2, err));
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, backward, err));
    PP_CHECK(pp_cpu_want_dtype(c, 1, PP_DTYPE_F32, backward, err));
    const pp_tensor *ins[2] = {&c->in[0], &c->in[1]};
    return pp_bcast_init(bc, &c->out[0], ins, 2, c->node, err);
}

/* y[row] = EXPR(a, b), with the three stride patterns written out so the common ones
 * (same shape, scalar on either side) vectorise. */
#define BIN_ROWS(EXPR)                                                                  \
    for (int64_t r = 0; r < bc.rows; r++) {                                             \
        int64_t off[2];                                                                 \
        pp_bcast_row(&bc, r, off);                                                      \
        const float *pa = A + off[0], *pb = B + off[1];                                 \
        float *py = Y + r * bc.inner;                                                   \
        if (bc.inner_stride[0] && bc.inner_stride[1]) {                                 \
            for (int64_t j = 0; j < bc.inner; j++) { float a = pa[j], b = pb[j]; py[j] = (EXPR); } \
        } else if (bc.inner_stride[0]) {                                                \
            const float b = pb[0];                                                      \
            for (int64_t j = 0; j < bc.inner; j++) { float a = pa[j]; py[j] = (EXPR); } \
        } else if (bc.inner_stride[1]) {                                                \
            const float a = pa[0];                                                      \
            for (int64_t j = 0; j < bc.inner; j++) { float b = pb[j]; py[j] = (EXPR); } \
        } else {                                                                        \
            const float a = pa[0], b = pb[0];                                           \
            for (int64_t j = 0; j < bc.inner; j++) py[j] = (EXPR);                      \
        }                                                                               \
    }

/* The float loops are built per ISA (PP_CPU_CLONES): SwiGLU's exp is arithmetic-bound, and
 * without AVX2 its backward rows did not vectorise at all (15 ms per 1M elements against 1.5). */
PP_CPU_CLONES static pp_status binary_forward(const pp_kernel_ctx *c, pp_error *err)
{
    pp_bcast bc = {0};
    PP_CHECK(binary_prepare(c, &bc, 0, err));
    const float *A = c->in[0].data, *B = c->in[1].data;
    float *Y = c->out[0].data;
    switch (c->op) {
#define FWD_CASE(ID, FWD, DA, DB) case PP_OP_##ID: BIN_ROWS(FWD); break;
    PP_EL_BINARY_LIST(FWD_CASE)
#undef FWD_CASE
    default: return pp_args_fail(c, PP_ERR_INTERNAL, err, "no element function (kernels/element_ops.h)");
    }
    return PP_OK;
}

PP_FWD(pp_cpu_binary_forward)
{
    if (c->nin != 2 && (c->op == PP_OP_MAX || c->op == PP_OP_MIN)) return pp_cpu_minmax_forward(c, err);
    if (c->nin == 2 && (c->in[0].dtype == PP_DTYPE_I64 || c->in[0].dtype == PP_DTYPE_I32))
        return pp_cpu_binary_int_forward(c, err);
    return binary_forward(c, err);
}

/* One row of G[which] (OLD) + gy * DEXPR(a, b) with a and b read at strides SA and SB: the
 * row loop that BIN_GRAD instantiates with constant strides, so that the common patterns
 * (same shape; a row-broadcast factor such as RMSNorm's 1/rms) vectorise. */
#define BIN_GRAD_ROW(SA, SB, OLD, DEXPR)                                                \
    for (int64_t j = 0; j < bc.inner; j++) {                                            \
        float a = pa[j * (SA)], b = pb[j * (SB)];                                       \
        (void)a, (void)b;                                                               \
        gr[j] = (OLD) + pg[j] * (DEXPR);                                                \
    }
#define BIN_GRAD_STRIDES(OLD, DEXPR)                                                    \
    if (sa == 1 && sb == 1) BIN_GRAD_ROW(1, 1, OLD, DEXPR)                              \
    else if (sa == 1 && sb == 0) BIN_GRAD_ROW(1, 0, OLD, DEXPR)                         \
    else if (sa == 0 && sb == 1) BIN_GRAD_ROW(0, 1, OLD, DEXPR)                         \
    else BIN_GRAD_ROW(sa, sb, OLD, DEXPR)

/* G[which] += gy * DEXPR(a, b), summed over the dims input `which` is broadcast along;
 * assign: G[which] is fresh and has the output's shape, so each element is written once as
 * 0 + gy * DEXPR (the rounding of zeroing, then adding) without zeroing it first.
 * An input backward did not keep (NULL: the registry's saves_for_other) reads as zeros. */
#define BIN_GRAD(DEXPR)                                                                 \
    for (int64_t r = 0; r < bc.rows; r++) {                                             \
        int64_t off[2];                                                                 \
        pp_bcast_row(&bc, r, off);                                                      \
        static const float unkept = 0.f;                                                \
        const float *pa = A ? A + off[0] : &unkept, *pb = B ? B + off[1] : &unkept;    \
        const float *pg = GY + r * bc.inner;                                            \
        const int64_t sa = A ? bc.inner_stride[0] : 0, sb = B ? bc.inner_stride[1] : 0; \
        float *gr = G + off[which];                                                     \
        if (bc.inner_stride[which]) {                                                   \
            if (assign) BIN_GRAD_STRIDES(0.f, DEXPR) else BIN_GRAD_STRIDES(gr[j], DEXPR) \
        } else {                                                                        \
            double acc = 0.0;                                                           \
            for (int64_t j = 0; j < bc.inner; j++) {                                    \
                float a = pa[j * sa], b = pb[j * sb];                                   \
                (void)a, (void)b;                                                       \
                acc += pg[j] * (DEXPR);                                                 \
            }                                                                           \
            gr[0] += (float)acc;                                                        \
        }                                                                               \
    }

/* SwiGLU with both gradients fresh (the MLP's gate and up): one pass and one exp for both
 * (pp_el_swiglu_grads), where the rows below would take two of each; A and B have the
 * output's shape (shape_swiglu). Inlined into binary_backward's clones. */
static inline void swiglu_backward(const float *A, const float *B, const float *GY, float *restrict GA,
                                   float *restrict GB, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float ga, gb;
        pp_el_swiglu_grads(A[i], B[i], GY[i], &ga, &gb);
        GA[i] = 0.f + ga;
        GB[i] = 0.f + gb;
    }
}

PP_CPU_CLONES static pp_status binary_backward(const pp_kernel_ctx *c, const pp_tensor *grad_out,
                                               pp_tensor *grad_in, pp_error *err)
{
    pp_bcast bc = {0};
    PP_CHECK(binary_prepare(c, &bc, 1, err));
    const float *A = c->in[0].data, *B = c->in[1].data, *GY = grad_out[0].data;
    if (c->op == PP_OP_SWIGLU && A && B && grad_in[0].data && grad_in[1].data && (c->grad_fresh & 3) == 3) {
        swiglu_backward(A, B, GY, grad_in[0].data, grad_in[1].data, pp_tensor_numel(&grad_out[0]));
        return PP_OK;
    }
    for (int which = 0; which < 2; which++) {
        float *G = grad_in[which].data;
        if (!G) continue;
        const int fresh = c->grad_fresh >> which & 1;
        const int assign = fresh && pp_tensor_numel(&grad_in[which]) == pp_tensor_numel(&grad_out[0]);
        if (fresh && !assign) memset(G, 0, (size_t)pp_tensor_nbytes(&grad_in[which]));
        switch (c->op) {
#define GRAD_CASE(ID, FWD, DA, DB)                                                      \
    case PP_OP_##ID:                                                                    \
        if (which) BIN_GRAD(DB) else BIN_GRAD(DA)                                       \
        break;
        PP_EL_BINARY_LIST(GRAD_CASE)
#undef GRAD_CASE
        default: return pp_args_fail(c, PP_ERR_INTERNAL, err, "no element function (kernels/element_ops.h)");
        }
    }
    return PP_OK;
}

PP_BWD(pp_cpu_binary_backward)
{
    if (!grad_out[0].data) return PP_OK;
    if (c->nin != 2 && (c->op == PP_OP_MAX || c->op == PP_OP_MIN))
        return pp_cpu_minmax_backward(c, grad_out, grad_in, err);
    if (c->op == PP_OP_ADD || c->op == PP_OP_SUB) {   /* a sum over the broadcast dims, no factor to read */
        if (grad_in[0].data)
            PP_CHECK(pp_bcast_reduce_add(&grad_in[0], &grad_out[0], 1.f, c->grad_fresh & 1, c->node, err));
        if (grad_in[1].data)
            PP_CHECK(pp_bcast_reduce_add(&grad_in[1], &grad_out[0], c->op == PP_OP_ADD ? 1.f : -1.f,
                                         c->grad_fresh >> 1 & 1, c->node, err));
        return PP_OK;
    }
    return binary_backward(c, grad_out, grad_in, err);
}

/* ---------------- unary ops ---------------- */

static pp_status unary_prepare(const pp_kernel_ctx *c, pp_el_params *p, pp_error *err)
{
    PP_CHECK(pp_cpu_want_inputs(c, 1, 1, err));
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, 0, err));
    if (pp_tensor_numel(&c->in[0]) != pp_tensor_numel(&c->out[0]))
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (%s): output has %lld elements, input %lld", c->node,
                            c->op_type, (long long)pp_tensor_numel(&c->out[0]), (long long)pp_tensor_numel(&c->in[0]));
    return pp_el_params_read(c->op, c->attrs, c->nattrs, c->node, p, err);
}

/* The activation loops (erf, tanh, GELU: rationals and exp per element) are bound by
 * arithmetic, not memory: PP_CPU_CLONES (cpu_math.h). */
/* gelu_tanh_hoisted: GELU's two forms behind a per-element choice on approximate (the list's
 * entry, element_ops.h) left the tanh form unvectorised, 11.7 ms per 1M elements forward
 * (GPT-2's gelu_new, fused by stage/fuse_gelu.c); each form in its own loop vectorises. */
#define UN_LOOP(EXPR) for (int64_t i = 0; i < n; i++) { float x = X[i]; Y[i] = (EXPR); }

PP_CPU_CLONES static pp_status unary_forward(const pp_kernel_ctx *c, pp_error *err)
{
    pp_el_params p;
    PP_CHECK(unary_prepare(c, &p, err));
    const float *X = c->in[0].data;
    float *Y = c->out[0].data;
    int64_t n = pp_tensor_numel(&c->in[0]);
    if (c->op == PP_OP_GELU && p.a != 0.f) {   /* the tanh form in a loop of its own (gelu_tanh_hoisted) */
        UN_LOOP(pp_el_gelu_tanh(x));
        return PP_OK;
    }
    switch (c->op) {
#define FWD_CASE(ID, READS, FWD, GRAD) case PP_OP_##ID: UN_LOOP(FWD); break;
    PP_EL_UNARY_LIST(FWD_CASE)
#undef FWD_CASE
    default: return pp_args_fail(c, PP_ERR_INTERNAL, err, "no element function (kernels/element_ops.h)");
    }
    return PP_OK;
}

/* GX += GY * DEXPR, where DEXPR reads x (the saved input) and y (the saved output) as
 * READS says; GX = 0 + GY * DEXPR when it is fresh (the same rounding, GX not read). */
#define UN_GRAD_LOOP(READS, DEXPR, OLD)                                                 \
    for (int64_t i = 0; i < n; i++) {                                                   \
        const float x = (READS) & PP_EL_X ? X[i] : 0.f, y = (READS) & PP_EL_Y ? Y[i] : 0.f; \
        (void)x, (void)y;                                                               \
        GX[i] = (OLD) + GY[i] * (DEXPR);                                                \
    }
#define UN_GRAD(READS, DEXPR)                                                           \
    if (fresh) UN_GRAD_LOOP(READS, DEXPR, 0.f) else UN_GRAD_LOOP(READS, DEXPR, GX[i])

PP_CPU_CLONES static pp_status unary_backward(const pp_kernel_ctx *c, const pp_tensor *grad_out, pp_tensor *grad_in,
                                              pp_error *err)
{
    float *GX = grad_in[0].data;
    const float *GY = grad_out[0].data;
    if (!GX || !GY) return PP_OK;
    pp_el_params p;
    PP_CHECK(pp_el_params_read(c->op, c->attrs, c->nattrs, c->node, &p, err));
    const float *X = c->in[0].data, *Y = c->out[0].data;
    int64_t n = pp_tensor_numel(&grad_in[0]);
    const int fresh = c->grad_fresh & 1;
    if (c->op == PP_OP_GELU && p.a != 0.f && X) {   /* gelu_tanh_hoisted */
        UN_GRAD(PP_EL_X, pp_el_gelu_tanh_grad(x));
        return PP_OK;
    }
    switch (c->op) {
#define GRAD_CASE(ID, READS, FWD, GRAD)                                                 \
    case PP_OP_##ID:                                                                    \
        if (((READS) & PP_EL_X && !X) || ((READS) & PP_EL_Y && !Y))                     \
            return pp_args_fail(c, PP_ERR_INTERNAL, err, "backward needs a saved tensor that was not kept"); \
        UN_GRAD(READS, GRAD);                                                           \
        break;
    PP_EL_UNARY_LIST(GRAD_CASE)
#undef GRAD_CASE
    default: return pp_args_fail(c, PP_ERR_INTERNAL, err, "no element function (kernels/element_ops.h)");
    }
    return PP_OK;
}

PP_FWD(pp_cpu_unary_forward)
{
    if (c->nin == 1 && (c->in[0].dtype == PP_DTYPE_I64 || c->in[0].dtype == PP_DTYPE_I32))
        return pp_cpu_unary_int_forward(c, err);
    return unary_forward(c, err);
}
PP_BWD(pp_cpu_unary_backward) { return unary_backward(c, grad_out, grad_in, err); }

/* Identity copies any dtype; its gradient passes through (float only). */
PP_FWD(pp_cpu_identity_forward)
{
    PP_CHECK(pp_cpu_want_inputs(c, 1, 1, err));
    if (c->in[0].dtype != c->out[0].dtype || pp_tensor_nbytes(&c->in[0]) != pp_tensor_nbytes(&c->out[0]))
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (Identity): output dtype/size differs from the input",
                            c->node);
    return pp_device_copy(c->dev, c->out[0].data, c->in[0].data, pp_tensor_nbytes(&c->in[0]), err);
}
PP_BWD(pp_cpu_identity_backward) { return unary_backward(c, grad_out, grad_in, err); }
