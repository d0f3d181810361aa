/* Helpers behind the example models (graph/example_gpt.c, graph/example_mlp.c):
 * the seeded weight RNG (splitmix64, Box-Muller), named nodes, parameters, constants,
 * batch-leading inputs and outputs, and the create/build/finalize wrapper. */
#include "example_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/graph_ir.h>

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* [0, 1) with 53 random bits. */
static double uniform01(uint64_t *state)
{
    return (double)(splitmix64(state) >> 11) * 0x1p-53;
}

static double normal01(uint64_t *state)
{
    double u1 = uniform01(state), u2 = uniform01(state);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
}

const char *ex_name(ex_builder *b, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    const char *s = pp_graph_strdup(b->g, buf);
    if (!s) b->oom = 1;
    return s;
}

/* Names are checked here, once, instead of after every ex_name. */
static pp_status check_names(ex_builder *b)
{
    return b->oom ? pp_error_set(b->err, PP_ERR_NOMEM, "out of memory naming values") : PP_OK;
}

static int count(const char *const *list)
{
    int n = 0;
    while (list[n]) n++;
    return n;
}

pp_status ex_node(ex_builder *b, const char *op, const char *name,
                  const char *const *ins, const char *const *outs)
{
    PP_CHECK(check_names(b));
    return pp_graph_add_node(b->g, op, "", name, ins, count(ins), outs, count(outs), &b->node, b->err);
}

typedef enum { FILL_NORMAL, FILL_UNIFORM, FILL_CONST } fill_kind;

/* A float initializer [dims] filled by kind; a = std, bound or value. */
static pp_status add_param(ex_builder *b, const char *name, int rank, const int64_t *dims,
                           fill_kind kind, double a)
{
    PP_CHECK(check_names(b));
    pp_shape shape = pp_shape_make(rank, dims);
    int64_t n = pp_shape_numel(&shape);
    float *w = pp_malloc((size_t)n * sizeof *w);
    if (!w) return pp_error_set(b->err, PP_ERR_NOMEM, "out of memory for parameter '%s' (%lld floats)",
                                name, (long long)n);
    for (int64_t i = 0; i < n; i++) {
        if (kind == FILL_NORMAL) w[i] = (float)(a * normal01(&b->rng));
        else if (kind == FILL_UNIFORM) w[i] = (float)(a * (2.0 * uniform01(&b->rng) - 1.0));
        else w[i] = (float)a;
    }
    pp_status st = pp_graph_add_initializer(b->g, name, PP_DTYPE_F32, &shape, w,
                                            (size_t)n * sizeof *w, 1, b->err);
    free(w);
    return st;
}

pp_status ex_param_normal(ex_builder *b, const char *name, int rank, const int64_t *dims, double std)
{
    return add_param(b, name, rank, dims, FILL_NORMAL, std);
}

pp_status ex_param_uniform(ex_builder *b, const char *name, int rank, const int64_t *dims, double bound)
{
    return add_param(b, name, rank, dims, FILL_UNIFORM, bound);
}

pp_status ex_param_fill(ex_builder *b, const char *name, int rank, const int64_t *dims, float value)
{
    return add_param(b, name, rank, dims, FILL_CONST, value);
}

pp_status ex_const_i64(ex_builder *b, const char *name, int n, const int64_t *values)
{
    PP_CHECK(check_names(b));
    int64_t dim = n;
    pp_shape shape = pp_shape_make(1, &dim);
    return pp_graph_add_initializer(b->g, name, PP_DTYPE_I64, &shape, values,
                                    (size_t)n * sizeof *values, 1, b->err);
}

pp_status ex_const_f32(ex_builder *b, const char *name, int rank, const int64_t *dims, const float *data)
{
    pp_const_tensor t = {.dtype = PP_DTYPE_F32, .shape = pp_shape_make(rank, dims), .data = data};
    t.nbytes = (size_t)pp_shape_numel(&t.shape) * sizeof(float);
    PP_CHECK(ex_node(b, "Constant", name, EX_LIST(NULL), EX_LIST(name)));
    return pp_graph_set_attr_tensor(b->g, b->node, "value", &t, b->err);
}

static pp_shape batch_shape(int64_t batch, int rank, const int64_t *dims)
{
    pp_shape s = {.rank = rank + 1};
    s.dims[0] = batch > 0 ? batch : -1;
    s.syms[0] = batch > 0 ? NULL : "batch";
    for (int i = 0; i < rank; i++) s.dims[i + 1] = dims[i];
    return s;
}

pp_status ex_input(ex_builder *b, const char *name, pp_dtype dt, int64_t batch, int rank, const int64_t *dims)
{
    PP_CHECK(check_names(b));
    pp_shape s = batch_shape(batch, rank, dims);
    return pp_graph_add_input(b->g, name, dt, &s, b->err);
}

pp_status ex_output(ex_builder *b, const char *name, pp_dtype dt, int64_t batch, int rank, const int64_t *dims)
{
    PP_CHECK(check_names(b));
    pp_shape s = batch_shape(batch, rank, dims);
    return pp_graph_add_output(b->g, name, dt, &s, b->err);
}

pp_status ex_loss(ex_builder *b, const char *logits, const char *labels)
{
    PP_CHECK(ex_node(b, "SoftmaxCrossEntropyLoss", "loss", EX_LIST(logits, labels), EX_LIST("loss")));
    PP_CHECK(pp_graph_set_attr_string(b->g, b->node, "reduction", "mean", b->err));
    return pp_graph_add_output(b->g, "loss", PP_DTYPE_F32, &(pp_shape){.rank = 0}, b->err);
}

pp_status ex_run(const char *model, int64_t opset, uint64_t seed,
                 pp_status (*build)(ex_builder *b, const void *cfg), const void *cfg,
                 pp_graph **out, pp_error *err)
{
    *out = NULL;
    if (opset == 0) opset = 17;
    if (opset < 13 || opset > 21)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "example %s: opset %lld out of range (13..21)",
                            model, (long long)opset);
    ex_builder b = {.err = err, .rng = seed};
    PP_CHECK(pp_graph_create(model, opset, &b.g, err));
    b.g->producer_name = "onnxpipe";
    const pp_graph_options opt = {.no_fold = 1, .allow_unknown_dims = 1};
    pp_status st;
    PP_CHECK_GOTO(build(&b, cfg), st, fail);
    PP_CHECK_GOTO(pp_graph_finalize(b.g, &opt, err), st, fail);
    *out = b.g;
    return PP_OK;
fail:
    pp_graph_destroy(b.g);
    return pp_error_prefix(err, "building example %s: ", model);
}
