"""Compares training runs with the reference run: per-step losses (relative) and the
final parameters of the exported models (absolute).

usage: compare_runs.py TOL_LOSS TOL_WEIGHT REF_LOSSES REF_MODEL [LOSSES MODEL LABEL]..."""
import sys
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402


def weights(path):
    return {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}


def main():
    tol_loss, tol_w = float(sys.argv[1]), float(sys.argv[2])
    ref_l, ref_w = np.loadtxt(sys.argv[3])[:, 1], weights(sys.argv[4])
    bad = []
    args = sys.argv[5:]
    for k in range(0, len(args), 3):
        losses, model, label = args[k:k + 3]
        got = np.loadtxt(losses)[:, 1]
        rel = float(np.max(np.abs(got - ref_l) / np.abs(ref_l))) if got.shape == ref_l.shape else float("inf")
        w = weights(model)
        wd = max(float(np.max(np.abs(w[n] - ref_w[n]))) for n in ref_w) if w.keys() == ref_w.keys() else float("inf")
        print(f"  {label:38s} loss rel diff {rel:.2e}   final weights max abs diff {wd:.2e}")
        if rel > tol_loss or wd > tol_w:
            bad.append(label)
    print(f"reference: {len(ref_l)} steps, loss {ref_l[0]:.5f} -> {ref_l[-1]:.5f}")
    if bad:
        sys.exit(f"layouts that differ from the single-rank run: {', '.join(bad)}")


if __name__ == "__main__":
    main()
