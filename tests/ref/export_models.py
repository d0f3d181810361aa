"""Exports the reference models with PyTorch's TorchScript ONNX exporter and records
their parameter counts in OUTDIR/params.json.

usage: export_models.py OUTDIR

Files: gpt_op13_static, gpt_op17_static, gpt_op17_dynamic (axes "batch", "T"),
gpt_op17_static_nofold (exported without constant folding: the tie survives), mlp,
resnet18 (eval mode, BatchNorm folded into Conv by the exporter), resnet18_bn (eval
mode, BatchNormalization kept), resnet18_fresh (torchvision's defaults, fresh init: merged
zero biases). Deterministic: every model is built right after
torch.manual_seed(0). Each export is checked against torch in onnxruntime, and the
parameters the file holds (count_params.py) against a count derived from torch's."""
import json
import math
import os
import sys
import contextlib
import io
import warnings

warnings.filterwarnings("ignore")
with contextlib.redirect_stderr(io.StringIO()):   # Debian's torch 1.13 complains about NumPy 2
    import torch
    torch.manual_seed(0)                           # (once more, the first time)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

from count_params import count_file_params  # noqa: E402

V, T, D, H, L = 128, 16, 64, 4, 2   # vocab, context, width, heads, layers
BATCH = 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc, self.out = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T), persistent=False)

    def attn(self, x):  # x: (B, t, D)
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split(D, dim=2)
        q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in (q, k, v))   # (B, H, t, D/H)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // H))            # (B, H, t, t)
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, D))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="none"))


class GPT(nn.Module):
    """GPT-2 style: token + position embeddings, pre-LN blocks, LM head tied to wte."""
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, V, bias=False)
        self.lm_head.weight = self.wte.weight

    def perturb_norms(self):
        """LayerNorms start at ones and zeros; the exporter would merge those equal
        initializers into one (behind Identity nodes). Trained models never have equal
        norms, so give each its own values."""
        for mod in self.modules():
            if isinstance(mod, nn.LayerNorm):
                nn.init.normal_(mod.weight, 1.0, 0.1)
                nn.init.normal_(mod.bias, 0.0, 0.1)

    def forward(self, idx):  # idx: (B, t) int64 -> logits (B, t, V)
        pos = torch.arange(idx.shape[1], dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


def mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def torch_params(model):
    """sum(p.numel()) over model.parameters(): a tied weight counts once."""
    return sum(p.numel() for p in model.parameters())


def to_numpy(t):
    return np.array(t.tolist(), dtype=np.int64 if t.dtype == torch.long else np.float32)  # no torch<->NumPy 2 bridge


def export(model, args, path, opset, dynamic_axes=None, input_names=("input",), output_names=("output",),
           fold=True, training=None):
    """The classic TorchScript exporter (torch 1.13 has no other), then a check that
    onnxruntime on the file gives torch's output."""
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, args, path, opset_version=opset, do_constant_folding=fold,
                          input_names=list(input_names), output_names=list(output_names),
                          dynamic_axes=dynamic_axes, training=training or torch.onnx.TrainingMode.EVAL)
        want = to_numpy(model(*args))
    onnx.checker.check_model(onnx.load(path), full_check=True)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {n: to_numpy(a) for n, a in zip(input_names, args)})[0]
    diff = float(np.max(np.abs(got - want)))
    if not diff <= 1e-4:
        sys.exit(f"export_models: {path}: onnxruntime differs from torch by {diff:.3g}")
    return diff


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    info = {}

    def record(name, model, held_want, note, diff, tied=(), trained=None):
        """held_want: the float initializers the file holds at differentiable inputs
        (count_params.py); trained (default the same): what onnxpipe must train."""
        path = os.path.join(outdir, name)
        held = count_file_params(onnx.load(path))
        if held != held_want:
            sys.exit(f"export_models: {name} holds {held} trainable parameters, expected {held_want} ({note})")
        expected = held_want if trained is None else trained
        info[name] = {"torch": torch_params(model), "expected": expected, "note": note, "tied": list(tied)}
        print(f"{name}: onnxruntime vs torch max abs diff {diff:.3g}; parameters torch {torch_params(model)}, "
              f"file {held} ({note})")

    for opset, dynamic, fold in ((13, False, True), (17, False, True), (17, True, True), (17, False, False)):
        torch.manual_seed(0)
        gpt = GPT()
        gpt.perturb_norms()
        idx = torch.randint(0, V, (BATCH, T))
        name = f"gpt_op{opset}_{'dynamic' if dynamic else 'static'}{'' if fold else '_nofold'}.onnx"
        axes = {"idx": {0: "batch", 1: "T"}, "logits": {0: "batch", 1: "T"}} if dynamic else None
        diff = export(gpt, (idx,), os.path.join(outdir, name), opset, axes, ("idx",), ("logits",), fold)
        if fold:   # the exporter folds the lm_head's Transpose(wte.weight) into a new [D, V] initializer,
            # which onnxpipe ties back to wte.weight (its exact transpose): torch's count again
            record(name, gpt, torch_params(gpt) + V * D,
                   f"the file holds torch's {torch_params(gpt)} + {V * D}: constant folding copies the tied "
                   "wte.weight into a separate (transposed) lm_head initializer, which onnxpipe ties back", diff,
                   trained=torch_params(gpt))
        else:      # the tie survives as Transpose(wte.weight) -> MatMul; shapes stay Shape/Gather chains
            record(name, gpt, torch_params(gpt), "no constant folding: the tied weight is held once", diff,
                   tied=["wte.weight"])

    torch.manual_seed(0)
    m = mlp()
    diff = export(m, (torch.randn(4, 32),), os.path.join(outdir, "mlp.onnx"), 17)
    record("mlp.onnx", m, torch_params(m), "all parameters", diff)

    with contextlib.redirect_stderr(io.StringIO()):   # late: its import is slow and noisy
        import torchvision
    torch.manual_seed(0)
    r = torchvision.models.resnet18(weights=None, num_classes=10)
    # fresh BatchNorms fold into all-zero Conv biases, which the exporter would merge
    # into one initializer; give them the varied statistics a trained network has
    for mod in r.modules():
        if isinstance(mod, nn.BatchNorm2d):
            nn.init.normal_(mod.weight, 1.0, 0.1)
            nn.init.normal_(mod.bias, 0.0, 0.1)
            nn.init.normal_(mod.running_mean, 0.0, 0.1)
            nn.init.uniform_(mod.running_var, 0.5, 1.5)
    diff = export(r, (torch.randn(1, 3, 64, 64),), os.path.join(outdir, "resnet18.onnx"), 17)
    # eval export folds BatchNorm(C) into the Conv before it: gamma and beta (2C) go,
    # a Conv bias (C) comes; running statistics were never parameters
    bn = sum(mod.num_features for mod in r.modules() if isinstance(mod, nn.BatchNorm2d))
    record("resnet18.onnx", r, torch_params(r) - bn,
           f"BatchNorm folded into Conv: torch {torch_params(r)} - {bn} (2C BN affine - C conv bias per BN)", diff)
    # TrainingMode.PRESERVE keeps BatchNormalization (training_mode=0) as its own node:
    # its scale and bias are parameters, its running statistics are not
    diff = export(r, (torch.randn(1, 3, 64, 64),), os.path.join(outdir, "resnet18_bn.onnx"), 17,
                  fold=False, training=torch.onnx.TrainingMode.PRESERVE)
    record("resnet18_bn.onnx", r, torch_params(r), "BatchNormalization kept: every torch parameter", diff)

    # torchvision's ResNet-18 as a user exports it (fresh init, 1000 classes, eval mode): its
    # BatchNorms fold into all-zero Conv biases, which the exporter merges into one initializer
    # per channel count, named again for each Conv by Identity nodes at the head of the file
    torch.manual_seed(0)
    r = torchvision.models.resnet18(weights=None)
    diff = export(r, (torch.randn(1, 3, 64, 64),), os.path.join(outdir, "resnet18_fresh.onnx"), 17)
    widths = [mod.num_features for mod in r.modules() if isinstance(mod, nn.BatchNorm2d)]
    merged = sum(widths) - sum(set(widths))
    record("resnet18_fresh.onnx", r, torch_params(r) - 2 * sum(widths) + sum(set(widths)),
           f"BatchNorm folded into zero Conv biases, merged: torch {torch_params(r)} - {sum(widths)} - {merged} "
           "(one initializer per channel count)", diff)

    with open(os.path.join(outdir, "params.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
