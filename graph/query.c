/* The accessors of the public tier's opaque pp_graph (graph.h): what a trainer reads of a
 * model (its inputs, outputs, values' names, dtypes and shapes, parameter count) without
 * the IR's records (internal/onnxpipe/graph_ir.h). An id out of range gives -1, NULL or
 * PP_DTYPE_UNDEFINED, as pp_graph_const does. */
#include <onnxpipe/graph_ir.h>

static int has_value(const pp_graph *g, int v)
{
    return v >= 0 && v < g->nvalues;
}

int pp_graph_num_inputs(const pp_graph *g)
{
    return g->ninputs;
}

int pp_graph_input(const pp_graph *g, int i)
{
    return i >= 0 && i < g->ninputs ? g->inputs[i] : -1;
}

int pp_graph_num_outputs(const pp_graph *g)
{
    return g->noutputs;
}

int pp_graph_output(const pp_graph *g, int i)
{
    return i >= 0 && i < g->noutputs ? g->outputs[i] : -1;
}

const char *pp_graph_value_name(const pp_graph *g, int v)
{
    return has_value(g, v) ? g->values[v].name : NULL;
}

pp_dtype pp_graph_value_dtype(const pp_graph *g, int v)
{
    return has_value(g, v) ? g->values[v].dtype : PP_DTYPE_UNDEFINED;
}

const pp_shape *pp_graph_value_shape(const pp_graph *g, int v)
{
    return has_value(g, v) ? &g->values[v].shape : NULL;
}

int64_t pp_graph_num_params(const pp_graph *g)
{
    return g->nparams;
}
