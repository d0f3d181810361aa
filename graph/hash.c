/* The model hash that checkpoints carry: what a model *is* (its parameters and the
 * nodes that read them, its inputs and outputs), never its weights, and the same for
 * every layout (dims bound to any microbatch size fold different shape chains, so
 * only nodes that read a parameter, which are never folded, take part). */
#include <onnxpipe/graph_ir.h>

#include <string.h>

/* FNV-1a, 64 bits */
static uint64_t mix(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t mix_str(uint64_t h, const char *s) { return mix(h, s ? s : "", strlen(s ? s : "") + 1); }

uint64_t pp_graph_model_hash(const pp_graph *g)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < g->ninputs; i++) {
        const pp_value *v = &g->values[g->inputs[i]];
        h = mix_str(h, v->name);
        h = mix(h, &v->dtype, sizeof v->dtype);
    }
    for (int i = 0; i < g->noutputs; i++) h = mix_str(h, g->values[g->outputs[i]].name);
    for (int i = 0; i < g->ninits; i++) {
        const pp_value *v = &g->values[g->inits[i].value];
        if (!v->is_param) continue;
        h = mix_str(h, v->name);
        h = mix(h, &v->dtype, sizeof v->dtype);
        h = mix(h, &v->shape.rank, sizeof v->shape.rank);
        h = mix(h, v->shape.dims, (size_t)v->shape.rank * sizeof v->shape.dims[0]);
        for (int k = 0; k < v->nconsumers; k++) {
            const pp_node *n = &g->nodes[v->consumers[k]];
            h = mix_str(h, n->name);
            h = mix_str(h, n->op_type);
        }
    }
    return h;
}
