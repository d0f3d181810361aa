/* The example MLP classifier (include/onnxpipe/example.h): Gemm + Relu per hidden
 * layer, a Gemm to the class logits, and optionally the mean cross-entropy loss. */
#include "example_util.h"

#include <math.h>

#include <onnxpipe/example.h>

#define MAX_DIM (1ll << 24)

pp_mlp_config pp_mlp_config_default(void)
{
    return (pp_mlp_config){.in = 32, .hidden = {64, 64}, .nhidden = 2, .classes = 10, .opset = 17};
}

/* y [B, out] = x [B, in] · p.weight [out, in]ᵀ + p.bias [out], like torch.nn.Linear;
 * weight ~ U(-sqrt(6 / in), sqrt(6 / in)), bias 0. */
static pp_status add_gemm(ex_builder *b, const char *p, const char *x, int64_t in, int64_t out,
                          const char *y)
{
    const char *w = ex_name(b, "%s.weight", p), *bias = ex_name(b, "%s.bias", p);
    PP_CHECK(ex_param_uniform(b, w, 2, (const int64_t[]){out, in}, sqrt(6.0 / (double)in)));
    PP_CHECK(ex_param_fill(b, bias, 1, &out, 0.0f));
    PP_CHECK(ex_node(b, "Gemm", p, EX_LIST(x, w, bias), EX_LIST(y)));
    return pp_graph_set_attr_int(b->g, b->node, "transB", 1, b->err);
}

static pp_status build_mlp(ex_builder *b, const void *cfg)
{
    const pp_mlp_config *c = cfg;
    PP_CHECK(ex_input(b, "x", PP_DTYPE_F32, c->batch, 1, &c->in));
    if (c->with_loss) PP_CHECK(ex_input(b, "labels", PP_DTYPE_I64, c->batch, 0, NULL));
    const char *x = "x";
    int64_t width = c->in;
    for (int l = 0; l < c->nhidden; l++) {
        const char *fc = ex_name(b, "fc.%d", l), *fc_out = ex_name(b, "fc.%d.out", l);
        const char *relu = ex_name(b, "relu.%d", l);
        PP_CHECK(add_gemm(b, fc, x, width, c->hidden[l], fc_out));          /* [B, hidden[l]] */
        PP_CHECK(ex_node(b, "Relu", relu, EX_LIST(fc_out), EX_LIST(relu)));
        x = relu;
        width = c->hidden[l];
    }
    PP_CHECK(add_gemm(b, "head", x, width, c->classes, "logits"));          /* [B, classes] */
    PP_CHECK(ex_output(b, "logits", PP_DTYPE_F32, c->batch, 1, &c->classes));
    return c->with_loss ? ex_loss(b, "logits", "labels") : PP_OK;
}

static pp_status check_config(const pp_mlp_config *c, pp_error *err)
{
    if (c->in < 1 || c->in > MAX_DIM)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "in = %lld out of range (1..%lld)", (long long)c->in, MAX_DIM);
    if (c->classes < 1 || c->classes > MAX_DIM)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "classes = %lld out of range (1..%lld)",
                            (long long)c->classes, MAX_DIM);
    if (c->nhidden < 0 || c->nhidden > PP_MLP_MAX_HIDDEN)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%d hidden layers out of range (0..%d)",
                            c->nhidden, PP_MLP_MAX_HIDDEN);
    for (int l = 0; l < c->nhidden; l++)
        if (c->hidden[l] < 1 || c->hidden[l] > MAX_DIM)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "hidden layer %d width %lld out of range (1..%lld)",
                                l, (long long)c->hidden[l], MAX_DIM);
    if (c->batch < 0 || c->batch > MAX_DIM)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "batch = %lld out of range (0 for symbolic, or 1..%lld)",
                            (long long)c->batch, MAX_DIM);
    return PP_OK;
}

pp_status pp_example_mlp(const pp_mlp_config *cfg, pp_graph **out, pp_error *err)
{
    *out = NULL;
    if (check_config(cfg, err) != PP_OK) return pp_error_prefix(err, "example mlp: ");
    return ex_run("mlp", cfg->opset, cfg->seed, build_mlp, cfg, out, err);
}
