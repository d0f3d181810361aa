"""Exports small GPT-style models with dynamic axes (batch, T) for tests/test_graph_infer.c,
at opsets 13 and 17, with and without constant folding; or, with --compare ORIG FINAL B T,
runs the original and the onnxpipe-finalized (folded, saved) model in onnxruntime on the
same tokens and prints the max abs difference (exit 1 if not 0 within 1e-6).

usage: infer_exports.py OUTDIR | --compare ORIG FINAL B T"""
import contextlib
import io
import os
import sys
import warnings

warnings.filterwarnings("ignore")
with contextlib.redirect_stderr(io.StringIO()):
    import torch
import numpy as np  # noqa: E402


def export(outdir):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import export_models as em
    torch.manual_seed(0)
    model = em.GPT()
    model.perturb_norms()
    model.eval()
    idx = torch.randint(0, em.V, (2, em.T))
    for opset in (13, 17):
        for fold in (True, False):
            path = os.path.join(outdir, f"gpt_op{opset}_{'fold' if fold else 'nofold'}.onnx")
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                torch.onnx.export(model, (idx,), path, opset_version=opset, do_constant_folding=fold,
                                  input_names=["idx"], output_names=["logits"],
                                  dynamic_axes={"idx": {0: "batch", 1: "T"}})
            print("exported", path)


def compare(orig, final, b, t):
    import onnx
    import onnxruntime as ort
    onnx.checker.check_model(onnx.load(final))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    x = np.random.default_rng(0).integers(0, 128, (b, t)).astype(np.int64)
    ya = ort.InferenceSession(orig, so, providers=["CPUExecutionProvider"]).run(None, {"idx": x})[0]
    yb = ort.InferenceSession(final, so, providers=["CPUExecutionProvider"]).run(None, {"idx": x})[0]
    d = float(np.abs(ya - yb).max())
    print(f"{os.path.basename(orig)}: onnxruntime, original vs finalized, logits {ya.shape}, max abs diff {d:.3g}")
    sys.exit(0 if ya.shape == yb.shape and d <= 1e-6 else 1)


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        compare(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        export(sys.argv[1])
