"""Independent checks of models that onnxpipe saves (tests/test_graph_save.sh).

usage: check_onnx.py make OUT.onnx
           writes a small MLP with onnx.helper: typed-field and raw initializers, a
           Constant, attributes of several kinds, all tensors in external data
       check_onnx.py compare ORIG.onnx COPY.onnx [COPY.onnx ...]
           onnx.checker on every copy (full check, external data included), then
           onnxruntime on the original and each copy with the same random input:
           outputs must agree within 1e-6 (they are the same graph)"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def make(out):
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((64, 8)).astype(np.float32)
    b1 = rng.standard_normal(64).astype(np.float32)
    w2 = rng.standard_normal((64, 4)).astype(np.float32)
    inits = [
        numpy_helper.from_array(w1, "W1"),                                    # raw_data
        helper.make_tensor("b1", TensorProto.FLOAT, [64], b1.tolist()),       # float_data
        numpy_helper.from_array(w2, "W2"),
        helper.make_tensor("shape", TensorProto.INT64, [2], [2, 4]),          # int64_data
        helper.make_tensor("scale", TensorProto.FLOAT16, [4],                 # int32_data (f16 bits)
                           np.array([0.5, 1, 2, -1], np.float16).view(np.uint16).tolist()),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], name="fc1", transB=1, alpha=0.75, beta=1.0),
        helper.make_node("Gelu", ["h"], ["g"], name="gelu", approximate="tanh"),
        helper.make_node("MatMul", ["g", "W2"], ["z"], name="fc2"),
        helper.make_node("Cast", ["scale"], ["scale32"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["z", "scale32"], ["zs"], name="mul"),
        helper.make_node("Constant", [], ["bias"], name="const",
                         value=numpy_helper.from_array(np.array([0.1, -0.2, 0.3, 0.0], np.float32))),
        helper.make_node("Add", ["zs", "bias"], ["za"], name="add"),
        helper.make_node("Reshape", ["za", "shape"], ["zr"], name="reshape"),
        helper.make_node("Softmax", ["zr"], ["y"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(nodes, "helper_mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], inits)
    model = helper.make_model(graph, producer_name="check_onnx.py", ir_version=8,
                              opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save_model(model, out, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=out.rsplit("/", 1)[-1] + ".weights", size_threshold=0)
    print(f"wrote {out} with {len(inits)} initializers in external data")


def run(path, x):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})


def compare(orig, copies):
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    want = run(orig, x)
    worst = 0.0
    for c in copies:
        onnx.checker.check_model(c, full_check=True)
        got = run(c, x)
        assert len(got) == len(want), f"{c}: {len(got)} outputs, expected {len(want)}"
        for a, b in zip(want, got):
            assert a.shape == b.shape, f"{c}: output shape {b.shape}, expected {a.shape}"
            diff = float(np.max(np.abs(a - b)))
            worst = max(worst, diff)
            assert diff <= 1e-6, f"{c}: max |diff| {diff:g} against {orig}"
        print(f"{c}: onnx.checker ok, onnxruntime outputs match {orig} (max |diff| {worst:g})")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
