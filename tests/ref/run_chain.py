"""Checks a partition's stage files against the whole model in onnxruntime.

usage: run_chain.py MODEL STAGE_DIR NSTAGES [--dim NAME=V ...] [--seed S] [--tol T]

Every STAGE_DIR/stage-<i>.onnx (i < NSTAGES) must pass onnx.checker (full check).
Then the whole model and the stages, in order, run on the same random inputs
(int inputs uniform in [0, rows of the table they index), floats standard normal);
every tensor a stage produces goes into one dict by name, so a skip connection may
pass over stages. Each model output from the chain must match the whole model's
within --tol (max abs diff, printed). Exits 1 on any failure."""
import argparse
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort

NP_TYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
            onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32}


def fail(msg):
    sys.exit(f"run_chain: {msg}")


def session(model):
    opts = ort.SessionOptions()
    # op by op, no fusions: fusing across a cut would change rounding between the two runs
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def index_bound(model, name):
    """Rows of the initializer a Gather indexes with `name`; an int input indexes a table."""
    inits = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Gather" and node.input[1] == name and node.input[0] in inits:
            return inits[node.input[0]].dims[0]
    fail(f"int input '{name}' indexes no Gather table; cannot pick its range")


def random_inputs(model, dims, rng):
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        tt = inp.type.tensor_type
        shape = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                shape.append(d.dim_value)
            elif d.dim_param in dims:
                shape.append(dims[d.dim_param])
            else:
                fail(f"input '{inp.name}' has dim '{d.dim_param}': bind it with --dim {d.dim_param}=V")
        dtype = NP_TYPES.get(tt.elem_type)
        if dtype is None:
            fail(f"input '{inp.name}' has element type {tt.elem_type}, which this script cannot fill")
        if np.issubdtype(dtype, np.integer):
            feeds[inp.name] = rng.integers(0, index_bound(model, inp.name), size=shape).astype(dtype)
        else:
            feeds[inp.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def main(argv=None):
    """argv: the command line's arguments (default sys.argv[1:]); a failure raises SystemExit."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("stage_dir")
    ap.add_argument("nstages", type=int)
    ap.add_argument("--dim", action="append", default=[], metavar="NAME=V")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-5)
    a = ap.parse_args(argv)
    dims = {}
    for b in a.dim:
        name, _, v = b.partition("=")
        if not v.isdigit():
            fail(f"--dim '{b}' is not NAME=V with V a positive integer")
        dims[name] = int(v)

    stages = []
    for i in range(a.nstages):
        path = os.path.join(a.stage_dir, f"stage-{i}.onnx")
        if not os.path.exists(path):
            fail(f"{path} is missing")
        try:
            onnx.checker.check_model(path, full_check=True)
        except Exception as e:  # checker and shape inference raise several types
            fail(f"{path} fails onnx.checker: {e}")
        stages.append((path, onnx.load(path)))
    extra = sorted(set(f for f in os.listdir(a.stage_dir) if f.startswith("stage-") and f.endswith(".onnx"))
                   - {f"stage-{i}.onnx" for i in range(a.nstages)})
    if extra:
        fail(f"{a.stage_dir} holds stage files beyond {a.nstages} stages: {', '.join(extra)}")

    whole = onnx.load(a.model)
    feeds = random_inputs(whole, dims, np.random.default_rng(a.seed))
    sess = session(whole)
    ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))

    produced = dict(feeds)   # every tensor so far, by name
    for i, (path, m) in enumerate(stages):
        s = session(m)
        names = [x.name for x in s.get_inputs()]
        missing = [n for n in names if n not in produced]
        if missing:
            fail(f"{path} reads {', '.join(missing)}, which neither the model inputs nor stages 0..{i - 1} produce")
        outs = s.run(None, {n: produced[n] for n in names})
        for o, v in zip(s.get_outputs(), outs):
            produced[o.name] = v
        print(f"  stage {i}: {len(m.graph.node)} nodes, reads {len(names)}, writes {len(outs)}")

    worst = 0.0
    for name, want in ref.items():
        if name not in produced:
            fail(f"model output '{name}' is produced by no stage")
        got = produced[name]
        if got.shape != want.shape:
            fail(f"output '{name}': stages give shape {got.shape}, the model {want.shape}")
        diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if want.size else 0.0
        print(f"  output '{name}' {list(want.shape)}: max |chain - model| = {diff:.3g}")
        worst = max(worst, diff)
    if not worst <= a.tol:
        fail(f"{a.model} in {a.nstages} stages: max abs diff {worst:.3g} exceeds {a.tol:g}")
    print(f"run_chain: {os.path.basename(a.model)} in {a.nstages} stages matches, max abs diff {worst:.3g}")


if __name__ == "__main__":
    main()
