/* Constant evaluation of the arithmetic in PyTorch's constant chains: Cast, Range,
 * ConstantOfShape, Where, and the elementwise ops of kernels/element_ops.h (binary with
 * broadcasting, comparisons, unary functions). Integers compute in int64; floats in float32
 * with the kernels' own element functions, stored in the output dtype. */
#include "infer.h"

#include <onnxpipe/element_ops.h>

#include <math.h>
#include <string.h>

static int is_float(pp_dtype dt)
{
    return dt == PP_DTYPE_F32 || dt == PP_DTYPE_F64;
}

static int is_int(pp_dtype dt)
{
    return pp_dtype_size(dt) && !pp_dtype_is_float(dt) && dt != PP_DTYPE_STRING;
}

static int handled(pp_dtype dt)
{
    return is_float(dt) || is_int(dt);
}

pp_status fold_cast(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    (void)err;
    const pp_const_tensor *x = infer_const(c, n->inputs[0]);
    if (!handled(x->dtype) || !handled(out->dtype)) return PP_OK;
    int64_t cnt = pp_shape_numel(&out->shape);
    for (int64_t i = 0; i < cnt; i++) {
        double f = const_f64(x, i);
        int64_t iv = out->dtype == PP_DTYPE_BOOL ? f != 0 : (is_float(out->dtype) ? 0 : const_i64(x, i));
        const_store(out->dtype, (void *)out->data, i, f, iv);
    }
    *done = 1;
    return PP_OK;
}

pp_status fold_range(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    (void)err;
    const pp_const_tensor *s = infer_const(c, n->inputs[0]), *d = infer_const(c, n->inputs[2]);
    if (!handled(out->dtype)) return PP_OK;
    for (int64_t i = 0; i < out->shape.dims[0]; i++)
        const_store(out->dtype, (void *)out->data, i, const_f64(s, 0) + (double)i * const_f64(d, 0),
                    const_i64(s, 0) + i * const_i64(d, 0));
    *done = 1;
    return PP_OK;
}

pp_status fold_const_of_shape(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    (void)c;
    (void)err;
    const pp_attr *v = pp_attr_find(n->attrs, n->nattrs, "value");
    size_t es = pp_dtype_size(out->dtype);
    int64_t cnt = pp_shape_numel(&out->shape);
    if (v)
        for (int64_t i = 0; i < cnt; i++) memcpy((char *)out->data + (size_t)i * es, v->t.data, es);
    *done = 1;  /* without value: float zeros, as allocated */
    return PP_OK;
}

/* Where(cond, X, Y): copies the element of X or Y (any dtype). */
pp_status fold_where(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    (void)err;
    const pp_const_tensor *t[3];
    const pp_shape *sh[3];
    for (int k = 0; k < 3; k++) {
        t[k] = infer_const(c, n->inputs[k]);
        sh[k] = &t[k]->shape;
    }
    size_t es = pp_dtype_size(out->dtype);
    int64_t cnt = pp_shape_numel(&out->shape);
    infer_iter it;
    iter_init(&it, &out->shape, sh, 3);
    for (int64_t i = 0; i < cnt; i++, iter_next(&it)) {
        int k = const_i64(t[0], it.off[0]) ? 1 : 2;
        memcpy((char *)out->data + (size_t)i * es, (const char *)t[k]->data + (size_t)it.off[k] * es, es);
    }
    *done = 1;
    return PP_OK;
}

/* The float function of a unary op, element_ops.h's (as the kernels compute it); 0 when
 * the op has none there. */
static int unary_f(pp_op op, pp_el_params p, float x, float *out)
{
    const float y = 0.f;   /* the gradient factor's y: not evaluated here */
    (void)y;
    switch (op) {
#define FWD_CASE(ID, READS, FWD, GRAD) case PP_OP_##ID: *out = (FWD); return 1;
    PP_EL_UNARY_LIST(FWD_CASE)
#undef FWD_CASE
    default: return 0;
    }
}

/* The same on integers: element_ops.h's integer unary list; 0 when the op has none there. */
static int unary_i(pp_op op, int64_t x, int64_t *out)
{
    switch (op) {
#define INT_CASE(ID, EXPR) case PP_OP_##ID: *out = (EXPR); return 1;
    PP_EL_INT_UNARY_LIST(INT_CASE)
#undef INT_CASE
    default: return 0;
    }
}

/* The unary ops of kernels/element_ops.h on floats (computed in float32, as the kernels
 * do), and those of its integer unary list on integers. */
pp_status fold_unary(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    const pp_const_tensor *x = infer_const(c, n->inputs[0]);
    pp_el_params p;
    PP_CHECK(pp_el_params_read(n->op, n->attrs, n->nattrs, n->name, &p, err));
    int64_t cnt = pp_shape_numel(&out->shape);
    if (is_float(x->dtype)) {
        for (int64_t i = 0; i < cnt; i++) {
            float r;
            if (!unary_f(n->op, p, (float)const_f64(x, i), &r)) return PP_OK;
            const_store(out->dtype, (void *)out->data, i, r, 0);
        }
    } else if (is_int(x->dtype)) {
        for (int64_t i = 0; i < cnt; i++) {
            int64_t r;
            if (!unary_i(n->op, const_i64(x, i), &r)) return PP_OK;
            const_store(out->dtype, (void *)out->data, i, (double)r, r);
        }
    } else {
        return PP_OK;
    }
    *done = 1;
    return PP_OK;
}

/* The float function of a binary op or comparison, element_ops.h's, in float32. */
static double binary_f(pp_op op, float a, float b)
{
    switch (op) {
#define FWD_CASE(ID, FWD, DA, DB) case PP_OP_##ID: return (FWD);
    PP_EL_BINARY_LIST(FWD_CASE)
#undef FWD_CASE
#define CMP_CASE(ID, PRED) case PP_OP_##ID: return (PRED);
    PP_EL_COMPARE_LIST(CMP_CASE)
#undef CMP_CASE
    default: return NAN;
    }
}

/* The same on integers: element_ops.h's integer list (wrapping, as numpy's int64); a constant
 * division or modulo by zero is an error naming the node. */
static pp_status binary_i(const pp_node *n, pp_op op, pp_el_params p, int64_t a, int64_t b, int64_t *r, pp_error *err)
{
    if ((op == PP_OP_DIV || op == PP_OP_MOD) && !b)
        return infer_fail(n, PP_ERR_NUMERIC, err, "integer division or modulo by zero in a constant");
    (void)p;
    switch (op) {
#define INT_CASE(ID, EXPR) case PP_OP_##ID: *r = (EXPR); break;
    PP_EL_INT_LIST(INT_CASE)
#undef INT_CASE
#define CMP_CASE(ID, PRED) case PP_OP_##ID: *r = (PRED); break;
    PP_EL_COMPARE_LIST(CMP_CASE)
#undef CMP_CASE
    default: return infer_fail(n, PP_ERR_INTERNAL, err, "no integer function to fold");
    }
    return PP_OK;
}

pp_status fold_element(const pp_node *n, int fl, int unary, double a, double b, double *r, int *ok, pp_error *err)
{
    pp_el_params p;
    PP_CHECK(pp_el_params_read(n->op, n->attrs, n->nattrs, n->name, &p, err));
    *ok = 1;
    if (unary) {
        float f = 0.f;   /* f and i are read below even when the op does not fold (*ok 0) */
        int64_t i = 0;
        *ok = fl ? unary_f(n->op, p, (float)a, &f) : unary_i(n->op, infer_i64(a), &i);
        *r = fl ? f : (double)i;
        return PP_OK;
    }
    if (fl) {
        *r = binary_f(n->op, (float)a, (float)b);
        return PP_OK;
    }
    int64_t i = 0;
    if ((n->op == PP_OP_DIV || n->op == PP_OP_MOD) && !infer_i64(b)) {
        *ok = 0;   /* no value (a constant's fold names the node: binary_i) */
        return PP_OK;
    }
    PP_CHECK(binary_i(n, n->op, p, infer_i64(a), infer_i64(b), &i, err));
    *r = (double)i;
    return PP_OK;
}

/* The binary ops and comparisons of kernels/element_ops.h with numpy broadcasting. */
pp_status fold_binary(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    const pp_const_tensor *a = infer_const(c, n->inputs[0]), *b = infer_const(c, n->inputs[1]);
    if (!handled(a->dtype) || !handled(b->dtype)) return PP_OK;
    pp_op op = n->op;
    pp_el_params p;
    PP_CHECK(pp_el_params_read(op, n->attrs, n->nattrs, n->name, &p, err));
    int fl = is_float(a->dtype) || is_float(b->dtype);
    const pp_shape *sh[2] = {&a->shape, &b->shape};
    int64_t cnt = pp_shape_numel(&out->shape);
    infer_iter it;
    iter_init(&it, &out->shape, sh, 2);
    for (int64_t i = 0; i < cnt; i++, iter_next(&it)) {
        if (fl) {
            double r = binary_f(op, (float)const_f64(a, it.off[0]), (float)const_f64(b, it.off[1]));
            const_store(out->dtype, (void *)out->data, i, r, is_float(out->dtype) ? 0 : (int64_t)r);
        } else {
            int64_t r = 0;
            PP_CHECK(binary_i(n, op, p, const_i64(a, it.off[0]), const_i64(b, it.off[1]), &r, err));
            const_store(out->dtype, (void *)out->data, i, (double)r, r);
        }
    }
    *done = 1;
    return PP_OK;
}
