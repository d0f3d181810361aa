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

#ifdef __cplusplus
}
#endif
#endif
