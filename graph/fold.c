/* Constant evaluation of the data-movement ops that PyTorch's shape chains use
 * (Shape, Gather, Unsqueeze, Concat, Reshape, Slice, Expand, Transpose, Split).
 * Output shapes come from the shape rules; these only fill the data. */
#include "infer.h"

#include <string.h>

void iter_init(infer_iter *it, const pp_shape *out, const pp_shape *const *ops, int nops)
{
    memset(it, 0, sizeof *it);
    it->rank = out->rank;
    it->nops = nops;
    for (int d = 0; d < out->rank; d++) it->dims[d] = out->dims[d];
    for (int k = 0; k < nops; k++) {
        int64_t stride = 1;
        for (int d = out->rank - 1; d >= 0; d--) {
            int di = d - (out->rank - ops[k]->rank);
            if (di < 0) break;
            it->strides[k][d] = ops[k]->dims[di] == 1 ? 0 : stride;
            stride *= ops[k]->dims[di];
        }
    }
}

void iter_next(infer_iter *it)
{
    for (int d = it->rank - 1; d >= 0; d--) {
        for (int k = 0; k < it->nops; k++) it->off[k] += it->strides[k][d];
        if (++it->idx[d] < it->dims[d]) return;
        for (int k = 0; k < it->nops; k++) it->off[k] -= it->strides[k][d] * it->dims[d];
        it->idx[d] = 0;
    }
}

/* out[i] = src[it.off[0]] for every element of out, esize bytes each. */
static void gather_elems(pp_const_tensor *out, const void *src, infer_iter *it)
{
    size_t es = pp_dtype_size(out->dtype);
    int64_t n = pp_shape_numel(&out->shape);
    char *dst = (char *)out->data;
    for (int64_t i = 0; i < n; i++, iter_next(it)) memcpy(dst + (size_t)i * es, (const char *)src + (size_t)it->off[0] * es, es);
}

static void contiguous_strides(const pp_shape *s, int64_t *strides)
{
    int64_t st = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        strides[d] = st;
        st *= s->dims[d];
    }
}

/* Reshape, Flatten, Squeeze, Unsqueeze: same bytes, new shape. */
pp_status fold_copy(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    (void)err;
    const pp_const_tensor *x = infer_const(c, n->inputs[0]);
    if (out->nbytes) memcpy((void *)out->data, x->data, out->nbytes);
    *done = 1;
    return PP_OK;
}

pp_status fold_transpose(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    const pp_const_tensor *x = infer_const(c, n->inputs[0]);
    const int64_t *perm;
    int np;
    int64_t in_st[PP_MAX_RANK];
    PP_CHECK(pp_attr_ints(n->attrs, n->nattrs, "perm", &perm, &np, n->name, err));
    contiguous_strides(&x->shape, in_st);
    infer_iter it;
    iter_init(&it, &out->shape, NULL, 0);
    it.nops = 1;
    for (int d = 0; d < out->shape.rank; d++) it.strides[0][d] = in_st[perm ? perm[d] : out->shape.rank - 1 - d];
    gather_elems(out, x->data, &it);
    *done = 1;
    return PP_OK;
}

pp_status fold_slice(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    const pp_const_tensor *x = infer_const(c, n->inputs[0]);
    int64_t start[PP_MAX_RANK], step[PP_MAX_RANK], in_st[PP_MAX_RANK];
    pp_shape os;
    PP_CHECK(infer_slice_plan(c, n, &x->shape, start, step, &os, err));
    contiguous_strides(&x->shape, in_st);
    infer_iter it;
    iter_init(&it, &out->shape, NULL, 0);
    it.nops = 1;
    for (int d = 0; d < x->shape.rank; d++) {
        /* a step past the dim takes one element: its stride is never walked (and in_st x
         * step may not fit); otherwise |step| < dim and the product stays within the input */
        it.strides[0][d] = out->shape.dims[d] > 1 ? in_st[d] * step[d] : 0;
        it.off[0] += start[d] * in_st[d];
    }
    if (pp_shape_numel(&out->shape) > 0) gather_elems(out, x->data, &it);
    *done = 1;
    return PP_OK;
}

pp_status fold_expand(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    (void)err;
    const pp_const_tensor *x = infer_const(c, n->inputs[0]);
    const pp_shape *ops[1] = {&x->shape};
    infer_iter it;
    iter_init(&it, &out->shape, ops, 1);
    gather_elems(out, x->data, &it);
    *done = 1;
    return PP_OK;
}

/* Block sizes around axis: outer = prod(dims[:axis]), inner = prod(dims[axis+1:]). */
static void blocks(const pp_shape *s, int axis, int64_t *outer, int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= s->dims[d];
    for (int d = axis + 1; d < s->rank; d++) *inner *= s->dims[d];
}

static int norm_axis(const pp_node *n, int rank, int64_t dflt)
{
    const pp_attr *a = pp_attr_find(n->attrs, n->nattrs, "axis");
    int64_t ax = a ? a->i : dflt;
    return (int)(ax < 0 ? ax + rank : ax);
}

pp_status fold_split(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    (void)err;
    const pp_const_tensor *x = infer_const(c, n->inputs[0]);
    int ax = norm_axis(n, x->shape.rank, 0);
    int64_t outer, inner, off = 0;
    size_t es = pp_dtype_size(x->dtype);
    blocks(&x->shape, ax, &outer, &inner);
    for (int k = 0; k < n->noutputs; k++) {
        int64_t len = out[k].shape.dims[ax];
        for (int64_t o = 0; o < outer && out[k].data; o++)
            memcpy((char *)out[k].data + (size_t)(o * len * inner) * es,
                   (const char *)x->data + (size_t)((o * x->shape.dims[ax] + off) * inner) * es,
                   (size_t)(len * inner) * es);
        off += len;
    }
    *done = 1;
    return PP_OK;
}

pp_status fold_concat(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    (void)err;
    int ax = norm_axis(n, out->shape.rank, 0);
    int64_t outer, inner, off = 0, total = out->shape.dims[ax];
    size_t es = pp_dtype_size(out->dtype);
    blocks(&out->shape, ax, &outer, &inner);
    for (int k = 0; k < n->ninputs; k++) {
        const pp_const_tensor *x = infer_const(c, n->inputs[k]);
        int64_t len = x->shape.dims[ax];
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)out->data + (size_t)((o * total + off) * inner) * es,
                   (const char *)x->data + (size_t)(o * len * inner) * es, (size_t)(len * inner) * es);
        off += len;
    }
    *done = 1;
    return PP_OK;
}

/* out[o, j, i] = data[o, idx[j], i] with data viewed as (outer, dim, inner). */
pp_status fold_gather(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    const pp_const_tensor *x = infer_const(c, n->inputs[0]), *idx = infer_const(c, n->inputs[1]);
    int ax = norm_axis(n, x->shape.rank, 0);
    int64_t outer, inner, dim = x->shape.dims[ax], nidx = pp_shape_numel(&idx->shape);
    size_t es = pp_dtype_size(x->dtype);
    blocks(&x->shape, ax, &outer, &inner);
    for (int64_t j = 0; j < nidx; j++) {
        int64_t i = const_i64(idx, j);
        if (i < -dim || i >= dim)
            return infer_fail(n, PP_ERR_SHAPE, err, "index %lld out of range for axis of size %lld", (long long)i,
                              (long long)dim);
        if (i < 0) i += dim;
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)out->data + (size_t)((o * nidx + j) * inner) * es,
                   (const char *)x->data + (size_t)((o * dim + i) * inner) * es, (size_t)inner * es);
    }
    *done = 1;
    return PP_OK;
}

pp_status fold_shape(infer_ctx *c, const pp_node *n, pp_const_tensor *out, int *done, pp_error *err)
{
    (void)err;
    const pp_shape *x = infer_shape_of(c, n, 0);
    int64_t s = infer_shape_start(n, x->rank);
    for (int64_t i = 0; i < out->shape.dims[0]; i++) ((int64_t *)out->data)[i] = x->dims[s + i];
    *done = 1;
    return PP_OK;
}
