"""Small real PyTorch exports for the loader's fuzz test (tests/test_graph_fuzz.c), which
mutates them: the GPT of export_models.py shrunk (dynamic axes at opset 17; static and
without constant folding at opset 13, so Shape/Gather/Concat chains and Constant nodes
stay), its MLP, and a small CNN (Conv, BatchNormalization kept, MaxPool,
GlobalAveragePool, Flatten, Gemm). No onnxruntime check: these are seeds to break, not references.

usage: export_fuzz_seeds.py OUTDIR     (writes OUTDIR/*.onnx, prints one line per file)"""
import contextlib
import io
import os
import sys
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
with contextlib.redirect_stderr(io.StringIO()):   # Debian's torch 1.13 complains about NumPy 2
    import torch
import torch.nn as nn  # noqa: E402

import export_models as em  # noqa: E402

# the GPT's module-level sizes, made small before any model is built
em.V, em.T, em.D, em.H, em.L = 32, 8, 16, 2, 1


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 8, 3, stride=2, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):  # x: (B, 3, 16, 16)
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = torch.relu(self.conv2(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def export(model, args, path, opset, axes=None, names=("input",), fold=True, training=None):
    model.eval()
    with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(model, args, path, opset_version=opset, do_constant_folding=fold,
                          input_names=list(names), output_names=["output"], dynamic_axes=axes,
                          training=training or torch.onnx.TrainingMode.EVAL)
    print(f"{os.path.basename(path)}: {os.path.getsize(path)} bytes")


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    gpt = em.GPT()
    idx = torch.randint(0, em.V, (2, em.T))
    export(gpt, (idx,), os.path.join(outdir, "gpt_op17_dynamic.onnx"), 17,
           {"idx": {0: "batch", 1: "T"}, "output": {0: "batch", 1: "T"}}, ("idx",))
    export(gpt, (idx,), os.path.join(outdir, "gpt_op13_nofold.onnx"), 13, names=("idx",), fold=False)
    torch.manual_seed(0)
    export(em.mlp(), (torch.randn(4, 32),), os.path.join(outdir, "mlp.onnx"), 17)
    torch.manual_seed(0)
    export(CNN(), (torch.randn(2, 3, 16, 16),), os.path.join(outdir, "cnn_bn.onnx"), 17, fold=False,
           training=torch.onnx.TrainingMode.PRESERVE)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
