#!/usr/bin/env bash
# Data read lazily, each rank its share (issue 42 §1), against readers nobody here wrote:
# - token streams and Megatron indexed datasets (megatron-core's IndexedDatasetBuilder, and
#   its _IndexWriter over a sparse .bin), small and large (sparse files of 1.5 and 1 GiB):
#   every sample `onnxpipe data show` prints (windows, --pack, --pad, --seq-buckets) equals
#   numpy.memmap's or megatron-core IndexedDataset's tokens placed by the rule
#   (tests/ref/pack_ref.py), and the largest resident set of `data show` and of
#   `train --steps 2` on the large ones stays under 200 MiB (before, the start-up check read
#   every label: the resident set was the file's size);
# - the cached document index and sample plan: built once, then reused (the log says so,
#   the files' mtimes stay), rebuilt when the data changes (its content, or its mtime
#   alone), put in --data-cache or, beside read-only data, in HOME/.cache/onnxpipe/data; four
#   processes building at once all print the same samples and leave one whole file of each;
#   under mpirun rank 0 builds and rank 1 reuses, and a build that fails on rank 0 fails
#   every rank with its message;
# - a token outside the model's vocabulary fails the step that reads it, naming the file and
#   the byte, alone and under mpirun at pp=2 (no hang), windowed and packed.
# Python: the export venv (numpy, megatron-core; scripts/export-venv.sh).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/data-lazy
unlock() { [ ! -d "$OUT/ro" ] || { chattr -i "$OUT/ro" || true; chmod 755 "$OUT/ro"; } 2>/dev/null; }
unlock
rm -rf "$OUT"
mkdir -p "$OUT"
trap 'unlock; rm -f "$OUT"/big*' EXIT   # the sparse files take no disk, but leave nothing large behind
XPY=$("$SRC_DIR/scripts/export-venv.sh" | tail -n 1)/bin/python
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
for s in 16 64; do
    "$ONNXPIPE" example gpt --layers 1 --d-model 32 --heads 2 --vocab 512 --seq $s -o "$OUT/gpt$s.onnx" >/dev/null
done

"$XPY" - "$SRC_DIR" "$OUT" "$ONNXPIPE" <<'PYEOF'
import json, os, re, shutil, subprocess, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np
src, out, onnxpipe = sys.argv[1:4]
sys.path.insert(0, os.path.join(src, "tests", "ref"))
import pack_ref as pr  # noqa: E402
from megatron.core.datasets.indexed_dataset import IndexedDataset, _IndexWriter  # noqa: E402

EOS, IGNORE, MiB = pr.EOS, pr.IGNORE, 1 << 20
RSS_GROWTH = 128   # MiB a process may hold beyond its start-up, whatever the corpus' size (ASan's included)
fails = 0


def check(ok, what):
    global fails
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    fails += not ok


# A process's largest RSS counts the memory of the process it was forked from (Linux keeps
# the high-water mark across exec), and this one maps gigabytes: a small Python forks onnxpipe.
SPAWN = """import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run(args, env=None, mpi=0):
    """onnxpipe (under mpirun -np mpi when mpi): return code, stdout, stderr, largest RSS (MiB)."""
    cmd = [sys.executable, "-S", "-c", SPAWN, f"{out}/run.rss", onnxpipe, *args]
    if mpi:
        cmd = ["timeout", "120", "mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(mpi),
               "-x", "OPENBLAS_NUM_THREADS", "-x", "PP_LOG", onnxpipe, *args]
    with open(f"{out}/run.out", "w") as o, open(f"{out}/run.err", "w") as e:
        rc = subprocess.run(cmd, stdout=o, stderr=e, env={**os.environ, "PP_LOG": os.environ.get("PP_LOG", "warn"),
                                                           **(env or {})}).returncode
    rss = 0 if mpi else int(open(f"{out}/run.rss").read()) / 1024
    return rc, open(f"{out}/run.out").read(), open(f"{out}/run.err").read(), rss


def show(path, *opts, env=None):
    rc, text, err, rss = run(["data", "show", path, *opts], env)
    if rc:
        sys.exit(f"onnxpipe data show {path} {' '.join(opts)}: {err.strip()[-600:]}")
    rows = [json.loads(ln) for ln in text.splitlines() if ln.startswith("{")]
    return text.splitlines()[0], rows, err, rss


def stream_docs(mm):
    """A stream's documents (split after each EOS), found by numpy in chunks: views of mm."""
    cuts, step = [], 64 * MiB
    for a in range(0, len(mm), step):
        cuts += (np.flatnonzero(mm[a:a + step] == EOS) + a + 1).tolist()
    cuts = [0] + [c for c in cuts if c < len(mm)] + [len(mm)]
    return [mm[a:b] for a, b in zip(cuts, cuts[1:])]


def placed(lengths, seq, pad, buckets=None):
    """The rule's samples (pieces per sample), in order of their bucket when buckets."""
    bins = pr.pack(lengths, seq, pad)
    if not buckets:
        return bins
    which = [next(b for b, n in enumerate(buckets) if n >= sum(p[2] for p in s)) for s in bins]
    return [bins[s] for s in sorted(range(len(bins)), key=lambda s: which[s])]


def same_sample(row, want):
    return all(np.array_equal(np.asarray(row[k]), want[k]) for k in ("input_ids", "labels", "position_ids"))


def compare_all(path, opts, docs, seq, pad, what, buckets=None):
    samples = placed([len(d) for d in docs], seq, "--pad" in opts, buckets)
    head, rows, _, _ = show(path, "--seq", str(seq), *opts, "--count", str(len(samples)))
    bad = [s for s, row in enumerate(rows) if not same_sample(row, pr.sample(docs, samples[s], seq, pad))]
    check(len(rows) == len(samples) and f"{len(samples)} samples" in head and not bad,
          f"{os.path.basename(path)} {' '.join(opts)}: {len(rows)} samples equal the rule's over {what}"
          + (f" (sample {bad[0]} differs)" if bad else ""))
    return rows


# ---- 1. small: a stream and a megatron-core dataset of the same documents ----------------
docs = pr.documents(5, 300, 500, 3 * pr.SEQ + 5)
pr.write_stream(f"{out}/docs.bin", docs)
pr.write_megatron(f"{out}/mega", docs)
mm = np.memmap(f"{out}/docs.bin", np.uint16, mode="r")
ndocs = stream_docs(mm)
mega = IndexedDataset(f"{out}/mega")
mdocs = [mega[i] for i in range(len(mega))]
B = ["--seq-buckets", "4,8,16"]
for opts, bk in ((["--pack"], None), (["--pad"], None), (["--pack", *B], (4, 8, 16)), (["--pad", *B], (4, 8, 16))):
    compare_all(f"{out}/docs.bin", [*opts, "--eos", str(EOS)], ndocs, pr.SEQ, EOS, "numpy.memmap's documents", bk)
for opts, bk in ((["--pack"], None), (["--pad", *B], (4, 8, 16))):
    compare_all(f"{out}/mega", opts, mdocs, pr.SEQ, 0, "megatron-core IndexedDataset's documents", bk)

# ---- 2. the cache: reused, rebuilt when the data changes, where it goes -------------------
pack = ["--seq", "16", "--pack", "--eos", str(EOS)]
files = [f"{out}/docs.bin.eos{EOS}.docs", f"{out}/docs.bin.eos{EOS}.pack16.samples"]
mtimes = [os.stat(f).st_mtime_ns for f in files]
_, rows, err, _ = show(f"{out}/docs.bin", *pack, "--count", "1000", env={"PP_LOG": "info"})
check(err.count("reusing") == 2 and "built" not in err and mtimes == [os.stat(f).st_mtime_ns for f in files],
      "a second run reuses the document index and the sample plan (log: 'reusing', mtimes kept)")
more = np.append(np.arange(2, 40), EOS).astype(np.uint16)
with open(f"{out}/docs.bin", "ab") as f:
    f.write(more.tobytes())
ndocs2 = ndocs + [more.astype(np.int64)]
_, _, err, _ = show(f"{out}/docs.bin", *pack, env={"PP_LOG": "info"})
check(err.count("built in") == 2, "a document appended to the stream: both rebuilt")
compare_all(f"{out}/docs.bin", pack[2:], ndocs2, 16, EOS, "the longer stream's documents")
os.utime(f"{out}/docs.bin", ns=(time.time_ns(), time.time_ns() + 10**9))
_, _, err, _ = show(f"{out}/docs.bin", *pack, env={"PP_LOG": "info"})
check(err.count("built in") == 2, "the stream's mtime changed alone: both rebuilt")
os.makedirs(f"{out}/cache")
m0 = [os.stat(f).st_mtime_ns for f in files]
_, rows_c, _, _ = show(f"{out}/docs.bin", *pack, "--count", "1000", "--data-cache", f"{out}/cache")
made = sorted(os.listdir(f"{out}/cache"))
check(len(made) == 2 and made[0].endswith(".eos1.docs") and made[1].endswith(".eos1.pack16.samples")
      and m0 == [os.stat(f).st_mtime_ns for f in files], f"--data-cache: the two files go there ({', '.join(made)})")
# read-only data: the cache goes to HOME/.cache/onnxpipe/data
os.makedirs(f"{out}/ro")
shutil.copy(f"{out}/docs.bin", f"{out}/ro/docs.bin")
os.chmod(f"{out}/ro", 0o555)
if os.access(f"{out}/ro", os.W_OK):   # root writes anywhere: make the folder immutable
    subprocess.run(["chattr", "+i", f"{out}/ro"], capture_output=True)
try:
    open(f"{out}/ro/probe", "w").close()
    print("skip a read-only data folder: none can be made here (root without chattr)")
except OSError:
    _, rows_ro, _, _ = show(f"{out}/ro/docs.bin", *pack, "--count", "1000", env={"HOME": f"{out}/home"})
    cached = os.listdir(f"{out}/home/.cache/onnxpipe/data")
    check(rows_ro == rows_c and len(cached) == 2 and sorted(os.listdir(f"{out}/ro")) == ["docs.bin"],
          f"read-only data folder: the files go to HOME/.cache/onnxpipe/data ({', '.join(sorted(cached))}), "
          "the samples are the same")
# four processes at once on a stream nothing has indexed
shutil.copy(f"{out}/docs.bin", f"{out}/conc.bin")
procs = [subprocess.Popen([onnxpipe, "data", "show", f"{out}/conc.bin", *pack, "--count", "1000"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
outs = [p.communicate() for p in procs]
left = sorted(f for f in os.listdir(out) if f.startswith("conc.bin."))
check(all(p.returncode == 0 for p in procs) and len({o for o, _ in outs}) == 1
      and [json.loads(ln) for ln in outs[0][0].splitlines() if ln.startswith("{")] == rows_c
      and left == ["conc.bin.eos1.docs", "conc.bin.eos1.pack16.samples"],
      f"four processes building at once: the same samples, one whole file of each ({', '.join(left)})")

# ---- 3. a 1.5 GiB stream: memory that of a 1 MiB stream ------------------------------------
# The bound is relative: a build with CUDA maps cuBLASLt, cuDNN and NCCL at start-up (~200 MiB
# resident before main), which no corpus changes.
tiny = f"{out}/tiny.bin"
np.random.default_rng(3).integers(2, 500, 1 << 19).astype(np.uint16).tofile(tiny)
RSS_BOUND = show(tiny, "--seq", "64", "--count", "1")[3] + RSS_GROWTH
print(f"     a 1 MiB stream's largest RSS + {RSS_GROWTH} MiB: the bound, {RSS_BOUND:.0f} MiB", flush=True)
# a 1.5 GiB stream, sparse: random tokens in 24 places, 6 documents
rng = np.random.default_rng(7)
big = f"{out}/big.bin"
ntok = 3 * (1 << 28)   # 1.5 GiB of uint16
with open(big, "wb") as f:
    f.truncate(2 * ntok)
    places = sorted(rng.choice(ntok // 4096, 24, replace=False) * 4096)
    for p in places:
        f.seek(2 * p)
        f.write(rng.integers(2, 500, 4096).astype(np.uint16).tobytes())
    for p in sorted(rng.choice(ntok, 5, replace=False)) + [ntok - 3]:   # a short last document too
        f.seek(2 * p)
        f.write(np.uint16(EOS).tobytes())
bm = np.memmap(big, np.uint16, mode="r")
seq, rss, bad = 64, 0, []
picks = [0, (ntok - 1) // seq - 1] + [p // seq + 3 for p in places[:6]]
for s in picks:
    head, rows, _, r = show(big, "--seq", str(seq), "--first", str(s), "--count", "1")
    rss = max(rss, r)
    if rows[0]["input_ids"] != bm[s * seq:(s + 1) * seq].tolist() or rows[0]["labels"] != bm[s * seq + 1:(s + 1) * seq + 1].tolist():
        bad.append(s)
check(not bad and rss < RSS_BOUND, f"1.5 GiB stream, windows of {seq}: samples {picks} equal numpy.memmap's "
      f"(largest RSS {rss:.0f} MiB)")
g = ["--loss", "cross_entropy", "--logits", "logits", "--labels", "labels", "--batch", "8", "--quiet"]
rc, _, err, rss = run(["train", "--model", f"{out}/gpt64.onnx", "--data", big, "--seq", "64", "--steps", "2",
                       "--shuffle", *g])
check(rc == 0 and rss < RSS_BOUND, f"train --steps 2 --shuffle on it: largest RSS {rss:.0f} MiB (the file: "
      f"{2 * ntok / MiB:.0f} MiB){err[-300:] if rc else ''}")
seq = 1 << 18   # samples of 262,144 tokens: few enough pieces for the rule in Python
bdocs = stream_docs(bm)
samples = pr.pack([len(d) for d in bdocs], seq)
first = np.cumsum([0] + [len(d) for d in bdocs])


def sample_of(p):   # the sample that holds token p of the stream
    return next(k for k, s in enumerate(samples) for q, o, n in s if first[q] + o <= p < first[q] + o + n)


want = [0, len(samples) - 1, sample_of(places[-1])]
rss, bad = 0, []
for k in want:
    head, rows, err, r = show(big, "--seq", str(seq), "--pack", "--eos", str(EOS), "--first", str(k), "--count", "1")
    rss = max(rss, r)
    if not same_sample(rows[0], pr.sample(bdocs, samples[k], seq, EOS)):
        bad.append(k)
check(not bad and rss < RSS_BOUND and f"{len(samples)} samples" in head,
      f"--pack --seq {seq}: {len(bdocs)} documents, samples {want} of {len(samples)} equal the rule's over "
      f"numpy.memmap (largest RSS {rss:.0f} MiB, the index built in one pass)")

# ---- 4. a 1 GiB Megatron dataset: megatron-core's index over a sparse .bin ----------------
lengths = [100_000_000, 0, 3, 150_000_000, 150_000_001]
lengths.append((1 << 29) - sum(lengths))
with _IndexWriter(f"{out}/bigmega.idx", np.uint16) as w:
    w.write(lengths, None, list(range(len(lengths) + 1)))
with open(f"{out}/bigmega.bin", "wb") as f:
    f.truncate(2 * sum(lengths))
    for p in [0, 99_999_990, 100_000_000, 250_000_000, sum(lengths) - 4096]:
        f.seek(2 * p)
        f.write(rng.integers(2, 500, 4096).astype(np.uint16).tobytes())
mds = IndexedDataset(f"{out}/bigmega")


class Doc:
    """Document i of the megatron-core dataset, sliced through IndexedDataset.get."""
    def __init__(self, i):
        self.i, self.n = i, int(mds.sequence_lengths[i])

    def __len__(self):
        return self.n

    def __getitem__(self, sl):
        a, b = max(sl.start, 0), min(sl.stop, self.n)
        return mds.get(self.i, a, b - a).astype(np.int64) if b > a else np.zeros(0, np.int64)


mdocs = [Doc(i) for i in range(len(mds))]
starts = np.cumsum([0] + lengths)


def stream(a, b):   # tokens [a, b) of the documents one after another
    return np.concatenate([mdocs[i][max(a - starts[i], 0):b - starts[i]] for i in range(len(mdocs))
                           if starts[i] < b and starts[i + 1] > a]).tolist()


seq, rss, bad = 64, 0, []
picks = [0, 99_999_990 // seq, 100_000_000 // seq, 250_000_000 // seq, (sum(lengths) - 1) // seq - 1]
for s in picks:
    _, rows, _, r = show(f"{out}/bigmega", "--seq", str(seq), "--first", str(s), "--count", "1")
    rss = max(rss, r)
    if rows[0]["input_ids"] != stream(s * seq, (s + 1) * seq) or rows[0]["labels"] != stream(s * seq + 1, (s + 1) * seq + 1):
        bad.append(s)
check(not bad and rss < RSS_BOUND, f"1 GiB Megatron dataset, windows of {seq}: samples {picks} (across documents) "
      f"equal megatron-core IndexedDataset's (largest RSS {rss:.0f} MiB)")
seq = 1 << 18
samples = pr.pack(lengths, seq)
want = [0, 381, len(samples) - 1]
rss, bad = 0, []
for k in want:
    head, rows, _, r = show(f"{out}/bigmega", "--seq", str(seq), "--pack", "--first", str(k), "--count", "1")
    rss = max(rss, r)
    if not same_sample(rows[0], pr.sample(mdocs, samples[k], seq, 0)):
        bad.append(k)
check(not bad and rss < RSS_BOUND and f"{len(samples)} samples" in head,
      f"--pack --seq {seq}: samples {want} of {len(samples)} equal the rule's over IndexedDataset "
      f"(largest RSS {rss:.0f} MiB)")

# ---- 5. a token outside the vocabulary fails the step that reads it, naming file and byte --
tok = rng.integers(2, 500, 4000).astype(np.uint16)
t = 24 * 16   # the last label of sample 23 (step 3 of batches of 8), an input of step 4 only
tok[t] = 600
tok.tofile(f"{out}/bad.bin")
gt = ["--model", f"{out}/gpt16.onnx", "--seq", "16", *g]
want = rf"step 3, [^:]*: --data '[^']*bad\.bin': array 'labels' holds label 600 \(sample 23, position 15: '[^']*bad\.bin' byte {2 * t}\), out of range \[0, 512\)"
rc, _, err, _ = run(["train", *gt, "--data", f"{out}/bad.bin", "--steps", "5", "--losses", f"{out}/bad.losses"])
check(rc != 0 and re.search(want, err) and len(open(f"{out}/bad.losses").read().split("\n")) == 3,
      f"a label of 600 for 512 classes: steps 1-2 train, step 3 fails: {err.strip().splitlines()[-1][:200]}")
t0 = time.time()
rc, text, err, _ = run(["train", *gt, "--data", f"{out}/bad.bin", "--steps", "5", "--pp", "2"], mpi=2)
check(rc not in (0, 124) and re.search(want, text + err), f"the same under mpirun at pp=2: the job ends "
      f"in {time.time() - t0:.1f} s naming the file and byte (exit {rc})")
pdocs = pr.documents(9, 200, 500, 40)
t = sum(len(d) for d in pdocs[:50]) + 3   # inside document 50 (its 4th token), a label of the same document
pdocs[50][3] = 600
pr.write_stream(f"{out}/badpack.bin", pdocs)
samples = pr.pack([len(d) for d in pdocs], 16)
at = sum(len(d) for d in pdocs[:50])
k, j = next((k, sum(q[2] for q in s[:i]) + t - at - o - 1) for k, s in enumerate(samples)
            for i, (d, o, n) in enumerate(s) if d == 50 and o < t - at <= o + n - 1)
rc, _, err, _ = run(["train", *gt, "--data", f"{out}/badpack.bin", "--pack", "--eos", str(EOS), "--steps",
                     str(k // 8 + 1)])
check(rc != 0 and re.search(rf"step {k // 8 + 1}, .*label 600 \(sample {k}, position {j}: '[^']*badpack\.bin' "
                            rf"byte {2 * t}\)", err),
      f"--pack: sample {k} holds it at position {j}: step {k // 8 + 1} fails naming byte {2 * t}")

# ---- 6. ranks of one job: rank 0 builds, the others reuse; a failure is every rank's -------
shutil.copy(f"{out}/docs.bin", f"{out}/mpi.bin")
pk = ["--data", f"{out}/mpi.bin", "--pack", "--eos", str(EOS), "--steps", "2", "--dp", "2"]
rc, text, err, _ = run(["train", *gt, *pk], env={"PP_LOG": "info"}, mpi=2)
built, reused = (text + err).count("built in"), (text + err).count("reusing")
check(rc == 0 and built == 2 and reused == 2, f"mpirun -np 2 --pack: {built} files built (rank 0), {reused} reused")
rc, text, err, _ = run(["train", *gt, *pk, "--data-cache", f"{out}/no/such/dir"], mpi=2)
check(rc not in (0, 124) and "[rank 0] cannot create" in text + err,
      f"a build failing on rank 0 (--data-cache of no folder) ends the job, no rank waiting (exit {rc})")
sys.exit(1 if fails else 0)
PYEOF
