#!/usr/bin/env bash
# Start-up on large token streams (issue 42 §1): uint16 streams of 1, 8 and 32 GiB (SIZES, in
# GiB) of documents of log-normal lengths (median 600 tokens, mean about 1,000, GPT-2's EOS
# 50256 after each; a 64 MiB block of random tokens written again and again, fsynced), each
# read cold (posix_fadvise DONTNEED on the stream before every run). For each: the wall time
# and largest resident set of `onnxpipe data show --count 1` (open and read one sample) and of
# `onnxpipe train --steps 2` (example GPT L2 D64 T64 V50304, batch 8): windowed; with --pack
# the first time (it builds and caches the document index and the sample plan: one pass over
# the stream); and with --pack again (both cached). Yardsticks in the same run, on the same
# file, cold: reading it once (`cat FILE > /dev/null`), numpy.memmap's open plus one sample,
# and the same train on a 1 MiB stream (what the model's own start-up and steps take).
# One JSON line per figure. One stream at a time under TMPDIR (32 GiB of disk at most, plus its
# index), deleted after.
# Usage: bench/data_start.sh [BUILD_DIR]   (a Release build; env SIZES="1 8 32", TMPDIR)
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" 2>/dev/null && pwd) || BUILD=${1:-$SRC/build}
OP=$BUILD/onnxpipe
SIZES=${SIZES:-1 8 32}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OPENBLAS_NUM_THREADS=1
XPY=$("$SRC/scripts/export-venv.sh" | tail -n 1)/bin/python   # numpy

fail() { printf '{"bench": "data_start", "error": "%s"}\n' "$1"; exit 1; }
[ -x "$OP" ] || fail "no onnxpipe at $OP (build first, or pass the build dir)"
"$OP" example gpt --layers 2 --d-model 64 --heads 2 --vocab 50304 --seq 64 -o "$TMP/gpt.onnx" >/dev/null ||
    fail "onnxpipe example gpt failed"

# measure NAME CMD...: runs CMD, output dropped (forked by a small Python, so its largest RSS is
# its own), and appends "NAME wall_s rss_kib cpu_s" to $TMP/times
measure() {
    python3 -S -c 'import os, sys, time
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.execvp(sys.argv[3], sys.argv[3:])
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], "a").write("%s %.4f %d %.4f\n" % (sys.argv[2], time.perf_counter() - t, usage.ru_maxrss,
                                                  usage.ru_utime + usage.ru_stime))
sys.exit(os.waitstatus_to_exitcode(status))' "$TMP/times" "$@" 2>>"$TMP/err" ||
        fail "$1 failed: $(tail -c 300 "$TMP/err" | tr '\n"' '  ')"
}
evict() { "$XPY" -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"; }

g=(--model "$TMP/gpt.onnx" --seq 64 --loss cross_entropy --logits logits --labels labels --batch 8 --steps 2 --quiet)
for gib in $SIZES; do
    data=$TMP/stream$gib.bin
    rm -f "$TMP"/stream*
    : >"$TMP/times"
    "$XPY" - "$data" "$gib" <<'PYEOF' || fail "cannot write a $gib GiB stream under $TMP"
import os, sys
import numpy as np
path, gib = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(1)
block = rng.integers(0, 50256, 32 << 20).astype(np.uint16)   # 64 MiB of tokens
ends = np.cumsum(np.maximum(1, rng.lognormal(np.log(600), 1.0, 1 << 17).astype(np.int64)))
block[ends[ends < len(block)]] = 50256
with open(path, "wb") as f:
    for _ in range(gib * 16):
        f.write(block.tobytes())
    f.flush()
    os.fsync(f.fileno())
PYEOF
    head -c 1M "$data" >"$TMP/tiny.bin"
    measure train_tiny "$OP" train "${g[@]}" --data "$TMP/tiny.bin"
    evict "$data" && measure read_once sh -c "cat '$data'"
    evict "$data" && measure memmap "$XPY" -c "import numpy as np, sys
m = np.memmap(sys.argv[1], np.uint16, mode='r'); s = len(m) // 2 // 64 * 64
x, y = np.array(m[s:s + 64], np.int64), np.array(m[s + 1:s + 65], np.int64)" "$data"
    for mode in windows pack_first pack_cached; do
        extra=()
        [ $mode = windows ] || extra=(--pack --eos 50256)
        evict "$data" && measure "show_$mode" "$OP" data show "$data" --seq 64 "${extra[@]}" \
            --first 1000000 --count 1
        [ $mode != pack_first ] || rm -f "$data".eos*   # the train run builds it again, the show above timed it
        evict "$data" && measure "train_$mode" "$OP" train "${g[@]}" --data "$data" "${extra[@]}"
    done
    index=$(du -cb "$data".eos* | tail -1 | cut -f1)
    "$XPY" - "$TMP/times" "$gib" "$index" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PYEOF'
import json, sys
path, gib, index, load = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
t = {name: (float(s), int(kib) / 1024, float(cpu)) for name, s, kib, cpu in (ln.split() for ln in open(path))}
base = {"bench": "data_start", "stream_gib": gib, "cold": "posix_fadvise DONTNEED on the stream before each run",
        "loadavg": load}
print(json.dumps({**base, "figure": "read_once_s", "value": round(t["read_once"][0], 3), "yardstick": True,
                  "what": "cat STREAM > /dev/null"}))
print(json.dumps({**base, "figure": "numpy_memmap_s", "value": round(t["memmap"][0], 3), "yardstick": True,
                  "rss_mib": round(t["memmap"][1], 1), "what": "python: np.memmap + one sample (interpreter start included)"}))
print(json.dumps({**base, "figure": "train_tiny_s", "value": round(t["train_tiny"][0], 3), "yardstick": True,
                  "rss_mib": round(t["train_tiny"][1], 1), "cpu_s": round(t["train_tiny"][2], 3),
                  "what": "the same train --steps 2 on a 1 MiB stream (the model's own start-up and steps)"}))
for mode, what in (("windows", "windows of 64 tokens"), ("pack_first", "--pack --eos 50256, building the index and plan"),
                   ("pack_cached", "--pack --eos 50256, both cached")):
    for cmd, label in (("show", "data show --count 1"), ("train", "train --steps 2")):
        s, rss, cpu = t[f"{cmd}_{mode}"]
        print(json.dumps({**base, "figure": f"{cmd}_s", "mode": mode, "value": round(s, 3), "rss_mib": round(rss, 1),
                          "cpu_s": round(cpu, 3), "what": f"{label}: {what}",
                          "x_read_once": round(s / t["read_once"][0], 3),
                          **({"minus_tiny_s": round(s - t["train_tiny"][0], 3)} if cmd == "train" else {}),
                          **({"index_bytes": index} if mode != "windows" else {})}))
PYEOF
    rm -f "$TMP"/stream*
done
