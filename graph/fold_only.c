/* The fold-only ops (KINDS FOLD in include/onnxpipe/backend/op_list.h): no kernel, only a shape rule
 * and a folder, for ops exporters write in shape and mask chains. Size reads only its
 * input's shape (torch.numel); NonZero's output length is its input's count of non-zero
 * elements, so it has a shape only where that input is a constant (torch.nonzero). Where
 * load cannot fold them, graph/infer.c's fold_only_refusal says which input is not constant. */
#include "infer.h"

#include <string.h>

/* Size(data) -> int64 scalar: the element count of data. */
pp_status shape_size(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, 0, err));
    c->os[0] = pp_shape_make(0, NULL);
    c->odt[0] = PP_DTYPE_I64;
    return PP_OK;
}

pp_status fold_size(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    (void)err;
    *(int64_t *)out->data = pp_shape_numel(infer_shape_of(c, n, 0));
    *done = 1;
    return PP_OK;
}

/* 1 when element i of t is not zero (NaN is not zero; -0.0 is). */
static int nonzero_at(const pp_const_tensor *t, int64_t i)
{
    const size_t es = pp_dtype_size(t->dtype);
    const unsigned char *p = (const unsigned char *)t->data + (size_t)i * es;
    uint16_t h;
    switch (t->dtype) {
    case PP_DTYPE_F32: case PP_DTYPE_F64: return const_f64(t, i) != 0;
    case PP_DTYPE_F16: case PP_DTYPE_BF16:
        memcpy(&h, p, sizeof h);
        return (h & 0x7fff) != 0;
    default:
        for (size_t b = 0; b < es; b++)
            if (p[b]) return 1;
        return 0;
    }
}

/* NonZero(X) -> int64 [rank(X), count]: the indices of X's non-zero elements, in row-major order. */
pp_status shape_nonzero(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, 0, err));
    const pp_const_tensor *x = infer_const(c, n->inputs[0]);
    int64_t dims[2] = {infer_shape_of(c, n, 0)->rank, -1};
    if (x) {
        const int64_t cnt = pp_shape_numel(&x->shape);
        dims[1] = 0;
        for (int64_t i = 0; i < cnt; i++) dims[1] += nonzero_at(x, i);
    }
    c->os[0] = pp_shape_make(2, dims);   /* without a constant input: [rank, unknown] (allow_unknown_dims) */
    c->odt[0] = PP_DTYPE_I64;
    return PP_OK;
}

pp_status fold_nonzero(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    (void)err;
    const pp_const_tensor *x = infer_const(c, n->inputs[0]);
    const int rank = x->shape.rank;
    const int64_t cnt = pp_shape_numel(&x->shape), nnz = out->shape.dims[1];
    int64_t idx[PP_MAX_RANK] = {0}, j = 0;
    int64_t *y = (int64_t *)out->data;   /* the folder's own buffer (graph/infer.c: evaluate) */
    for (int64_t i = 0; i < cnt; i++) {
        if (nonzero_at(x, i)) {
            for (int d = 0; d < rank; d++) y[d * nnz + j] = idx[d];
            j++;
        }
        for (int d = rank - 1; d >= 0 && ++idx[d] == x->shape.dims[d]; d--) idx[d] = 0;
    }
    *done = 1;
    return PP_OK;
}
