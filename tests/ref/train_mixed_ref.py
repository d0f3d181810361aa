"""Mixed-precision truth: onnxpipe trains the example GPT with --precision bf16 (or fp16),
and PyTorch trains the same model from the same weights on the same batches with AdamW
on fp32 master weights, rounding to bfloat16 (float16) with torch's own conversions at
the points onnxpipe's policy stores 16-bit tensors (stage/precision.c): every activation,
and the weights a matrix product reads; products accumulate in fp32 (bf16: under
torch.autocast("cpu", bfloat16), whose matmul takes 16-bit operands and accumulates in
fp32), and every other op computes in fp32 on the widened 16-bit values. Weight
gradients accumulate in fp32 (a straight-through rounding of the weight), activation
gradients are 16-bit like their tensors.

Per-step losses must agree within TOL (relative), derived in the test that calls this:
the two implementations round the same values but reach some of them through a different
fp32 summation order (GEMM blocking, LayerNorm and softmax reductions), so a value
within an fp32 ulp of a 16-bit rounding boundary can land one 16-bit ulp apart.

usage: train_mixed_ref.py ONNXPIPE WORKDIR {bf16,fp16} [--steps N] [--tol T]"""
import argparse
import math
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
from train_ref import TEXT, sh  # noqa: E402

G = dict(layers=2, d_model=64, heads=4, vocab=256, seq=32)
B, M = 8, 4
OPT = dict(lr=2e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


def gpt_forward(P, ids, lp):
    """The example GPT (tests/ref/example_check.py's gpt_torch) with onnxpipe's 16-bit policy."""
    D, H, T = G["d_model"], G["heads"], G["seq"]
    Bn, dh = ids.shape[0], D // H

    def r(x):      # store in 16 bits
        return x.to(lp)

    def w(p):      # the 16-bit copy of a weight a product reads; its gradient stays fp32
        return p + (p.to(lp).float() - p).detach()

    def mm(a, b):  # 16-bit operands, fp32 accumulation, 16-bit result
        if lp == torch.bfloat16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return r(a.to(lp) @ b.to(lp))
        return r(a.float() @ b.float())

    def ln(x, p):
        return r(F.layer_norm(x.float(), (D,), P[p + ".weight"], P[p + ".bias"], 1e-5))

    def linear(x, p):
        return r(mm(x, w(P[p + ".weight"])).float() + P[p + ".bias"])

    mask = torch.triu(torch.full((T, T), -1e9), diagonal=1)
    x = r(r(F.embedding(ids, P["wte.weight"])).float() + r(F.embedding(torch.arange(T), P["wpe.weight"])).float())
    for layer in range(G["layers"]):
        p = f"h.{layer}"
        q, k, v = linear(ln(x, p + ".ln_1"), p + ".attn.qkv").split(D, dim=-1)
        q, k, v = (z.reshape(Bn, T, H, dh).transpose(1, 2) for z in (q, k, v))
        att = r(r(mm(q, k.transpose(-2, -1)).float() * (1.0 / math.sqrt(dh))).float() + mask)
        att = r(F.softmax(att.float(), dim=-1))
        y = mm(att, v).transpose(1, 2).reshape(Bn, T, D)
        x = r(x.float() + linear(y, p + ".attn.proj").float())
        h = r(F.gelu(linear(ln(x, p + ".ln_2"), p + ".mlp.fc").float()))
        x = r(x.float() + linear(h, p + ".mlp.proj").float())
    logits = mm(ln(x, "ln_f"), w(P["wte.weight"]).t())
    return logits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("onnxpipe")
    ap.add_argument("workdir")
    ap.add_argument("precision", choices=("bf16", "fp16"))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--tol", type=float, required=True)
    a = ap.parse_args()
    lp = torch.bfloat16 if a.precision == "bf16" else torch.float16
    os.makedirs(a.workdir, exist_ok=True)
    model, data = os.path.join(a.workdir, "gpt.onnx"), os.path.join(a.workdir, "text")
    sh(a.onnxpipe, "example", "gpt", "--layers", G["layers"], "--d-model", G["d_model"], "--heads", G["heads"],
       "--vocab", G["vocab"], "--seq", G["seq"], "-o", model)
    sh(a.onnxpipe, "data", "text", TEXT, "-o", data, "--seq", G["seq"])
    ids = np.fromfile(os.path.join(data, "input_ids.bin"), dtype=np.int64).reshape(-1, G["seq"])
    labels = np.fromfile(os.path.join(data, "labels.bin"), dtype=np.int64).reshape(-1, G["seq"])

    losses = os.path.join(a.workdir, f"losses-{a.precision}.txt")
    sh(a.onnxpipe, "train", "--model", model, "--data", data, "--batch", B, "--microbatches", M, "--steps", a.steps,
       "--optimizer", "adamw", "--lr", OPT["lr"], "--beta1", OPT["betas"][0], "--beta2", OPT["betas"][1],
       "--eps", OPT["eps"], "--weight-decay", OPT["weight_decay"], "--precision", a.precision,
       *(["--loss-scale", 1] if a.precision == "fp16" else []), "--losses", losses, "--quiet",
       "--loss", "cross_entropy", "--logits", "logits", "--labels", "labels")
    got = np.loadtxt(losses)[:, 1]

    W0 = {i.name: numpy_helper.to_array(i) for i in onnx.load(model).graph.initializer}
    P = {k: torch.tensor(v.tolist(), dtype=torch.float32).requires_grad_() for k, v in W0.items() if v.dtype.kind == "f"}
    opt = torch.optim.AdamW(list(P.values()), **OPT)
    want = []
    n = ids.shape[0]
    for step in range(a.steps):
        idx = [(step * B + i) % n for i in range(B)]
        x, y = torch.tensor(ids[idx].tolist()), torch.tensor(labels[idx].tolist())
        opt.zero_grad()
        logits = gpt_forward(P, x, lp)
        loss = F.cross_entropy(logits.float().reshape(-1, G["vocab"]), y.reshape(-1))
        loss.backward()
        opt.step()
        want.append(loss.item())
    want = np.array(want)
    rel = np.abs(got - want) / np.abs(want)
    print(f"gpt {a.precision}: {a.steps} steps, loss {want[0]:.4f} -> {want[-1]:.4f} (PyTorch, {lp})")
    print(f"  per-step loss, onnxpipe (B={B} as {M} microbatches) vs PyTorch: max relative diff {rel.max():.3g} "
          f"(step 1: {rel[0]:.3g}), tolerance {a.tol:.3g}")
    if rel.max() > a.tol:
        sys.exit(f"train_mixed_ref {a.precision}: losses differ from PyTorch by {rel.max():.3g} (> {a.tol:.3g})")
    if np.mean(want[-5:]) >= want[0]:
        sys.exit("train_mixed_ref: the loss did not fall")


if __name__ == "__main__":
    main()
