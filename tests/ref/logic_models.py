"""Writes small ONNX models, one per check, of the comparisons, logic and more elementwise ops
(op_list.h's section of that name) into OUTDIR, for forward_ref.py to run in onnxpipe and in
onnxruntime. Every model starts with xw = x * w (w a trained [K] of ones, so the partitioner
has a parameter) for x [N, 4, K] standard normal; 'chain' folds integer shape chains
(Shape -> Mod / Max / Min / Clip / Abs / Sign / comparisons / logic) at load, and the '_runtime'
models run integer Max / Min / Mod / Div / Sub / Abs / Sign / Neg / Relu / Clip on data, where
nothing folds.

Models onnxpipe must refuse go to OUTDIR/errors/NAME.onnx, with NAME.expect: a piece of the
message it must give.

usage: logic_models.py OUTDIR    (prints the model names, one a line)"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

K = 5


def const(name, v, dt=np.float32):
    return nh.from_array(np.array(v, dtype=dt), name)


def model(name, nodes, out_dtype=TP.FLOAT, out_shape=("N", 4, K), inits=(), opset=17, k=K):
    x = h.make_tensor_value_info("x", TP.FLOAT, ["N", 4, k])
    y = h.make_tensor_value_info("y", out_dtype, list(out_shape))
    w = const("w", np.ones(k))
    g = h.make_graph([h.make_node("Mul", ["x", "w"], ["xw"])] + nodes, name, [x], [y], [w] + list(inits))
    return name, h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def unary(op, pre=None, opset=17, **attrs):
    nodes, src = [], "xw"
    if pre is not None:   # scale x first, to reach the function's kinks and tails
        nodes.append(h.make_node("Mul", ["xw", "s"], ["xs"]))
        src = "xs"
    nodes.append(h.make_node(op, [src], ["y"], **attrs))
    suffix = "".join(f"_{k}{v}" for k, v in attrs.items()) + ("_scaled" if pre is not None else "")
    return model(f"{op.lower()}{suffix}", nodes, inits=[const("s", pre)] if pre is not None else [], opset=opset)


def models():
    B = TP.BOOL
    yield model("less", [h.make_node("Less", ["xw", "c"], ["y"])], B, inits=[const("c", [0.1])])
    yield model("less_or_equal_ties", [h.make_node("Round", ["xw"], ["r"]), h.make_node("LessOrEqual", ["r", "xw"], ["y"])], B)
    yield model("greater", [h.make_node("Greater", ["xw", "c"], ["y"])], B, inits=[const("c", [[0.5], [-0.5], [0], [1]])])
    yield model("greater_or_equal_ties", [h.make_node("Floor", ["xw"], ["f"]),
                                          h.make_node("GreaterOrEqual", ["f", "c"], ["y"])], B, inits=[const("c", [0.0])])
    yield model("less_int64", [h.make_node("Mul", ["xw", "s"], ["xs"]), h.make_node("Cast", ["xs"], ["i"], to=TP.INT64),
                               h.make_node("Less", ["i", "c"], ["y"])], B,
                inits=[const("s", [3.0]), const("c", [-1, 0, 1, 2, 0], np.int64)])
    cmp = [h.make_node("Less", ["xw", "z"], ["neg"]), h.make_node("Greater", ["xw", "c"], ["big"])]
    ci = [const("z", [0.0]), const("c", [-0.5])]
    for op in ("And", "Or", "Xor"):
        yield model(op.lower(), cmp + [h.make_node(op, ["neg", "big"], ["y"])], B, inits=ci)
    yield model("not", cmp[:1] + [h.make_node("Not", ["neg"], ["y"])], B, inits=ci[:1])
    yield model("isnan", [h.make_node("Log", ["xw"], ["l"]), h.make_node("IsNaN", ["l"], ["y"])], B)
    rec = [h.make_node("Round", ["xw"], ["r"]), h.make_node("Reciprocal", ["r"], ["q"])]   # +-Inf at +-0
    yield model("isinf", rec + [h.make_node("IsInf", ["q"], ["y"])], B)
    yield model("isinf_neg_only", rec + [h.make_node("IsInf", ["q"], ["y"], detect_positive=0)], B)
    yield model("isinf_pos_only", rec + [h.make_node("IsInf", ["q"], ["y"], detect_negative=0)], B)
    for op in ("Abs", "Sign", "Exp", "Sin", "Cos", "Floor", "Ceil", "Elu"):
        yield unary(op)
    yield model("log", [h.make_node("Abs", ["xw"], ["a"]), h.make_node("Log", ["a"], ["y"])])
    yield unary("Sin", pre=[8.0])
    # halves: floor(4 x) / 2 has every k/2, so Round meets ties (to even)
    yield model("round_halves", [h.make_node("Mul", ["xw", "s"], ["xs"]), h.make_node("Floor", ["xs"], ["f"]),
                                 h.make_node("Div", ["f", "t"], ["hv"]), h.make_node("Round", ["hv"], ["y"])],
                inits=[const("s", [4.0]), const("t", [2.0])])
    yield unary("Softplus", pre=[30.0])
    yield unary("Elu", pre=[3.0], alpha=0.7)
    yield unary("HardSwish", pre=[4.0], opset=14)
    yield unary("HardSigmoid", pre=[3.0], alpha=0.3, beta=0.6)
    yield unary("HardSigmoid", pre=[3.0])
    yield unary("Mish", pre=[6.0], opset=18)
    yield unary("Swish", pre=[6.0], opset=24)
    yield unary("Swish", pre=[6.0], opset=24, alpha=1.7)
    yield model("max", [h.make_node("Max", ["xw", "c"], ["y"])], inits=[const("c", [0.5, -0.5, 0, 1, -1])])
    yield model("min_ties", [h.make_node("Round", ["xw"], ["r"]), h.make_node("Min", ["xw", "r"], ["y"])])
    yield model("min", [h.make_node("Min", ["xw", "c"], ["y"])], inits=[const("c", [[0.5], [-0.5], [0], [1]])])
    yield model("max_of_3", [h.make_node("Max", ["xw", "c", "d"], ["y"])],
                inits=[const("c", [0.5, -0.5, 0, 1, -1]), const("d", [[0.2], [-0.1], [0.7], [0]])])
    yield model("min_of_4", [h.make_node("Round", ["xw"], ["r"]), h.make_node("Min", ["xw", "c", "r", "d"], ["y"])],
                inits=[const("c", [0.5, -0.5, 0, 1, -1]), const("d", [0.3])])
    yield model("max_of_1", [h.make_node("Max", ["xw"], ["y"])])
    yield model("mod_fmod", [h.make_node("Mul", ["xw", "s"], ["xs"]), h.make_node("Mod", ["xs", "c"], ["y"], fmod=1)],
                inits=[const("s", [5.0]), const("c", [1.5, -1.5, 0.7, -2.5, 3.0])])
    yield model("prelu", [h.make_node("PRelu", ["xw", "c"], ["y"])], inits=[const("c", [[0.25], [-0.5], [0], [2]])])
    yield model("prelu_scalar", [h.make_node("PRelu", ["xw", "c"], ["y"])], inits=[const("c", [0.1])])
    yield model("clip", [h.make_node("Clip", ["xw", "lo", "hi"], ["y"])], inits=[const("lo", -0.5), const("hi", 0.5)])
    yield model("clip_max_only", [h.make_node("Clip", ["xw", "", "hi"], ["y"])], inits=[const("hi", 0.3)])
    yield model("clip_min_only", [h.make_node("Clip", ["xw", "lo"], ["y"])], inits=[const("lo", -0.2)])
    yield model("clip_none", [h.make_node("Clip", ["xw"], ["y"])])
    # integer arithmetic at run time (data-dependent, so nothing folds): the `binary` kernels' integer path
    for dt, npdt in ((TP.INT64, np.int64), (TP.INT32, np.int32)):
        for op, at, c in (("Max", {}, [-1, 0, 1, 2, 0]), ("Min", {}, [[1], [-2], [0], [3]]),
                          ("Mod", {"fmod": 0}, [3, -3, 2, -5, 7]), ("Mod", {"fmod": 1}, [3, -3, 2, -5, 7]),
                          ("Div", {}, [3, -3, 2, -5, 7]), ("Sub", {}, [1])):
            tag = "".join(f"_{k}{v}" for k, v in at.items())
            yield model(f"{op.lower()}{tag}_{np.dtype(npdt).name}_runtime",
                        [h.make_node("Mul", ["xw", "s"], ["xs"]), h.make_node("Cast", ["xs"], ["i"], to=dt),
                         h.make_node(op, ["i", "c"], ["r"], **at), h.make_node("Cast", ["r"], ["y"], to=TP.FLOAT)],
                        inits=[const("s", [7.0]), const("c", c, npdt)])
        unary_int = [("Abs", ["i"], []), ("Sign", ["i"], []), ("Neg", ["i"], []),
                     ("Clip", ["i", "lo", "hi"], [const("lo", -3, npdt), const("hi", 4, npdt)]),
                     ("Clip", ["i", "", "hi"], [const("hi", 2, npdt)])]
        if dt == TP.INT32:   # onnxruntime has no int64 Relu
            unary_int.append(("Relu", ["i"], []))
        for op, ins, inits in unary_int:
            bounds = "".join("_" + b for b in ins[1:] if b)
            yield model(f"{op.lower()}{bounds}_{np.dtype(npdt).name}_runtime",
                        [h.make_node("Mul", ["xw", "s"], ["xs"]), h.make_node("Cast", ["xs"], ["i"], to=dt),
                         h.make_node(op, ins, ["r"]), h.make_node("Cast", ["r"], ["y"], to=TP.FLOAT)],
                        inits=[const("s", [7.0])] + inits)
    # integer shape chains, folded at load: s = Shape(xw) = [N, 4, 27]; each piece [3]
    I = np.int64
    pieces = [("Mod", ["s", "m"], {"fmod": 0}), ("Mod", ["s", "m"], {"fmod": 1}), ("Max", ["s", "a", "b"], {}),
              ("Min", ["s", "a"], {}), ("Max", ["s"], {}), ("Clip", ["s", "lo", "hi"], {}), ("Abs", ["ns"], {}),
              ("Sign", ["d"], {}), ("Mod", ["ns", "m"], {"fmod": 0})]
    nodes = [h.make_node("Shape", ["xw"], ["s"]), h.make_node("Neg", ["s"], ["ns"]), h.make_node("Sub", ["s", "four"], ["d"])]
    cat = []
    for i, (op, ins, at) in enumerate(pieces):
        nodes.append(h.make_node(op, ins, [f"p{i}"], **at))
        cat.append(f"p{i}")
    nodes += [h.make_node("Less", ["s", "five"], ["lt"]), h.make_node("Not", ["lt"], ["nl"]),
              h.make_node("Xor", ["lt", "nl"], ["xo"])]
    for i, b in enumerate(("lt", "nl", "xo")):
        nodes.append(h.make_node("Cast", [b], [f"b{i}"], to=TP.INT64))
        cat.append(f"b{i}")
    nodes += [h.make_node("Concat", cat, ["all"], axis=0), h.make_node("Cast", ["all"], ["allf"], to=TP.FLOAT),
              h.make_node("Add", ["xw", "allf"], ["y"])]
    kk = 3 * len(cat)
    yield model("chain", nodes, out_shape=("N", 4, kk), k=kk,
                inits=[const("m", [-3, 3, -5], I), const("a", [3, 5, 7], I), const("b", [4], I),
                       const("lo", 3, I), const("hi", 6, I), const("four", [4], I), const("five", [5], I)])


def bad_models():
    """Models onnxpipe must refuse at load, each with a piece of the message that names why."""
    B = TP.BOOL
    yield ("mod_float_fmod0", "needs fmod=1",
           model("m", [h.make_node("Mod", ["xw", "c"], ["y"], name="n")], inits=[const("c", [1.5])])[1])
    yield ("and_of_floats", "expected bool",
           model("m", [h.make_node("And", ["xw", "xw"], ["y"], name="n")], B)[1])
    yield ("isnan_of_int", "expected float32",
           model("m", [h.make_node("Cast", ["xw"], ["i"], to=TP.INT64), h.make_node("IsNaN", ["i"], ["y"], name="n")],
                 B)[1])
    yield ("prelu_slope_wider", "does not broadcast to X",
           model("m", [h.make_node("PRelu", ["xw", "c"], ["y"], name="n")], out_shape=("N", 3, 4, K),
                 inits=[const("c", np.ones((3, 1, 1, 1)))])[1])


def main():
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "errors"), exist_ok=True)
    for name, m in models():
        onnx.checker.check_model(m, full_check=True)
        onnx.save(m, os.path.join(out, name + ".onnx"))
        print(name)
    for name, expect, m in bad_models():   # not checked: onnx's checker refuses some of them too
        onnx.save(m, os.path.join(out, "errors", name + ".onnx"))
        with open(os.path.join(out, "errors", name + ".expect"), "w") as f:
            f.write(expect)


if __name__ == "__main__":
    main()
