"""Attention fused into one Attention op (stage/fuse_attention.c) on small random-init HF GPT-2, Llama
(grouped-query heads) and BERT (a padding mask) exports from both PyTorch exporters
(examples/export/export_model.py), trained on the cpu with --fused-attention on against the same
export with --fused-attention off (the unfused chain: MatMul, scale, mask, Softmax, MatMul, the
heads' Transposes). Checked per model and exporter: the stage fuses every layer's attention (its
info line counts the blocks, the debug lines name them), Llama's reading its 2 kv heads without
HF's repeat_kv (the Expands go); the fused run's first loss equals onnxruntime's forward + a numpy
cross-entropy within 1e-5 relative; and one AdamW step with beta1 = 0 (the checkpoint's exp_avg
is then the gradient) gives the same loss and every parameter's gradient within 1e-5 (relative to
the tensor's largest) as the unfused run.

Runs in the export venv (scripts/export-venv.sh).
usage: attention_fuse_ref.py ONNXPIPE WORKDIR"""
import argparse
import os
import re
import sys
import time
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import rope_fuse_ref as rf  # noqa: E402
import zoo_train_ref as z  # noqa: E402

LAYERS = 2
TEXT = ["--layers", str(LAYERS), "--d-model", "64", "--vocab", "256", "--seq", "32"]
MODELS = {"gpt2": ["--model", "gpt2", *TEXT, "--heads", "4"],
          "llama": ["--model", "llama", *TEXT, "--heads", "4", "--kv-heads", "2"],
          # not causal: a padding mask [B, 1, 1, S] from the attention_mask input, added to the scores
          "bert-mlm": ["--model", "bert-mlm", *TEXT, "--heads", "4", "--attention-mask"]}
TOL = rf.TOL


def train(onnxpipe, path, data, fused, work):
    """One AdamW step (beta1 = 0): the loss, the blocks the stage says it fused, the attention
    chains the debug log names, and the checkpoint's exp_avg (the gradients)."""
    ck = os.path.join(work, "ckpt")
    cmd = [onnxpipe, "train", "--model", path, "--data", data, "--dim", "seq=32", "--batch", 8, "--microbatches", 2,
           "--steps", 1, "--loss", "cross_entropy", "--logits", "logits", "--labels", "labels",
           "--optimizer", "adamw", "--lr", 1e-3, "--beta1", 0, "--losses", os.path.join(work, "losses.txt"),
           "--fused-attention", "on" if fused else "off", "--save", ck, "--save-sync", "--quiet"]
    log = os.path.join(work, "train.log")
    z.sh(cmd, log)
    with open(log) as f:
        text = f.read()
    chains = set(re.findall(r"fused attention '[^']*' \.\. '([^']*)'(?: \(grouped-query[^)]*\))? into one Attention",
                            text))
    gqa = set(re.findall(r"fused attention '[^']*' \.\. '([^']*)' \(grouped-query", text))
    blocks = set(re.findall(r"stage: (\d+) attention blocks fused into Attention ops", text))
    loss = float(np.loadtxt(os.path.join(work, "losses.txt"), ndmin=2)[0, 1])
    t = load_file(os.path.join(ck, "step-1", "shard-s000-r000.safetensors"))
    grads = {k[:-len(".exp_avg")]: v for k, v in t.items() if k.endswith(".exp_avg")}
    return loss, chains, gqa, blocks, grads


def check(a, name, exporter, fails):
    work = os.path.join(a.workdir, name, exporter)
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    path = os.path.join(work, f"{name}.onnx")
    recipe = z.export_argv([*MODELS[name], "--exporter", exporter, "--save-weights", "--no-check", "-o", path])
    args = z.ex.parser().parse_args(recipe["argv"])
    z.ex.finish_args(args)
    data = os.path.join(work, "data")
    arrays = z.make_data(data, recipe["kind"], args)
    runs = {}
    for tag in ("fused", "unfused"):
        os.makedirs(os.path.join(work, tag), exist_ok=True)
        runs[tag] = train(a.onnxpipe, path, data, tag == "fused", os.path.join(work, tag))
    (loss, chains, gqa, blocks, grads), (loss_u, chains_u, _, _, grads_u) = runs["fused"], runs["unfused"]
    first = z.ort_first_loss(path, arrays)
    tag = f"{name} {exporter}"
    want_gqa = LAYERS if "--kv-heads" in MODELS[name] else 0
    print(f"  {tag}: fused {len(chains)} attention blocks into Attention ops (want {LAYERS}; the stage's count: "
          f"{', '.join(sorted(blocks)) or 'none'}), {len(gqa)} of them reading the kv heads without repeat_kv "
          f"(want {want_gqa}), unfused run {len(chains_u)}")
    if len(chains) != LAYERS or chains_u or blocks != {str(LAYERS)} or len(gqa) != want_gqa:
        fails.append(f"{tag}: fused {len(chains)} attention blocks (want {LAYERS}), {len(gqa)} grouped-query "
                     f"(want {want_gqa}), the unfused run {len(chains_u)}")
    rel = abs(loss - first) / abs(first)
    rel_u = abs(loss - loss_u) / abs(loss_u)
    print(f"  {tag}: loss {loss:.8f}, onnxruntime {first:.8f} (rel {rel:.1e}), unfused {loss_u:.8f} (rel {rel_u:.1e})")
    if rel > TOL or rel_u > TOL:
        fails.append(f"{tag}: loss {loss:.8f} vs onnxruntime {first:.8f}, unfused {loss_u:.8f} (> {TOL:g})")
    rf.compare_grads(tag, grads, grads_u, t0, fails)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("onnxpipe")
    ap.add_argument("workdir")
    a = ap.parse_args()
    os.environ["PP_LOG"] = "debug"
    fails = []
    for name in MODELS:
        for exporter in z.EXPORTERS:
            check(a, name, exporter, fails)
    for f in fails:
        print(f"FAILED: {f}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
