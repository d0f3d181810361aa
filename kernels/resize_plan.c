/* Resize's per-axis tables (see resize_plan.h): the ONNX coordinate transformation and
 * nearest rounding modes, read once for the cpu and cuda kernels. */
#include "resize_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { CT_HALF_PIXEL, CT_HALF_PIXEL_SYM, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC };
enum { NR_ROUND_PREFER_FLOOR, NR_ROUND_PREFER_CEIL, NR_FLOOR, NR_CEIL };

static int pick(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

/* the input coordinate of output index o */
static double coord(int ct, int64_t o, int64_t in, int64_t out, double scale)
{
    switch (ct) {
    case CT_HALF_PIXEL: return ((double)o + 0.5) / scale - 0.5;
    case CT_HALF_PIXEL_SYM: {
        const double adj = (double)out / (scale * (double)in), center = (double)in / 2;
        return center * (1 - adj) + ((double)o + 0.5) / scale - 0.5;
    }
    case CT_PYTORCH_HALF_PIXEL: return out > 1 ? ((double)o + 0.5) / scale - 0.5 : 0.0;
    case CT_ALIGN_CORNERS: return out == 1 ? 0.0 : (double)o * (double)(in - 1) / (double)(out - 1);
    default: return (double)o / scale;
    }
}

static int64_t clamp(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

static int64_t nearest(int nr, double x)
{
    const double f = floor(x);
    switch (nr) {
    case NR_ROUND_PREFER_FLOOR: return (int64_t)(x - f == 0.5 ? f : round(x));
    case NR_ROUND_PREFER_CEIL: return (int64_t)(x - f == 0.5 ? f + 1 : round(x));
    case NR_FLOOR: return (int64_t)f;
    default: return (int64_t)ceil(x);
    }
}

/* the scales (floats, input 2) where given: from the tensor or its host copy */
static pp_status read_scales(const pp_kernel_ctx *c, int rank, double *scale, int *given, pp_error *err)
{
    *given = 0;
    if (c->nin < 3 || !c->in[2].data || pp_tensor_numel(&c->in[2]) == 0) return PP_OK;
    const pp_tensor *t = &c->in[2];
    const void *h;
    PP_CHECK(pp_args_host_input(c, 2, "scales", &h, err));
    if (t->dtype != PP_DTYPE_F32 || pp_tensor_numel(t) != rank)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "scales must be %d float32 values", rank);
    for (int d = 0; d < rank; d++) scale[d] = ((const float *)h)[d];
    *given = 1;
    return PP_OK;
}

pp_status pp_resize_plan_make(const pp_kernel_ctx *c, pp_resize_plan *p, pp_error *err)
{
    static const char *const modes[] = {"nearest", "linear"};
    static const char *const cts[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                      "asymmetric"};
    static const char *const nrs[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    const char *mode_s, *ct_s, *nr_s, *policy;
    int64_t antialias;
    const int64_t *axes;
    int naxes;
    memset(p, 0, sizeof *p);
    PP_CHECK(pp_attr_string(c->attrs, c->nattrs, "mode", "nearest", &mode_s, c->node, err));
    PP_CHECK(pp_attr_string(c->attrs, c->nattrs, "coordinate_transformation_mode", "half_pixel", &ct_s, c->node, err));
    PP_CHECK(pp_attr_string(c->attrs, c->nattrs, "nearest_mode", "round_prefer_floor", &nr_s, c->node, err));
    PP_CHECK(pp_attr_string(c->attrs, c->nattrs, "keep_aspect_ratio_policy", "stretch", &policy, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "antialias", 0, &antialias, c->node, err));
    PP_CHECK(pp_attr_ints(c->attrs, c->nattrs, "axes", &axes, &naxes, c->node, err));
    const int mode = pick(mode_s, modes, 2), ct = pick(ct_s, cts, 5), nr = pick(nr_s, nrs, 4);
    if (mode < 0)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "mode '%s' is not supported (nearest, linear)", mode_s);
    if (ct < 0)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "coordinate_transformation_mode '%s' is not supported "
                            "(half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric)", ct_s);
    if (nr < 0) return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "nearest_mode '%s' is not supported", nr_s);
    if (antialias || axes || strcmp(policy, "stretch"))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "antialias, axes and keep_aspect_ratio_policy other than "
                            "stretch are not supported");
    const pp_tensor *x = &c->in[0], *y = &c->out[0];
    if (x->rank != y->rank || x->rank < 1)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "Y has rank %d, X rank %d", y->rank, x->rank);
    double scale[PP_MAX_RANK];
    int given;
    PP_CHECK(read_scales(c, x->rank, scale, &given, err));
    p->rank = x->rank;
    int64_t ntaps = 0, nrng = 0;
    for (int d = 0; d < x->rank; d++) {
        p->in_dims[d] = x->dims[d], p->out_dims[d] = y->dims[d];
        if (!given) scale[d] = (double)y->dims[d] / (double)x->dims[d];
        if (!(scale[d] > 0) || !x->dims[d])
            return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "scale %g of axis %d is not positive", scale[d], d);
        p->tap_off[d] = ntaps, p->rng_off[d] = nrng;
        ntaps += y->dims[d], nrng += x->dims[d];
    }
    p->bytes = (size_t)ntaps * sizeof(pp_resize_tap) + 2 * (size_t)nrng * sizeof(int64_t);
    p->mem = malloc(p->bytes + 1);
    if (!p->mem) return pp_args_fail(c, PP_ERR_NOMEM, err, "no memory for the resize tables");
    p->taps = p->mem;
    p->rng = (int64_t *)(p->taps + ntaps);
    for (int d = 0; d < x->rank; d++) {
        const int64_t in = x->dims[d], out = y->dims[d];
        pp_resize_tap *t = p->taps + p->tap_off[d];
        int64_t *r = p->rng + 2 * p->rng_off[d];
        for (int64_t i = 0; i < in; i++) r[2 * i] = out, r[2 * i + 1] = 0;
        for (int64_t o = 0; o < out; o++) {
            const double xo = coord(ct, o, in, out, scale[d]);
            if (mode == 0) {
                t[o] = (pp_resize_tap){clamp(nearest(nr, xo), in), clamp(nearest(nr, xo), in), 1.f, 0.f};
            } else {
                const double xc = xo < 0 ? 0 : xo > (double)(in - 1) ? (double)(in - 1) : xo;
                const int64_t i0 = (int64_t)floor(xc), i1 = i0 + 1 < in ? i0 + 1 : in - 1;
                const float w1 = (float)(xc - (double)i0);
                t[o] = (pp_resize_tap){i0, i1, 1.f - w1, w1};
                p->two[d] |= w1 != 0.f;
            }
            for (int k = 0; k < 2; k++) {
                const int64_t i = k ? t[o].i1 : t[o].i0;
                if (o < r[2 * i]) r[2 * i] = o;
                if (o + 1 > r[2 * i + 1]) r[2 * i + 1] = o + 1;
            }
        }
    }
    return PP_OK;
}
