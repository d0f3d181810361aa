"""Training truth: onnxpipe trains the example GPT / MLP, PyTorch trains the same model
from the same initial weights on the same batches with the same optimizer, and the
per-step losses and final weights must agree. Also: M microbatches of B/M give the
same step as one batch of B.

usage: train_ref.py ONNXPIPE WORKDIR {gpt,mlp} {sgd,adamw} [--steps N]"""
import argparse
import os
import subprocess
import sys
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from onnx import numpy_helper  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from example_check import gpt_torch, to_torch  # noqa: E402

TEXT = "/usr/share/common-licenses/GPL-3"
GPT = dict(layers=2, d_model=64, heads=4, vocab=256, seq=32)
MLP = dict(in_=16, hidden=[32, 32], classes=10)
OPT = {"sgd": dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
       "adamw": dict(lr=2e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)}


def sh(*cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"command failed: {' '.join(map(str, cmd))}\n{r.stderr}")
    return r.stdout


def write_dataset(d, arrays, n):
    import json
    os.makedirs(d, exist_ok=True)
    meta = []
    for name, x in arrays.items():
        x.tofile(os.path.join(d, name + ".bin"))
        meta.append({"name": name, "dtype": {np.float32: "float32", np.int64: "int64"}[x.dtype.type],
                     "shape": list(x.shape[1:]), "file": name + ".bin"})
    json.dump({"format": "onnxpipe-dataset-1", "samples": n, "arrays": meta}, open(os.path.join(d, "dataset.json"), "w"))


def read_dataset(d, name, dtype, per):
    return np.fromfile(os.path.join(d, name + ".bin"), dtype=dtype).reshape([-1] + per)


def onnxpipe_train(a, model, data, extra, batch, micro, tag):
    losses, out = os.path.join(a.workdir, f"losses-{tag}.txt"), os.path.join(a.workdir, f"trained-{tag}.onnx")
    o = OPT[a.optimizer]
    flags = ["--optimizer", a.optimizer, "--lr", o["lr"], "--weight-decay", o["weight_decay"]]
    if a.optimizer == "sgd":
        flags += ["--momentum", o["momentum"], "--nesterov"]
    else:
        flags += ["--beta1", o["betas"][0], "--beta2", o["betas"][1], "--eps", o["eps"]]
    sh(a.onnxpipe, "train", "--model", model, "--data", data, "--batch", batch, "--microbatches", micro,
       "--steps", a.steps, "--losses", losses, "--export", out, "--quiet", *flags, *extra)
    got = np.loadtxt(losses)[:, 1]
    weights = {i.name: numpy_helper.to_array(i) for i in onnx.load(out).graph.initializer}
    return got, weights


def torch_train(a, W0, forward, batches):
    params = {k: to_torch(v).requires_grad_() for k, v in W0.items() if v.dtype.kind == "f"}
    o = OPT[a.optimizer]
    opt = (torch.optim.SGD if a.optimizer == "sgd" else torch.optim.AdamW)(list(params.values()), **o)
    losses = []
    for step in range(a.steps):
        opt.zero_grad()
        loss = forward(params, *batches(step))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses), {k: np.array(v.detach().tolist()) for k, v in params.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("onnxpipe")
    ap.add_argument("workdir")
    ap.add_argument("model", choices=("gpt", "mlp"))
    ap.add_argument("optimizer", choices=("sgd", "adamw"))
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    B, M = 8, 4
    model = os.path.join(a.workdir, a.model + ".onnx")
    data = os.path.join(a.workdir, "data-" + a.model)
    if a.model == "gpt":
        g = GPT
        sh(a.onnxpipe, "example", "gpt", "--layers", g["layers"], "--d-model", g["d_model"], "--heads", g["heads"],
           "--vocab", g["vocab"], "--seq", g["seq"], "-o", model)
        sh(a.onnxpipe, "data", "text", TEXT, "-o", data, "--seq", g["seq"])
        extra = ["--loss", "cross_entropy", "--logits", "logits", "--labels", "labels"]
        ids, labels = (read_dataset(data, n, np.int64, [g["seq"]]) for n in ("input_ids", "labels"))
        ns = argparse.Namespace(**g)

        def forward(P, x, y):
            logits = gpt_torch(P, x, ns)
            return F.cross_entropy(logits.reshape(-1, g["vocab"]), y.reshape(-1))
    else:
        m = MLP
        sh(a.onnxpipe, "example", "mlp", "--in", m["in_"], "--hidden", ",".join(map(str, m["hidden"])),
           "--classes", m["classes"], "--loss", "-o", model)
        rng = np.random.default_rng(7)
        n = 256
        ids = rng.standard_normal((n, m["in_"])).astype(np.float32)
        teacher = rng.standard_normal((m["in_"], m["classes"]))   # learnable labels
        labels = np.argmax(ids @ teacher, axis=1).astype(np.int64)
        write_dataset(data, {"x": ids, "labels": labels}, n)
        extra = []
        names = [f"fc.{i}" for i in range(len(m["hidden"]))] + ["head"]

        def forward(P, x, y):
            h = x
            for i, nm in enumerate(names):
                h = F.linear(h, P[nm + ".weight"], P[nm + ".bias"])
                if i < len(names) - 1:
                    h = F.relu(h)
            return F.cross_entropy(h, y)
    N = ids.shape[0]

    def batches(step):
        idx = [(step * B + i) % N for i in range(B)]
        return to_torch(ids[idx]), to_torch(labels[idx])

    W0 = {i.name: numpy_helper.to_array(i) for i in onnx.load(model).graph.initializer}
    want, Wt = torch_train(a, W0, forward, batches)
    got, Wo = onnxpipe_train(a, model, data, extra, B, M, "m4")
    one, _ = onnxpipe_train(a, model, data, extra, B, 1, "m1")
    rel = np.max(np.abs(got - want) / np.abs(want))
    acc = np.max(np.abs(got - one) / np.abs(one))
    wdiff = max(float(np.max(np.abs(Wo[k] - Wt[k]))) for k in Wt)
    print(f"{a.model} {a.optimizer}: {a.steps} steps, loss {want[0]:.4f} -> {want[-1]:.4f} (PyTorch)")
    print(f"  per-step loss, onnxpipe (B={B} as {M} microbatches) vs PyTorch float64: max relative diff {rel:.3g}")
    print(f"  {M} microbatches of {B // M} vs 1 batch of {B}: max relative loss diff {acc:.3g}")
    print(f"  final weights vs PyTorch: max abs diff {wdiff:.3g} over {len(Wt)} tensors")
    bad = []
    if rel > 1e-4:
        bad.append(f"losses differ from PyTorch by {rel:.3g} (> 1e-4)")
    if acc > 1e-5:
        bad.append(f"gradient accumulation changes the loss by {acc:.3g} (> 1e-5)")
    if wdiff > 1e-3:
        bad.append(f"final weights differ from PyTorch by {wdiff:.3g} (> 1e-3)")
    if np.mean(want[-5:]) >= want[0]:
        bad.append("the loss did not fall")
    if bad:
        sys.exit(f"train_ref {a.model} {a.optimizer}: " + "; ".join(bad))


if __name__ == "__main__":
    main()
