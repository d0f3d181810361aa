"""Every case of tests/cuda_cases.h in onnxruntime (tests/test_op_cases_ort.sh).

usage: op_cases_ort.py DIR/index.json
    DIR is what `test_op_cases DIR` wrote: per case a one-node model, its graph inputs and
    the onnxpipe cpu outputs (raw little-endian). Each model passes onnx.checker (full
    check), runs in onnxruntime on the cpu, and its outputs are compared with onnxpipe's:
    float outputs within the case's tolerance as max |onnxpipe - ort| / (1 + |ort|),
    bool and integer outputs exactly. A case with bfloat16 / float16 inputs runs in
    float32 (its 16-bit inputs and outputs retyped, the values widened exactly) and is
    compared within its 16-bit tolerance. A case whose op or opset onnxruntime has no
    kernel for is reported as skipped with onnxruntime's reason; a model onnx.checker refuses
    fails, except for an op form onnx has since deprecated (GroupNormalization-18), which
    still runs; any mismatch or other error fails. One line per case, then a summary."""
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, numpy_helper

LOWP = (TensorProto.BFLOAT16, TensorProto.FLOAT16)
# what onnxruntime says when it has no kernel for an op, a type or an opset
UNSUPPORTED = ("NOT_IMPLEMENTED", "Could not find an implementation", "No Op registered for",
               "Unsupported model IR version")


def load(base, t):
    raw = np.fromfile(os.path.join(base, t["file"]), dtype=np.uint8)
    et = t["elem_type"]
    if et == TensorProto.BFLOAT16:
        a = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        a = raw.view(onnx.helper.tensor_dtype_to_np_dtype(et))
    return a.reshape(t["shape"])


def as_f32(model):
    """The model with its 16-bit graph inputs and outputs retyped float32 (a 16-bit case's
    model mixes types as onnxpipe's mixed precision does, which ONNX itself does not allow)."""
    for vi in list(model.graph.input) + list(model.graph.output):
        if vi.type.tensor_type.elem_type in LOWP:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT
    for i, t in enumerate(model.graph.initializer):
        if t.data_type in LOWP:
            a = numpy_helper.to_array(t).astype(np.float32)
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(a, t.name))
    del model.graph.value_info[:]
    return model


def widen_bf16_outputs(model):
    """numpy has no bfloat16, so onnxruntime cannot return one: a bfloat16 output y becomes
    Cast(y, to=FLOAT), which widens exactly."""
    for vi in model.graph.output:
        if vi.type.tensor_type.elem_type == TensorProto.BFLOAT16:
            for node in model.graph.node:
                node.output[:] = [o + "_bf16" if o == vi.name else o for o in node.output]
            model.graph.node.append(onnx.helper.make_node("Cast", [vi.name + "_bf16"], [vi.name],
                                                          to=TensorProto.FLOAT))
            vi.type.tensor_type.elem_type = TensorProto.FLOAT
    del model.graph.value_info[:]
    return model


def feed_value(t, widen):
    a = load(BASE, t)
    return a.astype(np.float32) if widen and t["elem_type"] in LOWP else a


def compare(case, got, want_t):
    """max |onnxpipe - ort| / (1 + |ort|), or the count of differing elements when exact"""
    ours = load(BASE, want_t)
    got = np.asarray(got)
    if got.shape != ours.shape:
        return f"{want_t['name']}: shape {list(got.shape)}, onnxpipe {list(ours.shape)}", None
    if want_t["elem_type"] in (TensorProto.FLOAT, TensorProto.DOUBLE) + LOWP:
        if got.dtype == np.uint16 and want_t["elem_type"] == TensorProto.BFLOAT16:   # bfloat16 bits
            got = (got.astype(np.uint32) << 16).view(np.float32)
        o, g = ours.astype(np.float64), got.astype(np.float64)
        with np.errstate(invalid="ignore"):
            d = np.abs(o - g) / (1 + np.abs(g))
        same_nan = np.isnan(o) & np.isnan(g)
        d = np.where(same_nan, 0.0, d)
        tol = case["tol"]
        err = float(np.nanmax(d)) if d.size else 0.0
        if np.isnan(d).any():
            err = float("nan")
        return None if err <= tol else f"{want_t['name']}: max rel diff {err:.2e} > tol {tol:.0e}", err
    bad = int(np.count_nonzero(got != ours))
    return None if bad == 0 else f"{want_t['name']}: {bad} of {ours.size} elements differ", 0.0


def run_case(case):
    if case.get("skip"):
        return "SKIP", case["skip"]
    path = os.path.join(BASE, case["model"])
    model = onnx.load(path)
    widen = case["compute"] != "float32"
    if widen:
        model = as_f32(model)
    note = ""
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:
        first = str(e).splitlines()[0]
        if "deprecated" not in first:   # our model is malformed: a failure, not a skip
            return "FAIL", f"onnx.checker: {first}"
        note = f" (onnx.checker: {first})"   # an op form later opsets replaced (GroupNormalization-18)
    model = widen_bf16_outputs(model)
    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:
        msg = " ".join(str(e).split())
        if any(u in msg for u in UNSUPPORTED):
            return "SKIP", f"onnxruntime {ort.__version__}: {msg[:200]}{note}"
        return "FAIL", f"onnxruntime session: {msg[:300]}{note}"
    feeds = {t["name"]: feed_value(t, widen) for t in case["inputs"]}
    try:
        got = sess.run([t["name"] for t in case["outputs"]], feeds)
    except Exception as e:
        msg = " ".join(str(e).split())
        if any(u in msg for u in UNSUPPORTED):
            return "SKIP", f"onnxruntime {ort.__version__}: {msg[:200]}"
        return "FAIL", f"onnxruntime run: {msg[:300]}"
    notes, worst = [], 0.0
    for g, t in zip(got, case["outputs"]):
        why, err = compare(case, g, t)
        if why:
            notes.append(why)
        elif err is not None:
            worst = max(worst, err)
    if notes:
        return "FAIL", "; ".join(notes)
    how = " (in float32)" if widen else ""
    return "PASS", f"{len(got)} output(s){how} max rel diff {worst:.2e} (tol {case['tol']:.0e}){note}"


def main():
    global BASE
    index = sys.argv[1]
    BASE = os.path.dirname(os.path.abspath(index))
    with open(index) as f:
        cases = json.load(f)
    counts = {"PASS": 0, "SKIP": 0, "FAIL": 0}
    for case in cases:
        verdict, why = run_case(case)
        counts[verdict] += 1
        print(f"{verdict} {case['name']:<32} opset {case['opset']:2d} {case['compute']:<8} {why}")
    print(f"op cases in onnxruntime {ort.__version__}: {counts['PASS']} passed, {counts['SKIP']} skipped, "
          f"{counts['FAIL']} failed of {len(cases)}")
    return 1 if counts["FAIL"] or not counts["PASS"] else 0


if __name__ == "__main__":
    sys.exit(main())
