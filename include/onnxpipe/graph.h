/* The ONNX IR: a graph of nodes and SSA values with initializers, loaded from a
 * .onnx file through protobuf-c (or built in code), then finalized: linked,
 * topologically sorted, dims bound, constants folded, shapes inferred, parameters
 * marked. A finalized graph is immutable. */
#ifndef ONNXPIPE_GRAPH_H
#define ONNXPIPE_GRAPH_H

#include <onnxpipe/core.h>
#include <onnxpipe/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A model: opaque here (its records are internal: internal/onnxpipe/graph_ir.h). Nodes and
 * values are named by id, 0 .. count - 1; a value id is what pp_graph_find_value returns. */
typedef struct pp_graph pp_graph;

/* A symbolic dim bound to a value by the caller (--dim T=128). */
typedef struct pp_dim_binding {
    const char *name;
    int64_t value;
} pp_dim_binding;

/* What is trained besides the rules of graph/params.c (docs/exporting.md): comma-separated
 * globs (fnmatch) over initializer names and the PyTorch names the model's metadata gives
 * them; NULL: none. */
typedef struct pp_param_rules {
    const char *trainable;  /* trained although the rules call them constants (--trainable) */
    const char *frozen;     /* never trained: no gradient, no optimizer state (--frozen) */
    const char *untie;      /* each reading node gets its own copy (--untie) */
    const char *tie;        /* kept one parameter although they look like an exporter's merge (--tie) */
} pp_param_rules;

typedef struct pp_graph_options {
    int64_t batch;                  /* binds dim 0 of every graph input when it is symbolic; 0: no */
    const pp_dim_binding *dims;     /* named symbolic dims */
    int ndims;
    int no_fold;                    /* keep constant subgraphs and Identity nodes as they are */
    int allow_unknown_dims;         /* preview only: leave unbound dims as -1 instead of failing */
    pp_param_rules params;          /* what is trained besides the default rules */
} pp_graph_options;

/* ---- loading, saving ---------------------------------------------------- */

/* Reads an ONNX model (IR 7-10, opsets 13-23), including external data (mmapped),
 * and finalizes it. opt may be NULL. The caller frees *out with pp_graph_destroy. Local. */
PP_API pp_status pp_graph_load(const char *path, const pp_graph_options *opt, pp_graph **out, pp_error *err);
/* Same, from a serialized ModelProto in memory; base_dir resolves external data (may be NULL). buf and
 * base_dir are not kept (the data is copied). Local. */
PP_API pp_status pp_graph_load_buffer(const void *buf, size_t len, const char *base_dir,
                                      const pp_graph_options *opt, pp_graph **out, pp_error *err);

typedef struct pp_graph_save_options {
    int64_t external_threshold;  /* initializers go to external data when the model's weights
                                    exceed this many bytes; 0 means the 2 GB protobuf limit */
    int force_external;          /* write all initializers >= 1 KiB to PATH.data */
} pp_graph_save_options;

/* Writes a valid ONNX model. opt may be NULL. Local. */
PP_API pp_status pp_graph_save(const pp_graph *g, const char *path, const pp_graph_save_options *opt,
                               pp_error *err);

/* ---- building ----------------------------------------------------------- */

/* An empty graph to build in code; opset is the ai.onnx version. The caller frees it with pp_graph_destroy.
 * Local. */
PP_API pp_status pp_graph_create(const char *name, int64_t opset, pp_graph **out, pp_error *err);
PP_API void pp_graph_destroy(pp_graph *g);

/* Memory and strings owned by the graph, freed with it (pp_graph_destroy). Local. */
PP_API void *pp_graph_alloc(pp_graph *g, size_t n);
PP_API const char *pp_graph_strdup(pp_graph *g, const char *s);

/* The id of the value with this name, created (kind NODE, dtype undefined) if absent; -1 on OOM. Local. */
PP_API int pp_graph_value(pp_graph *g, const char *name);
/* The id of the value with this name, or -1. Local; thread-safe on a finalized graph. */
PP_API int pp_graph_find_value(const pp_graph *g, const char *name);
/* The last node (largest id) reading value v, or its producer when no later node reads it;
 * -1 for a value no node makes (graph inputs, initializers). A cut after node i is crossed
 * by v when producer <= i < last reader. Local; thread-safe on a finalized graph. */
PP_API int pp_value_last_reader(const pp_graph *g, int v);

/* Declares a graph input; name and shape (its syms too) are copied into the graph. Local. */
PP_API pp_status pp_graph_add_input(pp_graph *g, const char *name, pp_dtype dtype, const pp_shape *shape,
                                    pp_error *err);
/* copy != 0 copies the data into the graph; copy == 0 borrows it (it must outlive the graph). Local. */
PP_API pp_status pp_graph_add_initializer(pp_graph *g, const char *name, pp_dtype dtype, const pp_shape *shape,
                                          const void *data, size_t nbytes, int copy, pp_error *err);
/* Declares a graph output; dtype/shape may be UNDEFINED / NULL (inferred). Local. */
PP_API pp_status pp_graph_add_output(pp_graph *g, const char *name, pp_dtype dtype, const pp_shape *shape,
                                     pp_error *err);
/* Adds a node; "" in inputs/outputs marks an omitted optional one. name may be NULL. Strings are copied
 * into the graph. Local. */
PP_API pp_status pp_graph_add_node(pp_graph *g, const char *op_type, const char *domain, const char *name,
                                   const char *const *inputs, int ninputs,
                                   const char *const *outputs, int noutputs,
                                   int *node_id, pp_error *err);
/* Attributes on node node_id (copied into the graph). Local. */
PP_API pp_status pp_graph_set_attr_int(pp_graph *g, int node_id, const char *name, int64_t v, pp_error *err);
PP_API pp_status pp_graph_set_attr_float(pp_graph *g, int node_id, const char *name, float v, pp_error *err);
PP_API pp_status pp_graph_set_attr_string(pp_graph *g, int node_id, const char *name, const char *v, pp_error *err);
PP_API pp_status pp_graph_set_attr_ints(pp_graph *g, int node_id, const char *name, const int64_t *v, int n,
                                        pp_error *err);
PP_API pp_status pp_graph_set_attr_floats(pp_graph *g, int node_id, const char *name, const float *v, int n,
                                          pp_error *err);
PP_API pp_status pp_graph_set_attr_tensor(pp_graph *g, int node_id, const char *name, const pp_const_tensor *t,
                                          pp_error *err);
/* Any attribute, copied (used by the loader and by subgraph extraction); pp_graph_add_opset declares an
 * opset import. Local. */
PP_API pp_status pp_graph_set_attr(pp_graph *g, int node_id, const pp_attr *a, pp_error *err);
/* The nodes reading value v at an input that carries a gradient, each node once, in node order:
 * their ids in out (at most max), and how many there are in all (a parameter read by several
 * is tied). Local; thread-safe on a finalized graph. */
PP_API int pp_graph_param_readers(const pp_graph *g, int v, int *out, int max);
/* The model's metadata value of key, or NULL; owned by the graph. Local; thread-safe on a finalized graph. */
PP_API const char *pp_graph_metadata(const pp_graph *g, const char *key);
/* Sets (or replaces) a metadata entry; key and value are copied. Local. */
PP_API pp_status pp_graph_set_metadata(pp_graph *g, const char *key, const char *value, pp_error *err);
PP_API pp_status pp_graph_add_opset(pp_graph *g, const char *domain, int64_t version, pp_error *err);

/* Links values to producers and consumers, checks that every value has one producer,
 * sorts nodes topologically (a cycle is an error naming a node on it), rejects ops
 * outside the supported set (naming node, op type and domain), binds symbolic dims,
 * folds constant subgraphs and removes Identity nodes (unless opt->no_fold),
 * infers every shape, and marks trainable parameters: floating-point initializers
 * that reach a differentiable input of some node. opt may be NULL. Local. */
PP_API pp_status pp_graph_finalize(pp_graph *g, const pp_graph_options *opt, pp_error *err);

/* ---- queries ------------------------------------------------------------ */

/* The graph inputs a trainer feeds (not initializers) and the graph outputs, in the model's
 * order: how many, and the value id of the i-th (-1 outside 0 .. count - 1). Local;
 * thread-safe on a finalized graph. */
PP_API int pp_graph_num_inputs(const pp_graph *g);
PP_API int pp_graph_input(const pp_graph *g, int i);
PP_API int pp_graph_num_outputs(const pp_graph *g);
PP_API int pp_graph_output(const pp_graph *g, int i);
/* Value v's name, dtype and shape (fully known after finalize, except dims a preview left
 * unbound: -1); owned by g, valid while g lives; NULL / PP_DTYPE_UNDEFINED for an id that
 * is not a value. Local; thread-safe on a finalized graph. */
PP_API const char *pp_graph_value_name(const pp_graph *g, int v);
PP_API pp_dtype pp_graph_value_dtype(const pp_graph *g, int v);
PP_API const pp_shape *pp_graph_value_shape(const pp_graph *g, int v);
/* Trainable parameter elements, each tied initializer counted once. Local; thread-safe on a
 * finalized graph. */
PP_API int64_t pp_graph_num_params(const pp_graph *g);

/* The constant data of a value (initializer), or NULL; owned by g, valid while g lives. Local; thread-safe
 * on a finalized graph. */
PP_API const pp_const_tensor *pp_graph_const(const pp_graph *g, int value);
/* A 64-bit hash of what the model is, for checkpoints: graph inputs and outputs (names,
 * dtypes), every trainable parameter (name, dtype, shape) and the nodes that read it
 * (name, op type); not the weights. The same for any dims bound at load. Local; thread-safe on a
 * finalized graph. */
PP_API uint64_t pp_graph_model_hash(const pp_graph *g);
/* Node id by name, or -1. Local; thread-safe on a finalized graph. */
PP_API int pp_graph_find_node(const pp_graph *g, const char *name);

/* A new finalized graph holding the given nodes of g (ids in g's topological order):
 * its inputs are the non-constant values those nodes consume but do not produce,
 * its initializers the ones they use (data borrowed from g, which must outlive it),
 * its outputs the values listed in out_values. The caller frees *out with pp_graph_destroy. Local. */
PP_API pp_status pp_graph_extract(const pp_graph *g, const int *nodes, int nnodes,
                                  const int *out_values, int nout, const char *name,
                                  pp_graph **out, pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
