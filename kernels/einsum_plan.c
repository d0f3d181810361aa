/* Einsum's maps (see einsum_plan.h): the equation parsed against the inputs' ranks, each
 * label's size checked, and the forward and gradient contractions laid out as strides. */
#include <onnxpipe/einsum_plan.h>

#include "op_args.h"

/* the contraction onto labels out[nout] of X (labels lx) and Y (labels ly; has_y 0: none) */
static void map_make(pp_einsum_map *m, const int *out, int nout, const int64_t *size, const int *lx, int nlx,
                     const int *ly, int nly, int has_y)
{
    int64_t sx[PP_EINSUM_LABELS] = {0}, sy[PP_EINSUM_LABELS] = {0};
    int in_out[PP_EINSUM_LABELS] = {0}, summed[PP_EINSUM_LABELS] = {0};
    int64_t st = 1;
    for (int k = nlx - 1; k >= 0; k--) sx[lx[k]] = st, st *= size[lx[k]];
    st = 1;
    for (int k = nly - 1; has_y && k >= 0; k--) sy[ly[k]] = st, st *= size[ly[k]];
    memset(m, 0, sizeof *m);
    m->nout = nout;
    m->has_y = has_y;
    for (int d = 0; d < nout; d++) {
        in_out[out[d]] = 1;
        m->out_dims[d] = size[out[d]], m->xo[d] = sx[out[d]], m->yo[d] = sy[out[d]];
    }
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < (pass ? (has_y ? nly : 0) : nlx); k++) {
            const int l = pass ? ly[k] : lx[k];
            if (in_out[l] || summed[l]) continue;
            summed[l] = 1;
            m->sum_dims[m->nsum] = size[l], m->xs[m->nsum] = sx[l], m->ys[m->nsum] = sy[l];
            m->nsum++;
        }
}

pp_status pp_args_einsum(const pp_kernel_ctx *c, pp_einsum_map *fwd, pp_einsum_map *grad, pp_error *err)
{
    const char *eq;
    char msg[256];
    PP_CHECK(pp_attr_string(c->attrs, c->nattrs, "equation", NULL, &eq, c->node, err));
    if (!eq) return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "attribute 'equation' is required");
    int ranks[2];
    const int64_t *dims[2];
    for (int i = 0; i < c->nin && i < 2; i++) ranks[i] = c->in[i].rank, dims[i] = c->in[i].dims;
    pp_einsum_eq q;
    int64_t size[PP_EINSUM_LABELS];
    if (pp_einsum_parse(eq, c->nin, ranks, &q, msg, sizeof msg) || pp_einsum_sizes(eq, &q, dims, size, msg, sizeof msg))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "%s", msg);
    int64_t n = 1;
    for (int d = 0; d < q.nout; d++) n *= size[q.out[d]];
    if (c->out[0].rank != q.nout || pp_tensor_numel(&c->out[0]) != n)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "equation '%s': output has %lld elements in %d dims, expected %lld "
                            "in %d", eq, (long long)pp_tensor_numel(&c->out[0]), c->out[0].rank, (long long)n, q.nout);
    const int two = q.nops == 2;
    map_make(fwd, q.out, q.nout, size, q.lab[0], q.nl[0], q.lab[1], q.nl[1], two);
    /* dA: dZ (labels out) with B onto A's labels; dB: dZ with A onto B's */
    for (int i = 0; i < q.nops; i++)
        map_make(&grad[i], q.lab[i], q.nl[i], size, q.out, q.nout, q.lab[1 - i], q.nl[1 - i], two);
    return PP_OK;
}
