/* Private to graph/load*.c: the state of one model being loaded, shared by the model
 * and graph reader (load.c) and the tensor reader (load_tensor.c). */
#ifndef PP_LOAD_INTERNAL_H
#define PP_LOAD_INTERNAL_H

#include "graph_internal.h"
#include "load_wire.h"

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

typedef struct loader {
    pp_graph *g;
    pp_graph *scratch;      /* the model and graph messages */
    pp_graph *elem;         /* the current element when decoding from the wire */
    pp_graph *cur;          /* which of the two unpack_alloc uses */
    ProtobufCAllocator alloc;
    const char *what;       /* the file, for messages */
    const Onnx__GraphProto *gp;   /* elements unpacked by protobuf-c, or NULL: */
    wire_graph wg;                /* elements as wire spans */
    int parse_failed;       /* an element did not parse: the message is final */
    const void **big;       /* blocks allocated in g's arena */
    int nbig, big_cap;
    int oom;
    const char *base_dir;   /* directory external locations are relative to; may be NULL */
    ext_file *files;
    int nfiles, cap;
} loader;

/* s, or dflt where s is NULL or empty. */
static inline const char *load_str_or(const char *s, const char *dflt) { return s && *s ? s : dflt; }

/* ONNX elem_type -> pp_dtype; UNDEFINED for types we cannot hold (string, complex, float8). */
pp_dtype load_dtype(int64_t t);

/* One tensor; `name` says which in messages ("initializer 'w'"). Data lives in the graph
 * or an mmap. */
pp_status load_tensor(loader *L, const Onnx__TensorProto *tp, const char *name, pp_const_tensor *t,
                      pp_error *err);

#endif
