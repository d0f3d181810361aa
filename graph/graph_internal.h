/* Private to graph/: the store behind a pp_graph (arena, name table, mmaps) and
 * the passes that finalize runs. */
#ifndef PP_GRAPH_INTERNAL_H
#define PP_GRAPH_INTERNAL_H

#include <onnxpipe/core_util.h>
#include <onnxpipe/graph_ir.h>

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    max_align_t data[];
} arena_block;

typedef struct graph_mmap {
    void *addr;
    size_t len;
} graph_mmap;

#define PP_INTERNED 64

struct pp_graph_store {
    arena_block *arena;
    int node_cap, value_cap, init_cap, input_cap, output_cap, opset_cap;
    /* open-addressing table: value name -> id; a slot holds the name and the high bits
     * of its hash, compared before the strings (name NULL = empty); name_hash[id] is the
     * full hash of value id's name, for rehashing */
    struct name_slot {
        const char *name;
        uint32_t id, tag;
    } *name_slots;
    int name_cap;
    uint64_t *name_hash;
    int last_found;   /* the value pp_graph_value last found (not made) */
    const char *interned[PP_INTERNED];   /* op types and domains of nodes, by hash */
    int *consumers;   /* the storage of every pp_value's consumers (graph_link) */
    graph_mmap *mmaps;
    int nmmaps, mmap_cap;
};

/* pp_graph_alloc without zeroing (for memory its user fills, e.g. protobuf-c's). */
void *graph_alloc_uninit(pp_graph *g, size_t n);

/* Empties g's arena for reuse, keeping its newest block: everything allocated is gone. */
void graph_arena_reset(pp_graph *g);

/* Makes room for at least this many nodes, values and initializers in all, so that
 * building a large graph does not regrow and rehash. 0 if it could not (a hint only:
 * the add_* calls still grow as needed). */
int graph_reserve(pp_graph *g, size_t nodes, size_t values, size_t inits);

/* A graph's large arrays (values, name table, nodes, ...) as far as this many nodes,
 * values and initializers fill them (and the capacity allows): up to max of those of
 * 4 MiB or more, for prefaulting their pages. */
typedef struct graph_region {
    void *p;
    size_t n;   /* bytes */
} graph_region;
int graph_big_arrays(const pp_graph *g, size_t nodes, size_t values, size_t inits, graph_region *r, int max);

/* Starts loading the name-table slot of this name into the cache, for a lookup or an
 * insertion soon after; no effect on results. */
void graph_prefetch_value(const pp_graph *g, const char *name);

/* The id of the value whose name is the n bytes at name (no NUL among them), or -1. */
int graph_find_value_n(const pp_graph *g, const char *name, size_t n);

/* Keeps an mmapped region alive until the graph is destroyed. */
pp_status graph_keep_mmap(pp_graph *g, void *addr, size_t len, pp_error *err);

/* Recomputes producers and consumers from the node list, checks single producers,
 * and sorts the nodes topologically (stable: file order among ready nodes).
 * Nodes whose op_type is NULL are dropped first (how passes delete nodes). */
pp_status graph_link(pp_graph *g, pp_error *err);

/* Turns a value into an initializer holding t (data copied into the graph);
 * its producer node, if any, must be deleted by the caller. */
pp_status graph_make_const(pp_graph *g, int value, const pp_const_tensor *t, pp_error *err);

/* The trained set, the tied copies and the untied merges (graph/params.c): sets is_param,
 * frozen, untied_from, copy_of and param_names of the initializers, g->nparams and
 * g->param_bytes. */
pp_status graph_params(pp_graph *g, const pp_param_rules *rules, pp_error *err);
/* Which values a gradient flows through to a float graph output, [nvalues] each: live[v],
 * and plain[v] (may be NULL) where a path without Cos or Sin does. Float values read at
 * differentiable inputs, walking the nodes (in topological order) backwards; a value whose
 * dtype is not inferred yet counts as float. */
void graph_grad_paths(const pp_graph *g, unsigned char *live, unsigned char *plain);
/* 1 when name matches one of the comma-separated globs in list (NULL: none); `also` (may be
 * NULL) is matched too: the PyTorch names ("a, b") the metadata gives the initializer. */
int graph_rule_matches(const char *list, const char *name, const char *also);

/* What values say (graph/params_values.c). A constant: a scalar, or a value non-finite or
 * of magnitude >= 1e30 (mask fills). */
int graph_constant_by_value(const pp_const_tensor *t);
int graph_all_equal(const pp_const_tensor *t);
/* A float table that is an exact function of positions: [1, .., T, C] whose every column is a
 * sinusoid of the row (folded rotary cos / sin, sinusoidal position encodings), or
 * [1, .., T, T] with one value along each diagonal (causal and sliding-window masks). */
int graph_position_table(const pp_const_tensor *t);
/* A vector of positive, non-increasing values at most 1: rotary inverse frequencies. */
int graph_angle_rates(const pp_const_tensor *t);
/* Ties each parameter that is another's copy (bit for bit, at least 1024 elements and not all
 * equal, or transposed; --untie keeps them apart): the copy becomes an Identity or Transpose
 * node's output (copy_of), no longer an initializer. *tied: how many; the caller relinks. */
pp_status graph_tie_copies(pp_graph *g, const pp_param_rules *rules, int *tied, pp_error *err);
/* 1 when initializer v may be trained under the rules (meta: the parsed "onnxpipe.parameters",
 * or NULL): folding leaves what may be trained unfolded, and folds the exporter's constants. */
int graph_may_train(const pp_graph *g, int v, const pp_param_rules *rules, const pp_jvalue *meta);

/* Folded constants repeated along leading dims (a mask expanded over the batch) keep one
 * slice where their readers broadcast it anyway (graph/compact.c). */
void graph_compact_constants(pp_graph *g);

/* Binds dims, folds constants, removes Identity, infers shapes (graph/infer.c). */
pp_status graph_infer(pp_graph *g, const pp_graph_options *opt, pp_error *err);

#endif
