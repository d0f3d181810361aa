/* The inference pass of pp_graph_finalize: binds symbolic input dims, turns Constant
 * nodes into initializers, removes Identity nodes, infers every output's dtype and
 * shape in one walk over the sorted nodes (each op's shape rule and folder come from
 * the registry, graph/ops.c), and folds constant subgraphs as it goes; a fold-only op
 * (no kernel) that does not fold is refused there, after everything it reads has folded. */
#include "infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/op_info.h>

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

/* Marks values through which a gradient reaches a graph output (graph/params.c). */
static pp_status compute_grad_live(infer_ctx *c, pp_error *err)
{
    c->grad_live = calloc((size_t)c->g->nvalues + 1, 1);
    if (!c->grad_live) return PP_NOMEM(err);
    graph_grad_paths(c->g, c->grad_live, NULL);
    return PP_OK;
}

/* Shape and Size read only their input's shape, which is known wherever dims are bound. */
static int reads_shape_only(pp_op op)
{
    return op == PP_OP_SHAPE || op == PP_OP_SIZE;
}

/* 1 when every input is constant and none may be trained (graph_may_train: the exporter's
 * scalars and fills are constants), and the outputs are small enough. Shape needs only a known input shape. */
static pp_status foldable(infer_ctx *c, const pp_node *n, const pp_op_info *op, int *ok, pp_error *err)
{
    pp_graph *g = c->g;
    *ok = 0;
    if (!op->fold) return PP_OK;
    if (reads_shape_only(n->op)) {
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

/* ---- fold-only ops ---------------------------------------------------------- */

/* 1 when constant value v is kept out of folding because it is trained. */
static pp_status trained(infer_ctx *c, int v, int *yes, pp_error *err)
{
    *yes = 0;
    if (!graph_may_train(c->g, v, &c->opt->params, c->params_meta)) return PP_OK;
    if (!c->grad_live) PP_CHECK(compute_grad_live(c, err));
    *yes = c->grad_live[v];
    return PP_OK;
}

/* Where a value that is not constant comes from: the first input that is not constant of
 * each producer, back to a graph input's data (SOURCE_DATA, *src that input), a shape query
 * of a value whose shape is unknown (SOURCE_SHAPE, *src the query's node) or a node whose
 * constant inputs did not fold (SOURCE_STUCK, *src that node). */
enum { SOURCE_DATA, SOURCE_SHAPE, SOURCE_STUCK };

static int trace_source(const infer_ctx *c, int v, int *src)
{
    const pp_graph *g = c->g;
    for (int hops = 0; g->values[v].producer >= 0 && hops <= g->nnodes; hops++) {
        const pp_node *p = &g->nodes[g->values[v].producer];
        *src = g->values[v].producer;
        if (reads_shape_only(p->op)) return SOURCE_SHAPE;
        int next = -1;
        for (int j = 0; j < p->ninputs && next < 0; j++)
            if (p->inputs[j] >= 0 && !infer_const(c, p->inputs[j])) next = p->inputs[j];
        if (next < 0) return SOURCE_STUCK;
        v = next;
    }
    *src = v;
    return SOURCE_DATA;
}

/* The error for a fold-only op (no kernel) that load could not fold: input k is not a
 * constant (traced back to where it comes from), or with k < 0 its inputs are constants
 * yet it did not fold (a trained input, a large result). */
static pp_status fold_only_refusal(infer_ctx *c, const pp_node *n, int k, pp_error *err)
{
    const pp_graph *g = c->g;
    const char *nm = pp_op_get(n->op)->name;
    if (k >= 0) {
        char why[512];
        int src, in = n->inputs[k];
        switch (trace_source(c, in, &src)) {
        case SOURCE_DATA:
            if (src == in) snprintf(why, sizeof why, "it is a graph input");
            else snprintf(why, sizeof why, "it is computed from graph input '%s'", g->values[src].name);
            break;
        case SOURCE_SHAPE:
            snprintf(why, sizeof why, "it is computed from node '%s' (%s) of a shape that is not known; bind the "
                     "model's dims (--batch N, --dim NAME=N)", g->nodes[src].name, g->nodes[src].op_type);
            break;
        default:
            snprintf(why, sizeof why, "it is computed by node '%s' (%s), which does not fold", g->nodes[src].name,
                     g->nodes[src].op_type);
        }
        return infer_fail(n, PP_ERR_UNSUPPORTED, err, "op %s is supported only where its inputs are constants "
                          "(fold-only: onnxpipe has no kernel for it), and input %d ('%s') is not constant: %s",
                          nm, k, g->values[in].name, why);
    }
    for (int j = 0; j < n->ninputs; j++) {
        int yes;
        if (n->inputs[j] < 0) continue;
        PP_CHECK(trained(c, n->inputs[j], &yes, err));
        if (yes)
            return infer_fail(n, PP_ERR_UNSUPPORTED, err, "op %s is supported only where its inputs are constants "
                              "(fold-only), and input %d ('%s') is a trained parameter; freeze it (--frozen %s) "
                              "to fold the node", nm, j, g->values[n->inputs[j]].name, g->values[n->inputs[j]].name);
    }
    char sh[128];
    return infer_fail(n, PP_ERR_UNSUPPORTED, err, "op %s is supported only where load folds it (fold-only), and "
                      "its constant inputs did not fold: its result (%s %s) is larger than load folds, or its "
                      "input dtype is not handled", nm, pp_dtype_name(c->odt[0]),
                      pp_shape_format(&c->os[0], sh, sizeof sh));
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
    /* a fold-only op has no kernel: its inputs must be constants (or only their shapes read);
     * a preview with unbound dims refuses only one that reads a graph input's data */
    const int fold_only = (op->flags & PP_OPF_FOLD_ONLY) != 0, unbound = c->opt->allow_unknown_dims;
    for (int k = 0, src; fold_only && !reads_shape_only(n->op) && k < n->ninputs; k++)
        if (n->inputs[k] >= 0 && !infer_const(c, n->inputs[k]) &&
            (!unbound || trace_source(c, n->inputs[k], &src) == SOURCE_DATA))
            return fold_only_refusal(c, n, k, err);
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
    int ok, folded = 0;
    PP_CHECK(foldable(c, n, op, &ok, err));
    if (ok) PP_CHECK(evaluate(c, n, op, &folded, err));
    if (!folded && unbound) PP_CHECK(infer_part_node(c, n, err));
    *changed |= folded;
    if (fold_only && !unbound && n->noutputs > 0 && n->outputs[0] >= 0 && !infer_const(c, n->outputs[0]))
        return fold_only_refusal(c, n, -1, err);
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
    free(c.part_of);
    free(c.parts);
    pp_json_free(c.params_meta);
    free(c.os);
    free(c.odt);
    free(c.fold_out);
    free(used_before);
    return st;
}
