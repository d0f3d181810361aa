"""Plain exports (issue 42 §2, §6): files written by torch.onnx.export with its defaults, without
the export recipe's metadata, so that onnxpipe must find the parameters itself. GPT-2 and
BERT-MLM (TorchScript: the tied embedding is written twice, once transposed, and equal zero
biases and unit norm weights are merged), Llama (dynamo: rotary frequencies reach the loss
through Cos and Sin; and the recipe's dynamo export with its metadata stripped: folded rotary
tables [1, 1, T, head_dim]), and a small GPT with a causal-mask buffer
(`register_buffer('mask', tril(ones))`, read through Slice -> Equal -> Where; TorchScript).
For each: the trained element count of `onnxpipe partition` equals PyTorch's
sum(p.numel()) (a tied parameter once); 5 AdamW steps (pp=1, and pp=2 for GPT-2, whose tie
then spans the stages) equal PyTorch's losses within 1e-5 relative (or twice PyTorch
float32's own error, as zoo_train_ref.py), the first onnxruntime's within 1e-6; the
parameters partition names are the checkpoint's, and `onnxpipe ckpt export` takes the job's
own checkpoint (zoo_train_ref.check_trained_set). For the masked GPT the exported file, in
onnxruntime, gives the logits of the PyTorch module trained the same 5 steps.

Runs in the export venv (scripts/export-venv.sh).
usage: plain_exports_ref.py ONNXPIPE WORKDIR"""
import argparse
import os
import sys
import time
import types
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import zoo_train_ref as z  # noqa: E402

ex = z.ex
STEPS = 5
HF = {  # name: (export_model.py arguments, exporter, how the plain file is made)
    "gpt2": (["--model", "gpt2", *z.TEXT], "torchscript", "torch.onnx.export"),
    "bert-mlm": (["--model", "bert-mlm", *z.TEXT, "--attention-mask"], "torchscript", "torch.onnx.export"),
    "llama": (["--model", "llama", *z.TEXT, "--kv-heads", "2"], "dynamo", "torch.onnx.export"),
    "llama-stripped": (["--model", "llama", *z.TEXT, "--kv-heads", "2", "--static"], "dynamo",
                       "recipe, metadata stripped"),
}
LAYOUTS = {"gpt2": (z.LAYOUTS[0], z.LAYOUTS[1])}   # pp=1, pp=2; the others pp=1


# ----------------------------------------------------------------------------- the masked GPT

V, D, H, T, L = 256, 32, 4, 16, 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        B, t, _ = x.shape
        q, k, v = (a.view(B, t, H, D // H).transpose(1, 2) for a in self.attn(self.ln1(x)).split(D, dim=2))
        a = (q @ k.transpose(-2, -1)) * (D // H) ** -0.5
        a = a.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        x = x + self.proj((F.softmax(a, dim=-1) @ v).transpose(1, 2).reshape(B, t, D))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class MaskedGPT(nn.Module):
    """A tied GPT whose blocks keep their causal mask as a buffer, as nanoGPT does."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        for e in (self.wte, self.wpe):
            nn.init.normal_(e.weight, std=0.02)
        self.h = nn.ModuleList([Block() for _ in range(L)])
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.h:
            x = b(x)
        return self.head(self.ln_f(x))


# ----------------------------------------------------------------------------- exports

def plain_export(model, inputs, path, exporter):
    """torch.onnx.export with the exporter's defaults (eval mode, constant folding, value
    deduplication; dynamo's optimizer), dynamic batch and sequence: what a user writes."""
    model.eval()
    if exporter == "torchscript":
        axes = {n: {0: "batch", 1: "seq"} for n in inputs}
        torch.onnx.export(model, tuple(inputs.values()), path, dynamo=False, opset_version=17,
                          input_names=list(inputs), output_names=["logits"],
                          dynamic_axes={**axes, "logits": {0: "batch", 1: "seq"}})
    else:
        from torch.export import Dim

        axes = {0: Dim("batch", min=1, max=4096), 1: Dim("seq", min=2, max=T)}
        torch.onnx.export(model, tuple(inputs.values()), path, dynamo=True, input_names=list(inputs),
                          output_names=["logits"], dynamic_shapes={"x": axes})
    m = onnx.load(path)
    assert not any(p.key.startswith("onnxpipe.") for p in m.metadata_props), "a plain export has no recipe metadata"


def export_hf(name, work):
    """The recipe's export (its weights and recipe, for PyTorch's side), then the plain file."""
    argv, exporter, how = HF[name]
    recipe_path = os.path.join(work, "recipe.onnx")
    recipe = z.export_argv([*argv, "--exporter", exporter, "--save-weights", "--no-check", "-o", recipe_path])
    path = os.path.join(work, f"{name}.onnx")
    args = ex.parser().parse_args(recipe["argv"])
    ex.finish_args(args)

    def build():
        return ex.LogitsOnly(ex.rebuild(recipe_path), recipe["kind"], recipe["model"])

    if how == "torch.onnx.export":
        with ex.no_packed_sequence_detection(args):
            plain_export(build(), ex.example_inputs(args, args.batch, args.seq), path, exporter)
    else:
        m = onnx.load(recipe_path)
        keep = [p for p in m.metadata_props if not p.key.startswith("onnxpipe.")]
        del m.metadata_props[:]
        m.metadata_props.extend(keep)
        onnx.save(m, path)
    return path, recipe["kind"], args, build, sum(p.numel() for p in build().parameters())


def export_masked(work):
    path = os.path.join(work, "masked-gpt.onnx")
    plain_export(MaskedGPT(), {"input_ids": torch.zeros(2, T, dtype=torch.int64)}, path, "torchscript")
    return path, "causal-lm", types.SimpleNamespace(vocab=V, seq=T), MaskedGPT, \
        sum(p.numel() for p in MaskedGPT().parameters())


# ----------------------------------------------------------------------------- checks

def exported_matches_torch(exported, trained, arrays):
    """onnxruntime on the exported checkpoint against the PyTorch module trained the same
    steps (float64), on step 1's first microbatch: max |diff|, and how far training moved
    the logits (the export must not be the untrained model)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    x = arrays["input_ids"][:z.MB]
    got = ort.InferenceSession(exported, so, providers=["CPUExecutionProvider"]).run(["logits"], {"input_ids": x})[0]
    with torch.no_grad():
        want = trained.eval()(torch.from_numpy(x)).numpy()
        before = MaskedGPT().double()(torch.from_numpy(x)).numpy()
    return float(np.abs(got - want).max()), float(np.abs(want - before).max())


def run_case(a, name, fails):
    work = os.path.join(a.workdir, name)
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    try:
        path, kind, args, build, want = export_masked(work) if name == "masked-gpt" else export_hf(name, work)
        data = os.path.join(work, "data")
        arrays = z.make_data(data, kind, args)
        dim = ["--dim", f"seq={args.seq}"]
        trained = z.what_is_trained(a.onnxpipe, path, dim, work)
        got = trained["trained"]["elements"]
        print(f"  {name}: onnxpipe trains {got} elements, PyTorch has {want} parameters; "
              f"tied copies {[(c['name'], c['of'], c['transposed']) for c in trained['copies']]}", flush=True)
        if trained["metadata"]["parameters"]:
            raise z.Miss("the plain export has onnxpipe.parameters metadata")
        if got != want:
            raise z.Miss(f"onnxpipe trains {got} elements, PyTorch has {want} parameters")
        keep = []
        ref = z.Reference(z.torch_losses(path, arrays, torch.float64, steps=STEPS, model=build(), keep=keep),
                          z.torch_losses(path, arrays, torch.float32, steps=STEPS, model=build()),
                          z.ort_first_loss(path, arrays))
        for layout in LAYOUTS.get(name, z.LAYOUTS[:1]):
            ckpt = os.path.join(work, "ckpt") if layout[1] * layout[2] == 1 else None
            losses = z.train(a.onnxpipe, path, data, dim, layout, work, steps=STEPS, save=ckpt)
            if len(losses) == STEPS:
                ferr, rel = ref.errors(losses)
                print(f"  {name} {layout[0]}: first loss vs onnxruntime {ferr:.2e} (tol {ref.first_tol:.0e}), "
                      f"{STEPS} steps vs PyTorch float64 max rel {rel:.2e} (tol {ref.step_tol:.0e}; "
                      f"PyTorch float32 {ref.floor:.2e})", flush=True)
            ref.check(losses)
            if ckpt:
                exported = z.check_trained_set(a.onnxpipe, path, trained, os.path.join(ckpt, f"step-{STEPS}"), work)
                print(f"  {name}: partition's {len(trained['trained']['names'])} trained initializers are the "
                      "checkpoint's; ckpt export took it", flush=True)
                if name == "masked-gpt":
                    diff, moved = exported_matches_torch(exported, keep[0], arrays)
                    print(f"  {name}: onnxruntime on the exported checkpoint vs PyTorch trained {STEPS} steps: "
                          f"max |diff| {diff:.2e} (bound 1e-5); training moved the logits by {moved:.2e}", flush=True)
                    if diff > 1e-5 or moved < 1e-3:
                        raise z.Miss(f"the exported checkpoint is not PyTorch's trained model "
                                     f"(max |diff| {diff:.3g}, moved {moved:.3g})")
        print(f"  {name}: ok, {time.time() - t0:.0f} s", flush=True)
    except z.Miss as e:
        fails.append(f"{name}: {e}")
        print(f"  {name}: FAILED: {e}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("onnxpipe")
    ap.add_argument("workdir")
    ap.add_argument("--cases", default=",".join([*HF, "masked-gpt"]))
    a = ap.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("PP_COMM_TIMEOUT", "60")
    fails = []
    for name in a.cases.split(","):
        run_case(a, name, fails)
    for f in fails:
        print(f"FAILED: {f}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
