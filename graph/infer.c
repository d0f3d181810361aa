/* The inference pass of pp_graph_finalize: binds symbolic input dims, turns Constant
 * nodes into initializers, removes Identity nodes, infers every output's dtype and
 * shape in one walk over the sorted nodes (each op's shape rule and folder come from
 * the registry, graph/ops.c), and folds constant subgraphs as it goes. */
#include "infer.h"

#include <stdlib.h>
#include <string.h>

#define FOLD_MAX_ELEMS (1 << 20)           /* general folded outputs stay small */
#define FOLD_MAX_MASK_BYTES (64u << 20)    /* mask-like chains (causal masks) may be larger */

/* ---- dim binding ----------------------------------------------------------- */

static const pp_dim_binding *find_binding(const pp_graph_options *opt, const char *name)
{
    for (int i = 0; name && i < opt->ndims; i++)
        if (!strcmp(opt->dims[i].name, name)) return &opt->dims[i];
    return NULL;
}

static pp_status bind_dims(pp_graph *g, const pp_graph_options *opt, pp_error *err)
{
    for (int i = 0; i < opt->ndims; i++)
        if (opt->dims[i].value < 0)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "--dim %s=%lld: a dim must be >= 0", opt->dims[i].name,
                                (long long)opt->dims[i].value);
    for (int i = 0; i < g->ninputs; i++) {
        pp_value *v = &g->values[g->inputs[i]];
        pp_shape *s = &v->shape;
        if (s->rank < 0) {
            if (opt->allow_unknown_dims) continue;
            return pp_error_set(err, PP_ERR_SHAPE, "graph input '%s' has no shape in the model; export it with "
                                "a static shape", v->name);
        }
        for (int d = 0; d < s->rank; d++) {
            if (s->dims[d] >= 0) continue;
            const pp_dim_binding *b = find_binding(opt, s->syms[d]);
            if (b) s->dims[d] = b->value;
            else if (d == 0 && opt->batch > 0) s->dims[d] = opt->batch;
            if (s->dims[d] >= 0 || opt->allow_unknown_dims) continue;
            if (s->syms[d])
                return pp_error_set(err, PP_ERR_SHAPE, "graph input '%s': dim %d ('%s') is not bound; bind it "
                                    "with %s--dim %s=N", v->name, d, s->syms[d], d == 0 ? "--batch N or " : "",
                                    s->syms[d]);
            return pp_error_set(err, PP_ERR_SHAPE, "graph input '%s': dim %d is unknown and has no name; %s",
                                v->name, d, d == 0 ? "bind it with --batch N" : "export the model with a static size");
        }
        PP_CHECK(pp_shape_check_size(s, v->dtype, err, "graph input '%s'", v->name));
    }
    for (int b = 0; b < opt->ndims; b++) {
        int used = 0;
        for (int i = 0; i < g->ninputs && !used; i++) {
            const pp_shape *s = &g->values[g->inputs[i]].shape;
            for (int d = 0; d < s->rank && !used; d++) used = s->syms[d] && !strcmp(s->syms[d], opt->dims[b].name);
        }
        if (!used) pp_log(PP_LOG_WARN, "--dim %s: no graph input has a dim named '%s'", opt->dims[b].name,
                          opt->dims[b].name);
    }
    return PP_OK;
}

/* ---- Constant nodes and Identity ------------------------------------------- */

static pp_status constant_node(pp_graph *g, pp_node *n, pp_error *err)
{
    if (n->nattrs != 1 || n->noutputs != 1 || n->outputs[0] < 0)
        return infer_fail(n, PP_ERR_PARSE, err, "a Constant needs exactly one attribute and one output");
    const pp_attr *a = &n->attrs[0];
    pp_const_tensor t;
    memset(&t, 0, sizeof t);
    int64_t len = a->n;
    if (!strcmp(a->name, "value") && a->type == PP_ATTR_TENSOR) {
        t = a->t;
    } else if (!strcmp(a->name, "value_float") && a->type == PP_ATTR_FLOAT) {
        t = (pp_const_tensor){PP_DTYPE_F32, pp_shape_make(0, NULL), &a->f, sizeof a->f};
    } else if (!strcmp(a->name, "value_int") && a->type == PP_ATTR_INT) {
        t = (pp_const_tensor){PP_DTYPE_I64, pp_shape_make(0, NULL), &a->i, sizeof a->i};
    } else if (!strcmp(a->name, "value_floats") && a->type == PP_ATTR_FLOATS) {
        t = (pp_const_tensor){PP_DTYPE_F32, pp_shape_make(1, &len), a->floats, (size_t)len * sizeof(float)};
    } else if (!strcmp(a->name, "value_ints") && a->type == PP_ATTR_INTS) {
        t = (pp_const_tensor){PP_DTYPE_I64, pp_shape_make(1, &len), a->ints, (size_t)len * sizeof(int64_t)};
    } else {
        return infer_fail(n, PP_ERR_UNSUPPORTED, err, "attribute '%s' is not supported (value, value_float(s), "
                          "value_int(s) are)", a->name);
    }
    t.shape = pp_shape_make(t.shape.rank, t.shape.dims);  /* no symbolic names on constants */
    PP_CHECK(graph_make_const(g, n->outputs[0], &t, err));
    n->op_type = NULL;
    return PP_OK;
}

/* Identity(x) -> y: consumers of y read x instead. Kept when y is a graph output. */
static int bypass_identity(pp_graph *g, pp_node *n)
{
    if (n->ninputs < 1 || n->inputs[0] < 0 || n->noutputs != 1 || n->outputs[0] < 0) return 0;
    int in = n->inputs[0], out = n->outputs[0];
    if (g->values[out].is_output) return 0;
    const pp_value *v = &g->values[out];
    for (int c = 0; c < v->nconsumers; c++) {
        pp_node *m = &g->nodes[v->consumers[c]];
        for (int k = 0; k < m->ninputs; k++)
            if (m->inputs[k] == out) m->inputs[k] = in;
    }
    n->op_type = NULL;
    return 1;
}

/* ---- folding --------------------------------------------------------------- */

/* Marks values through which a gradient reaches a graph output (reverse walk). */
static pp_status compute_grad_live(infer_ctx *c, pp_error *err)
{
    pp_graph *g = c->g;
    c->grad_live = calloc((size_t)g->nvalues + 1, 1);
    if (!c->grad_live) return PP_NOMEM(err);
    for (int k = 0; k < g->noutputs; k++) c->grad_live[g->outputs[k]] = 1;
    for (int i = g->nnodes - 1; i >= 0; i--) {
        const pp_node *n = &g->nodes[i];
        if (!n->op_type) continue;
        int live = 0;
        for (int k = 0; k < n->noutputs && !live; k++) live = n->outputs[k] >= 0 && c->grad_live[n->outputs[k]];
        for (int k = 0; live && k < n->ninputs; k++)
            if (n->inputs[k] >= 0 && pp_op_input_differentiable(n->op, k)) c->grad_live[n->inputs[k]] = 1;
    }
    return PP_OK;
}

/* 1 when every input is constant and none may be trained (graph_may_train: the exporter's
 * scalars and fills are constants), and the outputs are small enough. Shape needs only a known input shape. */
static pp_status foldable(infer_ctx *c, const pp_node *n, const pp_op_info *op, int *ok, pp_error *err)
{
    pp_graph *g = c->g;
    *ok = 0;
    if (!op->fold) return PP_OK;
    if (n->op == PP_OP_SHAPE) {
        *ok = pp_shape_numel(infer_shape_of(c, n, 0)) >= 0;
        return PP_OK;
    }
    for (int k = 0; k < n->ninputs; k++) {
        int v = n->inputs[k];
        if (v < 0) continue;
        if (!infer_const(c, v)) return PP_OK;
        if (graph_may_train(g, v, &c->opt->params, c->params_meta)) {
            if (!c->grad_live) PP_CHECK(compute_grad_live(c, err));
            if (c->grad_live[v]) return PP_OK;
        }
    }
    for (int k = 0; k < n->noutputs; k++) {
        int64_t cnt = pp_shape_numel(&c->os[k]);
        if (cnt < 0) return PP_OK;
        if (op->flags & PP_OPF_FOLD_LARGE ? (uint64_t)cnt * pp_dtype_size(c->odt[k]) > FOLD_MAX_MASK_BYTES : cnt > FOLD_MAX_ELEMS)
            return PP_OK;
    }
    *ok = 1;
    return PP_OK;
}

/* Keeps a computed constant beside the graph (no_fold): the node stays. */
static pp_status add_side_const(infer_ctx *c, int value, const pp_const_tensor *t, pp_error *err)
{
    if (!c->side) {
        c->side = malloc(((size_t)c->g->nvalues + 1) * sizeof *c->side);
        if (!c->side) return PP_NOMEM(err);
        memset(c->side, 0xff, ((size_t)c->g->nvalues + 1) * sizeof *c->side);
    }
    if (c->nconsts == c->consts_cap) {
        int cap = c->consts_cap ? 2 * c->consts_cap : 16;
        pp_const_tensor *p = pp_realloc_array(c->consts, (size_t)cap, sizeof *p);
        if (!p) return PP_NOMEM(err);
        c->consts = p;
        c->consts_cap = cap;
    }
    void *d = pp_malloc(t->nbytes ? t->nbytes : 1);
    if (!d) return PP_NOMEM(err);
    memcpy(d, t->data, t->nbytes);
    c->consts[c->nconsts] = *t;
    c->consts[c->nconsts].data = d;
    c->side[value] = c->nconsts++;
    return PP_OK;
}

/* Evaluates node n; its outputs become folded initializers (or side constants). */
static pp_status evaluate(infer_ctx *c, pp_node *n, const pp_op_info *op, int *folded, pp_error *err)
{
    pp_const_tensor *out = c->fold_out;
    pp_status st = PP_OK;
    int done = 0;
    *folded = 0;
    memset(out, 0, (size_t)n->noutputs * sizeof *out);
    for (int k = 0; k < n->noutputs; k++) {
        out[k].dtype = c->odt[k];
        out[k].shape = pp_shape_make(c->os[k].rank, c->os[k].dims);
        out[k].nbytes = (size_t)pp_shape_numel(&c->os[k]) * pp_dtype_size(c->odt[k]);
        if (!(out[k].data = calloc(out[k].nbytes + 1, 1))) {
            st = pp_error_set(err, PP_ERR_NOMEM, "out of memory folding node '%s'", n->name);
            goto done;
        }
    }
    PP_CHECK_GOTO(op->fold(c, n, out, &done, err), st, done);
    for (int k = 0; done && k < n->noutputs; k++) {
        if (n->outputs[k] < 0) continue;
        if (c->opt->no_fold) PP_CHECK_GOTO(add_side_const(c, n->outputs[k], &out[k], err), st, done);
        else PP_CHECK_GOTO(graph_make_const(c->g, n->outputs[k], &out[k], err), st, done);
    }
    if (done && !c->opt->no_fold) {
        n->op_type = NULL;
        *folded = 1;
    }
done:
    for (int k = 0; k < n->noutputs; k++) free((void *)out[k].data);
    return st;
}

/* ---- inference walk -------------------------------------------------------- */

/* Compares the inferred output k with what the file declared, then stores it. */
static pp_status commit(infer_ctx *c, const pp_node *n, pp_error *err)
{
    for (int k = 0; k < n->noutputs; k++) {
        if (n->outputs[k] < 0) continue;
        pp_value *v = &c->g->values[n->outputs[k]];
        const pp_shape *s = &c->os[k];
        char a[256], b[256];
        int differ = v->shape.rank >= 0 && s->rank >= 0 && v->shape.rank != s->rank;
        for (int d = 0; !differ && d < v->shape.rank && d < s->rank; d++)
            differ = v->shape.dims[d] >= 0 && s->dims[d] >= 0 && v->shape.dims[d] != s->dims[d];
        if (differ)
            return infer_fail(n, PP_ERR_SHAPE, err, "output '%s' is declared %s in the model but inferred as %s",
                              v->name, pp_shape_format(&v->shape, a, sizeof a), pp_shape_format(s, b, sizeof b));
        if (v->dtype && c->odt[k] && v->dtype != c->odt[k])
            return infer_fail(n, PP_ERR_SHAPE, err, "output '%s' is declared %s in the model but inferred as %s",
                              v->name, pp_dtype_name(v->dtype), pp_dtype_name(c->odt[k]));
        PP_CHECK(pp_shape_check_size(s, c->odt[k], err, "node '%s' (%s): output '%s'", n->name, n->op_type,
                                     v->name));
        if (!c->opt->allow_unknown_dims && (pp_shape_numel(s) < 0 || !c->odt[k]))
            return infer_fail(n, PP_ERR_SHAPE, err, "could not infer the %s of output %d ('%s')",
                              c->odt[k] ? "shape" : "dtype", k, v->name);
        v->shape = *s;
        v->dtype = c->odt[k];
    }
    return PP_OK;
}

static pp_status infer_one(infer_ctx *c, pp_node *n, int *changed, pp_error *err)
{
    pp_graph *g = c->g;
    if (n->op == PP_OP_CONSTANT) {
        *changed = 1;
        return constant_node(g, n, err);
    }
    const pp_op_info *op = pp_op_get(n->op);
    if (!op || !op->shape) return infer_fail(n, PP_ERR_UNSUPPORTED, err, "no shape rule for this op");
    if (!c->opt->no_fold && n->op == PP_OP_IDENTITY && bypass_identity(g, n)) {
        *changed = 1;
        return PP_OK;
    }
    int unknown_rank = 0;
    for (int k = 0; k < n->ninputs; k++)
        unknown_rank |= n->inputs[k] >= 0 && g->values[n->inputs[k]].shape.rank < 0;
    for (int k = 0; k < n->noutputs; k++) {
        c->os[k] = infer_unknown(-1);
        c->odt[k] = PP_DTYPE_UNDEFINED;
    }
    if (unknown_rank && c->opt->allow_unknown_dims) {
        for (int k = 0; k < n->noutputs; k++) c->odt[k] = n->ninputs ? infer_dtype_of(c, n, 0) : PP_DTYPE_UNDEFINED;
    } else {
        PP_CHECK(op->shape(c, n, err));
    }
    PP_CHECK(commit(c, n, err));
    int ok, folded;
    PP_CHECK(foldable(c, n, op, &ok, err));
    if (!ok) return PP_OK;
    PP_CHECK(evaluate(c, n, op, &folded, err));
    *changed |= folded;
    return PP_OK;
}

/* Drops initializers that folding or Identity removal left unused: folded ones and
 * those some node read before (used_before, for the first n0). The file's own unused
 * initializers stay. */
static void drop_dead_inits(pp_graph *g, const unsigned char *used_before, int n0)
{
    int k = 0;
    for (int i = 0; i < g->ninits; i++) {
        pp_value *v = &g->values[g->inits[i].value];
        if (!v->nconsumers && !v->is_output && (v->folded || (i < n0 && used_before[i]))) {
            v->init = -1;
            v->kind = PP_VALUE_NODE;
            v->folded = 0;
            continue;
        }
        g->inits[k] = g->inits[i];
        v->init = k++;
    }
    g->ninits = k;
}

pp_status graph_infer(pp_graph *g, const pp_graph_options *opt, pp_error *err)
{
    infer_ctx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.opt = opt;
    pp_status st = PP_OK;
    int changed = 0;
    PP_CHECK(bind_dims(g, opt, err));
    const char *meta = pp_graph_metadata(g, "onnxpipe.parameters");
    if (meta && pp_json_parse(meta, &c.params_meta, err) != PP_OK)
        return pp_error_prefix(err, "model metadata 'onnxpipe.parameters': ");
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].noutputs > c.max_outputs) c.max_outputs = g->nodes[i].noutputs;
    c.os = pp_malloc((size_t)(c.max_outputs + 1) * sizeof *c.os);
    c.odt = pp_malloc((size_t)(c.max_outputs + 1) * sizeof *c.odt);
    c.fold_out = pp_malloc((size_t)(c.max_outputs + 1) * sizeof *c.fold_out);
    int n0 = g->ninits;
    unsigned char *used_before = pp_malloc((size_t)n0 + 1);
    if (!c.os || !c.odt || !c.fold_out || !used_before) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory inferring shapes");
        goto done;
    }
    for (int i = 0; i < n0; i++) used_before[i] = g->values[g->inits[i].value].nconsumers > 0;
    for (int i = 0; i < g->nnodes; i++) PP_CHECK_GOTO(infer_one(&c, &g->nodes[i], &changed, err), st, done);
    if (changed) {
        PP_CHECK_GOTO(graph_link(g, err), st, done);
        drop_dead_inits(g, used_before, n0);
    }
done:
    for (int i = 0; i < c.nconsts; i++) free((void *)c.consts[i].data);
    free(c.consts);
    free(c.side);
    free(c.grad_live);
    pp_json_free(c.params_meta);
    free(c.os);
    free(c.odt);
    free(c.fold_out);
    free(used_before);
    return st;
}
