/* The layout of the ONNX IR (internal tier): the node, value and initializer records of a
 * graph and struct pp_graph itself, which the library's modules, the CLI, tests and bench
 * read and write directly. A trainer sees pp_graph as an opaque handle with accessors
 * (graph.h); the node's op is the registry's pp_op (backend/op.h). */
#ifndef ONNXPIPE_GRAPH_IR_H
#define ONNXPIPE_GRAPH_IR_H

#include <onnxpipe/backend/op.h>
#include <onnxpipe/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_node {
    const char *name;       /* the ONNX name, or "<op_type>_<index>" when the file had none */
    const char *op_type;
    const char *domain;     /* "" for ai.onnx */
    pp_op op;               /* the registry's op (op.h); set by pp_graph_finalize */
    int *inputs;            /* value ids; -1 for an omitted optional input ("") */
    int ninputs;
    int *outputs;           /* value ids; -1 for an omitted optional output */
    int noutputs;
    pp_attr *attrs;
    int nattrs;
} pp_node;

typedef enum {
    PP_VALUE_NODE = 0,      /* produced by a node */
    PP_VALUE_INPUT,         /* a graph input fed by the caller */
    PP_VALUE_INITIALIZER,   /* a constant tensor (weights, folded constants) */
} pp_value_kind;

typedef struct pp_value {
    const char *name;
    pp_dtype dtype;
    pp_shape shape;         /* after finalize: fully known for every used value */
    pp_value_kind kind;
    int producer;           /* node id, or -1 */
    int *consumers;         /* node ids, one entry per use (a node using it twice appears twice) */
    int nconsumers;
    int init;               /* index into graph->inits, or -1 */
    int is_output;          /* a graph output */
    int is_param;           /* a trainable parameter (graph/params.c says which initializers are) */
    int folded;             /* an initializer made from a Constant node or by folding: never trained */
    int frozen;             /* a parameter by the rules that --frozen (pp_param_rules.frozen) froze:
                               a constant to the stages (no gradient, no optimizer state) */
    int untied_from;        /* an initializer the exporter merged, untied: 1 + the value id of the
                               original (the original too); 0: not untied */
    const char *param_names;/* the PyTorch parameters it holds ("a, b"), from the export recipe's
                               metadata "onnxpipe.parameters"; NULL without */
    int copy_of;            /* an initializer the exporter wrote as a second copy of a parameter
                               (bit for bit, or its transpose), tied to it (graph/params_values.c):
                               1 + the value id of the parameter, which the node producing this
                               value (Identity or Transpose, made at load) copies; export writes
                               it back as an initializer. 0: none */
} pp_value;

typedef struct pp_initializer {
    int value;              /* value id */
    pp_const_tensor t;      /* data may live in an mmapped external-data file */
} pp_initializer;

typedef struct pp_opset {
    const char *domain;
    int64_t version;
} pp_opset;

/* A metadata_props entry of the model (the export recipe's "onnxpipe.parameters", ...). */
typedef struct pp_graph_meta {
    const char *key, *value;
} pp_graph_meta;

typedef struct pp_graph_store pp_graph_store;   /* private: arena, mmaps */

struct pp_graph {
    const char *path;           /* file it was loaded from, or NULL */
    const char *name;
    const char *producer_name;  /* e.g. "pytorch" */
    int64_t ir_version;
    int64_t opset;              /* version of the ai.onnx domain */
    pp_opset *opsets;
    int nopsets;
    pp_node *nodes;             /* topological order after finalize */
    int nnodes;
    pp_value *values;
    int nvalues;
    pp_initializer *inits;
    int ninits;
    int *inputs;                /* value ids of graph inputs that are not initializers */
    int ninputs;
    int *outputs;               /* value ids of graph outputs */
    int noutputs;
    pp_graph_meta *meta;        /* the model's metadata_props, kept by save and export */
    int nmeta;
    int64_t nparams;            /* trainable elements, each tied initializer counted once */
    int64_t param_bytes;
    int finalized;
    pp_graph_store *store;
};

/* ---- building (the loader, the example models, extraction, tests) ---------- */

/* An empty graph to build in code; opset is the ai.onnx version. The caller frees it with pp_graph_destroy.
 * Local. */
pp_status pp_graph_create(const char *name, int64_t opset, pp_graph **out, pp_error *err);
/* Memory and strings owned by the graph, freed with it (pp_graph_destroy). Local. */
void *pp_graph_alloc(pp_graph *g, size_t n);
const char *pp_graph_strdup(pp_graph *g, const char *s);

/* The id of the value with this name, created (kind NODE, dtype undefined) if absent; -1 on OOM. Local. */
int pp_graph_value(pp_graph *g, const char *name);
/* The last node (largest id) reading value v, or its producer when no later node reads it;
 * -1 for a value no node makes (graph inputs, initializers). A cut after node i is crossed
 * by v when producer <= i < last reader. Local; thread-safe on a finalized graph. */
int pp_value_last_reader(const pp_graph *g, int v);

/* Declares a graph input; name and shape (its syms too) are copied into the graph. Local. */
pp_status pp_graph_add_input(pp_graph *g, const char *name, pp_dtype dtype, const pp_shape *shape,
                             pp_error *err);
/* copy != 0 copies the data into the graph; copy == 0 borrows it (it must outlive the graph). Local. */
pp_status pp_graph_add_initializer(pp_graph *g, const char *name, pp_dtype dtype, const pp_shape *shape,
                                   const void *data, size_t nbytes, int copy, pp_error *err);
/* Declares a graph output; dtype/shape may be UNDEFINED / NULL (inferred). Local. */
pp_status pp_graph_add_output(pp_graph *g, const char *name, pp_dtype dtype, const pp_shape *shape,
                              pp_error *err);
/* Adds a node; "" in inputs/outputs marks an omitted optional one. name may be NULL. Strings are copied
 * into the graph. Local. */
pp_status pp_graph_add_node(pp_graph *g, const char *op_type, const char *domain, const char *name,
                            const char *const *inputs, int ninputs,
                            const char *const *outputs, int noutputs,
                            int *node_id, pp_error *err);
/* Attributes on node node_id (copied into the graph). Local. */
pp_status pp_graph_set_attr_int(pp_graph *g, int node_id, const char *name, int64_t v, pp_error *err);
pp_status pp_graph_set_attr_float(pp_graph *g, int node_id, const char *name, float v, pp_error *err);
pp_status pp_graph_set_attr_string(pp_graph *g, int node_id, const char *name, const char *v, pp_error *err);
pp_status pp_graph_set_attr_ints(pp_graph *g, int node_id, const char *name, const int64_t *v, int n,
                                 pp_error *err);
pp_status pp_graph_set_attr_floats(pp_graph *g, int node_id, const char *name, const float *v, int n,
                                   pp_error *err);
pp_status pp_graph_set_attr_tensor(pp_graph *g, int node_id, const char *name, const pp_const_tensor *t,
                                   pp_error *err);
/* Any attribute, copied (used by the loader and by subgraph extraction); pp_graph_add_opset declares an
 * opset import. Local. */
pp_status pp_graph_set_attr(pp_graph *g, int node_id, const pp_attr *a, pp_error *err);
/* The nodes reading value v at an input that carries a gradient, each node once, in node order:
 * their ids in out (at most max), and how many there are in all (a parameter read by several
 * is tied). Local; thread-safe on a finalized graph. */
int pp_graph_param_readers(const pp_graph *g, int v, int *out, int max);
/* Sets (or replaces) a metadata entry; key and value are copied. Local. */
pp_status pp_graph_set_metadata(pp_graph *g, const char *key, const char *value, pp_error *err);
pp_status pp_graph_add_opset(pp_graph *g, const char *domain, int64_t version, pp_error *err);

/* Links values to producers and consumers, checks that every value has one producer,
 * sorts nodes topologically (a cycle is an error naming a node on it), rejects ops
 * outside the supported set (naming node, op type and domain), binds symbolic dims,
 * folds constant subgraphs and removes Identity nodes (unless opt->no_fold),
 * infers every shape, and marks trainable parameters: floating-point initializers
 * that reach a differentiable input of some node. opt may be NULL. Local. */
pp_status pp_graph_finalize(pp_graph *g, const pp_graph_options *opt, pp_error *err);


/* ---- queries beyond the public ones ------------------------------------------ */

/* The constant data of a value (initializer), or NULL; owned by g, valid while g lives. Local; thread-safe
 * on a finalized graph. */
const pp_const_tensor *pp_graph_const(const pp_graph *g, int value);
/* A 64-bit hash of what the model is, for checkpoints: graph inputs and outputs (names,
 * dtypes), every trainable parameter (name, dtype, shape) and the nodes that read it
 * (name, op type); not the weights. The same for any dims bound at load. Local; thread-safe on a
 * finalized graph. */
uint64_t pp_graph_model_hash(const pp_graph *g);
/* A new finalized graph holding the given nodes of g (ids in g's topological order):
 * its inputs are the non-constant values those nodes consume but do not produce,
 * its initializers the ones they use (data borrowed from g, which must outlive it),
 * its outputs the values listed in out_values. The caller frees *out with pp_graph_destroy. Local. */
pp_status pp_graph_extract(const pp_graph *g, const int *nodes, int nnodes,
                           const int *out_values, int nout, const char *name,
                           pp_graph **out, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
