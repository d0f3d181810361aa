/* Shape rules of the convolutional ops: Conv, MaxPool / AveragePool (1-D to 3-D,
 * pads, auto_pad, strides, dilations, ceil_mode), GlobalAveragePool, BatchNormalization. */
#include "infer.h"

#include <string.h>

typedef struct window {
    int nsp;                        /* spatial dims */
    int64_t kernel[PP_MAX_RANK];
    int64_t stride[PP_MAX_RANK];
    int64_t dil[PP_MAX_RANK];
    int64_t pad[2 * PP_MAX_RANK];   /* begins, then ends */
    const char *auto_pad;
    int64_t ceil_mode;
} window;

/* Reads an ints attribute of nsp entries (or fills dflt when absent). */
static pp_status spatial_ints(const pp_node *n, const char *name, int count, int64_t dflt, int64_t *out,
                              pp_error *err)
{
    const int64_t *v;
    int nv;
    PP_CHECK(pp_attr_ints(n->attrs, n->nattrs, name, &v, &nv, n->name, err));
    if (v && nv != count)
        return infer_fail(n, PP_ERR_SHAPE, err, "attribute %s has %d entries, expected %d", name, nv, count);
    for (int i = 0; i < count; i++) out[i] = v ? v[i] : dflt;
    return PP_OK;
}

static pp_status read_window(const pp_node *n, int nsp, const int64_t *kernel_dflt, window *w, pp_error *err)
{
    memset(w, 0, sizeof *w);
    w->nsp = nsp;
    const int64_t *k;
    int nk;
    PP_CHECK(pp_attr_ints(n->attrs, n->nattrs, "kernel_shape", &k, &nk, n->name, err));
    if (!k && !kernel_dflt) return infer_fail(n, PP_ERR_PARSE, err, "attribute kernel_shape is required");
    if (k && nk != nsp)
        return infer_fail(n, PP_ERR_SHAPE, err, "kernel_shape has %d entries for %d spatial dims", nk, nsp);
    for (int i = 0; i < nsp; i++) w->kernel[i] = k ? k[i] : kernel_dflt[i];
    PP_CHECK(spatial_ints(n, "strides", nsp, 1, w->stride, err));
    PP_CHECK(spatial_ints(n, "dilations", nsp, 1, w->dil, err));
    PP_CHECK(spatial_ints(n, "pads", 2 * nsp, 0, w->pad, err));
    PP_CHECK(pp_attr_string(n->attrs, n->nattrs, "auto_pad", "NOTSET", &w->auto_pad, n->name, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "ceil_mode", 0, &w->ceil_mode, n->name, err));
    for (int i = 0; i < nsp; i++)
        if (w->stride[i] < 1 || w->dil[i] < 1 || w->kernel[i] < 1)
            return infer_fail(n, PP_ERR_SHAPE, err, "kernel, strides and dilations must be positive");
    return PP_OK;
}

static int64_t div_ceil(int64_t a, int64_t b)
{
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

/* Output size of one spatial dim of input size in (ONNX Conv / Pool rules). */
static pp_status window_out(const pp_node *n, const window *w, int i, int64_t in, int64_t *out, pp_error *err)
{
    if (in < 0) {
        *out = -1;
        return PP_OK;
    }
    int64_t s = w->stride[i], ek = w->dil[i] * (w->kernel[i] - 1) + 1;
    int64_t o;
    if (!strcmp(w->auto_pad, "SAME_UPPER") || !strcmp(w->auto_pad, "SAME_LOWER")) {
        o = div_ceil(in, s);
    } else if (!strcmp(w->auto_pad, "VALID")) {
        o = div_ceil(in - ek + 1, s);
    } else if (!strcmp(w->auto_pad, "NOTSET")) {
        int64_t padded = in + w->pad[i] + w->pad[w->nsp + i];
        int64_t span = padded - ek;
        o = (w->ceil_mode ? div_ceil(span, s) : (span >= 0 ? span / s : -1)) + 1;
        /* ceil_mode: the last window must start inside the input or the begin pad */
        if (w->ceil_mode && o > 0 && (o - 1) * s >= in + w->pad[i]) o--;
    } else {
        return infer_fail(n, PP_ERR_UNSUPPORTED, err, "auto_pad '%s' (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)",
                          w->auto_pad);
    }
    if (o < 1)
        return infer_fail(n, PP_ERR_SHAPE, err, "spatial dim %d of size %lld is smaller than the kernel window %lld",
                          i, (long long)in, (long long)ek);
    *out = o;
    return PP_OK;
}

/* Conv(X (N, C, D...), W (M, C/group, k...), B? (M)) -> (N, M, out...) */
pp_status shape_conv(infer_ctx *c, const pp_node *n, pp_error *err)
{
    int64_t group;
    PP_CHECK(infer_need(c, n, 0, 3, err));
    PP_CHECK(infer_need(c, n, 1, 3, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "group", 1, &group, n->name, err));
    const pp_shape *x = infer_shape_of(c, n, 0), *wt = infer_shape_of(c, n, 1);
    char sx[256], sw[256];
    if (wt->rank != x->rank || x->rank > 5)
        return infer_fail(n, PP_ERR_SHAPE, err, "input %s and weight %s must both have rank 3, 4 or 5",
                          pp_shape_format(x, sx, sizeof sx), pp_shape_format(wt, sw, sizeof sw));
    if (group < 1 || (wt->dims[0] >= 0 && wt->dims[0] % group) ||
        (x->dims[1] >= 0 && wt->dims[1] >= 0 && x->dims[1] != wt->dims[1] * group))
        return infer_fail(n, PP_ERR_SHAPE, err, "channels do not fit: input %s, weight %s, group %lld",
                          pp_shape_format(x, sx, sizeof sx), pp_shape_format(wt, sw, sizeof sw), (long long)group);
    if (infer_has_input(n, 2)) {
        PP_CHECK(infer_need(c, n, 2, 1, err));
        const pp_shape *b = infer_shape_of(c, n, 2);
        if (b->rank != 1 || (b->dims[0] >= 0 && wt->dims[0] >= 0 && b->dims[0] != wt->dims[0]))
            return infer_fail(n, PP_ERR_SHAPE, err, "bias %s does not fit weight %s",
                              pp_shape_format(b, sx, sizeof sx), pp_shape_format(wt, sw, sizeof sw));
    }
    int nsp = x->rank - 2;
    window w;
    PP_CHECK(read_window(n, nsp, wt->dims + 2, &w, err));
    for (int i = 0; i < nsp; i++)
        if (wt->dims[2 + i] >= 0 && w.kernel[i] != wt->dims[2 + i])
            return infer_fail(n, PP_ERR_SHAPE, err, "kernel_shape[%d] = %lld but the weight has %s", i,
                              (long long)w.kernel[i], pp_shape_format(wt, sw, sizeof sw));
    pp_shape r = *x;
    r.dims[1] = wt->dims[0];
    r.syms[1] = wt->syms[0];
    for (int i = 0; i < nsp; i++) {
        PP_CHECK(window_out(n, &w, i, x->dims[2 + i], &r.dims[2 + i], err));
        r.syms[2 + i] = NULL;
    }
    c->os[0] = r;
    c->odt[0] = infer_dtype_of(c, n, 0);
    return PP_OK;
}

/* MaxPool / AveragePool (X (N, C, D...)) -> Y (N, C, out...), Indices? (int64, MaxPool) */
pp_status shape_pool(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, 3, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    window w;
    PP_CHECK(read_window(n, x->rank - 2, NULL, &w, err));
    pp_shape r = *x;
    for (int i = 0; i < w.nsp; i++) {
        PP_CHECK(window_out(n, &w, i, x->dims[2 + i], &r.dims[2 + i], err));
        r.syms[2 + i] = NULL;
    }
    c->os[0] = r;
    c->odt[0] = infer_dtype_of(c, n, 0);
    if (n->noutputs > 1) {
        c->os[1] = r;
        c->odt[1] = PP_DTYPE_I64;
    }
    return PP_OK;
}

/* GlobalAveragePool (N, C, D...) -> (N, C, 1...) */
pp_status shape_global_pool(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, 3, err));
    infer_copy(c, n, 0, 0);
    for (int i = 2; i < c->os[0].rank; i++) {
        c->os[0].dims[i] = 1;
        c->os[0].syms[i] = NULL;
    }
    return PP_OK;
}

/* BatchNormalization(X (N, C, ...), scale, B, mean, var (C)) -> Y, running mean / var?
 * (C) in training mode; opset 13's saved mean / var are (C) too. */
pp_status shape_batchnorm(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, 2, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    for (int k = 1; k < 5; k++) {
        PP_CHECK(infer_need(c, n, k, 1, err));
        const pp_shape *p = infer_shape_of(c, n, k);
        if (p->rank != 1 || (p->dims[0] >= 0 && x->dims[1] >= 0 && p->dims[0] != x->dims[1])) {
            char s1[256], s2[256];
            return infer_fail(n, PP_ERR_SHAPE, err, "input %d of shape %s does not fit %s channels", k,
                              pp_shape_format(p, s1, sizeof s1), pp_shape_format(x, s2, sizeof s2));
        }
    }
    infer_copy(c, n, 0, 0);
    for (int k = 1; k < n->noutputs; k++) {
        c->os[k] = *infer_shape_of(c, n, 3);
        c->odt[k] = infer_dtype_of(c, n, 3);
    }
    return PP_OK;
}
