/* Views of a partition: the table a person reads before launching a job, the same
 * facts as JSON with stable keys, and a Graphviz drawing coloured by stage. */
#include "partition_internal.h"

#include <errno.h>
#include <string.h>

#define LIST_MAX 8   /* tensors listed per boundary in the text view (JSON lists all) */

static const char *unit_name(pp_balance b)
{
    switch (b) {
    case PP_BALANCE_PARAMS: return "params";
    case PP_BALANCE_FLOPS: return "FLOPs";
    case PP_BALANCE_MEMORY: return "bytes";
    case PP_BALANCE_UNIFORM: return "nodes";
    }
    return "";
}

static const char *fmt_weight(const pp_partition *p, int64_t x, char *buf, size_t len)
{
    if (p->balance == PP_BALANCE_MEMORY) return pp_format_bytes((double)x, buf, len);
    if (p->balance == PP_BALANCE_UNIFORM) {
        snprintf(buf, len, "%lld", (long long)x);
        return buf;
    }
    return pp_format_count((double)x, buf, len);
}

static const char *fmt_bytes(int64_t b, char *buf, size_t len)
{
    if (b < 0) return "?";
    return pp_format_bytes((double)b, buf, len);
}

static int64_t stage_weight(const pp_partition *p, int s)
{
    const pp_stage_info *st = &p->stages[s];
    switch (p->balance) {
    case PP_BALANCE_PARAMS: return st->own_params;
    case PP_BALANCE_FLOPS: return st->flops;
    case PP_BALANCE_UNIFORM: return st->last_node - st->first_node + 1;
    case PP_BALANCE_MEMORY: {
        int64_t own = 0;
        for (int i = st->first_node; i <= st->last_node; i++) own += p->costs[i].param_bytes;
        pp_stage_memory m = pp_partition_stage_memory(p, s, p->microbatches);
        int64_t w;   /* the stash is held at INT64_MAX where it would overflow: so is this */
        return __builtin_add_overflow(4 * own, m.stash_bytes < 0 ? 0 : m.stash_bytes, &w) ? INT64_MAX : w;
    }
    }
    return 0;
}

/* Names (and symbolic dims) come from the model file: they are printed escaped. */
static void print_value(const pp_graph *g, int v, int64_t bytes, FILE *out)
{
    char sb[128], bb[32];
    pp_text_fputs(g->values[v].name, 0, out);
    fprintf(out, " %s ", pp_dtype_name(g->values[v].dtype));
    pp_text_fputs(pp_shape_format(&g->values[v].shape, sb, sizeof sb), 0, out);
    fprintf(out, " %s", fmt_bytes(bytes, bb, sizeof bb));
}

static void print_stages(const pp_partition *p, FILE *out)
{
    const pp_graph *g = p->graph;
    char a[32], b[32], c[32], d[32];
    fprintf(out, "%5s %8s %9s %6s %9s %10s %10s %4s  %s\n", "stage", "nodes", "params", "share", "FLOPs/mb",
            "act/mb", "send/mb", "cut", "first .. last node");
    for (int s = 0; s < p->nstages; s++) {
        const pp_stage_info *st = &p->stages[s];
        double share = g->nparams ? 100.0 * (double)st->params / (double)g->nparams : 0;
        int ncut = s + 1 < p->nstages ? p->boundaries[s].ntensors : 0;
        fprintf(out, "%5d %8d %9s %5.1f%% %9s %10s %10s %4d  ", s, st->last_node - st->first_node + 1,
                pp_format_count((double)st->params, a, sizeof a), share,
                st->flops < 0 ? "?" : pp_format_count((double)st->flops, b, sizeof b),
                fmt_bytes(st->act_bytes, c, sizeof c), fmt_bytes(st->send_bytes, d, sizeof d), ncut);
        pp_text_fputs(g->nodes[st->first_node].name, 0, out);
        fputs(" .. ", out);
        pp_text_fputs(g->nodes[st->last_node].name, 0, out);
        fputc('\n', out);
    }
    fprintf(out, "act/mb: the bytes of the stage's node outputs per microbatch%s\n",
            p->shapes_known ? "" : " (unknown: ?)");
}

static void print_balance(const pp_partition *p, FILE *out)
{
    char a[32], b[32], c[32], d[32];
    int64_t mx = 0;
    for (int s = 0; s < p->nstages; s++) {
        int64_t w = stage_weight(p, s);
        if (w > mx) mx = w;
    }
    double mean = (double)p->total_weight / p->nstages;
    fprintf(out, "\nbalance (%s): largest stage %s %s, mean %s, max/mean %.3f\n", pp_balance_name(p->balance),
            fmt_weight(p, mx, a, sizeof a), unit_name(p->balance), fmt_weight(p, (int64_t)mean, b, sizeof b),
            mean > 0 ? (double)mx / mean : 1.0);
    if (p->manual)
        fprintf(out, "  manual cuts: the best split has a largest stage of at least %s (lower bound)\n",
                fmt_weight(p, p->lower_bound, c, sizeof c));
    else
        fprintf(out, "  optimal: no split into %d contiguous stages has a smaller largest stage "
                     "(lower bound max(largest node, ceil(total/%d)) = %s)\n",
                p->nstages, p->nstages, fmt_weight(p, p->lower_bound, c, sizeof c));
    if (p->balance == PP_BALANCE_PARAMS && p->ntied)
        fprintf(out, "  tied parameters count where first used for the balance; the table counts them in "
                     "every stage holding them\n");
    fprintf(out, "  cut: %s per microbatch over all boundaries%s\n", fmt_bytes(p->cut_bytes, d, sizeof d),
            p->manual ? "" : p->tiebreak ? " (the smallest among the optimal splits)"
                                         : " (tie-break skipped: too many candidate cuts)");
}

static void print_cuts(const pp_partition *p, FILE *out)
{
    const pp_graph *g = p->graph;
    char b[32];
    for (int k = 0; k + 1 < p->nstages; k++) {
        const pp_boundary *bd = &p->boundaries[k];
        fprintf(out, "%s  %d -> %d: %d tensor%s, %s per microbatch\n", k ? "" : "\nboundaries:\n", k, k + 1,
                bd->ntensors, bd->ntensors == 1 ? "" : "s", fmt_bytes(bd->bytes, b, sizeof b));
        for (int i = 0; i < bd->ntensors && i < LIST_MAX; i++) {
            const pp_cut_tensor *t = &p->cuts[bd->tensors[i]];
            fputs("    ", out);
            print_value(g, t->value, t->bytes, out);
            fputc('\n', out);
        }
        if (bd->ntensors > LIST_MAX) fprintf(out, "    ... and %d more (--json lists all)\n", bd->ntensors - LIST_MAX);
    }
    int nskip = 0;
    for (int i = 0; i < p->ncuts; i++) {
        const pp_cut_tensor *t = &p->cuts[i];
        if (t->to_stage <= t->from_stage + 1) continue;
        fprintf(out, "%s  ", nskip++ ? "" : "\nskips (relayed through the stages in between):\n");
        print_value(g, t->value, t->bytes, out);
        fprintf(out, ": stage %d -> %d, through %d", t->from_stage, t->to_stage, t->from_stage + 1);
        if (t->to_stage - 1 > t->from_stage + 1) fprintf(out, "..%d", t->to_stage - 1);
        fputc('\n', out);
    }
    for (int i = 0; i < p->ntied; i++) {
        const pp_value_stages *t = &p->tied[i];
        fprintf(out, "%s  ", i ? "" : "\ntied parameters (gradients all-reduced between their stages):\n");
        print_value(g, t->value, t->bytes, out);
        fputs(": stages", out);
        for (int k = 0; k < t->nstages; k++) fprintf(out, "%s %d", k ? "," : "", t->stages[k]);
        fputc('\n', out);
    }
    for (int i = 0; i < p->ninputs; i++) {
        const pp_value_stages *t = &p->inputs[i];
        fprintf(out, "%s  ", i ? "" : "\ngraph inputs (fed to the stages that read them):\n");
        print_value(g, t->value, t->bytes, out);
        fputs(": enters stage", out);
        for (int k = 0; k < t->nstages; k++) fprintf(out, "%s %d", k ? "," : "", t->stages[k]);
        fputc('\n', out);
    }
}

void pp_partition_print(const pp_partition *p, FILE *out)
{
    const pp_graph *g = p->graph;
    char a[32], b[32];
    fputs("model: ", out);
    pp_text_fputs(g->path ? g->path : "(in memory)", 0, out);
    fputs(" (graph '", out);
    pp_text_fputs(g->name, 0, out);
    fputs("', producer ", out);
    pp_text_fputs(g->producer_name && *g->producer_name ? g->producer_name : "unknown", 0, out);
    fprintf(out, ", opset %lld)\n", (long long)g->opset);
    fprintf(out, "  %d nodes, %s parameters (%s)\n", g->nnodes, pp_format_count((double)g->nparams, a, sizeof a),
            pp_format_bytes((double)g->param_bytes, b, sizeof b));
    fprintf(out, "partition: %d stages, balance %s%s\n\n", p->nstages, pp_balance_name(p->balance),
            p->manual ? " (manual cuts)" : "");
    print_stages(p, out);
    print_balance(p, out);
    print_cuts(p, out);
}

/* ---- JSON ------------------------------------------------------------------- */

static void json_bytes(pp_json *j, const char *key, int64_t b)
{
    if (b < 0) pp_json_null(j, key);
    else pp_json_int(j, key, b);
}

static void json_value(pp_json *j, const pp_graph *g, int v, int64_t bytes)
{
    const pp_value *val = &g->values[v];
    pp_json_string(j, "name", val->name);
    pp_json_string(j, "dtype", pp_dtype_name(val->dtype));
    if (val->shape.rank < 0) pp_json_null(j, "shape");
    else {
        pp_json_begin_array(j, "shape");
        for (int d = 0; d < val->shape.rank; d++) {
            if (val->shape.dims[d] >= 0) pp_json_int(j, NULL, val->shape.dims[d]);
            else if (val->shape.syms[d]) pp_json_string(j, NULL, val->shape.syms[d]);
            else pp_json_null(j, NULL);
        }
        pp_json_end_array(j);
    }
    json_bytes(j, "bytes", bytes);
}

static void json_names(pp_json *j, const char *key, const pp_graph *g, const int *ids, int n)
{
    pp_json_begin_array(j, key);
    for (int i = 0; i < n; i++) pp_json_string(j, NULL, g->values[ids[i]].name);
    pp_json_end_array(j);
}

static void json_ints(pp_json *j, const char *key, const int *v, int n)
{
    pp_json_begin_array(j, key);
    for (int i = 0; i < n; i++) pp_json_int(j, NULL, v[i]);
    pp_json_end_array(j);
}

static void json_stage(pp_json *j, const pp_partition *p, int s)
{
    const pp_graph *g = p->graph;
    const pp_stage_info *st = &p->stages[s];
    pp_stage_memory m = pp_partition_stage_memory(p, s, p->microbatches);
    pp_json_begin_object(j, NULL);
    pp_json_int(j, "stage", s);
    pp_json_int(j, "first_node", st->first_node);
    pp_json_int(j, "last_node", st->last_node);
    pp_json_string(j, "first", g->nodes[st->first_node].name);
    pp_json_string(j, "last", g->nodes[st->last_node].name);
    pp_json_int(j, "nodes", st->last_node - st->first_node + 1);
    pp_json_int(j, "params", st->params);
    pp_json_int(j, "param_bytes", st->param_bytes);
    pp_json_int(j, "own_params", st->own_params);
    pp_json_double(j, "share", g->nparams ? (double)st->params / (double)g->nparams : 0);
    json_bytes(j, "flops", st->flops);
    json_bytes(j, "act_bytes", st->act_bytes);
    json_bytes(j, "send_bytes", st->send_bytes);
    pp_json_int(j, "weight", stage_weight(p, s));
    json_names(j, "inputs", g, st->inputs, st->ninputs);
    json_names(j, "outputs", g, st->outputs, st->noutputs);
    pp_json_begin_object(j, "memory");
    pp_json_int(j, "param_bytes", m.param_bytes);
    pp_json_int(j, "grad_bytes", m.grad_bytes);
    pp_json_int(j, "optimizer_bytes", m.optimizer_bytes);
    pp_json_int(j, "inflight", m.inflight);
    json_bytes(j, "stash_bytes", m.stash_bytes);
    json_bytes(j, "recompute_bytes", m.recompute_bytes);
    pp_json_int(j, "total_bytes", m.total_bytes);
    pp_json_end_object(j);
    pp_json_end_object(j);
}

static void json_value_stages(pp_json *j, const char *key, const pp_graph *g, const pp_value_stages *v, int n)
{
    pp_json_begin_array(j, key);
    for (int i = 0; i < n; i++) {
        pp_json_begin_object(j, NULL);
        json_value(j, g, v[i].value, v[i].bytes);
        json_ints(j, "stages", v[i].stages, v[i].nstages);
        pp_json_end_object(j);
    }
    pp_json_end_array(j);
}

void pp_partition_write_json(const pp_partition *p, pp_json *j)
{
    const pp_graph *g = p->graph;
    pp_json_begin_object(j, NULL);
    pp_json_begin_object(j, "model");
    if (g->path) pp_json_string(j, "path", g->path);
    else pp_json_null(j, "path");
    pp_json_string(j, "name", g->name);
    pp_json_string(j, "producer", g->producer_name ? g->producer_name : "");
    pp_json_int(j, "opset", g->opset);
    pp_json_int(j, "nodes", g->nnodes);
    pp_json_end_object(j);
    pp_json_int(j, "params", g->nparams);
    pp_json_int(j, "param_bytes", g->param_bytes);
    pp_json_int(j, "nstages", p->nstages);
    pp_json_string(j, "balance", pp_balance_name(p->balance));
    pp_json_bool(j, "manual", p->manual);
    pp_json_int(j, "microbatches", p->microbatches);
    pp_json_bool(j, "shapes_known", p->shapes_known);
    pp_json_begin_array(j, "stages");
    for (int s = 0; s < p->nstages; s++) json_stage(j, p, s);
    pp_json_end_array(j);
    pp_json_begin_object(j, "bottleneck");
    pp_json_string(j, "unit", unit_name(p->balance));
    pp_json_int(j, "largest", p->bottleneck);
    pp_json_int(j, "total", p->total_weight);
    pp_json_double(j, "mean", (double)p->total_weight / p->nstages);
    pp_json_int(j, "lower_bound", p->lower_bound);
    pp_json_bool(j, "optimal", !p->manual);
    pp_json_bool(j, "cut_bytes_minimal", !p->manual && p->tiebreak);
    json_bytes(j, "cut_bytes", p->cut_bytes);
    pp_json_end_object(j);
    pp_json_begin_array(j, "boundaries");
    for (int b = 0; b + 1 < p->nstages; b++) {
        const pp_boundary *bd = &p->boundaries[b];
        pp_json_begin_object(j, NULL);
        pp_json_int(j, "from", b);
        pp_json_int(j, "to", b + 1);
        json_bytes(j, "bytes", bd->bytes);
        pp_json_begin_array(j, "tensors");
        for (int i = 0; i < bd->ntensors; i++) {
            const pp_cut_tensor *t = &p->cuts[bd->tensors[i]];
            pp_json_begin_object(j, NULL);
            json_value(j, g, t->value, t->bytes);
            pp_json_int(j, "from_stage", t->from_stage);
            pp_json_int(j, "to_stage", t->to_stage);
            pp_json_end_object(j);
        }
        pp_json_end_array(j);
        pp_json_end_object(j);
    }
    pp_json_end_array(j);
    pp_json_begin_array(j, "skips");
    for (int i = 0; i < p->ncuts; i++) {
        const pp_cut_tensor *t = &p->cuts[i];
        if (t->to_stage <= t->from_stage + 1) continue;
        pp_json_begin_object(j, NULL);
        json_value(j, g, t->value, t->bytes);
        pp_json_int(j, "from_stage", t->from_stage);
        pp_json_int(j, "to_stage", t->to_stage);
        pp_json_begin_array(j, "through");
        for (int s = t->from_stage + 1; s < t->to_stage; s++) pp_json_int(j, NULL, s);
        pp_json_end_array(j);
        pp_json_end_object(j);
    }
    pp_json_end_array(j);
    json_value_stages(j, "tied", g, p->tied, p->ntied);
    json_value_stages(j, "inputs", g, p->inputs, p->ninputs);
    pp_json_end_object(j);
}

/* ---- Graphviz --------------------------------------------------------------- */

static void dot_string(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
}

pp_status pp_partition_write_dot(const pp_partition *p, const char *path, pp_error *err)
{
    static const char *const colours[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
                                          "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"};
    const int ncol = (int)(sizeof colours / sizeof colours[0]);
    const pp_graph *g = p->graph;
    FILE *f = fopen(path, "w");
    if (!f) return pp_error_set(err, PP_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    fprintf(f, "digraph \"");
    dot_string(f, g->name);
    fprintf(f, "\" {\n  node [shape=box, style=filled, fontname=\"Helvetica\"];\n");
    for (int s = 0; s < p->nstages; s++) {
        fprintf(f, "  subgraph cluster_%d {\n    label=\"stage %d\";\n", s, s);
        for (int i = p->stages[s].first_node; i <= p->stages[s].last_node; i++) {
            fprintf(f, "    n%d [label=\"", i);
            dot_string(f, g->nodes[i].name);
            fputs("\\n", f);
            dot_string(f, g->nodes[i].op_type);
            fprintf(f, "\", fillcolor=\"%s\"];\n", colours[s % ncol]);
        }
        fputs("  }\n", f);
    }
    for (int i = 0; i < g->nnodes; i++) {
        const pp_node *n = &g->nodes[i];
        for (int k = 0; k < n->ninputs; k++) {
            int v = n->inputs[k];
            int prod = v >= 0 ? g->values[v].producer : -1;
            if (prod < 0) continue;
            int cut = p->node_stage[prod] != p->node_stage[i];
            fprintf(f, "  n%d -> n%d%s;\n", prod, i, cut ? " [style=bold, penwidth=3]" : "");
        }
    }
    fputs("}\n", f);
    if (fclose(f) != 0) return pp_error_set(err, PP_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    return PP_OK;
}
