/* The preview's "what is trained" (graph/params.c decides): trained and frozen parameters
 * with the largest of each, the constants the rules keep out of training, the ties the
 * gradients are summed over and the exporter's merges that were untied; as text and JSON. */
#include "partition_internal.h"

#include <string.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/graph_ir.h>

/* The figures of one class of initializers (trained, frozen, constant). */
typedef struct klass {
    int count;
    int64_t elems;
    int largest;   /* value id, -1 */
} klass;

static void add(klass *k, const pp_graph *g, int v)
{
    k->count++;
    k->elems += pp_shape_numel(&g->values[v].shape);
    if (k->largest < 0 || pp_shape_numel(&g->values[v].shape) > pp_shape_numel(&g->values[k->largest].shape))
        k->largest = v;
}

/* trained, frozen, constants: float initializers a gradient reaches */
static void classify(const pp_graph *g, klass *k)
{
    int one;
    for (int c = 0; c < 3; c++) k[c] = (klass){0, 0, -1};
    for (int i = 0; i < g->ninits; i++) {
        int v = g->inits[i].value;
        const pp_value *val = &g->values[v];
        if (val->is_param) add(&k[0], g, v);
        else if (val->frozen) add(&k[1], g, v);
        else if (!val->folded && pp_dtype_is_float(val->dtype) && pp_graph_param_readers(g, v, &one, 1))
            add(&k[2], g, v);
    }
}

static void print_class(const pp_graph *g, const char *what, const klass *k, FILE *out)
{
    char a[32], sb[128];
    fprintf(out, "  %s: %s elements in %d initializer%s", what, pp_format_count((double)k->elems, a, sizeof a),
            k->count, k->count == 1 ? "" : "s");
    if (k->largest >= 0) {
        const pp_value *v = &g->values[k->largest];
        fputs(", the largest ", out);
        pp_text_fputs(v->name, 0, out);
        fputc(' ', out);
        pp_text_fputs(pp_shape_format(&v->shape, sb, sizeof sb), 0, out);
    }
    fputc('\n', out);
}

/* How a reading node of a tied parameter is named: the node. */
static void print_reader(const pp_graph *g, int node, FILE *out)
{
    fputs("'", out);
    pp_text_fputs(g->nodes[node].name, 0, out);
    fprintf(out, "' (%s)", g->nodes[node].op_type);
}

void partition_print_params(const pp_graph *g, FILE *out)
{
    klass k[3];
    classify(g, k);
    print_class(g, "trained", &k[0], out);
    if (k[1].count) print_class(g, "frozen (--frozen)", &k[1], out);
    if (k[2].count) print_class(g, "constants a gradient reaches, not trained", &k[2], out);
    enum { SHOWN = 8 };   /* readers named; the rest counted */
    int readers[SHOWN];
    for (int i = 0; i < g->ninits; i++) {
        int v = g->inits[i].value;
        const pp_value *val = &g->values[v];
        if (!val->is_param) continue;
        int n = pp_graph_param_readers(g, v, readers, SHOWN), shown = n < SHOWN ? n : SHOWN;
        if (n > 1) {
            fputs("  tied: ", out);
            pp_text_fputs(val->name, 0, out);
            if (val->param_names) {
                fputs(" (", out);
                pp_text_fputs(val->param_names, 0, out);
                fputs(")", out);
            }
            fputs(" is read by ", out);
            for (int r = 0; r < shown; r++) {
                fputs(r ? (r == n - 1 ? " and " : ", ") : "", out);
                print_reader(g, readers[r], out);
            }
            if (n > shown) fprintf(out, " and %d more", n - shown);
            fputc('\n', out);
        }
        if (val->untied_from == v + 1) {
            int copies = 0;
            for (int j = 0; j < g->ninits; j++) copies += g->values[g->inits[j].value].untied_from == v + 1;
            fputs("  untied: ", out);
            pp_text_fputs(val->name, 0, out);
            fprintf(out, " (an exporter's merge of equal values) into %d parameters, one per reading node "
                    "(--tie keeps it one)\n", copies);
        }
    }
}

void partition_json_params(const pp_graph *g, pp_json *j)
{
    klass k[3];
    classify(g, k);
    const char *names[3] = {"trained", "frozen", "constants"};
    pp_json_begin_object(j, "what_is_trained");
    for (int c = 0; c < 3; c++) {
        pp_json_begin_object(j, names[c]);
        pp_json_int(j, "initializers", k[c].count);
        pp_json_int(j, "elements", k[c].elems);
        if (k[c].largest >= 0) pp_json_string(j, "largest", g->values[k[c].largest].name);
        else pp_json_null(j, "largest");
        pp_json_end_object(j);
    }
    pp_json_begin_array(j, "tied");
    int readers[64];   /* read_by names the first 64; "readers" counts them all */
    for (int i = 0; i < g->ninits; i++) {
        int v = g->inits[i].value;
        if (!g->values[v].is_param) continue;
        int n = pp_graph_param_readers(g, v, readers, 64);
        if (n < 2) continue;
        pp_json_begin_object(j, NULL);
        pp_json_string(j, "name", g->values[v].name);
        pp_json_int(j, "readers", n);
        pp_json_begin_array(j, "read_by");
        for (int r = 0; r < n && r < 64; r++) pp_json_string(j, NULL, g->nodes[readers[r]].name);
        pp_json_end_array(j);
        pp_json_end_object(j);
    }
    pp_json_end_array(j);
    pp_json_begin_array(j, "untied");
    for (int i = 0; i < g->ninits; i++) {
        int v = g->inits[i].value;
        if (g->values[v].untied_from) {
            pp_json_begin_object(j, NULL);
            pp_json_string(j, "name", g->values[v].name);
            pp_json_string(j, "from", g->values[g->values[v].untied_from - 1].name);
            pp_json_end_object(j);
        }
    }
    pp_json_end_array(j);
    pp_json_end_object(j);
}
