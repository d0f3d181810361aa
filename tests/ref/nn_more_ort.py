"""Runs each case dumped by tests/test_nn_more.c (DIR/case<n>.json: op, opset, attributes,
raw inputs and onnxpipe's cpu output) as a one-node ONNX model in onnxruntime and asserts
that the outputs agree within 1e-4 (|ours - ort| / (1 + |ort|)).

usage: nn_more_ort.py DIR"""
import contextlib
import glob
import io
import json
import sys

import numpy as np
with contextlib.redirect_stderr(io.StringIO()):
    import onnx
    import onnx.numpy_helper
    from onnx import helper
    import onnxruntime as ort


def load(t):
    dt = helper.tensor_dtype_to_np_dtype(t["dtype"])
    return np.fromfile(t["file"], dtype=dt).reshape(t["dims"])


def main():
    worst_all, bad = 0.0, 0
    for path in sorted(glob.glob(sys.argv[1] + "/case*.json")):
        case = json.load(open(path))
        ins = [load(t) for t in case["inputs"]]
        names = [f"in{i}" for i in range(len(ins))]
        attrs = {a["name"]: a.get("i", a.get("f", a.get("s"))) for a in case["attrs"]}
        node = helper.make_node(case["op"], names, ["y"], **attrs)
        want = load(case["output"])
        # empty inputs (Resize's roi, scales beside sizes) as initializers: ORT reads a graph
        # input as given even when it is empty
        empty = {n for n, x in zip(names, ins) if x.size == 0}
        graph = helper.make_graph(
            [node], "one",
            [helper.make_tensor_value_info(n, case["inputs"][i]["dtype"], x.shape)
             for i, (n, x) in enumerate(zip(names, ins)) if n not in empty],
            [helper.make_tensor_value_info("y", case["output"]["dtype"], case["output"]["dims"])],
            [onnx.numpy_helper.from_array(x, n) for n, x in zip(names, ins) if n in empty])
        opset = case["opset"] or 17
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 10
        ref = f"onnxruntime {ort.__version__}"
        try:
            onnx.checker.check_model(model)
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
            got = sess.run(None, {n: x for n, x in zip(names, ins) if n not in empty})[0]
        except Exception as e:  # GroupNormalization-18 (deprecated): onnx's reference evaluator
            if "deprecated" not in str(e):
                raise
            from onnx.reference import ReferenceEvaluator
            ref = "onnx reference (deprecated op)"
            got = ReferenceEvaluator(model).run(None, {n: x for n, x in zip(names, ins) if n not in empty})[0]
        d = float(np.max(np.abs(want - got) / (1 + np.abs(got)))) if got.size else 0.0
        ok = got.shape == want.shape and d <= 1e-4
        print(f"{case['op']:22s} opset {opset}: forward vs {ref} max rel diff {d:.2e}"
              f"{'' if ok else '  MISMATCH'}")
        worst_all = max(worst_all, d)
        bad += not ok
    print(f"{bad} mismatches, largest difference {worst_all:.2e}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
