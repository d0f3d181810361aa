"""Fold-only ops (KINDS FOLD: no kernel, only a folder) and dims bound from the data.

The model (opset 17, written here with onnx.helper) has inputs x [batch, seq, D], m [batch, seq]
and labels [batch, half], symbolic 'seq' and 'half'. Its rows are picked by a shape chain,
NonZero(Mod(Range(0, Shape(x)[1], 1), 2)) (the odd positions), its columns by NonZero of a
constant mask, and its logits are divided by Size(rows): every NonZero and Size folds at load.
onnxpipe trains it with SGD and no --dim (the data binds seq and half); the first loss must
equal onnxruntime's within 1e-6 and every step's loss PyTorch's float64 within 1e-5 (relative).
Then what must be refused, each with a piece of its message:
  - NonZero on the data path (NonZero(Greater(x, 0))), with `train` and with `partition`;
  - --dim seq=5 against data whose x has seq 6;
  - arrays that bind seq differently (x with 6, m with 4);
  - --eval-data whose x has another seq than --data's.

usage: fold_only.py ONNXPIPE WORKDIR"""
import contextlib
import io
import os
import subprocess
import sys

import numpy as np
with contextlib.redirect_stderr(io.StringIO()):
    import onnx
    import onnxruntime as ort
    import torch
    import torch.nn.functional as F
    from onnx import TensorProto as T, helper as h, numpy_helper as nh

sys.path.insert(0, os.path.dirname(__file__))
from train_ref import sh, write_dataset  # noqa: E402

S, D, B, NS, STEPS, LR = 6, 8, 4, 16, 5, 0.5
CMASK = np.array([1, 0, 2, 0, 1, 1, 0, -1], np.float32)   # columns 0, 2, 4, 5, 7
COLS = np.nonzero(CMASK)[0].tolist()
E = len(COLS)


def ints(name, v):
    return nh.from_array(np.array(v, np.int64), name)


def model(path, w, data_path=False):
    N = h.make_node
    if data_path:   # the rows picked from the data itself: nothing can fold NonZero
        rows = [N("Greater", ["m", "zero_f"], ["pos"]), N("NonZero", ["pos"], ["nz"]),
                N("Gather", ["nz", "one_i"], ["rows"], axis=0)]
        inits_extra = [nh.from_array(np.float32(0), "zero_f")]
    else:
        rows = [N("Shape", ["x"], ["s"]), N("Gather", ["s", "one_i"], ["sl"], axis=0),
                N("Range", ["zero_i", "sl", "one_i"], ["r"]), N("Mod", ["r", "two_i"], ["odd"]),
                N("NonZero", ["odd"], ["nz"]), N("Squeeze", ["nz", "ax0"], ["rows"])]
        inits_extra = []
    nodes = [N("MatMul", ["x", "w"], ["h"]), N("Unsqueeze", ["m", "ax2"], ["m3"]), N("Mul", ["h", "m3"], ["hm"])]
    nodes += rows + [
        N("Gather", ["hm", "rows"], ["sel"], axis=1),
        N("NonZero", ["cmask"], ["nzc"]), N("Squeeze", ["nzc", "ax0"], ["cols"]),
        N("Gather", ["sel", "cols"], ["sel2"], axis=2),
        N("Size", ["rows"], ["nr"]), N("Cast", ["nr"], ["nrf"], to=T.FLOAT),
        N("Div", ["sel2", "nrf"], ["logits3"]),
        N("Reshape", ["logits3", "flat"], ["logits"]), N("Reshape", ["labels", "flat1"], ["lab"]),
        N("SoftmaxCrossEntropyLoss", ["logits", "lab"], ["loss"])]
    inits = [nh.from_array(w, "w"), nh.from_array(CMASK, "cmask"), ints("zero_i", 0), ints("one_i", 1), ints("two_i", 2), ints("ax0", [0]), ints("ax2", [2]),
             ints("flat", [-1, E]), ints("flat1", [-1])] + inits_extra
    g = h.make_graph(nodes, "fold_only", [h.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", D]),
                                          h.make_tensor_value_info("m", T.FLOAT, ["batch", "seq"]),
                                          h.make_tensor_value_info("labels", T.INT64, ["batch", "half"])],
                     [h.make_tensor_value_info("loss", T.FLOAT, [])], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)


def torch_losses(w, x, m, y):
    W = torch.tensor(w.tolist(), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([W], lr=LR)
    out = []
    for step in range(STEPS):   # the loader's order: consecutive batches, no shuffling
        i = (step * B) % NS
        xb, mb = torch.tensor(x[i:i + B].tolist(), dtype=torch.float64), torch.tensor(m[i:i + B].tolist(), dtype=torch.float64)
        hm = (xb @ W) * mb[..., None]
        logits = hm[:, 1::2][:, :, COLS] / (S // 2)
        loss = F.cross_entropy(logits.reshape(-1, E), torch.tensor(y[i:i + B].reshape(-1).tolist()))
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return np.array(out)


def refused(cmd, want):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    msg = (r.stdout + r.stderr).strip().splitlines()
    msg = msg[-1] if msg else ""
    if r.returncode == 0 or not all(w in msg for w in want):
        sys.exit(f"expected an error with {want}: {' '.join(map(str, cmd))}\ngot (exit {r.returncode}): {msg}")
    print(f"  refused: {msg}")


def main():
    onnxpipe, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(5)
    w = rng.normal(0, 0.5, (D, D)).astype(np.float32)
    x = rng.standard_normal((NS, S, D)).astype(np.float32)
    m = (rng.uniform(size=(NS, S)) > 0.2).astype(np.float32)
    y = rng.integers(0, E, (NS, S // 2)).astype(np.int64)
    path, data, losses = (os.path.join(work, f) for f in ("fold_only.onnx", "data", "losses.txt"))
    model(path, w)
    write_dataset(data, {"x": x, "m": m, "labels": y}, NS)
    out = sh(onnxpipe, "train", "--model", path, "--data", data, "--batch", B, "--steps", STEPS, "--losses", losses,
             "--optimizer", "sgd", "--lr", LR, "--momentum", 0, "--weight-decay", 0)
    bound = [ln for ln in out.splitlines() if ln.startswith("dims from the data")]
    print(f"  {bound[0] if bound else 'NO dims line'}")
    if bound != ["dims from the data: seq = 6 (from --data x), half = 3 (from --data labels)"]:
        sys.exit("the plan printout does not say what the data bound")
    got = np.loadtxt(losses)[:, 1]
    first = ort.InferenceSession(path).run(None, {"x": x[:B], "m": m[:B], "labels": y[:B]})[0]
    want = torch_losses(w, x, m, y)
    d_ort = abs(got[0] - first) / abs(first)
    rel = float(np.max(np.abs(got - want) / np.abs(want)))
    print(f"fold-only NonZero / Size in a shape chain and a constant chain, trained with no --dim: first loss "
          f"{got[0]:.6f}, onnxruntime {first:.6f} (relative {d_ort:.2g}); SGD {STEPS} steps {want[0]:.4f} -> "
          f"{want[-1]:.4f}, PyTorch float64 max relative diff {rel:.2g}")
    if not d_ort <= 1e-6 or not rel <= 1e-5 or not want[-1] < want[0]:
        sys.exit("MISMATCH (or the loss did not fall)")

    bad = os.path.join(work, "data_path.onnx")
    model(bad, w, data_path=True)
    nz = ["op NonZero is supported only where its inputs are constants (fold-only",
          "input 0 ('pos') is not constant: it is computed from graph input 'm'"]
    refused([onnxpipe, "train", "--model", bad, "--data", data, "--batch", B, "--steps", 1, "--quiet"], nz)
    refused([onnxpipe, "partition", bad, "--stages", 1], nz)
    refused([onnxpipe, "train", "--model", path, "--data", data, "--batch", B, "--steps", 1, "--quiet",
             "--dim", "seq=5"], ["--dim seq=5, but --data array 'x' has 6 along dim 1 ('seq')"])
    mixed = os.path.join(work, "mixed")
    write_dataset(mixed, {"x": x, "m": m[:, :4].copy(), "labels": y}, NS)
    refused([onnxpipe, "train", "--model", path, "--data", mixed, "--batch", B, "--steps", 1, "--quiet"],
            ["--data array 'x' binds seq = 6, but array 'm' has 4 along dim 1 ('seq')"])
    short = os.path.join(work, "short")
    write_dataset(short, {"x": x[:, :4].copy(), "m": m[:, :4].copy(), "labels": y[:, :2].copy()}, NS)
    refused([onnxpipe, "train", "--model", path, "--data", data, "--eval-data", short, "--eval-every", 1,
             "--batch", B, "--steps", 1, "--quiet"], ["array 'x' is float32 [4, 8] per sample", "[6, 8]"])


if __name__ == "__main__":
    main()
