/* What is trained (DESIGN.md "the user's model is the truth"): of the floating-point
 * initializers a gradient reaches, the model's parameters, never the exporter's constants,
 * and initializers the exporter merged because their values were equal, untied. The rules,
 * in order (docs/exporting.md says the same for users):
 *   1. the export recipe's metadata "onnxpipe.parameters" (initializer -> the PyTorch
 *      parameters it holds), when the file has it, names the parameters exactly;
 *   2. otherwise an initializer read at a differentiable input is a parameter unless it is
 *      a constant by its values: a scalar (exponents, eps, attention scales), or one holding
 *      a non-finite value or a magnitude >= 1e30 (the finfo.min / -inf fills of masks);
 *      folded values (masks and tables computed at load) never are;
 *   3. --trainable GLOB,... adds, --frozen GLOB,... removes (a frozen parameter is a constant
 *      to the stages: no gradient, no optimizer state).
 * An initializer a gradient reaches from several nodes is a tie; it is a merge, untied into
 * one initializer per reading node, when the metadata says it holds several parameters that
 * PyTorch does not tie ("onnxpipe.tied"), or without metadata, in a file PyTorch exported,
 * when all its elements are equal (zero biases, unit norm weights of a fresh init); --untie
 * and --tie decide otherwise. */
#include "graph_internal.h"

#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>

#define MAX_READERS 4096   /* reading nodes of one initializer that an untie can give copies */

/* 1 when name matches one of the comma-separated globs in list (NULL: none); `also` (may be
 * NULL) is matched too: the PyTorch names the metadata gives the initializer. */
static int matches(const char *list, const char *name, const char *also)
{
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char glob[512];
        if (n && n < sizeof glob) {
            memcpy(glob, p, n);
            glob[n] = 0;
            if (!fnmatch(glob, name, 0)) return 1;
            for (const char *a = also; a && *a;) {   /* also: names separated by ", " */
                const char *ae = strstr(a, ", ");
                size_t an = ae ? (size_t)(ae - a) : strlen(a);
                char one[512];
                if (an < sizeof one) {
                    memcpy(one, a, an);
                    one[an] = 0;
                    if (!fnmatch(glob, one, 0)) return 1;
                }
                a = ae ? ae + 2 : NULL;
            }
        }
        p = e ? e + 1 : NULL;
    }
    return 0;
}

/* Element i of a float initializer as double. */
static double elem(const pp_const_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case PP_DTYPE_F32: return ((const float *)t->data)[i];
    case PP_DTYPE_F64: return ((const double *)t->data)[i];
    default: return 0;   /* 16-bit initializers: read as ordinary values (never scalars or fills in practice) */
    }
}

/* A constant by its values (rule 2). */
static int constant_by_value(const pp_const_tensor *t)
{
    int64_t n = pp_shape_numel(&t->shape);
    if (n <= 1) return 1;
    for (int64_t i = 0; i < n; i++) {
        double x = elem(t, i);
        if (!isfinite(x) || fabs(x) >= 1e30) return 1;
    }
    return 0;
}

static int all_equal(const pp_const_tensor *t)
{
    int64_t n = pp_shape_numel(&t->shape);
    size_t es = pp_dtype_size(t->dtype);
    for (int64_t i = 1; i < n; i++)
        if (memcmp((const char *)t->data + (size_t)i * es, t->data, es)) return 0;
    return 1;
}

int pp_graph_param_readers(const pp_graph *g, int v, int *out, int max)
{
    int n = 0;
    const pp_value *val = &g->values[v];
    for (int c = 0; c < val->nconsumers; c++) {
        int id = val->consumers[c], dup = 0;
        const pp_node *nd = &g->nodes[id];
        int diff = 0;
        for (int k = 0; k < nd->ninputs; k++) diff |= nd->inputs[k] == v && pp_op_input_differentiable(nd->op, k);
        for (int j = 0; j < c && !dup; j++) dup = val->consumers[j] == id;   /* counted at its first use */
        if (diff && !dup) {
            if (n < max) out[n] = id;
            n++;
        }
    }
    return n;
}

int graph_may_train(const pp_graph *g, int v, const pp_param_rules *rules, const pp_jvalue *meta)
{
    const pp_value *val = &g->values[v];
    if (val->init < 0 || val->folded || !pp_dtype_is_float(val->dtype)) return 0;
    const pp_jvalue *names = meta ? pp_json_get(meta, val->name) : NULL;
    if (rules && matches(rules->trainable, val->name, NULL)) return 1;
    return meta ? names != NULL : !constant_by_value(&g->inits[val->init].t);
}

/* The metadata's parameter names of initializer `name`, as "a, b, c" in the graph's arena;
 * NULL when it has none. */
static const char *meta_names(pp_graph *g, const pp_jvalue *params, const char *name)
{
    const pp_jvalue *list = params ? pp_json_get(params, name) : NULL;
    if (!list || list->type != PP_JARR) return NULL;
    size_t len = 1;
    for (int i = 0; i < list->n; i++) len += (list->items[i].type == PP_JSTR ? strlen(list->items[i].str) : 0) + 2;
    char *s = pp_graph_alloc(g, len);
    if (!s) return NULL;
    for (int i = 0; i < list->n; i++)
        if (list->items[i].type == PP_JSTR) {
            if (*s) strcat(s, ", ");
            strcat(s, list->items[i].str);
        }
    return s;
}

/* 1 when the metadata's "onnxpipe.tied" puts every name of list (a JSON array of PyTorch
 * names) in one group: PyTorch itself ties them (a deliberate tie). */
static int tied_in_pytorch(const pp_jvalue *tied, const pp_jvalue *list)
{
    for (int gi = 0; tied && tied->type == PP_JARR && gi < tied->n; gi++) {
        const pp_jvalue *grp = &tied->items[gi];
        int all = grp->type == PP_JARR && list->n > 0;
        for (int i = 0; all && i < list->n; i++) {
            int in = 0;
            for (int j = 0; j < grp->n && !in; j++)
                in = grp->items[j].type == PP_JSTR && list->items[i].type == PP_JSTR &&
                     !strcmp(grp->items[j].str, list->items[i].str);
            all = in;
        }
        if (all) return 1;
    }
    return 0;
}

/* Gives every reading node of v after the first its own copy of v, named after the
 * metadata's parameter names where they pair up with the readers, else "<name>.untied<k>". */
static pp_status untie(pp_graph *g, int v, const int *readers, int nr, const pp_jvalue *list, pp_error *err)
{
    const char *base = g->values[v].name;
    const pp_initializer in = g->inits[g->values[v].init];
    const int named = list && list->n == nr;
    g->values[v].untied_from = v + 1;
    for (int r = 1; r < nr; r++) {
        char buf[512];
        const char *nm = named && list->items[r].type == PP_JSTR ? list->items[r].str : NULL;
        if (!nm || pp_graph_find_value(g, nm) >= 0) {
            snprintf(buf, sizeof buf, "%s.untied%d", base, r);
            nm = buf;
        }
        PP_CHECK(pp_graph_add_initializer(g, nm, in.t.dtype, &in.t.shape, in.t.data, in.t.nbytes, 0, err));
        int c = pp_graph_find_value(g, nm);
        g->values[c].untied_from = v + 1;
        pp_node *nd = &g->nodes[readers[r]];
        for (int k = 0; k < nd->ninputs; k++)
            if (nd->inputs[k] == v) nd->inputs[k] = c;
    }
    return PP_OK;
}

/* The trained set and the untied merges (rules above). */
pp_status graph_params(pp_graph *g, const pp_param_rules *rules, pp_error *err)
{
    static const pp_param_rules none = {0};
    if (!rules) rules = &none;
    pp_jvalue *meta = NULL, *tied = NULL;
    const char *mp = pp_graph_metadata(g, "onnxpipe.parameters"), *mt = pp_graph_metadata(g, "onnxpipe.tied");
    if (mp && pp_json_parse(mp, &meta, err) != PP_OK)
        return pp_error_prefix(err, "model metadata 'onnxpipe.parameters': ");
    if (mt && pp_json_parse(mt, &tied, err) != PP_OK) {
        pp_json_free(meta);
        return pp_error_prefix(err, "model metadata 'onnxpipe.tied': ");
    }
    pp_status st = PP_OK;
    int *readers = malloc(MAX_READERS * sizeof *readers);
    if (!readers) {
        st = PP_NOMEM(err);
        goto done;
    }
    int untied = 0;
    /* PyTorch's exporters merge equal initializers; a graph built in code means its ties */
    const int exported = g->producer_name && !strcmp(g->producer_name, "pytorch");
    const int ninits = g->ninits;   /* untie appends copies: they are decided with their original */
    for (int i = 0; i < ninits; i++) {
        const int v = g->inits[i].value;
        pp_value *val = &g->values[v];
        val->is_param = val->frozen = 0;
        val->untied_from = 0;
        val->param_names = meta_names(g, meta, val->name);
        if (val->folded || !pp_dtype_is_float(val->dtype)) continue;
        int nr = pp_graph_param_readers(g, v, readers, MAX_READERS);
        if (!nr) continue;
        int param = graph_may_train(g, v, rules, meta) || matches(rules->trainable, val->name, val->param_names);
        if (param && matches(rules->frozen, val->name, val->param_names)) {
            g->values[v].frozen = 1;
            continue;
        }
        if (!param) continue;
        val->is_param = 1;
        if (nr > MAX_READERS) nr = MAX_READERS;   /* beyond: they share the last copy's original */
        if (nr < 2 || matches(rules->tie, val->name, val->param_names)) continue;
        const pp_jvalue *list = meta ? pp_json_get(meta, val->name) : NULL;
        int merge = list ? list->n > 1 && !tied_in_pytorch(tied, list) : exported && all_equal(&g->inits[i].t);
        if (matches(rules->untie, val->name, val->param_names)) merge = 1;
        if (!merge) continue;
        PP_CHECK_GOTO(untie(g, v, readers, nr, list, err), st, done);
        for (int k = ninits; k < g->ninits; k++) {   /* the copies: parameters as their original */
            pp_value *cp = &g->values[g->inits[k].value];
            if (cp->untied_from == v + 1 && !cp->is_param) {
                cp->is_param = 1;
                cp->param_names = NULL;
            }
        }
        untied++;
    }
    if (untied) PP_CHECK_GOTO(graph_link(g, err), st, done);
    g->nparams = g->param_bytes = 0;
    for (int i = 0; i < g->ninits; i++) {
        const pp_value *v = &g->values[g->inits[i].value];
        if (!v->is_param) continue;
        g->nparams += pp_shape_numel(&v->shape);
        g->param_bytes += (int64_t)g->inits[i].t.nbytes;
    }
done:
    free(readers);
    pp_json_free(meta);
    pp_json_free(tied);
    return st;
}
