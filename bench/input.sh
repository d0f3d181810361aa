#!/usr/bin/env bash
# Input time against step time: the example GPT (L=2, D=128, H=4, T=128, V=4096; AdamW;
# global batch 8 in 4 microbatches) at pp=2 1f1b under mpirun, one BLAS thread per rank,
# trained --shuffle from a 1 GiB uint16 token stream on disk read cold: the stream is
# written under /tmp, flushed and dropped from the page cache (posix_fadvise
# POSIX_FADV_DONTNEED on the file alone, before each run) and deleted at the end. Each run
# is in a memory cgroup (v1, memory.limit_in_bytes MEM_MB, default 384) that cannot hold the
# stream, so what was read stays no cheaper to read again (the start-up reads no sample since
# issue 42), and the figure says when no cgroup could be made. Shuffled samples
# land anywhere in the file, so each is a page fault to the disk. The figure is the
# share of each rank's step time its feeds take (waiting for the data and copying it:
# --metrics input_s_per_rank / step_s_per_rank), the largest rank's, over steps 2..N; the
# yardstick is the same run with PP_PREFETCH=0 (every feed reads from the mapped file then),
# with the same samples. Target: under 1% with the reader thread. One JSON line per figure.
# Usage: bench/input.sh [BUILD_DIR] (env STEPS, default 20; TMPDIR for the stream).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRC/build}
OP=$BUILD/onnxpipe
STEPS=${STEPS:-20}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
SEQ=128 VOCAB=4096 MEM_MB=${MEM_MB:-384}

fail() { printf '{"bench": "input", "error": "%s"}\n' "$1"; exit 1; }
[ -x "$OP" ] || fail "no onnxpipe at $OP (build first, or pass the build dir)"
"$OP" example gpt --layers 2 --d-model 128 --heads 4 --vocab $VOCAB --seq $SEQ -o "$TMP/gpt.onnx" >/dev/null ||
    fail "onnxpipe example gpt failed"
# 2^29 tokens (1 GiB): 2 MiB of random tokens 512 times (the page cache holds each page of
# the file on its own, so repeats are no cheaper to read), flushed to disk
python3 - "$TMP/tokens.bin" $VOCAB <<'PYEOF' || fail "cannot write the 1 GiB stream under $TMP"
import array, os, random, sys
path, vocab = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
piece = array.array("H", (rng.randrange(vocab) for _ in range(1 << 20))).tobytes()
with open(path, "wb") as f:
    for _ in range(512):
        f.write(piece)
    f.flush()
    os.fsync(f.fileno())
PYEOF
evict() {   # drops the stream's pages from the page cache
    python3 - "$TMP/tokens.bin" <<'PYEOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)
PYEOF
}

CG=/sys/fs/cgroup/memory$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)/pp-bench-input.$$
if mkdir "$CG" 2>/dev/null && echo $((MEM_MB << 20)) >"$CG/memory.limit_in_bytes"; then
    trap 'rmdir "$CG"; rm -rf "$TMP"' EXIT
    CACHE="memory cgroup of $MEM_MB MiB"
else
    CG= CACHE="no memory cgroup: pages read stay cached"
fi
for mode in ahead direct; do
    evict || fail "posix_fadvise failed"
    pf=$([ $mode = ahead ] && echo 1 || echo 0)
    [ -z "$CG" ] || echo $$ >"$CG/cgroup.procs"
    PP_PREFETCH=$pf mpirun --oversubscribe --bind-to none -np 2 -x OPENBLAS_NUM_THREADS -x PP_PREFETCH "$OP" train \
        --model "$TMP/gpt.onnx" --data "$TMP/tokens.bin" --seq $SEQ --loss cross_entropy --logits logits \
        --labels labels --pp 2 --schedule 1f1b --batch 8 --microbatches 4 --steps "$STEPS" --shuffle --seed 3 \
        --optimizer adamw --lr 1e-3 --metrics "$TMP/$mode.jsonl" --log-every 1 --quiet --losses "$TMP/$mode.losses" \
        >"$TMP/$mode.log" 2>&1 || fail "onnxpipe train ($mode) failed: $(tail -c 300 "$TMP/$mode.log" | tr '\n"' '  ')"
    [ -z "$CG" ] || echo $$ >"$(dirname "$CG")/cgroup.procs"
done
cmp -s "$TMP/ahead.losses" "$TMP/direct.losses" || fail "the losses differ with and without the reader thread"

python3 - "$TMP" "$STEPS" "$(cut -d' ' -f1-3 /proc/loadavg)" "$CACHE" <<'PYEOF'
import json, sys
tmp, steps, load, cache = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
res = {}
for mode in ["ahead", "direct"]:
    lines = [json.loads(l) for l in open(f"{tmp}/{mode}.jsonl")][1:]   # step 1: start-up
    ranks = len(lines[0]["step_s_per_rank"])
    step = [sum(m["step_s_per_rank"][r] for m in lines) for r in range(ranks)]
    feed = [sum(m["input_s_per_rank"][r] for m in lines) for r in range(ranks)]
    read = [sum(m["input_read_s_per_rank"][r] for m in lines) for r in range(ranks)]
    share = max(feed[r] / step[r] for r in range(ranks))
    res[mode] = share
    print(json.dumps({"bench": "input", "figure": f"input_share_{mode}", "value": round(share, 6),
                      "unit": "fraction of the step", "target": 0.01 if mode == "ahead" else None,
                      "reader_thread": mode == "ahead", "steps": len(lines),
                      "step_ms_per_rank": [round(1e3 * s / len(lines), 3) for s in step],
                      "feed_ms_per_step_per_rank": [round(1e3 * f / len(lines), 4) for f in feed],
                      "reader_ms_per_step_per_rank": [round(1e3 * x / len(lines), 4) for x in read],
                      "stream_bytes": 1 << 30, "cold": f"posix_fadvise DONTNEED before the run; {cache}",
                      "model": "example gpt L2 D128 H4 T128 V4096, pp2 1f1b, batch 8 x 4 microbatches, --shuffle",
                      "loadavg": load}))
print(json.dumps({"bench": "input", "figure": "input_share_ratio", "value": round(res["direct"] / res["ahead"], 1)
                  if res["ahead"] > 0 else None, "unit": "x (without / with the reader thread)"}))
PYEOF
