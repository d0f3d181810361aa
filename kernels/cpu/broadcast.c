/* numpy multidirectional broadcasting: plan (align right, zero strides on broadcast dims,
 * merge contiguous dims) and the reduce-to-shape used by the backward of broadcast ops. */
#include "broadcast.h"
#include "cpu_math.h"   /* PP_CPU_CLONES */

#include <stdio.h>
#include <string.h>

static const char *shape_str(const pp_tensor *t, char *buf, size_t len)
{
    pp_shape s = pp_shape_make(t->rank, t->dims);
    return pp_shape_format(&s, buf, len);
}

pp_status pp_bcast_init(pp_bcast *b, const pp_tensor *out, const pp_tensor *const *in, int nin,
                        const char *node, pp_error *err)
{
    int64_t dims[PP_MAX_RANK], str[PP_BCAST_MAX_IN][PP_MAX_RANK];
    int R = out->rank;
    b->nin = nin;
    for (int i = 0; i < nin; i++) {
        const pp_tensor *t = in[i];
        char sa[96], so[96];
        if (t->rank > R)
            return pp_error_set(err, PP_ERR_SHAPE, "node '%s': input %s has rank %d, above the output rank %d",
                                node, shape_str(t, sa, sizeof sa), t->rank, R);
        int64_t s = 1;
        for (int d = R - 1; d >= 0; d--) {
            int td = d - (R - t->rank);
            int64_t n = td >= 0 ? t->dims[td] : 1;
            if (n != out->dims[d] && n != 1)
                return pp_error_set(err, PP_ERR_SHAPE,
                                    "node '%s': input %d of shape %s does not broadcast to the output shape %s",
                                    node, i, shape_str(t, sa, sizeof sa), shape_str(out, so, sizeof so));
            str[i][d] = n == 1 ? 0 : s;
            s *= n;
        }
    }
    for (int d = 0; d < R; d++) dims[d] = out->dims[d];
    /* drop size-1 dims, then merge d into the previous kept dim p when every input's
     * stride is contiguous across them */
    int r = 0;
    for (int d = 0; d < R; d++) {
        if (dims[d] == 1) continue;
        int merge = r > 0;
        for (int i = 0; i < nin && merge; i++) merge = b->strides[i][r - 1] == str[i][d] * dims[d];
        if (merge) {
            b->dims[r - 1] *= dims[d];
            for (int i = 0; i < nin; i++) b->strides[i][r - 1] = str[i][d];
        } else {
            b->dims[r] = dims[d];
            for (int i = 0; i < nin; i++) b->strides[i][r] = str[i][d];
            r++;
        }
    }
    if (r == 0) {
        b->dims[0] = pp_tensor_numel(out) == 0 ? 0 : 1;
        for (int i = 0; i < nin; i++) b->strides[i][0] = 0;
        r = 1;
    }
    b->rank = r;
    b->inner = b->dims[r - 1];
    b->rows = 1;
    for (int d = 0; d < r - 1; d++) b->rows *= b->dims[d];
    if (pp_tensor_numel(out) == 0) b->rows = 0;
    for (int i = 0; i < nin; i++) b->inner_stride[i] = b->strides[i][r - 1];
    return PP_OK;
}

/* Memory-bound row sums (a fused bias's gradient: 37 MB of dY per GPT step) run faster
 * with the AVX2 loads of the clone; the order of the additions is the source's. */
PP_CPU_CLONES pp_status pp_bcast_reduce_add(pp_tensor *dst, const pp_tensor *src, float scale, int assign,
                                            const char *node, pp_error *err)
{
    pp_bcast b = {0};
    const pp_tensor *ins[1] = {dst};
    PP_CHECK(pp_bcast_init(&b, src, ins, 1, node, err));
    float *y = dst->data;
    const float *x = src->data;
    const int64_t n = pp_tensor_numel(src);
    if (assign && pp_tensor_numel(dst) == n) {   /* no broadcast: one pass, 0 + s x */
        for (int64_t i = 0; i < n; i++) y[i] = scale * x[i];
        return PP_OK;
    }
    if (assign) memset(y, 0, (size_t)pp_tensor_numel(dst) * sizeof *y);
    for (int64_t r = 0; r < b.rows; r++) {
        int64_t off;
        pp_bcast_row(&b, r, &off);
        const float *xr = x + r * b.inner;
        if (b.inner_stride[0]) {
            for (int64_t j = 0; j < b.inner; j++) y[off + j] += scale * xr[j];
        } else {
            double s = 0.0;
            for (int64_t j = 0; j < b.inner; j++) s += xr[j];
            y[off] += scale * (float)s;
        }
    }
    return PP_OK;
}
