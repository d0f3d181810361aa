/* Views of a partition: the table a person reads before launching a job, the same
 * facts as JSON with stable keys, and a Graphviz drawing coloured by stage. */
#include "partition_internal.h"

#include <errno.h>
#include <string.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/report_json.h>
#include <onnxpipe/graph_ir.h>

#define LIST_MAX 8   /* tensors listed per boundary in the text view (JSON lists all) */

static const char *unit_name(pp_balance b)
{
    switch (b) {
    case PP_BALANCE_PARAMS: return "params";
    case PP_BALANCE_FLOPS: return "FLOPs";
    case PP_BALANCE_MEMORY: return "bytes";
    case PP_BALANCE_UNIFORM: return "nodes";
    case PP_BALANCE_TIME: return "FLOP-times";
    }
    return "";
}

static const char *fmt_weight(const pp_partition *p, int64_t x, char *buf, size_t len)
{
    if (p->balance == PP_BALANCE_MEMORY) return pp_format_bytes((double)x, buf, len);
    if (p->balance == PP_BALANCE_TIME) {
        double sec = (double)x / (p->gflops * 1e9);
        if (sec >= 1) snprintf(buf, len, "%.3f s", sec);
        else if (sec >= 1e-3) snprintf(buf, len, "%.3f ms", sec * 1e3);
        else snprintf(buf, len, "%.3f us", sec * 1e6);
        return buf;
    }
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

static int64_t stage_weight(const pp_partition *p, int s) { return p->stages[s].weight; }

/* The first and last node of stage s in the partition's order. */
static const char *first_name(const pp_partition *p, int s) { return p->graph->nodes[p->order[p->stages[s].first_node]].name; }
static const char *last_name(const pp_partition *p, int s) { return p->graph->nodes[p->order[p->stages[s].last_node]].name; }

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
    int extra = p->balance == PP_BALANCE_TIME || p->balance == PP_BALANCE_MEMORY;
    fprintf(out, "%5s %8s %9s %6s %9s %10s %10s %4s  ", "stage", "nodes", "params", "share", "FLOPs/mb", "act/mb",
            "send/mb", "cut");
    if (extra) fprintf(out, "%10s  ", p->balance == PP_BALANCE_TIME ? "time/mb" : "memory");
    fprintf(out, "first .. last node%s\n", p->reordered ? " (in the searched order)" : "");
    for (int s = 0; s < p->nstages; s++) {
        const pp_stage_info *st = &p->stages[s];
        double share = g->nparams ? 100.0 * (double)st->params / (double)g->nparams : 0;
        int ncut = s + 1 < p->nstages ? p->boundaries[s].ntensors : 0;
        fprintf(out, "%5d %8d %9s %5.1f%% %9s %10s %10s %4d  ", s, st->last_node - st->first_node + 1,
                pp_format_count((double)st->params, a, sizeof a), share,
                st->flops < 0 ? "?" : pp_format_count((double)st->flops, b, sizeof b),
                fmt_bytes(st->act_bytes, c, sizeof c), fmt_bytes(st->send_bytes, d, sizeof d), ncut);
        if (extra) fprintf(out, "%10s  ", fmt_weight(p, st->weight, c, sizeof c));
        pp_text_fputs(first_name(p, s), 0, out);
        fputs(" .. ", out);
        pp_text_fputs(last_name(p, s), 0, out);
        fputc('\n', out);
    }
    fprintf(out, "act/mb: the bytes of the stage's node outputs per microbatch%s\n",
            p->shapes_known ? "" : " (unknown: ?)");
}

/* What the balance charges a stage, in words. */
static void print_model(const pp_partition *p, FILE *out)
{
    if (p->balance == PP_BALANCE_TIME) {
        fprintf(out, "  time: forward + backward = 3 x forward FLOPs at %g GFLOP/s", p->gflops);
        if (p->recompute != PP_RECOMPUTE_NONE) fputs(" (+1 x for what recompute runs again)", out);
        if (p->op_overhead > 0) fprintf(out, " + %g us per node", p->op_overhead * 1e6);
        if (p->link_gbps > 0) fprintf(out, "; sends (activations on, gradients back) at %g GB/s\n", p->link_gbps);
        else fputs("; sends are free (give --link-gbps)\n", out);
    } else if (p->balance == PP_BALANCE_MEMORY) {
        const pp_memory_profile *m = p->memory;
        fprintf(out, "  memory: params, grads and %d optimizer state%s per parameter, the stash of the driver's 1F1B "
                     "slots (min(P - s, %lld), one more after stage 0) and the model's largest scratch, by %s\n",
                m->optimizer_states, m->optimizer_states == 1 ? "" : "s", (long long)p->microbatches,
                m->planned ? "the stage planner's profile" : "the partitioner's estimate (no stage planner: coarse)");
    }
}

static void print_order(const pp_partition *p, FILE *out)
{
    if (p->manual) return;
    if (p->order_searched && p->reordered)
        fprintf(out, "  order: searched over every order in which tensors flow forward (%lld downsets); %d node%s "
                     "placed differently from the graph's order\n", (long long)p->order_states, p->reordered,
                p->reordered == 1 ? "" : "s");
    else if (p->order_searched)
        fprintf(out, "  order: searched over every order in which tensors flow forward (%lld downsets); the graph's "
                     "own order has a split as good\n", (long long)p->order_states);
    else if (p->order_states || p->nstages == 1)
        fprintf(out, "  order: the graph's own order%s\n", p->nstages == 1 ? "" : " (more downsets than the search "
                     "enumerates; optimal over this order only)");
    else
        fputs("  order: the graph's own order (--order graph; optimal over this order only)\n", out);
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
    const char *unit = p->balance == PP_BALANCE_TIME ? " per microbatch" : p->balance == PP_BALANCE_MEMORY ? ""
                     : p->balance == PP_BALANCE_PARAMS ? " params" : p->balance == PP_BALANCE_FLOPS ? " FLOPs" : " nodes";
    fprintf(out, "\nbalance (%s): largest stage %s%s, mean %s, max/mean %.3f\n", pp_balance_name(p->balance),
            fmt_weight(p, mx, a, sizeof a), unit,
            fmt_weight(p, (int64_t)mean, b, sizeof b), mean > 0 ? (double)mx / mean : 1.0);
    print_model(p, out);
    if (p->manual)
        fprintf(out, "  manual cuts: the best split has a largest stage of at least %s (lower bound)\n",
                fmt_weight(p, p->lower_bound, c, sizeof c));
    else if (p->bottleneck > p->optimum)
        fprintf(out, "  optimum %s; the split taken is %.2f%% above it (within the tolerance %g%%) and crosses "
                     "fewer bytes (lower bound max(largest node, ceil(total/%d)) = %s)\n",
                fmt_weight(p, p->optimum, c, sizeof c), 100.0 * (double)(p->bottleneck - p->optimum) / (double)p->optimum,
                100 * p->tolerance, p->nstages, fmt_weight(p, p->lower_bound, d, sizeof d));
    else
        fprintf(out, "  optimal: no split into %d stages%s has a smaller largest stage "
                     "(lower bound max(largest node, ceil(total/%d)) = %s)\n",
                p->nstages, p->order_searched ? " in the orders searched" : " of this order", p->nstages,
                fmt_weight(p, p->lower_bound, c, sizeof c));
    print_order(p, out);
    if (p->balance == PP_BALANCE_PARAMS && p->ntied)
        fprintf(out, "  tied parameters count where first used for the balance; the table counts them in "
                     "every stage holding them\n");
    fprintf(out, "  cut: %s per microbatch over all boundaries%s\n", fmt_bytes(p->cut_bytes, d, sizeof d),
            p->manual ? "" : !p->tiebreak ? " (tie-break skipped: too many candidate cuts)"
                       : p->tolerance > 0 ? " (the fewest among the splits within the tolerance)"
                                          : " (the smallest among the optimal splits)");
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
        fprintf(out, "%s  ", i ? "" : "\ntied parameters (gradients summed over their stages, in reading-node order):\n");
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
    partition_print_params(g, out);
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
    pp_json_string(j, "first", first_name(p, s));
    pp_json_string(j, "last", last_name(p, s));
    pp_json_int(j, "nodes", st->last_node - st->first_node + 1);
    pp_json_int(j, "params", st->params);
    pp_json_int(j, "param_bytes", st->param_bytes);
    pp_json_int(j, "own_params", st->own_params);
    pp_json_double(j, "share", g->nparams ? (double)st->params / (double)g->nparams : 0);
    json_bytes(j, "flops", st->flops);
    json_bytes(j, "act_bytes", st->act_bytes);
    json_bytes(j, "send_bytes", st->send_bytes);
    pp_json_int(j, "weight", stage_weight(p, s));
    if (p->balance == PP_BALANCE_TIME) pp_json_double(j, "seconds", st->seconds);
    if (p->reordered) {   /* the stage's nodes, in the graph's order */
        pp_json_begin_array(j, "node_names");
        for (int i = 0; i < g->nnodes; i++)
            if (p->node_stage[i] == s) pp_json_string(j, NULL, g->nodes[i].name);
        pp_json_end_array(j);
    }
    json_names(j, "inputs", g, st->inputs, st->ninputs);
    json_names(j, "outputs", g, st->outputs, st->noutputs);
    pp_json_begin_object(j, "memory");
    pp_json_int(j, "param_bytes", m.param_bytes);
    pp_json_int(j, "grad_bytes", m.grad_bytes);
    pp_json_int(j, "optimizer_bytes", m.optimizer_bytes);
    pp_json_int(j, "param_copy_bytes", m.param_copy_bytes);
    pp_json_int(j, "constant_bytes", m.constant_bytes);
    pp_json_int(j, "inflight", m.inflight);
    pp_json_int(j, "slot_bytes", m.slot_bytes);
    pp_json_int(j, "scratch_bytes", m.scratch_bytes);
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
    partition_json_params(g, j);
    pp_json_int(j, "nstages", p->nstages);
    pp_json_string(j, "balance", pp_balance_name(p->balance));
    pp_json_bool(j, "manual", p->manual);
    pp_json_begin_object(j, "order");
    pp_json_bool(j, "searched", p->order_searched);
    pp_json_int(j, "states", p->order_states);
    pp_json_int(j, "moved", p->reordered);
    pp_json_end_object(j);
    if (p->balance == PP_BALANCE_TIME) {
        pp_json_begin_object(j, "time_model");
        pp_json_double(j, "gflops", p->gflops);
        pp_json_double(j, "link_gbps", p->link_gbps);
        pp_json_double(j, "op_overhead", p->op_overhead);
        pp_json_end_object(j);
    }
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
    pp_json_bool(j, "optimal", !p->manual && p->bottleneck == p->optimum);
    if (p->manual) pp_json_null(j, "optimum");
    else pp_json_int(j, "optimum", p->optimum);
    pp_json_double(j, "tolerance", p->tolerance);
    pp_json_bool(j, "cut_bytes_minimal", !p->manual && p->tiebreak);
    pp_json_string(j, "memory_model", !p->memory ? "coarse" : p->memory->planned ? "planner" : "estimate");
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
        for (int k = p->stages[s].first_node; k <= p->stages[s].last_node; k++) {
            int i = p->order[k];
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
