"""--pack (issue 26 §2) against a Python statement of the same rule (train/dataset_pack.c):
documents cut into pieces of at most seq tokens, first-fit decreasing (longest first, ties in
document order; each into the first sequence with room), input_ids padded with the eos
token (0 without one), labels the next token of the same document else -100, position_ids from 0 in each
piece, and a [1, seq, seq] mask: causal within a piece, a padding token sees itself;
--pad: each piece a sample of its own.

  pack_ref.py show ONNXPIPE WORKDIR    a token stream (EOS-separated) and a Megatron indexed
                                       dataset (megatron-core) of log-normal document lengths:
                                       every sample of `onnxpipe data show --pack` (and of the
                                       stream's --pad) equals the
                                       rule's, and the padding fraction printed is the rule's
  pack_ref.py llama ONNXPIPE WORKDIR   a random-init HF Llama exported by both exporters with a
                                       4-D attention_mask and position_ids; onnxpipe trains 10
                                       AdamW steps on the packed stream at pp=1 and pp=2 x dp=2,
                                       PyTorch (float64) the HF module on the rule's samples:
                                       first loss within 1e-6, every step within 1e-5 relative;
                                       and the dynamo export on the padded documents in buckets
                                       of 4, 8 and 16 tokens (each step at its bucket's length,
                                       in the sampler's order, bucket_steps) at pp=1, pp=2 and
                                       pp=2 x dp=2, the same bounds

Runs in the export venv (scripts/export-venv.sh)."""
import json
import os
import subprocess
import sys
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402

IGNORE, EOS, SEQ = -100, 1, 16
BUCKETS = (4, 8, 16)


def documents(seed, n, vocab, longest):
    """n documents of log-normal lengths (some longer than SEQ), each ending in EOS."""
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n):
        length = int(min(longest, max(1, rng.lognormal(2.0, 0.9))))
        docs.append(np.append(rng.integers(2, vocab, length - 1), EOS).astype(np.int64))
    return docs


def pack(lengths, seq, pad=False):
    """The rule: [(document, offset, length), ...] per sequence (--pad: a piece each)."""
    pieces = [(d, off, min(seq, n - off)) for d, n in enumerate(lengths) for off in range(0, n, seq)]
    if pad:
        return [[p] for p in pieces]
    pieces.sort(key=lambda p: (-p[2], p[0], p[1]))
    bins, room = [], []
    for p in pieces:
        k = next((i for i, r in enumerate(room) if r >= p[2]), len(bins))
        if k == len(bins):
            bins.append([])
            room.append(seq)
        bins[k].append(p)
        room[k] -= p[2]
    return bins


def sample(docs, pieces, seq, pad):
    """One sample's input_ids, labels and position_ids from its pieces [(document, offset,
    length), ...] (docs: arrays, or numpy/megatron memmaps of any size)."""
    out = {"input_ids": np.full(seq, pad, np.int64), "labels": np.full(seq, IGNORE, np.int64),
           "position_ids": np.zeros(seq, np.int64)}
    at = 0
    for d, off, length in pieces:
        doc = docs[d]
        out["input_ids"][at:at + length] = doc[off:off + length]
        nxt = doc[off + 1:off + length + 1]
        out["labels"][at:at + len(nxt)] = nxt
        out["position_ids"][at:at + length] = np.arange(length)
        at += length
    return out


def arrays(docs, seq, pad, pad_only=False):
    bins = pack([len(d) for d in docs], seq, pad_only)
    n = len(bins)
    out = {"input_ids": np.full((n, seq), pad, np.int64), "labels": np.full((n, seq), IGNORE, np.int64),
           "position_ids": np.zeros((n, seq), np.int64), "attention_mask": np.zeros((n, 1, seq, seq), np.int64)}
    for s, pieces in enumerate(bins):
        for k, v in sample(docs, pieces, seq, pad).items():
            out[k][s] = v
        at = 0
        for _, _, length in pieces:
            out["attention_mask"][s, 0, at:at + length, at:at + length] = np.tril(np.ones((length, length), np.int64))
            at += length
        for i in range(at, seq):
            out["attention_mask"][s, 0, i, i] = 1
    padding = 1 - sum(len(d) for d in docs) / (n * seq)
    return out, padding


def mix64(x):
    """splitmix64's finaliser (train/sampler.c)."""
    m = (1 << 64) - 1
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & m
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & m
    return x ^ (x >> 31)


def shuffle_index(seed, epoch, i, n):
    """pp_shuffle_index: a Feistel permutation of [0, n) with cycle walking."""
    if n <= 1 or i >= n:
        return i
    h, m = 1, (1 << 64) - 1
    while h < 32 and (1 << (2 * h)) < n:
        h += 1
    mask, key = (1 << h) - 1, mix64(seed ^ mix64((epoch + 0x9E3779B97F4A7C15) & m))
    while True:
        left, right = i >> h, i & mask
        for r in range(4):
            f = mix64((key + r * 0x632BE59BD9B4E019 + right) & m) & mask
            left, right = right, left ^ f
        i = left << h | right
        if i < n:
            return i


def bucket_steps(docs, buckets, batch, steps, pad, seed=0):
    """--pad --seq-buckets: each document piece a sample in the shortest bucket that holds
    it, the samples bucket by bucket; a global batch from one bucket, the epoch's batches in
    a seeded order (no --shuffle within a bucket). Per step: its length and arrays."""
    seq = buckets[-1]
    out, _ = arrays(docs, seq, pad, pad_only=True)
    lengths = [p[0][2] for p in pack([len(d) for d in docs], seq, True)]
    which = [next(b for b, n in enumerate(buckets) if n >= k) for k in lengths]
    order = sorted(range(len(which)), key=lambda s: which[s])
    first = [0] * (len(buckets) + 1)
    for b in which:
        first[b + 1] += 1
    for b in range(len(buckets)):
        first[b + 1] += first[b]
    per = [(first[b + 1] - first[b]) // batch for b in range(len(buckets))]
    spe = sum(per)
    result = []
    for step in range(steps):
        p = step * batch
        epoch, j = p // (spe * batch), p % (spe * batch) // batch
        k = shuffle_index(seed ^ 0x5BD1E995, epoch, j, spe)
        b = 0
        while b < len(buckets) - 1 and k >= per[b]:
            k -= per[b]
            b += 1
        n = buckets[b]
        picked = [order[first[b] + k * batch + o] for o in range(batch)]
        step_arrays = {"input_ids": out["input_ids"][picked, :n], "labels": out["labels"][picked, :n],
                       "position_ids": out["position_ids"][picked, :n],
                       "attention_mask": out["attention_mask"][picked][:, :, :n, :n]}
        result.append((n, step_arrays))
    return result


def write_stream(path, docs):
    np.concatenate(docs).astype(np.uint16).tofile(path)


def write_megatron(prefix, docs):
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    b = IndexedDatasetBuilder(prefix + ".bin", dtype=np.uint16)
    for d in docs:
        b.add_document(torch.from_numpy(d), [len(d)])
    b.finalize(prefix + ".idx")


def show(onnxpipe, path, n, extra=()):
    r = subprocess.run([onnxpipe, "data", "show", path, "--seq", str(SEQ), *extra, "--count", str(n)],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"onnxpipe data show {path}: {r.stderr.strip()}")
    head = [ln for ln in r.stdout.splitlines() if not ln.startswith("{")]
    return head, [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]


def check_show(onnxpipe, work):
    docs = documents(3, 400, 500, 3 * SEQ + 5)
    write_stream(os.path.join(work, "docs.bin"), docs)
    write_megatron(os.path.join(work, "mega"), docs)
    bad = 0
    # a stream pads with its --eos token; the indexed dataset, given none, with 0
    for path, extra, pad in ((os.path.join(work, "docs.bin"), ("--pack", "--eos", str(EOS)), EOS),
                             (os.path.join(work, "mega"), ("--pack",), 0),
                             (os.path.join(work, "docs.bin"), ("--pad", "--eos", str(EOS)), EOS)):
        want, padding = arrays(docs, SEQ, pad, "--pad" in extra)
        n = len(want["input_ids"])
        head, got = show(onnxpipe, path, n, extra)
        before = bad
        line = next((ln for ln in head if "padding" in ln), "")
        print(f"{os.path.basename(path)} {' '.join(extra)}: {head[0]}\n  {line.strip()}")
        if len(got) != n or f"into {n} samples" not in line or f"{100 * padding:.2f}% padding" not in line:
            print(f"  FAIL: the rule makes {n} samples with {100 * padding:.2f}% padding")
            bad += 1
        for s, row in enumerate(got):
            for k in ("input_ids", "labels", "position_ids"):
                if not np.array_equal(np.array(row[k]), want[k][s]):
                    print(f"  FAIL: sample {s} {k}: {row[k]}\n        the rule: {want[k][s].tolist()}")
                    bad += 1
        print(f"  {len(got)} samples x input_ids, labels, position_ids compared with the rule: "
              f"{'equal' if bad == before else 'DIFFER'}")
    return bad


def run_layouts(zr, onnxpipe, path, stream, data_args, layouts, ref, what, work, fails):
    """onnxpipe's losses at each layout (zoo_train_ref.train) against PyTorch's (first within
    1e-6, all within 1e-5)."""
    os.makedirs(work, exist_ok=True)
    for layout in layouts:
        tag = layout[0]
        try:
            got = zr.train(onnxpipe, path, stream, [*data_args, "--eos", EOS], layout, work)
        except zr.Miss as e:
            fails.append(f"{what} {tag}: {e}")
            continue
        rel = np.abs(got - ref) / np.abs(ref)
        print(f"{what} {tag}: first loss {got[0]:.8f} vs PyTorch float64 {ref[0]:.8f} "
              f"(rel {rel[0]:.2e}), max rel over {len(got)} steps {rel.max():.2e}")
        if len(got) != zr.STEPS or rel[0] > 1e-6 or rel.max() > 1e-5:
            fails.append(f"{what} {tag}: losses {got.tolist()} vs PyTorch {ref.tolist()}")


def check_llama(onnxpipe, work):
    sys.path.insert(0, os.path.dirname(__file__))
    import zoo_train_ref as zr
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("PP_COMM_TIMEOUT", "60")
    docs = documents(4, 300, 256, 2 * SEQ)
    data, _ = arrays(docs, SEQ, EOS)
    need = zr.STEPS * zr.BATCH
    if len(data["input_ids"]) < need:
        sys.exit(f"pack_ref: {len(data['input_ids'])} packed samples, the run needs {need}")
    stream = os.path.join(work, "llama-docs.bin")
    write_stream(stream, docs)
    fails, ref = [], None
    for exporter in ("dynamo", "torchscript"):
        path = os.path.join(work, f"llama-{exporter}.onnx")
        argv = ["--model", "llama", "--layers", "2", "--d-model", "32", "--heads", "4", "--kv-heads", "2",
                "--vocab", "256", "--seq", str(SEQ), "--attention-mask", "4d", "--position-ids",
                "--exporter", exporter, "--save-weights", "--no-check", "-o", path]
        with open(os.path.join(work, f"export-{exporter}.log"), "w") as log:
            r = subprocess.run([sys.executable, zr.ex.__file__, *argv], stdout=log, stderr=subprocess.STDOUT)
        if r.returncode:
            fails.append(f"{exporter}: export failed (export-{exporter}.log)")
            continue
        if ref is None:
            ref = zr.torch_losses(path, data, torch.float64)
        run_layouts(zr, onnxpipe, path, stream, ["--seq", SEQ, "--pack", "--dim", f"seq={SEQ}"], zr.LAYOUTS[::2], ref,
                    f"llama {exporter} --pack", os.path.join(work, exporter), fails)
        if exporter == "dynamo":   # its seq axis is symbolic in every input: one graph per bucket
            steps = bucket_steps(docs, BUCKETS, zr.BATCH, zr.STEPS, EOS)
            print(f"  --pad --seq-buckets {','.join(map(str, BUCKETS))}: steps at lengths {[n for n, _ in steps]}")
            def batches(step):
                a = steps[step][1]
                mbs = [{k: v[i:i + zr.MB] for k, v in a.items()} for i in range(0, zr.BATCH, zr.MB)]
                return mbs, int(np.sum(a["labels"] != IGNORE))
            bref = zr.torch_losses(path, None, torch.float64, batches)
            run_layouts(zr, onnxpipe, path, stream, ["--pad", "--seq-buckets", ",".join(map(str, BUCKETS))], zr.LAYOUTS,
                        bref, f"llama {exporter} --pad --seq-buckets", os.path.join(work, "buckets"), fails)
    for f in fails:
        print(f"FAIL: {f}")
    return len(fails)


def main():
    mode, onnxpipe, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    bad = check_show(onnxpipe, work) if mode == "show" else check_llama(onnxpipe, work)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
