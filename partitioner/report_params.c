/* The preview's "what is trained" (graph/params.c decides): trained and frozen parameters
 * with the largest of each beside what the file's metadata says (a warning where it has
 * none), the constants the rules keep out of training, the ties the gradients are summed
 * over, the exporter's copies tied and its merges untied; as text and JSON. */
#include "partition_internal.h"

#include <string.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/graph_ir.h>

#define SHOWN_READERS 8   /* reading nodes of a tie the text names */

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

/* trained, frozen, constants: float initializers read at an input that can take a gradient */
static void classify(const pp_graph *g, klass *k)
{
    for (int c = 0; c < 3; c++) k[c] = (klass){0, 0, -1};
    for (int i = 0; i < g->ninits; i++) {
        int v = g->inits[i].value;
        const pp_value *val = &g->values[v];
        if (val->is_param) add(&k[0], g, v);
        else if (val->frozen) add(&k[1], g, v);
        else if (!val->folded && pp_dtype_is_float(val->dtype) && pp_graph_param_readers(g, v, NULL, 0))
            add(&k[2], g, v);
    }
}

/* What the export recipe's metadata says: the initializers onnxpipe.parameters names and
 * their elements, and PyTorch's parameter count (onnxpipe.export's pytorch_numel, -1 if
 * absent). 0 when the file has no onnxpipe.parameters. */
typedef struct meta_count {
    int inits;
    int64_t elems, pytorch;
} meta_count;

static int metadata_count(const pp_graph *g, meta_count *m)
{
    *m = (meta_count){0, 0, -1};
    if (!pp_graph_metadata(g, "onnxpipe.parameters")) return 0;
    for (int i = 0; i < g->ninits; i++) {
        const pp_value *v = &g->values[g->inits[i].value];
        if (!v->param_names) continue;
        m->inits++;
        m->elems += pp_shape_numel(&v->shape);
    }
    const char *recipe = pp_graph_metadata(g, "onnxpipe.export");
    pp_jvalue *j = NULL;
    if (recipe && pp_json_parse(recipe, &j, NULL) == PP_OK) {
        const pp_jvalue *n = pp_json_get(j, "pytorch_numel");
        if (n && n->type == PP_JNUM) m->pytorch = (int64_t)n->num;
    }
    pp_json_free(j);
    return 1;
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

static void print_metadata(const pp_graph *g, FILE *out)
{
    meta_count m;
    char a[32], b[32];
    if (!metadata_count(g, &m)) {
        fputs("  warning: no 'onnxpipe.parameters' metadata (the file was not exported by "
              "examples/export/): the trained set is onnxpipe's reading of the graph (docs/exporting.md, "
              "\"Files without the metadata\"); compare it with your model's parameter count\n", out);
        return;
    }
    fprintf(out, "  the file's metadata: %s elements in the %d initializers it names as parameters",
            pp_format_count((double)m.elems, a, sizeof a), m.inits);
    if (m.pytorch >= 0) fprintf(out, ", PyTorch's count %s", pp_format_count((double)m.pytorch, b, sizeof b));
    fputc('\n', out);
}

/* How a reading node of a tied parameter is named: the node. */
static void print_reader(const pp_graph *g, int node, FILE *out)
{
    fputs("'", out);
    pp_text_fputs(g->nodes[node].name, 0, out);
    fprintf(out, "' (%s)", g->nodes[node].op_type);
}

static void print_tie(const pp_graph *g, int v, FILE *out)
{
    const pp_value *val = &g->values[v];
    int readers[SHOWN_READERS];
    int n = pp_graph_param_readers(g, v, readers, SHOWN_READERS), shown = n < SHOWN_READERS ? n : SHOWN_READERS;
    if (n < 2) return;
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

void partition_print_params(const pp_graph *g, FILE *out)
{
    klass k[3];
    char sb[128];
    classify(g, k);
    print_class(g, "trained", &k[0], out);
    print_metadata(g, out);
    if (k[1].count) print_class(g, "frozen (--frozen)", &k[1], out);
    if (k[2].count) print_class(g, "constants read where a gradient could flow, not trained", &k[2], out);
    for (int i = 0; i < g->ninits; i++) {
        int v = g->inits[i].value;
        const pp_value *val = &g->values[v];
        if (!val->is_param) continue;
        print_tie(g, v, out);
        if (val->untied_from == v + 1) {
            int copies = 0;
            for (int j = 0; j < g->ninits; j++) copies += g->values[g->inits[j].value].untied_from == v + 1;
            fputs("  untied: ", out);
            pp_text_fputs(val->name, 0, out);
            fprintf(out, " (an exporter's merge of equal values) into %d parameters, one per reading node "
                    "(--tie keeps it one)\n", copies);
        }
    }
    for (int v = 0; v < g->nvalues; v++) {
        const pp_value *c = &g->values[v];
        if (!c->copy_of) continue;
        const int transposed = c->producer >= 0 && g->nodes[c->producer].op == PP_OP_TRANSPOSE;
        fputs("  tied copy: ", out);
        pp_text_fputs(c->name, 0, out);
        fputc(' ', out);
        pp_text_fputs(pp_shape_format(&c->shape, sb, sizeof sb), 0, out);
        fputs(" holds ", out);
        pp_text_fputs(g->values[c->copy_of - 1].name, 0, out);
        fprintf(out, "%s, bit for bit: trained as that one parameter (--untie ", transposed ? " transposed" : "");
        pp_text_fputs(c->name, 0, out);
        fputs(" trains them apart)\n", out);
    }
}

void partition_json_params(const pp_graph *g, pp_json *j)
{
    klass k[3];
    meta_count m;
    classify(g, k);
    const char *names[3] = {"trained", "frozen", "constants"};
    pp_json_begin_object(j, "what_is_trained");
    for (int c = 0; c < 3; c++) {
        pp_json_begin_object(j, names[c]);
        pp_json_int(j, "initializers", k[c].count);
        pp_json_int(j, "elements", k[c].elems);
        if (k[c].largest >= 0) pp_json_string(j, "largest", g->values[k[c].largest].name);
        else pp_json_null(j, "largest");
        if (c == 0) {
            pp_json_begin_array(j, "names");
            for (int i = 0; i < g->ninits; i++)
                if (g->values[g->inits[i].value].is_param) pp_json_string(j, NULL, g->values[g->inits[i].value].name);
            pp_json_end_array(j);
        }
        pp_json_end_object(j);
    }
    pp_json_begin_object(j, "metadata");
    int has = metadata_count(g, &m);
    pp_json_bool(j, "parameters", has);
    if (has) {
        pp_json_int(j, "initializers", m.inits);
        pp_json_int(j, "elements", m.elems);
    }
    if (m.pytorch >= 0) pp_json_int(j, "pytorch_numel", m.pytorch);
    pp_json_end_object(j);
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
        pp_json_begin_array(j, "read_by");   /* the first 64 */
        for (int r = 0; r < n && r < 64; r++) pp_json_string(j, NULL, g->nodes[readers[r]].name);
        pp_json_end_array(j);
        pp_json_end_object(j);
    }
    pp_json_end_array(j);
    pp_json_begin_array(j, "copies");
    for (int v = 0; v < g->nvalues; v++) {
        const pp_value *c = &g->values[v];
        if (!c->copy_of) continue;
        pp_json_begin_object(j, NULL);
        pp_json_string(j, "name", c->name);
        pp_json_string(j, "of", g->values[c->copy_of - 1].name);
        pp_json_bool(j, "transposed", c->producer >= 0 && g->nodes[c->producer].op == PP_OP_TRANSPOSE);
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
