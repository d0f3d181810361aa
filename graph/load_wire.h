/* Private to graph/load*.c: reading an ONNX model's wire format directly. The model and
 * graph are split into per-element byte spans, and the common elements (plain nodes,
 * value types, raw-data tensors) are decoded without protobuf-c; anything else is left
 * to protobuf-c, so what is accepted and how it reads never changes. */
#ifndef PP_LOAD_WIRE_H
#define PP_LOAD_WIRE_H

#include <onnx/onnx.pb-c.h>

#include <stddef.h>
#include <stdint.h>

typedef struct wire_span {
    const uint8_t *p;
    size_t n;   /* bytes */
} wire_span;

/* The repeated fields of a GraphProto as spans, in file order, and its other fields
 * (name, sparse initializers, ...) as one buffer that is itself a GraphProto. */
typedef struct wire_graph {
    wire_span *node, *init, *input, *output, *value_info;
    size_t n_node, n_init, n_input, n_output, n_value_info;
    uint8_t *rest;
    size_t rest_len;
} wire_graph;

/* Splits a ModelProto into its one graph field and the other fields (*rest, malloc'd, a
 * ModelProto without graph) and the graph into a wire_graph. Returns 1 on success, 0
 * where the file is not in the simple shape (no graph or several, unusual framing):
 * then protobuf-c must parse the whole model; -1 when out of memory. */
int wire_split_model(const uint8_t *buf, size_t len, uint8_t **rest, size_t *rest_len, wire_graph *wg);

void wire_graph_free(wire_graph *wg);

/* Calls fn for each length-delimited field of s numbered a or b. */
void wire_each_string(wire_span s, uint32_t a, uint32_t b, void (*fn)(void *ctx, wire_span str), void *ctx);

/* Decode one element the way protobuf-c would, allocating from a; NULL where the element
 * has something these decoders do not handle (then use protobuf-c's unpack) or on OOM. */
Onnx__NodeProto *wire_node(wire_span s, ProtobufCAllocator *a);
Onnx__ValueInfoProto *wire_value_info(wire_span s, ProtobufCAllocator *a);
Onnx__TensorProto *wire_tensor(wire_span s, ProtobufCAllocator *a);

#endif
