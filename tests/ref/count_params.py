"""Counts the trainable parameters an ONNX file holds, by onnxpipe's rule, and lists
the ops it uses.

usage: count_params.py FILE...   prints, per file, the count and its op types

Rule (the one graph/finalize.c graph_mark_params applies): a parameter is a
floating-point initializer read by at least one node at a differentiable input. Which
inputs are differentiable comes from ONNX's own schemas (NonDifferentiable inputs:
shapes, axes, indices, masks, ...), plus the running statistics of
BatchNormalization, which ONNX tags differentiable but nobody trains. Constant nodes
are not initializers, so they never count; a tied weight counts once."""
import sys
from collections import Counter

import onnx
import onnx.defs
from onnx import TensorProto

FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE}
NOT_TRAINED = {("BatchNormalization", 3), ("BatchNormalization", 4)}   # running mean, var


def opset_of(model, domain=""):
    return next(o.version for o in model.opset_import if o.domain in (domain, "ai.onnx"))


def differentiable(op_type, index, opset):
    if (op_type, index) in NOT_TRAINED:
        return False
    schema = onnx.defs.get_schema(op_type, opset)
    formal = schema.inputs[min(index, len(schema.inputs) - 1)]   # variadic: the last formal
    return formal.differentiation_category != onnx.defs.OpSchema.DifferentiationCategory.NonDifferentiable


def trained_initializers(model):
    """{name: elements} of the floating-point initializers read at a differentiable input."""
    opset = opset_of(model)
    inits = {t.name: t for t in model.graph.initializer if t.data_type in FLOAT_TYPES}
    trained = {}
    for node in model.graph.node:
        for k, name in enumerate(node.input):
            if name in inits and differentiable(node.op_type, k, opset):
                n = 1
                for d in inits[name].dims:
                    n *= d
                trained[name] = n
    return trained


def count_file_params(model):
    return sum(trained_initializers(model).values())


def op_summary(model):
    """'Op(attr=..)' forms that matter to a loader, with counts."""
    forms = Counter()
    for node in model.graph.node:
        attrs = ",".join(f"{a.name}={onnx.helper.get_attribute_value(a)}" for a in node.attribute
                         if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS,
                                       onnx.AttributeProto.FLOAT, onnx.AttributeProto.STRING))
        forms[f"{node.op_type}({attrs})" if attrs else node.op_type] += 1
    return forms


def main(paths):
    for path in paths:
        m = onnx.load(path)
        print(f"{path}: opset {opset_of(m)}, {len(m.graph.node)} nodes, "
              f"{len(m.graph.initializer)} initializers, {count_file_params(m)} parameters")
        for form, n in sorted(op_summary(m).items()):
            print(f"  {n:3d} x {form}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
