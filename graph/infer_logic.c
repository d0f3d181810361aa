/* Shape rules of the comparisons, logic and more elementwise ops (include/onnxpipe/backend/op_list.h's
 * section of that name): And / Or / Xor on bool, Not / IsNaN / IsInf to bool, variadic Max / Min,
 * Mod's fmod attribute, PRelu's unidirectional broadcast of the slope. */
#include "infer.h"

#include <onnxpipe/element_ops.h>

/* Numpy broadcast of every input, all of one dtype, into output 0 of that dtype. */
pp_status shape_variadic(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, 0, err));
    pp_shape out = *infer_shape_of(c, n, 0);
    const pp_dtype dt = infer_dtype_of(c, n, 0);
    for (int k = 1; k < n->ninputs; k++) {
        PP_CHECK(infer_need(c, n, k, 0, err));
        PP_CHECK(infer_broadcast(n, &out, infer_shape_of(c, n, k), &out, err));
        const pp_dtype dk = infer_dtype_of(c, n, k);
        if (dt && dk && dk != dt)
            return infer_fail(n, PP_ERR_SHAPE, err, "input %d has dtype %s, input 0 %s", k, pp_dtype_name(dk),
                              pp_dtype_name(dt));
    }
    c->os[0] = out;
    c->odt[0] = dt;
    return PP_OK;
}

/* And, Or, Xor: bool inputs (ONNX's type constraint), broadcast, to bool. */
pp_status shape_logic(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(shape_compare(c, n, err));
    for (int k = 0; k < 2; k++) {
        const pp_dtype dt = infer_dtype_of(c, n, k);
        if (dt && dt != PP_DTYPE_BOOL)
            return infer_fail(n, PP_ERR_SHAPE, err, "input %d has dtype %s, expected bool", k, pp_dtype_name(dt));
    }
    return PP_OK;
}

/* Not, IsNaN, IsInf: input 0's shape, bool; the input of the dtype element_ops.h's row names. */
pp_status shape_predicate(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, 0, err));
    infer_copy(c, n, 0, 0);
    const pp_dtype dt = c->odt[0];
    c->odt[0] = PP_DTYPE_BOOL;
    switch (n->op) {
#define PRED_CASE(ID, DT, EXPR)                                                                                       \
    case PP_OP_##ID:                                                                                                  \
        if (dt && dt != (DT))                                                                                         \
            return infer_fail(n, PP_ERR_UNSUPPORTED, err, "input has dtype %s, expected %s", pp_dtype_name(dt),       \
                              pp_dtype_name(DT));                                                                     \
        return PP_OK;
        PP_EL_PREDICATE_LIST(PRED_CASE)
#undef PRED_CASE
    default: return infer_fail(n, PP_ERR_INTERNAL, err, "no predicate in kernels/element_ops.h");
    }
}

/* Mod: the binary rule; on floats ONNX asks for fmod=1 (C fmod), the only float form. */
pp_status shape_mod(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(shape_binary(c, n, err));
    int64_t fmod;
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "fmod", 0, &fmod, n->name, err));
    if (fmod != 0 && fmod != 1)
        return infer_fail(n, PP_ERR_INVALID_ARG, err, "fmod=%lld, expected 0 or 1", (long long)fmod);
    if (pp_dtype_is_float(c->odt[0]) && fmod != 1)
        return infer_fail(n, PP_ERR_INVALID_ARG, err, "a %s Mod needs fmod=1 (ONNX: fmod=0 is for integers)",
                          pp_dtype_name(c->odt[0]));
    return PP_OK;
}

/* PRelu(X, slope): the slope broadcasts to X (unidirectional), so the output is X's shape. */
pp_status shape_prelu(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(shape_binary(c, n, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    int same = c->os[0].rank == x->rank;
    for (int d = 0; same && d < x->rank; d++) same = c->os[0].dims[d] == x->dims[d] || c->os[0].dims[d] < 0;
    if (!same)
        return infer_fail(n, PP_ERR_SHAPE, err, "the slope does not broadcast to X's shape (rank %d): PRelu "
                          "broadcasts the slope only", x->rank);
    c->os[0] = *x;
    return PP_OK;
}

/* SwiGLU(A, B): A and B of one shape (ONNX broadcasts neither); alpha 1, the SiLU gate that
 * HF's decoders use and stage/fuse_swiglu.c makes (element_ops.h's row has no other). */
pp_status shape_swiglu(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(shape_binary(c, n, err));
    const pp_shape *a = infer_shape_of(c, n, 0), *b = infer_shape_of(c, n, 1);
    int same = a->rank == b->rank;
    for (int d = 0; same && d < a->rank; d++) same = a->dims[d] == b->dims[d];
    if (!same) return infer_fail(n, PP_ERR_SHAPE, err, "A and B must have the same shape (SwiGLU does not broadcast)");
    float alpha;
    PP_CHECK(pp_attr_float(n->attrs, n->nattrs, "alpha", 1.f, &alpha, n->name, err));
    if (alpha != 1.f)
        return infer_fail(n, PP_ERR_UNSUPPORTED, err, "alpha=%g is not supported (only 1, the SiLU gate); write "
                          "Swish(A, alpha) then Mul(., B) for another", (double)alpha);
    return PP_OK;
}
