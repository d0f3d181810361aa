"""Runs models forward in onnxpipe (`onnxpipe eval`) and in onnxruntime on the same random
inputs, and asserts the outputs agree within a tolerance. Several models in one call share
one Python start (the op tests pass dozens); each works in WORKDIR/<model's name>.

usage: forward_ref.py ONNXPIPE WORKDIR MODEL... [--batch B] [--batches N] [--dim NAME=V ...] [--tol X]"""
import argparse
import contextlib
import io
import json
import os
import subprocess
import sys

import numpy as np
with contextlib.redirect_stderr(io.StringIO()):
    import onnx
    import onnxruntime as ort

NP = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 11: np.float64}
NAMES = {1: "float32", 6: "int32", 7: "int64", 9: "bool", 11: "float64"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("onnxpipe")
    ap.add_argument("workdir")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument("--dim", action="append", default=[])
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    for model in a.models:
        check(a, model, os.path.join(a.workdir, os.path.splitext(os.path.basename(model))[0]))
    if len(a.models) > 1:
        print(f"{len(a.models)} models: forward within {a.tol:g} of onnxruntime")


def check(a, model, workdir):
    dims = dict(d.split("=") for d in a.dim)
    m = onnx.load(model)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(0)
    data = os.path.join(workdir, "data")
    os.makedirs(data, exist_ok=True)
    n = a.batch * a.batches
    arrays, feeds = [], {}
    for inp in m.graph.input:
        if inp.name in inits:
            continue
        tt = inp.type.tensor_type
        shape = []
        for k, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value"):
                shape.append(d.dim_value)
            elif d.dim_param in dims:
                shape.append(int(dims[d.dim_param]))
            elif k == 0:
                shape.append(a.batch)
            else:
                sys.exit(f"input {inp.name}: bind dim {d.dim_param} with --dim")
        per = shape[1:]
        if tt.elem_type == 7:   # token ids: stay inside the embedding table
            vocab = min(int(np.prod(i.dims[:1])) for i in m.graph.initializer if len(i.dims) == 2)
            x = rng.integers(0, vocab, size=[n] + per, dtype=np.int64)
        else:
            x = rng.standard_normal([n] + per).astype(NP[tt.elem_type])
        x.tofile(os.path.join(data, inp.name + ".bin"))
        feeds[inp.name] = x
        arrays.append({"name": inp.name, "dtype": NAMES[tt.elem_type], "shape": per, "file": inp.name + ".bin"})
    json.dump({"format": "onnxpipe-dataset-1", "samples": n, "arrays": arrays},
              open(os.path.join(data, "dataset.json"), "w"))
    out = os.path.join(workdir, "out")
    cmd = [a.onnxpipe, "eval", "--model", model, "--data", data, "-o", out, "--batch", str(a.batch)]
    for d in a.dim:
        cmd += ["--dim", d]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{model}: onnxpipe eval failed: {r.stderr.strip()}")
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    worst = 0.0
    for o in sess.get_outputs():
        want = np.concatenate([sess.run([o.name], {k: v[b * a.batch:(b + 1) * a.batch] for k, v in feeds.items()})[0]
                               for b in range(a.batches)])
        got = np.fromfile(os.path.join(out, o.name + ".bin"), dtype=want.dtype).reshape(want.shape)
        diff = float(np.max(np.abs(got.astype(np.float64) - want)) / max(1.0, float(np.max(np.abs(want)))))
        print(f"  {os.path.basename(model)}: output {o.name} {list(want.shape)}: max |onnxpipe - onnxruntime| "
              f"(relative to max |x|) = {diff:.3g}")
        worst = max(worst, diff)
    if worst > a.tol:
        sys.exit(f"{model}: forward differs from onnxruntime by {worst:.3g} > {a.tol}")


if __name__ == "__main__":
    main()
