"""Training through the new nn ops matches PyTorch: a one-block model with RMSNormalization,
RotaryEmbedding, grouped-query causal Attention (3-D form), GroupNormalization, Resize and
Einsum (opset 23, written here by hand: torch 1.13 exports none of them), trained for a few
SGD steps by onnxpipe (2 microbatches) and by PyTorch in float64 on the same data; the
per-step losses must agree within 1e-4 relative and the loss must fall, and recompute
(selective, full) must not change a bit of them.

usage: train_nn_more.py ONNXPIPE WORKDIR"""
import contextlib
import io
import os
import sys

import numpy as np
with contextlib.redirect_stderr(io.StringIO()):
    import onnx
    from onnx import TensorProto as T, helper as h, numpy_helper as nh
    import torch
    import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from train_ref import sh, write_dataset  # noqa: E402

S, D, HQ, HKV, HD, E, STEPS, LR = 6, 16, 4, 2, 4, 8, 8, 0.1


def weights(rng):
    f = lambda *s: rng.normal(0, 0.3, s)  # noqa: E731
    ang = rng.uniform(0, 3, (1, S, HD // 2))
    return {"g": rng.uniform(0.5, 1.5, D), "wq": f(D, HQ * HD), "wk": f(D, HKV * HD), "wv": f(D, HKV * HD),
            "gs": rng.uniform(0.5, 1.5, 2), "gb": f(2), "wo": f(HQ * HD, E), "cos1": np.cos(ang), "sin1": np.sin(ang)}


def model(W, path):
    inits = [nh.from_array(v.astype(np.float32), k) for k, v in W.items()]
    inits += [nh.from_array(np.array(v, np.int64), k) for k, v in
              {"tail": [S, HD // 2], "g4": [-1, 2, S, HQ * HD // 2], "flat": [-1, E], "back": [-1, S, HQ * HD]}.items()]
    inits.append(nh.from_array(np.array([1, 1, 1, 1], np.float32), "one"))
    N = h.make_node
    nodes = [N("RMSNormalization", ["x", "g"], ["n"], epsilon=1e-5),
             N("MatMul", ["n", "wq"], ["q0"]), N("MatMul", ["n", "wk"], ["k"]), N("MatMul", ["n", "wv"], ["v"]),
             N("Shape", ["x"], ["b"], end=1), N("Concat", ["b", "tail"], ["cshape"], axis=0),
             N("Expand", ["cos1", "cshape"], ["cos"]), N("Expand", ["sin1", "cshape"], ["sin"]),
             N("RotaryEmbedding", ["q0", "cos", "sin"], ["q"], num_heads=HQ),
             N("Attention", ["q", "k", "v"], ["a"], q_num_heads=HQ, kv_num_heads=HKV, is_causal=1),
             N("Reshape", ["a", "g4"], ["a4"]),
             N("GroupNormalization", ["a4", "gs", "gb"], ["gn"], num_groups=2),
             N("Resize", ["gn", "", "one"], ["rz"], mode="linear"),   # scale 1: the identity, through the op
             N("Reshape", ["rz", "back"], ["a3"]),
             N("Einsum", ["a3", "wo"], ["logits3"], equation="bsd,de->bse"),
             N("Reshape", ["logits3", "flat"], ["logits"]), N("Reshape", ["labels", "flat1"], ["lab"]),
             N("SoftmaxCrossEntropyLoss", ["logits", "lab"], ["loss"])]
    inits.append(nh.from_array(np.array([-1], np.int64), "flat1"))
    g = h.make_graph(nodes, "nn_more", [h.make_tensor_value_info("x", T.FLOAT, ["batch", S, D]),
                                        h.make_tensor_value_info("labels", T.INT64, ["batch", S])],
                     [h.make_tensor_value_info("loss", T.FLOAT, [])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 23)])
    m.ir_version = 10
    onnx.save(m, path)


def torch_loss(P, x, y):
    n = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * P["g"]
    B = x.shape[0]
    q = (n @ P["wq"]).reshape(B, S, HQ, HD)
    c, s = P["cos1"].unsqueeze(2), P["sin1"].unsqueeze(2)
    q1, q2 = q[..., :HD // 2], q[..., HD // 2:]
    q = torch.cat([c * q1 - s * q2, s * q1 + c * q2], -1).transpose(1, 2)
    k = (n @ P["wk"]).reshape(B, S, HKV, HD).transpose(1, 2).repeat_interleave(HQ // HKV, 1)
    v = (n @ P["wv"]).reshape(B, S, HKV, HD).transpose(1, 2).repeat_interleave(HQ // HKV, 1)
    sc = q @ k.transpose(-1, -2) / HD ** 0.5
    sc = sc.masked_fill(torch.triu(torch.ones(S, S, dtype=torch.bool), 1), float("-inf"))
    a = (sc.softmax(-1) @ v).transpose(1, 2).reshape(B, S, HQ * HD)
    a4 = F.group_norm(a.reshape(B, 2, S, HQ * HD // 2), 2, eps=1e-5)
    a4 = a4 * P["gs"].reshape(1, 2, 1, 1) + P["gb"].reshape(1, 2, 1, 1)
    logits = torch.einsum("bsd,de->bse", a4.reshape(B, S, HQ * HD), P["wo"])
    return F.cross_entropy(logits.reshape(-1, E), y.reshape(-1))


def main():
    onnxpipe, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(3)
    W = weights(rng)
    path, data, losses = os.path.join(work, "nn_more.onnx"), os.path.join(work, "data"), os.path.join(work, "losses.txt")
    model(W, path)
    n, B = 64, 8
    x = rng.standard_normal((n, S, D)).astype(np.float32)
    y = rng.integers(0, E, (n, S)).astype(np.int64)
    write_dataset(data, {"x": x, "labels": y}, n)
    runs = {}
    for rc in ("none", "selective", "full"):   # the attention probabilities kept, or made again
        sh(onnxpipe, "train", "--model", path, "--data", data, "--batch", B, "--microbatches", 2, "--steps", STEPS,
           "--losses", losses, "--optimizer", "sgd", "--lr", LR, "--momentum", 0, "--weight-decay", 0,
           "--recompute", rc, "--quiet")
        runs[rc] = np.loadtxt(losses)[:, 1]
    got = runs["none"]
    P = {k: torch.tensor(v.tolist(), dtype=torch.float64, requires_grad=k not in ("cos1", "sin1")) for k, v in W.items()}
    opt = torch.optim.SGD([p for p in P.values() if p.requires_grad], lr=LR)
    want = []
    for step in range(STEPS):   # the loader's order: consecutive batches, no shuffling
        i = (step * B) % n
        opt.zero_grad()
        loss = torch_loss(P, torch.tensor(x[i:i + B].tolist(), dtype=torch.float64),
                          torch.tensor(y[i:i + B].tolist()))
        loss.backward()
        opt.step()
        want.append(loss.item())
    want = np.array(want)
    rel = float(np.max(np.abs(got - want) / np.abs(want)))
    same = all(np.array_equal(got, r) for r in runs.values())
    print(f"nn ops model, SGD {STEPS} steps: loss {want[0]:.4f} -> {want[-1]:.4f} (PyTorch float64); "
          f"onnxpipe (2 microbatches) max relative diff {rel:.3g}; recompute selective and full "
          f"{'give the same losses bit for bit' if same else 'CHANGE THE LOSSES'}")
    if not rel <= 1e-4 or not want[-1] < want[0] or not same:
        sys.exit("MISMATCH (or the loss did not fall)")


if __name__ == "__main__":
    main()
