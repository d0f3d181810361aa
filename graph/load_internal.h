/* Private to graph/load*.c: the state of one model being loaded, shared by the model
 * and graph reader (load.c) and the tensor reader (load_tensor.c). */
#ifndef PP_LOAD_INTERNAL_H
#define PP_LOAD_INTERNAL_H

#include "graph_internal.h"
#include "load_wire.h"

#include <pthread.h>
#include <stdatomic.h>

/* One external-data file, mapped once however many initializers point into it. */
typedef struct ext_file {
    const char *location;   /* as written in the model */
    const uint8_t *addr;    /* NULL for an empty file */
    size_t len;             /* bytes */
} ext_file;

/* protobuf-c allocates unpacked messages from two arenas: small ones from a scratch
 * graph's arena (no per-message free; the model level lives until loading ends, one
 * graph element only until the next is decoded), and blocks of BIG_ALLOC bytes or more
 * (raw_data of large initializers) from the graph's own arena, so those initializers
 * keep their bytes without a copy. */
#define BIG_ALLOC (64 * 1024)

/* One value_info entry decoded ahead (graph/load_type.c); ok = 0: the main thread
 * decodes it itself. */
#define TYPE_REC_RANK 4

typedef struct type_rec {
    const char *name;   /* in the file, not NUL-terminated */
    uint32_t len;       /* bytes of name */
    int8_t ok, dtype, rank;   /* rank -1: no shape */
    int64_t dims[TYPE_REC_RANK];
} type_rec;

/* The second thread and what it has decoded: recs[0, done) are final. */
typedef struct types_ahead {
    pthread_t thread;
    int running;
    const wire_span *spans;
    size_t n;
    type_rec *recs;
    _Atomic size_t done;
    _Atomic int stop;
    pp_graph *scratch;   /* the thread's own arena */
    ProtobufCAllocator alloc;
    graph_region fill[5];   /* the graph's large arrays, faulted in first (see ahead_main) */
    int nfill;
} types_ahead;

typedef struct loader {
    pp_graph *g;
    pp_graph *scratch;      /* the model and graph messages */
    pp_graph *elem;         /* the current element when decoding from the wire */
    pp_graph *cur;          /* which of the two unpack_alloc uses */
    ProtobufCAllocator alloc;
    const char *what;       /* the file, for messages */
    const Onnx__GraphProto *gp;   /* elements unpacked by protobuf-c, or NULL: */
    wire_graph wg;                /* elements as wire spans */
    types_ahead ahead;            /* wg's value_info list, decoded on a second thread */
    int parse_failed;       /* an element did not parse: the message is final */
    const void **big;       /* blocks allocated in g's arena */
    int nbig, big_cap;
    int oom;
    const char *base_dir;   /* directory external locations are relative to; may be NULL */
    const char *model_path; /* the model's file, or NULL when loaded from a buffer */
    ext_file *files;
    int nfiles, cap;
} loader;

/* s, or dflt where s is NULL or empty. */
static inline const char *load_str_or(const char *s, const char *dflt) { return s && *s ? s : dflt; }

/* ONNX elem_type -> pp_dtype; UNDEFINED for types we cannot hold (string, complex, float8). */
pp_dtype load_dtype(int64_t t);

/* A ValueInfoProto's tensor type; dtype UNDEFINED / rank -1 where the file leaves them
 * out. Named dims are copied into g; with g NULL they fail (PP_ERR_UNSUPPORTED). */
pp_status load_type(pp_graph *g, const Onnx__ValueInfoProto *vi, pp_dtype *dtype, pp_shape *shape,
                    pp_error *err);

/* Starts the second thread: it faults in the pages of the nfill regions (the graph's
 * large arrays), then decodes the n value_info spans. Nothing for a small graph or where
 * no thread can start. */
void types_ahead_start(types_ahead *a, const wire_span *spans, size_t n, const graph_region *fill, int nfill);
/* Entry i if the thread has decoded it and it is plain, else NULL. */
const type_rec *types_ahead_get(types_ahead *a, size_t i);
/* Stops and joins the thread and frees what it decoded; safe on a zeroed types_ahead. */
void types_ahead_stop(types_ahead *a);

/* One tensor; `name` says which in messages ("initializer 'w'"). Data lives in the graph
 * or an mmap. */
pp_status load_tensor(loader *L, const Onnx__TensorProto *tp, const char *name, pp_const_tensor *t,
                      pp_error *err);

#endif
