"""Training truth for examples/custom_trainer.c, the trainer on the public tier alone: it
walked a pipeline schedule's actions over its own stages; PyTorch trains the same MLP from
the same initial weights on the same batches with AdamW in float64, and the per-step losses
and the trained parameters must agree.

usage: custom_trainer_ref.py OUT_DIR   (what example_custom_trainer STEPS OUT_DIR wrote)"""
import os
import sys
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from onnx import numpy_helper  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from example_check import to_torch  # noqa: E402

BATCH = 32                     # examples/custom_trainer.c: BATCH
ADAMW = dict(lr=3e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)   # pp_stage_options_default, lr


def main():
    out = sys.argv[1]
    W0 = {i.name: numpy_helper.to_array(i) for i in onnx.load(os.path.join(out, "mlp.onnx")).graph.initializer}
    names = sorted({k.rsplit(".", 1)[0] for k in W0 if k.endswith(".weight")}, key=lambda n: (n == "head", n))
    d = W0[names[0] + ".weight"].shape[1]
    got = np.loadtxt(os.path.join(out, "losses.txt"))[:, 1]
    steps = len(got)
    raw = np.fromfile(os.path.join(out, "batches.bin"), dtype=np.uint8)
    per = BATCH * d * 4 + BATCH * 8
    assert raw.size == steps * per, f"batches.bin holds {raw.size} bytes, {steps} steps need {steps * per}"

    P = {k: to_torch(v).requires_grad_() for k, v in W0.items() if v.dtype.kind == "f"}
    opt = torch.optim.AdamW(list(P.values()), **ADAMW)
    want = []
    for s in range(steps):
        chunk = raw[s * per:(s + 1) * per]
        x = chunk[:BATCH * d * 4].view(np.float32).reshape(BATCH, d)
        y = chunk[BATCH * d * 4:].view(np.int64)
        h = to_torch(x)
        for i, n in enumerate(names):
            h = F.linear(h, P[n + ".weight"], P[n + ".bias"])
            if i < len(names) - 1:
                h = F.relu(h)
        loss = F.cross_entropy(h, to_torch(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        want.append(loss.item())
    want = np.array(want)
    rel = float(np.max(np.abs(got - want) / np.abs(want)))
    wdiff = 0.0
    for k, v in P.items():
        trained = np.fromfile(os.path.join(out, k + ".bin"), dtype=np.float32).reshape(W0[k].shape)
        wdiff = max(wdiff, float(np.max(np.abs(trained - np.array(v.detach().tolist())))))
    print(f"custom trainer: {steps} steps, loss {want[0]:.4f} -> {want[-1]:.4f} (PyTorch float64 AdamW)")
    print(f"  per-step loss, pipelined by hand vs PyTorch: max relative diff {rel:.3g} (bound 1e-4)")
    print(f"  trained parameters vs PyTorch: max abs diff {wdiff:.3g} over {len(P)} tensors (bound 1e-3)")
    bad = []
    if rel > 1e-4:
        bad.append(f"losses differ from PyTorch by {rel:.3g} (> 1e-4)")
    if wdiff > 1e-3:
        bad.append(f"trained parameters differ from PyTorch by {wdiff:.3g} (> 1e-3)")
    if np.mean(want[-5:]) >= want[0]:
        bad.append("the loss did not fall")
    if bad:
        sys.exit("custom_trainer_ref: " + "; ".join(bad))


if __name__ == "__main__":
    main()
