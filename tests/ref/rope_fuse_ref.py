"""HF's rotary embedding fused into one RotaryEmbedding (stage/fuse_rope.c), on small random-init
HF Llama exports from both PyTorch exporters (examples/export/export_model.py). Checked per
exporter: the stage fuses q's and k's rotate_half in every layer (the debug log's lines name
them); its first loss equals onnxruntime's forward + a numpy cross-entropy within 1e-5
relative; and one AdamW step with beta1 = 0 (the checkpoint's exp_avg is then the gradient)
gives the same loss and every parameter's gradient within 1e-5 (relative to the tensor's
largest) as a twin of the export whose Negs are Mul by -1 (the same values, bit for bit,
that the fusion does not match: the unfused chain's own ops run).

Runs in the export venv (scripts/export-venv.sh).
usage: rope_fuse_ref.py ONNXPIPE WORKDIR"""
import argparse
import os
import re
import subprocess
import sys
import time
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import zoo_train_ref as z  # noqa: E402

LAYERS = 2
ARGS = ["--model", "llama", "--layers", str(LAYERS), "--d-model", "64", "--heads", "2", "--vocab", "256",
        "--seq", "32"]
TOL = 1e-5


def unfused_twin(path, out):
    """The export with every Neg written as Mul by -1: the same float values, no rotate_half."""
    m = onnx.load(path)
    n = 0
    for i, node in enumerate(m.graph.node):
        if node.op_type != "Neg":
            continue
        c = f"rope_twin_minus_one_{n}"
        m.graph.initializer.append(numpy_helper.from_array(np.array(-1.0, np.float32), c))
        m.graph.node[i].CopyFrom(helper.make_node("Mul", [node.input[0], c], list(node.output), name=node.name))
        n += 1
    onnx.save(m, out)
    return n


def train(onnxpipe, path, data, work):
    """One AdamW step (beta1 = 0): the loss, the fused rotate_half chains the log names, and
    the checkpoint's parameters' exp_avg (their gradients)."""
    ck = os.path.join(work, "ckpt")
    cmd = [onnxpipe, "train", "--model", path, "--data", data, "--dim", "seq=32", "--batch", 8, "--microbatches", 2,
           "--steps", 1, "--loss", "cross_entropy", "--logits", "logits", "--labels", "labels",
           "--optimizer", "adamw", "--lr", 1e-3, "--beta1", 0, "--losses", os.path.join(work, "losses.txt"),
           "--save", ck, "--save-sync", "--quiet"]
    log = os.path.join(work, "train.log")
    z.sh(cmd, log)
    with open(log) as f:
        fused = set(re.findall(r"fused rotate_half '[^']*' \.\. '([^']*)' into one RotaryEmbedding", f.read()))
    loss = float(np.loadtxt(os.path.join(work, "losses.txt"), ndmin=2)[0, 1])
    t = load_file(os.path.join(ck, "step-1", "shard-s000-r000.safetensors"))
    grads = {k[:-len(".exp_avg")]: v for k, v in t.items() if k.endswith(".exp_avg")}
    return loss, fused, grads


def check(a, exporter, fails):
    work = os.path.join(a.workdir, exporter)
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    path = os.path.join(work, "llama.onnx")
    recipe = z.export_argv([*ARGS, "--exporter", exporter, "--save-weights", "--no-check", "-o", path])
    args = z.ex.parser().parse_args(recipe["argv"])
    z.ex.finish_args(args)
    data = os.path.join(work, "data")
    arrays = z.make_data(data, "causal-lm", args)
    twin = os.path.join(work, "llama-unfused.onnx")
    negs = unfused_twin(path, twin)
    runs = {}
    for tag, p in (("fused", path), ("unfused", twin)):
        os.makedirs(os.path.join(work, tag), exist_ok=True)
        runs[tag] = train(a.onnxpipe, p, data, os.path.join(work, tag))
    (loss, fused, grads), (loss_u, fused_u, grads_u) = runs["fused"], runs["unfused"]
    first = z.ort_first_loss(path, arrays)
    print(f"  {exporter}: {negs} Negs; fused {len(fused)} rotate_half chains (want {2 * LAYERS}), the twin "
          f"{len(fused_u)}")
    if len(fused) != 2 * LAYERS or fused_u:
        fails.append(f"{exporter}: fused {len(fused)} chains (want {2 * LAYERS}), the twin {len(fused_u)} (want 0)")
    rel = abs(loss - first) / abs(first)
    rel_u = abs(loss - loss_u) / abs(loss_u)
    print(f"  {exporter}: loss {loss:.8f}, onnxruntime {first:.8f} (rel {rel:.1e}), unfused {loss_u:.8f} "
          f"(rel {rel_u:.1e})")
    if rel > TOL or rel_u > TOL:
        fails.append(f"{exporter}: loss {loss:.8f} vs onnxruntime {first:.8f}, unfused {loss_u:.8f} (> {TOL:g})")
    compare_grads(exporter, grads, grads_u, t0, fails)


def compare_grads(tag, grads, grads_u, t0, fails):
    """Every parameter's gradient of a fused run against the unfused run's, relative to the
    tensor's largest: printed, and a failure past TOL or where their parameters differ."""
    if grads.keys() != grads_u.keys() or not grads:
        fails.append(f"{tag}: the runs' parameters differ: {sorted(grads.keys() ^ grads_u.keys())}")
        return
    worst, where = 0.0, ""
    for k in grads:
        d = float(np.max(np.abs(grads[k] - grads_u[k])) / max(float(np.max(np.abs(grads_u[k]))), 1e-30))
        if d > worst:
            worst, where = d, k
    print(f"  {tag}: {len(grads)} parameters' gradients vs unfused: max rel {worst:.1e} ({where}), "
          f"{time.time() - t0:.0f} s")
    if worst > TOL:
        fails.append(f"{tag}: gradient of {where} differs from the unfused run's by {worst:.1e} (> {TOL:g})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("onnxpipe")
    ap.add_argument("workdir")
    a = ap.parse_args()
    os.environ["PP_LOG"] = "debug"
    fails = []
    for exporter in z.EXPORTERS:
        check(a, exporter, fails)
    for f in fails:
        print(f"FAILED: {f}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
