"""Offline export of checkpoints of a PyTorch export trained with --loss cross_entropy
(test_ckpt_export_torch.sh): a small language model with its embedding tied to its output
projection, exported by torch.onnx.export in training mode. `export DIR` writes DIR/lm.onnx;
`check CKPT EXPORTED UNTIE FROZEN` loads the checkpoint's tensors (by manifest.json, no
onnxpipe code) into the same PyTorch model (the untied copy, when UNTIE names it, as a
separate output weight; FROZEN parameters keep their initial values) and compares its
logits with onnxruntime's on the exported file.
usage: ckpt_export_ref.py export DIR | check CKPT EXPORTED UNTIE|- FROZEN|-"""
import json
import os
import sys

import numpy as np
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, D, T = 256, 16, 16


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(VOCAB, D)
        self.ln = nn.LayerNorm(D)
        self.fc = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D)
        self.head = None  # the output weight once untied; else the embedding's

    def forward(self, input_ids):
        h = self.emb(input_ids)
        h = h + torch.relu(self.fc(self.ln(h)))
        return F.linear(self.ln2(h), self.emb.weight if self.head is None else self.head)


def export(d):
    torch.onnx.export(LM().train(), (torch.zeros(2, T, dtype=torch.int64),), os.path.join(d, "lm.onnx"),
                      input_names=["input_ids"], output_names=["logits"], opset_version=17,
                      dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)


def checkpoint_tensors(ck):
    """Every parameter and buffer of the checkpoint, by name, from its manifest and shards."""
    man = json.load(open(os.path.join(ck, "manifest.json")))
    out = {}
    for t in man["tensors"]:
        if t["state"] is None:
            raw = open(os.path.join(ck, t["file"]), "rb").read()[t["offset"]:t["offset"] + t["nbytes"]]
            # torch.frombuffer: this torch's numpy bridge may not load the installed numpy
            out[t["name"]] = torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(t["shape"])
    return out


def check(ck, exported, untie, frozen):
    tensors = checkpoint_tensors(ck)
    m = LM().eval()
    init = {k: v.detach().clone() for k, v in m.named_parameters()}
    for name, p in m.named_parameters():
        if frozen != "-" and name.startswith(frozen):
            assert name not in tensors, f"frozen {name} is in the checkpoint"
            continue
        p.data = tensors[name]
    copies = [k for k in tensors if k.startswith("emb.weight.untied")]
    if untie != "-":
        assert copies == ["emb.weight.untied1"], f"untied copies {copies}"
        m.head = tensors[copies[0]]
        print(f"  untied: emb.weight and emb.weight.untied1 differ by "
              f"{(m.head - m.emb.weight).abs().max().item():.3g} after training")
    else:
        assert not copies, f"untied copies {copies} without --untie"
    x = np.random.default_rng(1).integers(0, VOCAB, size=(3, T), dtype=np.int64)
    with torch.no_grad():
        want = np.array(m(torch.tensor(x.tolist())).tolist(), dtype=np.float32)
        for k, v in init.items():
            dict(m.named_parameters())[k].data = v
        m.head = None
        before = np.array(m(torch.tensor(x.tolist())).tolist(), dtype=np.float32)
    got = ort.InferenceSession(exported, providers=["CPUExecutionProvider"]).run(None, {"input_ids": x})[0]
    diff, moved = float(np.abs(got - want).max()), float(np.abs(want - before).max())
    print(f"  onnxruntime on {os.path.basename(exported)} vs PyTorch with {os.path.basename(ck)}'s weights "
          f"({len(tensors)} tensors): max |diff| = {diff:.3g} (bound 1e-5); training moved the logits by {moved:.3g}")
    if diff > 1e-5 or moved < 1e-3:
        sys.exit("FAIL: the exported model is not the checkpoint's")


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(sys.argv[2])
    else:
        check(*sys.argv[2:6])
