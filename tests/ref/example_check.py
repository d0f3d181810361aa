"""Checks a model written by `onnxpipe example gpt|mlp` against independent references.

usage: example_check.py gpt FILE --layers L --d-model D --heads H --vocab V --seq T
                            [--batch B] [--opset N] [--seed S] [--loss]
       example_check.py mlp FILE --in N --hidden 64,64 --classes C
                            [--batch B] [--opset N] [--seed S] [--loss]
       (--summary-params N: also assert the count the CLI printed)

Asserts: onnx.checker (full check) passes; opset, inputs and outputs are as asked;
the trainable parameters (float initializers) number the closed form; the weights are
the documented splitmix64 / Box-Muller draws (include/onnxpipe/example.h), regenerated
here; onnxruntime's logits on random inputs equal a PyTorch implementation (float64,
torch.nn.functional) fed the file's initializers within 1e-4, and the loss output equals
F.cross_entropy within 1e-4. Prints every max difference. Exits non-zero on failure."""
import argparse
import contextlib
import io
import math
import sys
import warnings

warnings.filterwarnings("ignore")  # Debian's torch 1.13 warns about NumPy 2 on import
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from onnx import numpy_helper  # noqa: E402

with contextlib.redirect_stderr(io.StringIO()):  # torch 1.13 prints a NumPy 2 notice on first use
    torch.zeros(1).reshape((1,))

TOL = 1e-4
SYM_BATCH = 3          # batch fed when the file's batch dim is symbolic
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def to_torch(a):
    """float64 / int64 torch tensor from a NumPy array (torch 1.13 has no NumPy 2 bridge);
    a torch tensor passes through (training references hand in trainable ones)."""
    if isinstance(a, torch.Tensor):
        return a
    a = np.ascontiguousarray(a, dtype=np.int64 if a.dtype.kind in "iu" else np.float64)
    t = torch.frombuffer(bytearray(a.tobytes()), dtype=torch.int64 if a.dtype == np.int64 else torch.float64)
    return t.reshape(tuple(int(s) for s in a.shape))


def to_numpy(t):
    return np.array(t.tolist(), dtype=np.float64)


class Rng:
    """The weight stream of include/onnxpipe/example.h: splitmix64 draws, uniform
    (z >> 11) * 2^-53, normal by Box-Muller from two draws."""
    GOLDEN = np.uint64(0x9E3779B97F4A7C15)

    def __init__(self, seed):
        self.seed = np.uint64(seed)
        self.used = 0

    def draws(self, n):
        k = np.arange(self.used + 1, self.used + n + 1, dtype=np.uint64)
        self.used += n
        with np.errstate(over="ignore"):
            z = self.seed + k * self.GOLDEN
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        return (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53

    def normal(self, shape, std):
        u = self.draws(2 * int(np.prod(shape))).reshape(-1, 2)
        return (std * np.sqrt(-2.0 * np.log(1.0 - u[:, 0])) * np.cos(2.0 * math.pi * u[:, 1])).reshape(shape)

    def uniform(self, shape, bound):
        return (bound * (2.0 * self.draws(int(np.prod(shape))) - 1.0)).reshape(shape)


def check_file(model, a, want_inputs, want_outputs):
    onnx.checker.check_model(model, full_check=True)
    print("ok   onnx.checker.check_model(full_check=True)")
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    check(opset == a.opset, f"opset {opset} (asked {a.opset})")

    def io(values):
        return {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in values}
    inits = {i.name for i in model.graph.initializer}
    got_in = {k: v for k, v in io(model.graph.input).items() if k not in inits}
    check(got_in == want_inputs, f"inputs {got_in} (expected {want_inputs})")
    check(io(model.graph.output) == want_outputs, f"outputs {io(model.graph.output)} (expected {want_outputs})")


def weights_of(model):
    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


def count_params(weights):
    """Trainable parameters: the float initializers (constants are Constant nodes)."""
    return sum(w.size for w in weights.values() if w.dtype.kind == "f")


def check_summary(a, want):
    if a.summary_params is not None:
        check(a.summary_params == want, f"onnxpipe counted {a.summary_params} parameters (closed form {want})")


def check_weights(weights, expected):
    """expected: name -> float64 array regenerated from the documented RNG."""
    worst = 0.0
    for name, want in expected.items():
        got = weights.get(name)
        if got is None or got.shape != want.shape:
            check(False, f"initializer {name}: {None if got is None else got.shape}, expected {want.shape}")
            continue
        worst = max(worst, float(np.max(np.abs(got - want.astype(np.float32)), initial=0.0)))
    check(worst <= 1e-7, f"{len(expected)} initializers equal the seeded RNG draws: max abs diff {worst:.3g}")


def run_ort(path, feeds):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def compare(what, got, want):
    diff = float(np.max(np.abs(np.asarray(got, dtype=np.float64) - want)))
    check(diff <= TOL, f"{what}: max abs diff {diff:.3g} (tolerance {TOL:g})")


# ---------------------------------------------------------------------------- GPT

def gpt_expected_weights(a):
    rng, L, D, V, T = Rng(a.seed), a.layers, a.d_model, a.vocab, a.seq
    w = {"wte.weight": rng.normal((V, D), 0.02), "wpe.weight": rng.normal((T, D), 0.02)}
    proj_std = 0.02 / math.sqrt(2 * L)
    for l in range(L):
        p = f"h.{l}"
        for ln in ("ln_1", "ln_2"):
            w[f"{p}.{ln}.weight"], w[f"{p}.{ln}.bias"] = np.ones(D), np.zeros(D)
        for name, fan_in, fan_out, std in (("attn.qkv", D, 3 * D, 0.02), ("attn.proj", D, D, proj_std),
                                           ("mlp.fc", D, 4 * D, 0.02), ("mlp.proj", 4 * D, D, proj_std)):
            w[f"{p}.{name}.weight"], w[f"{p}.{name}.bias"] = rng.normal((fan_in, fan_out), std), np.zeros(fan_out)
    w["ln_f.weight"], w["ln_f.bias"] = np.ones(D), np.zeros(D)
    return w


def gpt_torch(W, ids, a):
    """GPT-2 forward in float64 with torch.nn.functional; ids (B, T) -> logits (B, T, V)."""
    D, H, T = a.d_model, a.heads, a.seq
    B, dh = ids.shape[0], D // H
    W = {k: to_torch(v) for k, v in W.items()}

    def ln(x, p):
        return F.layer_norm(x, (D,), W[p + ".weight"], W[p + ".bias"], 1e-5)

    def linear(x, p):  # ONNX weights are [in, out]
        return x @ W[p + ".weight"] + W[p + ".bias"]

    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = F.embedding(ids, W["wte.weight"]) + F.embedding(torch.arange(T), W["wpe.weight"])
    for l in range(a.layers):
        p = f"h.{l}"
        q, k, v = linear(ln(x, p + ".ln_1"), p + ".attn.qkv").split(D, dim=-1)
        q, k, v = (z.view(B, T, H, dh).transpose(1, 2) for z in (q, k, v))      # (B, H, T, dh)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(dh)
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, D)
        x = x + linear(y, p + ".attn.proj")
        x = x + linear(F.gelu(linear(ln(x, p + ".ln_2"), p + ".mlp.fc")), p + ".mlp.proj")
    return ln(x, "ln_f") @ W["wte.weight"].T


def check_gpt(a):
    L, D, H, V, T = a.layers, a.d_model, a.heads, a.vocab, a.seq
    model = onnx.load(a.file)
    bdim = a.batch or "batch"
    ins = {"input_ids": [bdim, T]}
    outs = {"logits": [bdim, T, V]}
    if a.loss:
        ins["labels"], outs["loss"] = [bdim, T], []
    check_file(model, a, ins, outs)
    ops = {n.op_type for n in model.graph.node}
    check(("LayerNormalization" in ops) == (a.opset >= 17),
          f"LayerNormalization {'used' if a.opset >= 17 else 'decomposed'} at opset {a.opset}")
    users = [n.op_type for n in model.graph.node if "wte.weight" in n.input]
    check(sorted(users) == ["Gather", "Transpose"], f"wte.weight tied: read by {sorted(users)}")

    W = weights_of(model)
    want = V * D + T * D + L * (12 * D * D + 13 * D) + 2 * D
    got = count_params(W)
    check(got == want, f"parameters {got} == V*D + T*D + L*(12*D^2 + 13*D) + 2*D = {want}")
    check_summary(a, want)
    check_weights(W, gpt_expected_weights(a))

    B = a.batch or SYM_BATCH
    gen = np.random.default_rng(1234)
    ids = gen.integers(0, V, size=(B, T), dtype=np.int64)
    labels = gen.integers(0, V, size=(B, T), dtype=np.int64)
    feeds = {"input_ids": ids, **({"labels": labels} if a.loss else {})}
    res = run_ort(a.file, feeds)
    with torch.no_grad():
        ref = gpt_torch(W, to_torch(ids), a)
        compare(f"logits [{B}, {T}, {V}] onnxruntime vs torch", res["logits"], to_numpy(ref))
        if a.loss:
            ce = F.cross_entropy(ref.reshape(B * T, V), to_torch(labels).reshape(B * T)).item()
            compare(f"loss {float(res['loss']):.6f} onnxruntime vs torch F.cross_entropy {ce:.6f}",
                    res["loss"], ce)


# ---------------------------------------------------------------------------- MLP

def mlp_layers(a):
    """(name, fan_in, fan_out) of every Gemm."""
    widths = [a.in_] + a.hidden + [a.classes]
    names = [f"fc.{i}" for i in range(len(a.hidden))] + ["head"]
    return list(zip(names, widths[:-1], widths[1:]))


def check_mlp(a):
    model = onnx.load(a.file)
    bdim = a.batch or "batch"
    ins, outs = {"x": [bdim, a.in_]}, {"logits": [bdim, a.classes]}
    if a.loss:
        ins["labels"], outs["loss"] = [bdim], []
    check_file(model, a, ins, outs)
    layers = mlp_layers(a)
    W = weights_of(model)
    want = sum(i * o + o for _, i, o in layers)
    check(count_params(W) == want, f"parameters {count_params(W)} == sum(in*out + out) = {want}")
    check_summary(a, want)
    rng, expected = Rng(a.seed), {}
    for name, i, o in layers:
        expected[name + ".weight"] = rng.uniform((o, i), math.sqrt(6.0 / i))
        expected[name + ".bias"] = np.zeros(o)
    check_weights(W, expected)

    B = a.batch or SYM_BATCH
    gen = np.random.default_rng(1234)
    x = gen.standard_normal((B, a.in_)).astype(np.float32)
    labels = gen.integers(0, a.classes, size=(B,), dtype=np.int64)
    res = run_ort(a.file, {"x": x, **({"labels": labels} if a.loss else {})})
    with torch.no_grad():
        h = to_torch(x)
        for n, (name, _, _) in enumerate(layers):
            h = F.linear(h, to_torch(W[name + ".weight"]), to_torch(W[name + ".bias"]))
            if n < len(layers) - 1:
                h = F.relu(h)
        compare(f"logits [{B}, {a.classes}] onnxruntime vs torch", res["logits"], to_numpy(h))
        if a.loss:
            ce = F.cross_entropy(h, to_torch(labels)).item()
            compare(f"loss {float(res['loss']):.6f} onnxruntime vs torch F.cross_entropy {ce:.6f}",
                    res["loss"], ce)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=("gpt", "mlp"))
    ap.add_argument("file")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--in", dest="in_", type=int, default=32)
    ap.add_argument("--hidden", type=lambda s: [int(v) for v in s.split(",")], default=[64, 64])
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--loss", action="store_true")
    ap.add_argument("--summary-params", type=int, help="parameter count the CLI printed, checked too")
    a = ap.parse_args()
    print(f"== {a.model} {a.file}")
    (check_gpt if a.model == "gpt" else check_mlp)(a)
    if failures:
        sys.exit(f"example_check: {len(failures)} check(s) failed: " + "; ".join(failures))


if __name__ == "__main__":
    main()
