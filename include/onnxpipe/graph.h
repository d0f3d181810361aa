/* The ONNX IR as a trainer sees it (public tier): a model loaded from a .onnx file through
 * protobuf-c and finalized (linked, topologically sorted, dims bound, constants folded,
 * shapes inferred, parameters marked), saved, and queried by name and id. A finalized graph
 * is immutable. Building a graph in code, its records, extraction and hashing are internal
 * (internal/onnxpipe/graph_ir.h). */
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

/* Frees g; accepts NULL. Local. */
PP_API void pp_graph_destroy(pp_graph *g);

/* The id of the value with this name, or -1. Local; thread-safe on a finalized graph. */
PP_API int pp_graph_find_value(const pp_graph *g, const char *name);
/* The model's metadata value of key, or NULL; owned by the graph. Local; thread-safe on a finalized graph. */
PP_API const char *pp_graph_metadata(const pp_graph *g, const char *key);

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

/* Node id by name, or -1. Local; thread-safe on a finalized graph. */
PP_API int pp_graph_find_node(const pp_graph *g, const char *name);

#ifdef __cplusplus
}
#endif
#endif
