/* Slice, Split and Concat on the cpu, all as strided copies of boxes of the larger
 * tensor (nn_util.c); backward adds the gradient of each box back through the same
 * strides. Slice follows ONNX clamping for negative starts/ends/steps. */
#include "cpu_math.h"
#include "nn_util.h"
#include "op_args.h"

#include <stdint.h>
#include <string.h>

/* ---- Slice --------------------------------------------------------------------- */

/* offset: element offset of the first picked input element; src_st: input stride per
 * output dim (step times the input stride). */
static pp_status slice_plan(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y, int64_t *offset,
                            int64_t *src_st, pp_error *err)
{
    int64_t x_st[PP_MAX_RANK], start[PP_MAX_RANK], step[PP_MAX_RANK], count[PP_MAX_RANK];
    PP_CHECK(pp_args_slice(c, x, y, start, step, count, err));
    nn_strides(x->rank, x->dims, x_st);
    *offset = 0;
    for (int k = 0; k < x->rank; k++) {
        if (count[k] > 0) *offset += start[k] * x_st[k];
        src_st[k] = step[k] * x_st[k];
    }
    return PP_OK;
}

pp_status pp_cpu_slice_forward(const pp_kernel_ctx *c, pp_error *err)
{
    const pp_tensor *x = &c->in[0], *y = &c->out[0];
    int64_t off, src_st[PP_MAX_RANK];
    PP_CHECK(slice_plan(c, x, y, &off, src_st, err));
    const size_t es = pp_dtype_size(x->dtype);
    nn_fill_output(y, (const char *)x->data + off * (int64_t)es, src_st, es);
    return PP_OK;
}

pp_status pp_cpu_slice_backward(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, pp_error *err)
{
    if (!gin[0].data || !gout[0].data) return PP_OK;
    const pp_tensor *gy = &gout[0];
    int64_t off, src_st[PP_MAX_RANK], y_st[PP_MAX_RANK];
    PP_CHECK(slice_plan(c, &gin[0], gy, &off, src_st, err));
    nn_strides(gy->rank, gy->dims, y_st);
    nn_add_strided((float *)gin[0].data + off, src_st, gy->data, y_st, gy->dims, gy->rank, 1.0f);
    return PP_OK;
}

/* ---- Split and Concat: pieces along one axis of a whole ------------------------- */

/* The box of a piece of dk along axis of whole, as [outer, dk, inner] with its strides
 * in the whole (whole_st) and in the piece (piece_st). */
static void piece_box(const pp_tensor *whole, int axis, int64_t dk, int64_t *dims3, int64_t *whole_st,
                      int64_t *piece_st)
{
    const int64_t inner = nn_prod(whole->dims, axis + 1, whole->rank);
    dims3[0] = nn_prod(whole->dims, 0, axis);
    dims3[1] = dk;
    dims3[2] = inner;
    whole_st[0] = whole->dims[axis] * inner;
    piece_st[0] = dk * inner;
    whole_st[1] = piece_st[1] = inner;
    whole_st[2] = piece_st[2] = 1;
}

/* Checks that pieces [n] have whole's dims except along axis, where they add up. */
static pp_status check_pieces(const pp_kernel_ctx *c, const pp_tensor *whole, const pp_tensor *pieces, int n,
                              int axis, pp_error *err)
{
    int64_t sum = 0;
    for (int k = 0; k < n; k++) {
        if (pieces[k].rank != whole->rank)
            return pp_args_fail(c, PP_ERR_SHAPE, err, "piece %d has rank %d, expected %d", k, pieces[k].rank, whole->rank);
        for (int d = 0; d < whole->rank; d++)
            if (d != axis && pieces[k].dims[d] != whole->dims[d])
                return pp_args_fail(c, PP_ERR_SHAPE, err, "piece %d has dim %d = %lld, expected %lld", k, d,
                               (long long)pieces[k].dims[d], (long long)whole->dims[d]);
        sum += pieces[k].dims[axis];
    }
    if (sum != whole->dims[axis])
        return pp_args_fail(c, PP_ERR_SHAPE, err, "pieces add up to %lld along axis %d, expected %lld", (long long)sum,
                       axis, (long long)whole->dims[axis]);
    return PP_OK;
}

/* Split sizes come from the output shapes; a given split (input 1 from opset 13, else
 * the attribute) must agree with them. */
static pp_status split_check(const pp_kernel_ctx *c, const pp_tensor *outs, int axis, pp_error *err)
{
    int64_t sp[64];
    int n = -1;
    if (c->opset >= 13) {
        PP_CHECK(pp_args_ints(c, 1, "split", sp, &n, 64, err));
    } else {
        const int64_t *a;
        PP_CHECK(pp_attr_ints(c->attrs, c->nattrs, "split", &a, &n, c->node, err));
        for (int i = 0; i < n && i < 64; i++) sp[i] = a[i];
        if (!a) n = -1;
    }
    if (n < 0) return PP_OK;
    if (n != c->nout)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "split has %d values for %d outputs", n, c->nout);
    for (int k = 0; k < n; k++)
        if (sp[k] != outs[k].dims[axis])
            return pp_args_fail(c, PP_ERR_SHAPE, err, "split[%d] = %lld but output %d has %lld along axis %d", k,
                           (long long)sp[k], k, (long long)outs[k].dims[axis], axis);
    return PP_OK;
}

pp_status pp_cpu_split_forward(const pp_kernel_ctx *c, pp_error *err)
{
    const pp_tensor *x = &c->in[0];
    int axis;
    PP_CHECK(pp_args_axis_attr(c, 0, x->rank, &axis, err));
    PP_CHECK(check_pieces(c, x, c->out, c->nout, axis, err));
    PP_CHECK(split_check(c, c->out, axis, err));
    const size_t es = pp_dtype_size(x->dtype);
    int64_t off = 0, dims3[3], wst[3], pst[3];
    for (int k = 0; k < c->nout; k++) {
        const int64_t dk = c->out[k].dims[axis];
        piece_box(x, axis, dk, dims3, wst, pst);
        if (c->out[k].data)
            nn_copy_strided(c->out[k].data, pst, (const char *)x->data + off * dims3[2] * (int64_t)es, wst, dims3, 3, es);
        off += dk;
    }
    return PP_OK;
}

pp_status pp_cpu_split_backward(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, pp_error *err)
{
    if (!gin[0].data) return PP_OK;
    int axis;
    PP_CHECK(pp_args_axis_attr(c, 0, gin[0].rank, &axis, err));
    PP_CHECK(check_pieces(c, &gin[0], gout, c->nout, axis, err));
    int64_t off = 0, dims3[3], wst[3], pst[3];
    /* fresh: every piece is copied in; zeroed first when a piece gets no gradient */
    int fresh = c->grad_fresh & 1;
    for (int k = 0; k < c->nout && fresh; k++)
        if (!gout[k].data) {
            memset(gin[0].data, 0, pp_tensor_nbytes(&gin[0]));
            fresh = 0;
        }
    for (int k = 0; k < c->nout; k++) {
        const int64_t dk = gout[k].dims[axis];
        piece_box(&gin[0], axis, dk, dims3, wst, pst);
        float *dst = (float *)gin[0].data + off * dims3[2];
        if (gout[k].data && fresh)
            nn_copy_strided(dst, wst, gout[k].data, pst, dims3, 3, sizeof(float));
        else if (gout[k].data)
            nn_add_strided(dst, wst, gout[k].data, pst, dims3, 3, 1.0f);
        off += dk;
    }
    return PP_OK;
}

pp_status pp_cpu_concat_forward(const pp_kernel_ctx *c, pp_error *err)
{
    const pp_tensor *y = &c->out[0];
    int axis;
    PP_CHECK(pp_args_axis_attr(c, INT64_MIN, y->rank, &axis, err));
    PP_CHECK(check_pieces(c, y, c->in, c->nin, axis, err));
    const size_t es = pp_dtype_size(y->dtype);
    int64_t off = 0, dims3[3], wst[3], pst[3];
    for (int k = 0; k < c->nin; k++) {
        const int64_t dk = c->in[k].dims[axis];
        piece_box(y, axis, dk, dims3, wst, pst);
        nn_copy_strided((char *)y->data + off * dims3[2] * (int64_t)es, wst, c->in[k].data, pst, dims3, 3, es);
        off += dk;
    }
    return PP_OK;
}

pp_status pp_cpu_concat_backward(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin, pp_error *err)
{
    const pp_tensor *gy = &gout[0];
    if (!gy->data) return PP_OK;
    int axis;
    PP_CHECK(pp_args_axis_attr(c, INT64_MIN, gy->rank, &axis, err));
    PP_CHECK(check_pieces(c, gy, gin, c->nin, axis, err));
    int64_t off = 0, dims3[3], wst[3], pst[3];
    for (int k = 0; k < c->nin; k++) {
        const int64_t dk = gin[k].dims[axis];
        piece_box(gy, axis, dk, dims3, wst, pst);
        if (gin[k].data) nn_add_strided(gin[k].data, pst, (const float *)gy->data + off * dims3[2], wst, dims3, 3, 1.0f);
        off += dk;
    }
    return PP_OK;
}
