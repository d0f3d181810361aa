/* What is trained (DESIGN.md "the user's model is the truth", "one trained-set function"):
 * of the floating-point initializers, the model's parameters, never the exporter's
 * constants; the exporter's second copies of a parameter tied to it, and initializers the
 * exporter merged because their values were equal, untied. Every load runs it (the last pass
 * of pp_graph_finalize), so partition, train, checkpoints and export see one trained set.
 * The rules, in order (docs/exporting.md says the same for users):
 *   1. the export recipe's metadata "onnxpipe.parameters" (initializer -> the PyTorch
 *      parameters it holds), when the file has it, names the parameters exactly (among
 *      the initializers read at a differentiable input);
 *   2. otherwise an initializer is a parameter when a gradient flows from it to a graph
 *      output (graph_grad_paths: float values through differentiable inputs, so a mask that
 *      only reaches Equal, Where's condition or a Cast to bool is not) and it is not a
 *      constant by its values (graph/params_values.c): a scalar (exponents, eps, attention
 *      scales), a non-finite value or a magnitude >= 1e30 (mask fills), a table that is an
 *      exact function of positions (folded rotary cos / sin, [1, 1, T, T] masks), or
 *      rotary frequencies that reach the outputs only through Cos and Sin; folded values
 *      never are. Two parameters of which one is the other bit for bit (large, not
 *      constant-valued) or its transpose are one tied parameter: the copy becomes an
 *      Identity or Transpose of the other (its gradient then adds into the other's through
 *      the tied-weight sums), unless --untie names either;
 *   3. --trainable GLOB,... adds, --frozen GLOB,... removes (a frozen parameter is a constant
 *      to the stages: no gradient, no optimizer state).
 * An initializer a gradient reaches from several nodes is a tie; it is a merge, untied into
 * one initializer per reading node, when the metadata says it holds several parameters that
 * PyTorch does not tie ("onnxpipe.tied"), or without metadata, in a file PyTorch exported,
 * when all its elements are equal (zero biases, unit norm weights of a fresh init); --untie
 * and --tie decide otherwise. A BatchNorm running statistic that several BatchNormalization
 * nodes update is always a merge: untied, one per node. */
#include "graph_internal.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>

#define MAX_READERS 4096   /* reading nodes of one initializer that an untie can give copies */

int graph_rule_matches(const char *list, const char *name, const char *also)
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

static int maybe_float(const pp_value *v)
{
    return v->dtype == PP_DTYPE_UNDEFINED || pp_dtype_is_float(v->dtype);
}

void graph_grad_paths(const pp_graph *g, unsigned char *live, unsigned char *plain)
{
    memset(live, 0, (size_t)g->nvalues);
    if (plain) memset(plain, 0, (size_t)g->nvalues);
    for (int k = 0; k < g->noutputs; k++)
        if (maybe_float(&g->values[g->outputs[k]])) {
            live[g->outputs[k]] = 1;
            if (plain) plain[g->outputs[k]] = 1;
        }
    for (int i = g->nnodes - 1; i >= 0; i--) {
        const pp_node *n = &g->nodes[i];
        if (!n->op_type) continue;   /* deleted by a pass */
        int l = 0, p = 0;
        for (int k = 0; k < n->noutputs; k++)
            if (n->outputs[k] >= 0) l |= live[n->outputs[k]], p |= plain && plain[n->outputs[k]];
        if (!l) continue;
        const int trig = n->op == PP_OP_COS || n->op == PP_OP_SIN;
        for (int k = 0; k < n->ninputs; k++) {
            int v = n->inputs[k];
            if (v < 0 || !pp_op_input_differentiable(n->op, k) || !maybe_float(&g->values[v])) continue;
            live[v] = 1;
            if (plain && p && !trig) plain[v] = 1;
        }
    }
}

int graph_may_train(const pp_graph *g, int v, const pp_param_rules *rules, const pp_jvalue *meta)
{
    const pp_value *val = &g->values[v];
    if (val->init < 0 || val->folded || !pp_dtype_is_float(val->dtype)) return 0;
    const pp_jvalue *names = meta ? pp_json_get(meta, val->name) : NULL;
    const pp_const_tensor *t = &g->inits[val->init].t;
    if (rules && graph_rule_matches(rules->trainable, val->name, NULL)) return 1;
    return meta ? names != NULL : !graph_constant_by_value(t) && !graph_position_table(t);
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

/* The BatchNormalization nodes that update running statistic v (read at input 3 or 4, returned
 * as output 1 or 2), each once: their ids in out (at most max), and how many there are. */
static int running_stat_readers(const pp_graph *g, int v, int *out, int max)
{
    int n = 0;
    const pp_value *val = &g->values[v];
    for (int c = 0; c < val->nconsumers; c++) {
        const pp_node *nd = &g->nodes[val->consumers[c]];
        int dup = 0, reads = 0;
        for (int j = 0; j < c && !dup; j++) dup = val->consumers[j] == val->consumers[c];
        if (dup || nd->op != PP_OP_BATCH_NORMALIZATION || nd->ninputs < 5 || nd->noutputs < 3) continue;
        for (int k = 3; k <= 4; k++) reads |= nd->inputs[k] == v && nd->outputs[k - 2] >= 0;
        if (!reads) continue;
        if (n < max) out[n] = val->consumers[c];
        n++;
    }
    return n;
}

/* The trained set and the untied merges (rules above). */
pp_status graph_params(pp_graph *g, const pp_param_rules *rules, pp_error *err)
{
    static const pp_param_rules none = {0};
    if (!rules) rules = &none;
    pp_jvalue *meta = NULL, *tied_meta = NULL;
    const char *mp = pp_graph_metadata(g, "onnxpipe.parameters"), *mt = pp_graph_metadata(g, "onnxpipe.tied");
    if (mp && pp_json_parse(mp, &meta, err) != PP_OK)
        return pp_error_prefix(err, "model metadata 'onnxpipe.parameters': ");
    if (mt && pp_json_parse(mt, &tied_meta, err) != PP_OK) {
        pp_json_free(meta);
        return pp_error_prefix(err, "model metadata 'onnxpipe.tied': ");
    }
    pp_status st = PP_OK;
    unsigned char *live = NULL, *plain = NULL;
    int *readers = malloc(MAX_READERS * sizeof *readers);
    if (!readers) {
        st = PP_NOMEM(err);
        goto done;
    }
    if (!meta) {   /* rule 2's paths */
        live = calloc((size_t)g->nvalues + 1, 1);
        plain = calloc((size_t)g->nvalues + 1, 1);
        if (!live || !plain) {
            st = PP_NOMEM(err);
            goto done;
        }
        graph_grad_paths(g, live, plain);
    }
    int ninits = g->ninits;
    for (int i = 0; i < ninits; i++) {
        const int v = g->inits[i].value;
        pp_value *val = &g->values[v];
        val->is_param = val->frozen = 0;
        val->untied_from = 0;
        val->param_names = meta_names(g, meta, val->name);
        if (val->folded || !pp_dtype_is_float(val->dtype)) continue;
        if (meta ? !pp_graph_param_readers(g, v, NULL, 0) : !live[v]) continue;
        int param = graph_may_train(g, v, rules, meta) ||
                    graph_rule_matches(rules->trainable, val->name, val->param_names);
        if (param && !meta && !plain[v] && graph_angle_rates(&g->inits[i].t))   /* rotary frequencies */
            param = graph_rule_matches(rules->trainable, val->name, NULL);
        if (param && graph_rule_matches(rules->frozen, val->name, val->param_names)) val->frozen = 1;
        else val->is_param = param;
    }
    int tied = 0, untied = 0;
    if (!meta) PP_CHECK_GOTO(graph_tie_copies(g, rules, &tied, err), st, done);
    if (tied) PP_CHECK_GOTO(graph_link(g, err), st, done);
    /* PyTorch's exporters merge equal initializers; a graph built in code means its ties */
    const int exported = g->producer_name && !strcmp(g->producer_name, "pytorch");
    ninits = g->ninits;   /* untie appends copies: they are decided with their original */
    for (int i = 0; i < ninits; i++) {
        const int v = g->inits[i].value;
        pp_value *val = &g->values[v];
        if (!val->is_param) continue;
        int nr = pp_graph_param_readers(g, v, readers, MAX_READERS);
        if (nr > MAX_READERS) nr = MAX_READERS;   /* beyond: they share the last copy's original */
        if (nr < 2 || graph_rule_matches(rules->tie, val->name, val->param_names)) continue;
        const pp_jvalue *list = meta ? pp_json_get(meta, val->name) : NULL;
        int merge = list ? list->n > 1 && !tied_in_pytorch(tied_meta, list)
                         : exported && graph_all_equal(&g->inits[i].t);
        if (graph_rule_matches(rules->untie, val->name, val->param_names)) merge = 1;
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
    /* Running statistics the exporter merged (fresh ones are all 0 or all 1): one per
     * BatchNormalization that updates it, as PyTorch keeps them, so that each is a buffer of
     * its own, checkpointed once */
    ninits = g->ninits;
    for (int i = 0; i < ninits; i++) {
        const int v = g->inits[i].value;
        int nr = g->values[v].is_param ? 0 : running_stat_readers(g, v, readers, MAX_READERS);
        if (nr < 2) continue;
        PP_CHECK_GOTO(untie(g, v, readers, nr > MAX_READERS ? MAX_READERS : nr, NULL, err), st, done);
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
    free(live);
    free(plain);
    pp_json_free(meta);
    pp_json_free(tied_meta);
    return st;
}
