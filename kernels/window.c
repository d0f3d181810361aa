/* Sliding-window geometry for Conv and pooling: reads kernel_shape/strides/dilations/pads/
 * auto_pad and checks the output spatial sizes against the ONNX formula. */
#include "window.h"

#include <string.h>
#include <onnxpipe/backend/kernels_backend.h>

/* INTS attribute into v[0..nsp-1] (default dflt), requiring exactly `want` values. */
static pp_status read_ints(const pp_kernel_ctx *c, const char *name, int want, int64_t dflt, int64_t *v,
                           pp_error *err)
{
    const int64_t *p;
    int n;
    PP_CHECK(pp_attr_ints(c->attrs, c->nattrs, name, &p, &n, c->node, err));
    for (int i = 0; i < want; i++) v[i] = dflt;
    if (!p) return PP_OK;
    if (n != want)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "node '%s' (%s): attribute %s has %d values, expected %d", c->node,
                            c->op_type, name, n, want);
    for (int i = 0; i < want; i++) v[i] = p[i];
    return PP_OK;
}

pp_status pp_window_make(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y,
                             const int64_t *kernel, int ceil_mode, pp_window *w, pp_error *err)
{
    int nsp = x->rank - 2;
    if (nsp < 1 || nsp > 2 || y->rank != x->rank)
        return pp_error_set(err, PP_ERR_UNSUPPORTED,
                            "node '%s' (%s): input rank %d (output rank %d) is not supported; expected 3 (1-D) or 4 (2-D)",
                            c->node, c->op_type, x->rank, y->rank);
    int64_t s[2], d[2], p[4];
    PP_CHECK(read_ints(c, "strides", nsp, 1, s, err));
    PP_CHECK(read_ints(c, "dilations", nsp, 1, d, err));
    PP_CHECK(read_ints(c, "pads", 2 * nsp, 0, p, err));
    const char *auto_pad;
    PP_CHECK(pp_attr_string(c->attrs, c->nattrs, "auto_pad", "NOTSET", &auto_pad, c->node, err));
    memset(w, 0, sizeof *w);
    w->nsp = nsp;
    w->N = x->dims[0];
    w->C = x->dims[1];
    int o = 2 - nsp; /* 1-D fills slot 1; slot 0 is a unit H */
    w->in[0] = w->out[0] = w->k[0] = w->s[0] = w->d[0] = 1;
    for (int i = 0; i < nsp; i++) {
        int j = i + o;
        w->in[j] = x->dims[2 + i];
        w->out[j] = y->dims[2 + i];
        w->k[j] = kernel[i];
        w->s[j] = s[i];
        w->d[j] = d[i];
        if (w->k[j] < 1 || w->s[j] < 1 || w->d[j] < 1)
            return pp_error_set(err, PP_ERR_INVALID_ARG,
                                "node '%s' (%s): kernel %lld, stride %lld, dilation %lld on spatial dim %d must be >= 1",
                                c->node, c->op_type, (long long)w->k[j], (long long)w->s[j], (long long)w->d[j], i);
        int64_t span = (w->k[j] - 1) * w->d[j] + 1;
        if (!strcmp(auto_pad, "NOTSET")) {
            w->pb[j] = p[i];
            w->pe[j] = p[i + nsp];
        } else if (!strcmp(auto_pad, "VALID")) {
            w->pb[j] = w->pe[j] = 0;
        } else if (!strcmp(auto_pad, "SAME_UPPER") || !strcmp(auto_pad, "SAME_LOWER")) {
            int64_t want = (w->in[j] + w->s[j] - 1) / w->s[j];
            int64_t total = (want - 1) * w->s[j] + span - w->in[j];
            if (total < 0) total = 0;
            w->pb[j] = !strcmp(auto_pad, "SAME_UPPER") ? total / 2 : total - total / 2;
            w->pe[j] = total - w->pb[j];
        } else {
            return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' (%s): auto_pad '%s' is not supported", c->node,
                                c->op_type, auto_pad);
        }
        int64_t room = w->in[j] + w->pb[j] + w->pe[j] - span;
        int64_t expect = room < 0 ? 0 : (ceil_mode ? (room + w->s[j] - 1) / w->s[j] : room / w->s[j]) + 1;
        /* ceil_mode: the last window must start inside the input or the begin pad */
        if (ceil_mode && expect > 0 && (expect - 1) * w->s[j] >= w->in[j] + w->pb[j]) expect--;
        if (w->out[j] != expect)
            return pp_error_set(err, PP_ERR_SHAPE,
                                "node '%s' (%s): output spatial dim %d is %lld, but the window gives %lld", c->node,
                                c->op_type, i, (long long)w->out[j], (long long)expect);
    }
    return PP_OK;
}
