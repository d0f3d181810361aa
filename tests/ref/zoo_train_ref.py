"""The model zoo (issue 24 §5): small random-init HuggingFace and timm models, exported for
training by examples/export/export_model.py with both PyTorch exporters, trained by onnxpipe
at pp=1, pp=2 and pp=2 x dp=2 and by PyTorch (float64) from the same weights on the same
batches with the same microbatching. Checked for each export: the trained element count of
`onnxpipe partition` equals PyTorch's sum(p.numel()), and the parameters it names are those
of the pp=1 run's checkpoint, which `onnxpipe ckpt export` takes (check_trained_set); every
layout's first loss equals onnxruntime's forward + a numpy cross-entropy within 1e-6
relative; every step's loss equals PyTorch's within 1e-5 relative. A model that does not
load is a failure. The table also shows how far PyTorch float32, trained the same way, is
from float64: the noise floor.
Where BatchNorm sees few values per channel (EfficientNet-B0's late stages at microbatch 2)
that floor passes the issue's bounds, and a float32 trainer can be held to no less than
twice the float32 references' own error: each bound is max(bound, 2 x floor), printed as
"tol" (the first loss's floor is the larger of PyTorch float32's and onnxruntime's distance
from float64 at step 1).

The zoo is split in two (MODELS' first field): the fast set, which `make test` runs
(test_zoo_ref_mpi: one model of each kind, each exporter, each layout), and the rest
(test_zoo_full_mpi, in `make test-zoo`, and in CI's `make test` when its time allows).

Runs in the export venv (scripts/export-venv.sh).
usage: zoo_train_ref.py ONNXPIPE WORKDIR [--set fast|rest|all] [--models a,b] [--exporters torchscript,dynamo]"""
import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "export"))
import export_model as ex  # noqa: E402

TEXT = ["--layers", "2", "--d-model", "32", "--heads", "4", "--vocab", "256", "--seq", "16"]
# CNNs at 64 x 64: at 32 x 32 their last stages are 1 x 1, where BatchNorm over a microbatch
# of 2 normalizes 2 values per channel and amplifies rounding (EfficientNet-B0's first loss
# in PyTorch float32 differs from float64 by 4e-2; at 64 x 64 by 1.5e-7).
IMAGE = ["--num-classes", "10"]
# Which exports of a model `make test` runs (the fast set; the others run in the full zoo):
BOTH = ("torchscript", "dynamo")   # both exporters
TS, DYNAMO = ("torchscript",), ("dynamo",)
FULL = ()                          # none: the full zoo only
# A new model goes in as FULL, or in the fast set when it is the first of its kind (an op,
# an exporter's pattern or a fusion that no fast model has); keep the fast set's time under
# about 60 s of the suite's (the "zoo:" line prints it).
MODELS = {  # name: (exports in the fast set, export_model.py arguments)
    # GPT-2: tied embedding, Conv1D; its TorchScript export trains plain against PyTorch at
    # pp=1 and pp=2 in test_plain_exports_ref_mpi, so the fast set runs the dynamo export
    "gpt2": (DYNAMO, ["--model", "gpt2", *TEXT]),
    # Llama: rotary, RMSNorm, SwiGLU and GQA, and the fusions of both exporters' chains
    "llama": (BOTH, ["--model", "llama", *TEXT, "--kv-heads", "2"]),
    # Qwen2 and Mistral: Llama's ops and fusions again (Qwen2 adds q/k/v biases)
    "qwen2": (FULL, ["--model", "qwen2", *TEXT, "--kv-heads", "2"]),
    "mistral": (FULL, ["--model", "mistral", *TEXT, "--kv-heads", "2"]),
    # BERT MLM: attention mask, ignored labels, tied decoder; the classifier: the pooler
    "bert-mlm": (DYNAMO, ["--model", "bert-mlm", *TEXT, "--attention-mask"]),
    "bert-cls": (TS, ["--model", "bert-cls", *TEXT, "--attention-mask", "--num-classes", "3"]),
    "vit": (FULL, ["--model", "vit_tiny_patch16_224", *IMAGE, "--patch-size", "8",
                   "--image-size", "32", "--layers", "2", "--d-model", "32", "--heads", "4"]),
    # ResNet-50's blocks with a quarter of the bottleneck width (5.9M parameters, not 23.5M)
    "resnet50": (FULL, ["--model", "resnet50", *IMAGE, "--image-size", "64", "--set", "base_width=16"]),
    # the CNNs' kind in the fast set: BatchNorm, depthwise convolutions, HardSwish, squeeze-excite;
    # dynamo's export (TorchScript's Conv and BatchNorm train in test_partition_order_ref_mpi's
    # and test_memory_mpi's ResNet-18)
    "mobilenetv3": (DYNAMO, ["--model", "mobilenetv3_small_050", *IMAGE, "--image-size", "64"]),
    "efficientnet": (FULL, ["--model", "efficientnet_b0", *IMAGE, "--image-size", "64"]),
    # OPT (learned positions, ReLU MLP over [batch x seq, d] rows) and Swin (shifted windows,
    # padded and reshaped through Shape arithmetic): both lost the last dim at load (issue 42 §3);
    # OPT's TorchScript file is trained plain (PLAIN below)
    "opt": (TS, ["--model", "opt", *TEXT]),
    "swin": (FULL, ["--model", "swin_tiny_patch4_window7_224", *IMAGE, "--image-size", "32", "--set", "patch_size=2",
                    "--set", "embed_dim=32", "--set", "depths=[2,2]", "--set", "num_heads=[2,4]",
                    "--set", "window_size=4", "--set", "drop_path_rate=0"]),
}
# What stage/fuse*.c must make of each decoder's chains at pp=1 (the run's PP_LOG=debug lines
# "fused ... into one OP"), per layer: SiLU as Swish and Swish(gate) * up as SwiGLU, RMSNorm
# as RMSNormalization (and the final norm), the rotary embedding of q and of k as RotaryEmbedding;
# and stage/fuse_residual_norm.c, each residual Add with the norm that reads it (every norm but
# the first, which reads the embeddings: 2 per layer) as onnxruntime's Skip(Simplified)LayerNormalization.
# Trained as plain exports (issue 42 §6): their TorchScript files lose the recipe's parameter
# metadata before onnxpipe reads them, so what is trained comes from the file alone.
PLAIN = {"opt", "swin"}
PARAM_METADATA = ("onnxpipe.parameters", "onnxpipe.tied", "onnxpipe.transposed")
LAYERS = int(TEXT[TEXT.index("--layers") + 1])
DECODER_FUSIONS = {"Swish": LAYERS, "SwiGLU": LAYERS, "RMSNormalization": 2 * LAYERS + 1,
                   "RotaryEmbedding": 2 * LAYERS, "SkipSimplifiedLayerNormalization": 2 * LAYERS}
LN_FUSIONS = {"SkipLayerNormalization": 2 * LAYERS}
VIT_LAYERS = int(MODELS["vit"][1][MODELS["vit"][1].index("--layers") + 1])
FUSIONS = {"llama": DECODER_FUSIONS, "qwen2": DECODER_FUSIONS, "mistral": DECODER_FUSIONS, "gpt2": LN_FUSIONS,
           "bert-cls": LN_FUSIONS, "bert-mlm": LN_FUSIONS, "vit": {"SkipLayerNormalization": 2 * VIT_LAYERS}}
EXPORTERS = ("torchscript", "dynamo")
# Global batch 8 in microbatches of 2 in every layout, so that BatchNorm sees the same
# groups of samples everywhere: (tag, pp, dp, microbatches per replica).
BATCH, MB = 8, 2
LAYOUTS = (("pp1", 1, 1, 4), ("pp2", 2, 1, 4), ("pp2xdp2", 2, 2, 2))
STEPS = 10
ADAMW = dict(lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
IGNORE = -100
FIRST_TOL, STEP_TOL = 1e-6, 1e-5


class Miss(Exception):
    """A check that failed; its text is the reason printed."""


def sh(cmd, log):
    """Run cmd, its output in log; a failure raises Miss with its last error line."""
    with open(log, "w") as f:
        r = subprocess.run([str(c) for c in cmd], stdout=f, stderr=subprocess.STDOUT)
    if r.returncode:
        lines = open(log).read().strip().splitlines()
        errs = [ln for ln in lines if "error" in ln.lower()] or lines
        raise Miss(f"{os.path.basename(log)}: {errs[-1] if errs else 'exit %d' % r.returncode}")


# ----------------------------------------------------------------------------- data

def make_data(d, kind, args):
    """STEPS x BATCH samples as an onnxpipe dataset folder; returns the arrays."""
    rng = np.random.default_rng(5)
    n, V, T = STEPS * BATCH, args.vocab, args.seq
    # Token 0 is the HF configs' pad_token_id: nn.Embedding(padding_idx=0) gives its row no
    # gradient, which a Gather in ONNX cannot say; so the inputs never hold it.
    if kind == "causal-lm":
        seq = rng.integers(1, V, (n, T + 1))
        arrays = {"input_ids": seq[:, :-1], "labels": seq[:, 1:]}
    elif kind in ("masked-lm", "seq-cls"):
        ids = rng.integers(1, V, (n, T))
        mask = np.ones((n, T), np.int64)
        for i in range(n):  # padded tails of 0..3 tokens
            mask[i, T - i % 4:] = 0
        if kind == "masked-lm":
            picked = (rng.random((n, T)) < 0.25) & (mask == 1)
            picked[:, 0] = True
            labels = np.where(picked, ids, IGNORE)
            ids = np.where(picked, V - 1, ids)  # the [MASK] token
        else:
            labels = rng.integers(0, args.num_classes, n)
        arrays = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    else:
        s = args.image_size
        arrays = {"pixel_values": rng.standard_normal((n, 3, s, s)).astype(np.float32),
                  "labels": rng.integers(0, args.num_classes, n)}
    arrays = {k: v.astype(np.int64) if v.dtype.kind == "i" else v for k, v in arrays.items()}
    os.makedirs(d, exist_ok=True)
    meta = []
    for name, x in arrays.items():
        x.tofile(os.path.join(d, name + ".bin"))
        meta.append({"name": name, "dtype": str(x.dtype), "shape": list(x.shape[1:]), "file": name + ".bin"})
    with open(os.path.join(d, "dataset.json"), "w") as f:
        json.dump({"format": "onnxpipe-dataset-1", "samples": n, "arrays": meta}, f)
    return arrays


def microbatches(arrays, step):
    """The microbatches of a step's global batch, in onnxpipe's order (replica-major,
    contiguous), and the global count of labels the loss is a mean over."""
    lo = step * BATCH
    y = arrays["labels"][lo:lo + BATCH]
    mbs = [{k: v[lo + i:lo + i + MB] for k, v in arrays.items()} for i in range(0, BATCH, MB)]
    return mbs, int(np.sum(y != IGNORE))


# ----------------------------------------------------------------------------- references

def ort_first_loss(path, arrays):
    """onnxruntime's logits for step 1's microbatches, numpy cross-entropy, float64."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    mbs, count = microbatches(arrays, 0)
    total = 0.0
    for mb in mbs:
        logits = sess.run(["logits"], {n: mb[n] for n in names})[0].astype(np.float64)
        C = logits.shape[-1]
        x, y = logits.reshape(-1, C), mb["labels"].reshape(-1)
        keep = y != IGNORE
        x, y = x[keep], y[keep]
        m = x.max(axis=1, keepdims=True)
        lse = (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0]
        total += float(np.sum(lse - x[np.arange(len(y)), y]))
    return total / count


def torch_losses(path, arrays, dtype, batches=None, steps=STEPS, model=None, keep=None):
    """PyTorch trains the module the export was made from (rebuilt with its initial weights),
    in `dtype`, on the same microbatches: gradients summed, the loss a mean over the labels of
    the global batch. float64 is the reference; float32's distance from it is the noise floor
    (how much fp32 rounding alone moves 10 steps of this model). batches(step) gives a step's
    (microbatches, label count); default: microbatches(arrays, step). model: the module to
    train instead (model(x, *extra) gives the logits; default: rebuilt from the recipe beside
    path); keep: a list that receives the trained model."""
    if model is None:
        recipe = json.load(open(os.path.splitext(path)[0] + ".json"))
        model = ex.LogitsOnly(ex.rebuild(path), recipe["kind"], recipe["model"])
    model = model.to(dtype).train()
    opt = torch.optim.AdamW(model.parameters(), **ADAMW)
    losses = []
    for step in range(steps):
        opt.zero_grad()
        mbs, count = (batches or (lambda s: microbatches(arrays, s)))(step)
        total = 0.0
        for mb in mbs:
            x = torch.from_numpy(mb["pixel_values"]).to(dtype) if "pixel_values" in mb \
                else torch.from_numpy(mb["input_ids"])
            extra = [torch.from_numpy(mb[k]) for k in ("attention_mask", "position_ids") if k in mb]
            logits = model(x, *extra)
            y = torch.from_numpy(mb["labels"]).reshape(-1)
            loss = F.cross_entropy(logits.reshape(y.numel(), -1), y, ignore_index=IGNORE,
                                   reduction="sum") / count
            loss.backward()
            total += loss.item()
        opt.step()
        losses.append(total)
    if keep is not None:
        keep.append(model)
    return np.array(losses)


class Reference:
    """PyTorch's losses for an export (float64: the reference; float32: its noise floor) and
    onnxruntime's first loss, with the bounds a float32 trainer is held to: FIRST_TOL and
    STEP_TOL, or twice the float32 references' own error where that is larger."""

    def __init__(self, r64, r32, first):
        self.r64, self.first = r64, first
        self.floor = float(np.max(np.abs(r32 - r64) / np.abs(r64)))
        # onnxruntime's own float32 forward is a float32 reference too: its distance from
        # float64 at step 1 joins PyTorch float32's in the first loss's floor
        floor1 = float(abs(r32[0] - r64[0]) / abs(r64[0]))
        ort_err = float(abs(first - r64[0]) / abs(r64[0]))
        self.first_tol, self.step_tol = max(FIRST_TOL, 2 * max(floor1, ort_err)), max(STEP_TOL, 2 * self.floor)

    def errors(self, losses):
        """onnxpipe's first loss against onnxruntime's, and its steps' largest relative
        difference from PyTorch float64's."""
        rel = np.abs(losses - self.r64) / np.abs(self.r64)
        return abs(losses[0] - self.first) / abs(self.first), float(np.max(rel))

    def check(self, losses):
        """Raises Miss where onnxpipe's losses pass the bounds."""
        if len(losses) != len(self.r64):
            raise Miss(f"{len(losses)} losses written, {len(self.r64)} steps asked")
        ferr, rel = self.errors(losses)
        if ferr > self.first_tol:
            raise Miss(f"first loss {losses[0]:.8f} vs onnxruntime {self.first:.8f} (> {self.first_tol:g})")
        if rel > self.step_tol:
            step = int(np.argmax(np.abs(losses - self.r64) / np.abs(self.r64)))
            raise Miss(f"step {step + 1}: loss {losses[step]:.8f} vs PyTorch {self.r64[step]:.8f} "
                       f"(> {self.step_tol:g} relative; PyTorch float32 misses by {self.floor:.2e})")


def same_weights(a, b):
    wa, wb = (ex.load_weights(os.path.splitext(p)[0] + ".safetensors") for p in (a, b))
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


# ----------------------------------------------------------------------------- onnxpipe

def dims(kind, args):
    """Text models' symbolic sequence axis (the batch axis follows --batch)."""
    return ["--dim", f"seq={args.seq}"] if kind in ex.TEXT_KINDS else []


def what_is_trained(onnxpipe, path, dim, work):
    """What `onnxpipe partition --json` says it trains (its "what_is_trained"), at the
    microbatch and dims that training binds."""
    out, log = os.path.join(work, "partition.json"), os.path.join(work, "partition.log")
    with open(out, "w") as f, open(log, "w") as e:
        r = subprocess.run([str(c) for c in [onnxpipe, "partition", path, "--stages", 2, "--batch", MB,
                                              *dim, "--json"]], stdout=f, stderr=e)
    if r.returncode:
        lines = open(log).read().strip().splitlines()
        raise Miss(f"onnxpipe partition: {lines[-1] if lines else 'exit %d' % r.returncode}")
    with open(out) as f:
        return json.load(f)["what_is_trained"]


def train(onnxpipe, path, data, dim, layout, work, steps=STEPS, save=None):
    """onnxpipe's per-step losses for one layout (mpirun as tests/lib/run.sh launches it);
    save: a directory for its checkpoint of the last step."""
    tag, pp, dp, micro = layout
    losses = os.path.join(work, f"losses-{tag}.txt")
    cmd = [onnxpipe, "train", "--model", path, "--data", data, "--pp", pp, "--dp", dp,
           "--batch", BATCH, "--microbatches", micro, "--steps", steps, *dim, *(["--save", save] if save else []),
           "--loss", "cross_entropy", "--logits", "logits", "--labels", "labels",
           "--optimizer", "adamw", "--lr", ADAMW["lr"], "--beta1", ADAMW["betas"][0],
           "--beta2", ADAMW["betas"][1], "--eps", ADAMW["eps"],
           "--weight-decay", ADAMW["weight_decay"], "--losses", losses, "--quiet"]
    if pp * dp > 1:
        cmd = ["timeout", 300, "mpirun", "--oversubscribe", "--bind-to", "none", "-np", pp * dp,
               "-x", "OPENBLAS_NUM_THREADS", "-x", "PP_COMM_TIMEOUT", *cmd]
    else:
        cmd = ["env", "PP_LOG=debug", *cmd]   # the fusions' lines, for check_fusions
    sh(cmd, os.path.join(work, f"train-{tag}.log"))
    return np.loadtxt(losses, ndmin=2)[:, 1]


def check_trained_set(onnxpipe, path, trained, ckpt, work):
    """One trained set (issue 42 §2): the parameters `onnxpipe partition` names (`trained`,
    its what_is_trained) are the checkpoint's (every tensor with AdamW state), with the same
    element count in its manifest, and `onnxpipe ckpt export` takes that checkpoint with the
    model file (export loads it unbound, as the job's own graph was not). Returns the
    exported file; a difference raises Miss naming the first names."""
    man = json.load(open(os.path.join(ckpt, "manifest.json")))
    saved = {t["param"] for t in man["tensors"] if t["state"]}
    names = set(trained["trained"]["names"])
    if saved != names:
        raise Miss(f"trained set: partition trains {sorted(names - saved)[:3]} that the checkpoint lacks, "
                   f"the checkpoint holds {sorted(saved - names)[:3]} that partition does not train")
    elems = man["trainer"]["params"]["trained_elements"]
    if elems != trained["trained"]["elements"]:
        raise Miss(f"trained set: the checkpoint's manifest says {elems} elements, partition "
                   f"{trained['trained']['elements']}")
    out = os.path.join(work, "exported.onnx")
    sh([onnxpipe, "ckpt", "export", ckpt, "--model", path, "-o", out], os.path.join(work, "export.log"))
    return out


def check_fusions(name, work):
    """The pp=1 run fused what FUSIONS says it must; returns the counts seen, as text. (The
    run builds its stage more than once, for its memory estimate: distinct lines count.)"""
    log = open(os.path.join(work, "train-pp1.log")).read()
    got = {op: len(set(re.findall(rf"^.*stage: fused .* into one {op}$", log, re.M))) for op in FUSIONS.get(name, {})}
    bad = [f"{op} {got[op]} (want {n})" for op, n in FUSIONS.get(name, {}).items() if got[op] != n]
    if bad:
        raise Miss("fusions at pp=1: " + ", ".join(bad))
    return " ".join(f"{op} {n}" for op, n in got.items())


# ----------------------------------------------------------------------------- main

def export(name, exporter, path):
    return export_argv([*MODELS[name][1], "--exporter", exporter, "--save-weights", "--no-check", "-o", path])


def chosen(a):
    """(model, exporter) pairs of the set asked, in MODELS' order."""
    names = a.models.split(",") if a.models else list(MODELS)
    return [(n, e) for n in names for e in a.exporters
            if a.set == "all" or (e in MODELS[n][0]) == (a.set == "fast")]


def export_argv(argv):
    """export_model.py run on argv, its output kept; the recipe it wrote (a failure: Miss)."""
    path = argv[argv.index("-o") + 1]
    log = io.StringIO()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        rc = ex.main(argv)
    if rc:
        raise Miss(f"export failed: {log.getvalue().strip().splitlines()[-1]}")
    return json.load(open(os.path.splitext(path)[0] + ".json"))


def make_plain(path):
    """Drops the metadata onnxpipe reads the trained set from (the recipe, onnxpipe.export, stays
    for rebuild())."""
    import onnx

    m = onnx.load(path)
    keep = [p for p in m.metadata_props if p.key not in PARAM_METADATA]
    del m.metadata_props[:]
    m.metadata_props.extend(keep)
    onnx.save(m, path)


def run_model(a, name, exporters, rows, fails):
    work = os.path.join(a.workdir, name)
    arrays, torch_ref = None, None   # the dataset and PyTorch's losses, shared by the exporters
    for exporter in exporters:
        ework = os.path.join(work, exporter)
        os.makedirs(ework, exist_ok=True)
        path = os.path.join(ework, f"{name}.onnx")
        row = dict(model=name, exporter=exporter, layout="-", params="-", first="-", rel="-", floor="-", tol="-")
        try:
            t0 = time.time()
            recipe = export(name, exporter, path)
            if exporter == "torchscript" and name in PLAIN:
                make_plain(path)
                row["exporter"] = "torchscript (plain)"
            args = ex.parser().parse_args(recipe["argv"])
            ex.finish_args(args)
            kind, want = recipe["kind"], recipe["pytorch_numel"]
            data = os.path.join(work, "data")
            if arrays is None:
                arrays = make_data(data, kind, args)
            dim = dims(kind, args)
            trained = what_is_trained(a.onnxpipe, path, dim, ework)
            got = trained["trained"]["elements"]
            row["params"] = f"{got}/{want}"
            if got != want:
                raise Miss(f"onnxpipe trains {got} elements, PyTorch has {want} parameters")
            if torch_ref is None or not same_weights(torch_ref[0], path):
                torch_ref = (path, torch_losses(path, arrays, torch.float64), torch_losses(path, arrays, torch.float32))
            ref = Reference(torch_ref[1], torch_ref[2], ort_first_loss(path, arrays))
            row["floor"] = f"{ref.floor:.2e}"
            row["tol"] = f"{ref.first_tol:.0e}/{ref.step_tol:.0e}"
            t_ref = time.time() - t0
            for layout in LAYOUTS:
                lrow = dict(row, layout=layout[0])
                rows.append(lrow)
                try:
                    ckpt = os.path.join(ework, "ckpt") if layout[1] * layout[2] == 1 else None
                    losses = train(a.onnxpipe, path, data, dim, layout, ework, save=ckpt)
                    if ckpt:
                        check_trained_set(a.onnxpipe, path, trained, os.path.join(ckpt, f"step-{STEPS}"), ework)
                    if len(losses) == STEPS:
                        ferr, rel = ref.errors(losses)
                        lrow.update(first=f"{ferr:.2e}", rel=f"{rel:.2e}")
                    ref.check(losses)
                    if layout[1] * layout[2] == 1 and name in FUSIONS:
                        print(f"  {name} {exporter}: fused {check_fusions(name, ework)}", flush=True)
                    lrow["status"] = "ok"
                except Miss as e:
                    lrow["status"] = "FAIL"
                    fails.append(f"{name} {exporter} {layout[0]}: {e}")
            print(f"  {name} {exporter}: export + references {t_ref:.0f} s, all {time.time() - t0:.0f} s",
                  flush=True)
        except Miss as e:
            rows.append(dict(row, status="FAIL"))
            fails.append(f"{name} {exporter}: {e}")
            print(f"  {name} {exporter}: {e}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("onnxpipe")
    ap.add_argument("workdir")
    ap.add_argument("--set", choices=("fast", "rest", "all"), default="all")
    ap.add_argument("--models", help="of the set, only these (comma-separated)")
    ap.add_argument("--exporters", default=",".join(EXPORTERS))
    a = ap.parse_args()
    a.exporters = a.exporters.split(",")
    torch.set_num_threads(1)
    os.environ.setdefault("PP_COMM_TIMEOUT", "60")
    rows, fails = [], []
    t0 = time.time()
    pairs = chosen(a)
    for name in dict.fromkeys(n for n, _ in pairs):
        run_model(a, name, [e for n, e in pairs if n == name], rows, fails)
    cols = ("model", "exporter", "layout", "params", "first", "rel", "floor", "tol", "status")
    head = ("model", "exporter", "layout", "params onnxpipe/torch", "1st loss vs ORT",
            f"max rel vs torch64 ({STEPS} steps)", "torch32 vs torch64", "tol 1st/steps", "")
    width = [max(len(str(r.get(c, ""))) for r in rows + [dict(zip(cols, head))]) for c in cols]
    for r in [dict(zip(cols, head))] + rows:
        print("  ".join(str(r.get(c, "")).ljust(w) for c, w in zip(cols, width)))
    print(f"zoo ({a.set}: {len(pairs)} exports of {len(dict.fromkeys(n for n, _ in pairs))} models): {len(rows)} rows, "
          f"{len(fails)} failures, {time.time() - t0:.0f} s")
    for f in fails:
        print(f"FAILED: {f}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
