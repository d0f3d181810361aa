#!/usr/bin/env bash
# Memory that is measured: the example GPT trained 2 steps under mpirun with pp in {1, 2,
# 4} x {gpipe, 1f1b, interleaved}, zb-v, and pp=2 with --recompute selective/full and
# --precision bf16/fp16, an MLP in 9 of those runs (every pp, schedule and lever once:
# the RUNS marked m), and a PyTorch ResNet-18 (Conv) in fp32 and bf16; each rank's peak from the device counters (train's table) is within 10% of what a
# separate preview process estimated for that rank's stages (`onnxpipe schedule --model
# ... --json`, and `onnxpipe partition --model ... --schedule K --json` for gpipe), and
# train's own estimate column is the preview's.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/memory
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null
"$ONNXPIPE" example mlp --in 16 --hidden 32,32,32,32 --classes 10 --loss -o "$OUT/mlp.onnx" >/dev/null
"$PY" "$SRC_DIR/tests/ref/mlp_data.py" "$OUT/mlp-data" 256 3
"$PY" "$SRC_DIR/tests/ref/export_models.py" "$OUT/ref" >/dev/null
mv "$OUT/ref/resnet18_bn.onnx" "$OUT/"
"$PY" "$SRC_DIR/tests/ref/image_data.py" "$OUT/image-data" 8 3 64 64

# One job: preview (partition for gpipe, else schedule --model) and a 2-step training run.
# MODEL MB M DATA "PP SCHED [LEVERS...]" [LOSS OPTIONS...]
job() {
    local model=$1 mb=$2 m=$3 data=$4 pp sched levers
    read -r pp sched levers <<<"$5"
    shift 5
    local lever chunks=1 tag=$model-$pp-$sched$(tr -d ' -' <<<"$levers")
    read -ra lever <<<"$levers"
    case $sched in interleaved|zb-v) chunks=2;; esac
    if [ "$sched" = gpipe ]; then
        "$ONNXPIPE" partition --model "$OUT/$model.onnx" --stages $((pp * chunks)) --batch "$mb" \
            --microbatches "$m" --schedule "$sched" --device cpu "$@" "${lever[@]}" --json >"$OUT/$tag.json"
    else
        "$ONNXPIPE" schedule --model "$OUT/$model.onnx" --pp "$pp" --kind "$sched" --batch "$mb" \
            --microbatches "$m" --device cpu "$@" "${lever[@]}" --json >"$OUT/$tag.json"
    fi
    timeout 120 mpirun --oversubscribe --bind-to none -np "$pp" -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT \
        "$ONNXPIPE" train --model "$OUT/$model.onnx" --data "$data" "$@" "${lever[@]}" --device cpu --pp "$pp" \
        --schedule "$sched" --batch $((mb * m)) --microbatches "$m" --steps 2 >"$OUT/$tag.log" 2>&1 ||
        { echo "FAILED: $tag"; cat "$OUT/$tag.log"; exit 1; }
}

# the models (g: the GPT, m: the MLP), pp, schedule, levers (which change what the stash
# holds and in which dtype); microbatch 4 x 4
while read -r models run <&3; do
    job gpt 4 4 "$OUT/text" "$run" --loss cross_entropy --logits logits --labels labels
    [ "$models" = g ] || job mlp 4 4 "$OUT/mlp-data" "$run"
done 3<<'RUNS'
g 1 gpipe
gm 2 gpipe
g 4 gpipe
g 1 1f1b
g 2 1f1b
gm 4 1f1b
gm 1 interleaved
g 2 interleaved
gm 4 interleaved
gm 2 zb-v
g 4 zb-v
gm 2 1f1b --recompute selective
g 2 1f1b --recompute full
gm 2 zb-h1 --recompute full
g 2 1f1b --precision bf16
gm 2 interleaved --precision fp16
gm 2 1f1b --precision bf16 --recompute full
RUNS
# a PyTorch ResNet-18 (fixed batch 1): Conv's own im2col columns are part of the estimate
for run in "2 1f1b" "2 1f1b --precision bf16"; do
    job resnet18_bn 1 2 "$OUT/image-data" "$run" --loss cross_entropy --logits output --labels labels
done

"$PY" - "$OUT" <<'PYEOF'
import glob, json, os, re, sys
units = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}
def nbytes(s):
    v, u = s.split()
    return float(v) * units[u]
row = re.compile(r"^(\d+)\s+(\S+)\s+peak\s+([0-9.]+ \w?i?B)\s.*\n\s+estimate\s+([0-9.]+ \w?i?B)", re.M)
bad, n, worst = [], 0, 0.0
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    tag = os.path.basename(path)[:-5]
    est = json.load(open(path))["memory_estimate"]
    if "error" in est:
        bad.append(f"{tag}: the preview made no estimate: {est['error']}")
        continue
    log = open(path[:-5] + ".log").read()
    rows = row.findall(log)
    if len(rows) != len(est["ranks"]):
        bad.append(f"{tag}: {len(rows)} ranks in train's table, the preview has {len(est['ranks'])}")
        continue
    for rank, stages, peak, train_est in rows:
        r = est["ranks"][int(rank)]
        want = [s["stage"] for s in est["stages"] if s["rank"] == int(rank)]
        got = [int(s) for s in stages.split(",")]
        p, e = nbytes(peak), r["total_bytes"]
        rel = abs(p - e) / e
        worst = max(worst, rel)
        n += 1
        print(f"{tag:<20} rank {rank} stages {stages:<4} measured peak {peak:>11}  preview estimate {e:>9} B "
              f"({rel * 100:.2f}% apart)")
        if got != want:
            bad.append(f"{tag} rank {rank}: train ran stages {got}, the preview estimated {want}")
        if rel > 0.10:
            bad.append(f"{tag} rank {rank}: measured peak {peak} is {rel * 100:.1f}% from the estimate {e} B")
        if abs(nbytes(train_est) - e) > 0.006 * e:   # train prints 3 significant digits or more
            bad.append(f"{tag} rank {rank}: train's estimate {train_est}, the preview's {e} B")
print(f"{n} ranks over {len(glob.glob(os.path.join(sys.argv[1], '*.json')))} runs: measured peaks within "
      f"{worst * 100:.2f}% of the previews' estimates (bound 10%)")
if n == 0:
    bad.append("nothing compared")
if bad:
    sys.exit("memory: " + "; ".join(bad[:10]))
PYEOF
