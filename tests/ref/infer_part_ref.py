"""Exports, with PyTorch's TorchScript exporter (dynamic batch, and sequence for text), two
small models written the way HF's OPT and timm's Swin are, whose shapes flow through Shape
arithmetic: OPT's decoder layer runs its MLP on rows, x.reshape(-1, x.size(-1)), and views the
result back to x's shape; Swin pads its feature map to whole windows ((ws - H % ws) % ws),
cuts it into windows (view, permute, reshape by H // ws) and back, and crops the padding. For
tests/test_graph_infer.c: next to each MODEL.onnx, MODEL.shapes lists every value's shape as
ONNX's own shape inference with data propagation (onnx.shape_inference, data_prop=True) has it,
one "name<TAB>d0,d1,..." line per value, "?" for a dim it does not know.

usage: infer_part_ref.py OUTDIR"""
import contextlib
import io
import os
import sys
import warnings

warnings.filterwarnings("ignore")
with contextlib.redirect_stderr(io.StringIO()):   # Debian's torch 1.13 complains about NumPy 2
    import torch
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import onnx  # noqa: E402
from onnx import shape_inference  # noqa: E402

from export_models import export  # noqa: E402

V, D, HEADS = 64, 32, 4


class OptLayer(nn.Module):
    """OPT's decoder layer (pre-norm attention, ReLU MLP over [batch x seq, d] rows)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.ln1, self.ln2, self.ln_f = nn.LayerNorm(D), nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.out = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.head = nn.Linear(D, V)

    def forward(self, ids):
        x = self.emb(ids)
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q, k, v = (y.view(b, t, HEADS, D // HEADS).transpose(1, 2) for y in (q, k, v))
        a = torch.softmax(q @ k.transpose(-1, -2) / (D // HEADS) ** 0.5, dim=-1) @ v
        x = x + self.out(a.transpose(1, 2).reshape(b, t, D))
        shape = x.shape
        x = x.reshape(-1, x.size(-1))
        x = x + self.fc2(F.relu(self.fc1(self.ln2(x))))
        return self.head(self.ln_f(x.view(shape)))


class SwinBlock(nn.Module):
    """timm's Swin block on a 12 x 12 map with 8 x 8 windows: padded to 16 x 16, 4 windows."""

    def __init__(self, ws=8):
        super().__init__()
        self.ws = ws
        self.embed = nn.Conv2d(3, D, 2, stride=2)
        self.norm0, self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj, self.mlp = nn.Linear(D, 3 * D), nn.Linear(D, D), nn.Linear(D, D)
        self.head = nn.Linear(D, 10)

    def forward(self, img):
        x = self.norm0(self.embed(img).permute(0, 2, 3, 1))   # B, H, W, C
        B, H, W, C = x.shape
        ws = self.ws
        pad_h, pad_w = (ws - H % ws) % ws, (ws - W % ws) % ws
        h = F.pad(self.norm1(x), (0, 0, 0, pad_w, 0, pad_h))
        _, Hp, Wp, _ = h.shape
        win = h.view(B, Hp // ws, ws, Wp // ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, C)
        q, k, v = self.qkv(win).split(C, dim=-1)
        a = self.proj(torch.softmax(q @ k.transpose(-1, -2) / C ** 0.5, dim=-1) @ v)
        h = a.view(-1, Hp // ws, Wp // ws, ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, Hp, Wp, C)
        x = x + h[:, :H, :W, :].contiguous()
        x = x + self.mlp(self.norm2(x))
        return self.head(x.mean(dim=(1, 2)))


def onnx_shapes(path):
    """ONNX's shapes with data propagation, as "name<TAB>dims" lines next to the model."""
    m = shape_inference.infer_shapes(onnx.load(path), data_prop=True)
    lines = []
    for v in list(m.graph.value_info) + list(m.graph.output):
        t = v.type.tensor_type
        if t.HasField("shape"):
            dims = ",".join(str(d.dim_value) if d.HasField("dim_value") else "?" for d in t.shape.dim)
            lines.append(f"{v.name}\t{dims}\n")
    with open(os.path.splitext(path)[0] + ".shapes", "w") as f:
        f.writelines(lines)
    return len(lines)


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    for name, model, x, axes in (("opt_layer", OptLayer(), torch.randint(0, V, (2, 7)), {0: "batch", 1: "seq"}),
                                 ("swin_block", SwinBlock(), torch.randn(2, 3, 24, 24), {0: "batch"})):
        path = os.path.join(outdir, name + ".onnx")
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            diff = export(model, (x,), path, 17, {"x": axes, "y": {0: "batch"}}, ("x",), ("y",), fold=False)
        print(f"{name}.onnx: onnxruntime vs torch {diff:.3g}, {onnx_shapes(path)} shapes from onnx")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
