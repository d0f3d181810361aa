"""Writes one-node (or few-node) ONNX models of the indexing, padding, tiling, cumulative and
extra reduction ops, and of the attribute -> input moves of ReduceSum, ReduceMean, Squeeze,
Unsqueeze, Split and Slice at opsets 13, 17, 18, 20 and 23, for tests/test_index_ops.sh to
run through `onnxpipe eval` and onnxruntime (tests/ref/forward_ref.py). Graph input x0 is
float32 with batch dim 2, x = x0 + w with a weight w of one sample's shape (a model needs a
parameter to be partitioned; a one-element one would be a constant); indices, axes, pads and the like are initializers.

usage: index_ops_models.py OUTDIR   (prints one model file name per line)"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

F, I64 = TensorProto.FLOAT, TensorProto.INT64
OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)


def model(name, opset, x_shape, nodes, outputs, inits=()):
    """nodes: (op, inputs, outputs, attrs); outputs: (name, elem type); inits: (name, array)."""
    nodes = [("Add", ["x0", "w"], ["x"], {})] + list(nodes)
    w = np.linspace(0.1, 0.3, int(np.prod(x_shape[1:]))).astype(np.float32).reshape(x_shape[1:])
    inits = [("w", w)] + list(inits)
    g = helper.make_graph(
        [helper.make_node(op, i, o, name=f"n{k}", **a) for k, (op, i, o, a) in enumerate(nodes)], name,
        [helper.make_tensor_value_info("x0", F, x_shape)],
        [helper.make_tensor_value_info(o, t, None) for o, t in outputs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = f"{name}_op{opset}.onnx"
    save(m, os.path.join(OUT, path))
    print(path)


def one(name, opset, x_shape, op, inputs, attrs=None, inits=(), outs=(("y", F),)):
    model(name, opset, x_shape, [(op, ["x"] + inputs, [o for o, _ in outs], attrs or {})], outs, inits)


i64 = lambda *v: np.array(v, dtype=np.int64)

# ---- the new ops ----
one("cumsum", 17, [2, 5, 3], "CumSum", ["ax"], inits=[("ax", i64(1))])
one("cumsum_ex_rev", 17, [2, 5, 3], "CumSum", ["ax"], {"exclusive": 1, "reverse": 1}, [("ax", np.int64(-1))])
# position ids from a mask: int64 through Cast
model("cumsum_int", 17, [2, 6], [("Cast", ["x"], ["xi"], {"to": I64}), ("CumSum", ["xi", "ax"], ["y"], {})],
      [("y", I64)], [("ax", i64(1))])
one("trilu_upper", 14, [2, 4, 5], "Trilu", ["k"], {"upper": 1}, [("k", np.int64(1))])
one("trilu_lower", 17, [2, 4, 5], "Trilu", ["k"], {"upper": 0}, [("k", np.int64(-1))])
# a causal mask folded at load: Trilu of a constant, then used
model("trilu_fold", 17, [2, 5, 5],
      [("ConstantOfShape", ["shp"], ["ones"], {"value": numpy_helper.from_array(np.array([1.0], np.float32))}),
       ("Trilu", ["ones"], ["tri"], {"upper": 0}), ("Mul", ["x", "tri"], ["y"], {})], [("y", F)],
      [("shp", i64(5, 5))])
one("tile", 17, [2, 3, 4], "Tile", ["r"], inits=[("r", i64(1, 2, 3))])
one("pad_const", 13, [2, 3, 4], "Pad", ["p", "v"], inits=[("p", i64(0, 1, 2, 0, 2, 1)), ("v", np.float32(0.5))])
one("pad_reflect", 13, [2, 4, 5], "Pad", ["p"], {"mode": "reflect"}, [("p", i64(0, 2, 3, 0, 1, 4))])
one("pad_edge", 17, [2, 4, 5], "Pad", ["p"], {"mode": "edge"}, [("p", i64(0, 2, 0, 0, 1, 3))])
one("pad_axes", 18, [2, 3, 4], "Pad", ["p", "", "a"], inits=[("p", i64(1, -1, 2, 1)), ("a", i64(-1, 1))])
one("pad_wrap", 19, [2, 3, 4], "Pad", ["p"], {"mode": "wrap"}, [("p", i64(0, 1, 2, 0, 2, 1))])
rng = np.random.default_rng(1)
one("gather_elements", 17, [2, 5, 4], "GatherElements", ["i"], {"axis": 1},
    [("i", rng.integers(-5, 5, size=(2, 3, 4)))])
one("gather_nd_batch", 17, [2, 4, 3], "GatherND", ["i"], {"batch_dims": 1},
    [("i", rng.integers(0, 4, size=(2, 5, 1)))])
one("gather_nd", 13, [2, 4, 3], "GatherND", ["i"], inits=[("i", i64([0, 3], [1, -1], [1, 0]))])
one("scatter_nd", 13, [2, 5, 3], "ScatterND", ["i", "u"],
    inits=[("i", i64([0, 1], [1, 3])), ("u", rng.standard_normal((2, 3)).astype(np.float32))])
one("scatter_nd_add", 16, [2, 5, 3], "ScatterND", ["i", "u"], {"reduction": "add"},
    [("i", i64([1], [0], [1])), ("u", rng.standard_normal((3, 5, 3)).astype(np.float32))])
one("scatter_elements", 13, [2, 5], "ScatterElements", ["i", "u"], {"axis": 1},
    [("i", i64([4, 0], [2, -1])), ("u", rng.standard_normal((2, 2)).astype(np.float32))])
one("scatter_elements_add", 18, [2, 5], "ScatterElements", ["i", "u"], {"axis": 1, "reduction": "add"},
    [("i", i64([4, 4, 0], [2, 1, 2])), ("u", rng.standard_normal((2, 3)).astype(np.float32))])
for op in ("ReduceMax", "ReduceMin", "ReduceProd"):
    low = op.lower()
    one(f"{low}_attr", 13, [2, 3, 4], op, [], {"axes": [1], "keepdims": 0})
    one(f"{low}_attr_all", 17, [2, 3, 4], op, [], {"keepdims": 1})
    one(f"{low}_input", 18, [2, 3, 4], op, ["a"], {"keepdims": 0}, [("a", i64(-1, 1))])
    one(f"{low}_noop", 20, [2, 3, 4], op, [], {"noop_with_empty_axes": 1})
one("argmax", 13, [2, 5, 3], "ArgMax", [], {"axis": 1, "keepdims": 0}, outs=(("y", I64),))
one("argmax_last", 17, [2, 5, 3], "ArgMax", [], {"axis": -1, "select_last_index": 1}, outs=(("y", I64),))
one("topk", 13, [2, 3, 7], "TopK", ["k"], inits=[("k", i64(3))], outs=(("y", F), ("yi", I64)))
one("topk_small", 17, [2, 6, 4], "TopK", ["k"], {"axis": 1, "largest": 0}, [("k", i64(2))],
    outs=(("y", F), ("yi", I64)))

# constant chains the folder evaluates (int64 as in mask and length chains), then used on x
ci = np.array([[3, -1, 7, 7], [0, 2, 2, -5], [1, 1, 1, 1]], np.int64)
fold_chain = lambda name, opset, nodes, inits, x_shape=(2, 3): model(
    name, opset, list(x_shape), nodes + [("Cast", ["c"], ["cf"], {"to": F}), ("Add", ["x", "cf"], ["y"], {})], [("y", F)],
    inits)
fold_chain("fold_reducemax", 18, [("ReduceMax", ["ci", "a"], ["c"], {"keepdims": 0})], [("ci", ci), ("a", i64(1))])
fold_chain("fold_reduceprod", 13, [("ReduceProd", ["ci"], ["c"], {"axes": [1], "keepdims": 0})], [("ci", ci)])
fold_chain("fold_argmax", 17, [("ArgMax", ["ci"], ["c"], {"axis": 1, "keepdims": 0, "select_last_index": 1})],
           [("ci", ci)])
fold_chain("fold_cumsum", 17, [("CumSum", ["ci", "a"], ["cs"], {}),
                               ("GatherElements", ["cs", "g"], ["c"], {"axis": 1})],
           [("ci", ci), ("a", i64(1)), ("g", i64([3], [0], [-1]))], (2, 3, 1))
fold_chain("fold_scatter", 17, [("ScatterND", ["ci", "si", "su"], ["sc"], {}), ("Tile", ["sc", "r"], ["t"], {}),
                                ("Pad", ["t", "p"], ["pd"], {"mode": "edge"}), ("ReduceMin", ["pd"], ["c"],
                                                                               {"axes": [1], "keepdims": 0})],
           [("ci", ci), ("si", i64([1, 2])), ("su", i64(-9)), ("r", i64(1, 2)), ("p", i64(0, 1, 0, 2))])

# ---- the existing ops' attribute -> input moves ----
for v in (13, 17, 18, 20, 23):
    one("reducesum", v, [2, 3, 4], "ReduceSum", ["a"], {"keepdims": 0}, [("a", i64(1))])
    one("reducesum_noop", v, [2, 3, 4], "ReduceSum", [], {"noop_with_empty_axes": 1})
    one("reducesum_all", v, [2, 3, 4], "ReduceSum", [], {"keepdims": 1})
    if v < 18:
        one("reducemean", v, [2, 3, 4], "ReduceMean", [], {"axes": [-1]})
    else:
        one("reducemean", v, [2, 3, 4], "ReduceMean", ["a"], {"keepdims": 0}, [("a", i64(-1, 1))])
    if v >= 18:
        one("reducemean_noop", v, [2, 3, 4], "ReduceMean", [], {"noop_with_empty_axes": 1})
    one("squeeze", v, [2, 1, 4, 1], "Squeeze", ["a"], inits=[("a", i64(1, -1))])
    one("squeeze_all", v, [2, 1, 4, 1], "Squeeze", [])
    one("unsqueeze", v, [2, 4], "Unsqueeze", ["a"], inits=[("a", i64(1, -1))])
    outs = (("y", F), ("y2", F))
    one("split", v, [2, 6], "Split", ["s"], {"axis": 1}, [("s", i64(2, 4))], outs=outs)
    if v >= 18:
        one("split_num", v, [2, 7], "Split", [], {"axis": 1, "num_outputs": 2}, outs=outs)
    else:
        one("split_even", v, [2, 6], "Split", [], {"axis": 1}, outs=outs)
    one("slice", v, [2, 6, 5], "Slice", ["s", "e", "a", "t"],
        inits=[("s", i64(-1, 1)), ("e", i64(-100, 5)), ("a", i64(1, 2)), ("t", i64(-2, 2))])
    one("slice_2in", v, [2, 6, 5], "Slice", ["s", "e"], inits=[("s", i64(0, 1, 1)), ("e", i64(2, -1, 100))])
