/* Shape rules of the row normalisations (RMS, instance, group, the residual forms), RotaryEmbedding, Attention
 * Resize and Einsum: the outputs take X's (or Q's) shape, Resize's from its sizes or scales,
 * Einsum's from its equation; what
 * the kernels cannot run (a KV cache, the extra outputs of Attention) is refused here, at
 * load, naming the node. */
#include "infer.h"

#include <onnxpipe/einsum_plan.h>   /* the equation parser the kernels use */

#include <math.h>

/* RMSNormalization, InstanceNormalization, GroupNormalization: Y is X; the parameters'
 * sizes are checked by the kernels (kernels/op_args_nn.c) */
pp_status shape_norm_rows(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, n->op == PP_OP_RMS_NORMALIZATION ? 1 : 2, err));
    PP_CHECK(infer_need(c, n, 1, 0, err));
    if (n->op != PP_OP_RMS_NORMALIZATION) PP_CHECK(infer_need(c, n, 2, 0, err));
    infer_copy(c, n, 0, 0);
    return PP_OK;
}

/* SkipLayerNormalization / SkipSimplifiedLayerNormalization: output and input_skip_bias_sum
 * (output 3) are the input; the mean and inv_std_var outputs are refused (the kernels check
 * skip and the parameters: kernels/op_args_nn.c) */
pp_status shape_skip_norm(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, 1, err));
    PP_CHECK(infer_need(c, n, 1, 1, err));
    PP_CHECK(infer_need(c, n, 2, 1, err));
    for (int k = 1; k < 3 && k < n->noutputs; k++)
        if (n->outputs[k] >= 0)
            return infer_fail(n, PP_ERR_UNSUPPORTED, err, "output %d (%s) is not supported: only output and "
                              "input_skip_bias_sum", k, k == 1 ? "mean" : "inv_std_var");
    infer_copy(c, n, 0, 0);
    if (n->noutputs > 3) infer_copy(c, n, 3, 0);
    return PP_OK;
}

pp_status shape_rope(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, 3, err));
    PP_CHECK(infer_need(c, n, 1, 2, err));
    PP_CHECK(infer_need(c, n, 2, 2, err));
    infer_copy(c, n, 0, 0);
    return PP_OK;
}

/* Y [B, Hq, Sq, Dv] from Q [B, Hq, Sq, Dk] and V [B, Hkv, Skv, Dv]; the 3-D form
 * [B, Sq, Hq * Dv] from V [B, Skv, Hkv * Dv] and the head counts */
pp_status shape_attention(infer_ctx *c, const pp_node *n, pp_error *err)
{
    for (int k = 0; k < 3; k++) PP_CHECK(infer_need(c, n, k, 3, err));
    if (infer_has_input(n, 4) || infer_has_input(n, 5))
        return infer_fail(n, PP_ERR_UNSUPPORTED, err, "past_key / past_value (a KV cache) are not supported: export "
                          "the model without a cache for training");
    for (int k = 1; k < n->noutputs; k++)
        if (n->outputs[k] >= 0)
            return infer_fail(n, PP_ERR_UNSUPPORTED, err, "output %d (present_key, present_value, qk_matmul_output) "
                              "is not supported: only Y", k);
    const pp_shape *q = infer_shape_of(c, n, 0), *v = infer_shape_of(c, n, 2);
    if (q->rank != v->rank || q->rank > 4)
        return infer_fail(n, PP_ERR_SHAPE, err, "Q and V have ranks %d and %d, expected both 4 or both 3", q->rank,
                          v->rank);
    infer_copy(c, n, 0, 0);
    if (q->rank == 4) {
        c->os[0].dims[3] = v->dims[3];
        c->os[0].syms[3] = v->syms[3];
        return PP_OK;
    }
    int64_t qh, kvh;
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "q_num_heads", 0, &qh, n->name, err));
    PP_CHECK(pp_attr_int(n->attrs, n->nattrs, "kv_num_heads", 0, &kvh, n->name, err));
    if (qh <= 0 || kvh <= 0)
        return infer_fail(n, PP_ERR_INVALID_ARG, err, "3-D Q, K, V need the attributes q_num_heads and kv_num_heads");
    c->os[0].dims[2] = v->dims[2] < 0 ? -1 : qh * (v->dims[2] / kvh);
    c->os[0].syms[2] = NULL;
    return PP_OK;
}

/* Resize: Y's dims are sizes (input 3) when given, else floor(X dims * scales) (input 2);
 * both must be constants (unknown dims with allow_unknown_dims) */
pp_status shape_resize(infer_ctx *c, const pp_node *n, pp_error *err)
{
    PP_CHECK(infer_need(c, n, 0, 1, err));
    const pp_shape *x = infer_shape_of(c, n, 0);
    infer_copy(c, n, 0, 0);
    int64_t sizes[PP_MAX_RANK];
    int nsizes = -1, known = 1;
    if (infer_has_input(n, 3))
        PP_CHECK(infer_const_ints(c, n, 3, "sizes", sizes, &nsizes, PP_MAX_RANK, &known, err));
    if (!known) {
        c->os[0] = infer_unknown(x->rank);
        return PP_OK;
    }
    if (nsizes > 0) {
        if (nsizes != x->rank)
            return infer_fail(n, PP_ERR_SHAPE, err, "sizes has %d values for an input of rank %d", nsizes, x->rank);
        for (int d = 0; d < x->rank; d++) c->os[0].dims[d] = sizes[d], c->os[0].syms[d] = NULL;
        return PP_OK;
    }
    const pp_const_tensor *s = infer_has_input(n, 2) ? infer_const(c, n->inputs[2]) : NULL;
    if (!s) {
        if (c->opt->allow_unknown_dims) {
            c->os[0] = infer_unknown(x->rank);
            return PP_OK;
        }
        return infer_fail(n, PP_ERR_UNSUPPORTED, err, "needs constant scales or sizes");
    }
    if (pp_shape_numel(&s->shape) != x->rank)
        return infer_fail(n, PP_ERR_SHAPE, err, "scales has %lld values for an input of rank %d",
                          (long long)pp_shape_numel(&s->shape), x->rank);
    for (int d = 0; d < x->rank; d++) {
        const float sc = (float)const_f64(s, d);
        c->os[0].dims[d] = x->dims[d] < 0 ? -1 : (int64_t)floorf((float)x->dims[d] * sc);
        if (sc != 1.f) c->os[0].syms[d] = NULL;
    }
    return PP_OK;
}

/* Einsum: the output labels' sizes, from the equation and the inputs' dims */
pp_status shape_einsum(infer_ctx *c, const pp_node *n, pp_error *err)
{
    const char *eq;
    char msg[256];
    int ranks[2] = {0, 0};
    const int64_t *dims[2] = {NULL, NULL};
    PP_CHECK(pp_attr_string(n->attrs, n->nattrs, "equation", NULL, &eq, n->name, err));
    if (!eq) return infer_fail(n, PP_ERR_INVALID_ARG, err, "attribute 'equation' is required");
    for (int i = 0; i < n->ninputs && i < 2; i++) {
        PP_CHECK(infer_need(c, n, i, 0, err));
        ranks[i] = infer_shape_of(c, n, i)->rank;
        dims[i] = infer_shape_of(c, n, i)->dims;
    }
    pp_einsum_eq q;
    int64_t size[PP_EINSUM_LABELS];
    if (pp_einsum_parse(eq, n->ninputs, ranks, &q, msg, sizeof msg) ||
        pp_einsum_sizes(eq, &q, dims, size, msg, sizeof msg))
        return infer_fail(n, PP_ERR_UNSUPPORTED, err, "%s", msg);
    infer_copy(c, n, 0, 0);
    c->os[0].rank = q.nout;
    for (int d = 0; d < q.nout; d++) {
        c->os[0].dims[d] = size[q.out[d]];
        c->os[0].syms[d] = NULL;
    }
    return PP_OK;
}
