#!/usr/bin/env bash
# The eval loss does not depend on layout: the example GPT (tied embedding, --logits) and
# an MLP (its own SoftmaxCrossEntropyLoss, classes on axis 1) trained with --shuffle and
# evaluated every 5 steps under (pp, dp, schedule) in {(1,1), (2,1) gpipe, (1,2) 1f1b,
# (2,2) interleaved, (4,1) zb-h1, (4,2) 1f1b, (4,1) interleaved, (4,1) zb-v} give the single-rank
# training losses (so the shuffled order is the same for every layout) and eval losses
# within 1e-5 relative, and the same accuracy (one argmax tie may flip); --epochs E runs
# E x (samples / batch) steps, and a run resumed from a checkpoint (on another layout) reads
# the same shuffled order as one that never stopped.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/eval-layout
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 --split 0.9 >/dev/null
"$ONNXPIPE" example mlp --in 16 --hidden 32,32,32 --classes 10 --loss -o "$OUT/mlp.onnx" >/dev/null
"$PY" - "$OUT" <<'PYEOF'
import json, os, sys
import numpy as np
rng = np.random.default_rng(5)
for name, n in [("mlp-train", 400), ("mlp-valid", 96)]:
    d = os.path.join(sys.argv[1], name); os.makedirs(d, exist_ok=True)
    x = rng.standard_normal((n, 16)).astype(np.float32)
    (x.argmax(1) % 10).astype(np.int64).tofile(f"{d}/labels.bin")   # learnable labels
    x.tofile(f"{d}/x.bin")
    json.dump({"format": "onnxpipe-dataset-1", "samples": n, "arrays": [
        {"name": "x", "dtype": "float32", "shape": [16], "file": "x.bin"},
        {"name": "labels", "dtype": "int64", "shape": [], "file": "labels.bin"}]}, open(f"{d}/dataset.json", "w"))
PYEOF

train() {  # MODEL TAG PP DP SCHEDULE EXTRA...
    local model=$1 tag=$2 pp=$3 dp=$4 sched=$5
    shift 5
    local args=(train --model "$OUT/$model.onnx" --pp "$pp" --dp "$dp" --schedule "$sched" --batch 16 --microbatches 4
                --optimizer adamw --lr 3e-3 --shuffle --seed 11 --eval-every 5 --quiet
                --losses "$OUT/$tag.losses" --metrics "$OUT/$tag.jsonl" "$@")
    timeout 300 mpirun --oversubscribe --bind-to none -np $((pp * dp)) -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT \
        "$ONNXPIPE" "${args[@]}" >"$OUT/$tag.log" 2>&1 || { echo "FAILED: $tag"; cat "$OUT/$tag.log"; exit 1; }
}

gpt=(--data "$OUT/text/train" --eval-data "$OUT/text/valid" --eval-batches 6 --steps 10
     --loss cross_entropy --logits logits --labels labels)
mlp=(--data "$OUT/mlp-train" --eval-data "$OUT/mlp-valid" --steps 10)
runs=()
train gpt gpt-ref 1 1 1f1b "${gpt[@]}"
train mlp mlp-ref 1 1 1f1b "${mlp[@]}"
for layout in 2x1:gpipe 1x2:1f1b 2x2:interleaved 4x1:zb-h1 4x2:1f1b 4x1:interleaved 4x1:zb-v; do
    pp=${layout%%x*} rest=${layout#*x} dp=${rest%%:*} sched=${layout#*:}
    train gpt "gpt-$sched-pp$pp-dp$dp" "$pp" "$dp" "$sched" "${gpt[@]}"
    runs+=("gpt-$sched-pp$pp-dp$dp")
done
for layout in 2x1:1f1b 2x2:zb-h1; do
    pp=${layout%%x*} rest=${layout#*x} dp=${rest%%:*} sched=${layout#*:}
    train mlp "mlp-$sched-pp$pp-dp$dp" "$pp" "$dp" "$sched" "${mlp[@]}"
    runs+=("mlp-$sched-pp$pp-dp$dp")
done
"$PY" - "$OUT" "${runs[@]}" <<'PYEOF'
import json, sys
import numpy as np
out, runs = sys.argv[1], sys.argv[2:]
def load(tag):
    lines = [json.loads(l) for l in open(f"{out}/{tag}.jsonl")]
    ev = {m["step"]: (m["eval_loss"], m.get("eval_accuracy")) for m in lines if "eval_loss" in m}
    return np.loadtxt(f"{out}/{tag}.losses")[:, 1], ev
bad = []
for tag in runs:
    model = tag.split("-")[0]
    ref_l, ref_e = load(f"{model}-ref")
    got_l, got_e = load(tag)
    rl = float(np.max(np.abs(got_l - ref_l) / np.abs(ref_l)))
    re = max(abs(got_e[s][0] - ref_e[s][0]) / ref_e[s][0] for s in ref_e) if got_e.keys() == ref_e.keys() else np.inf
    da = max(abs(got_e[s][1] - ref_e[s][1]) for s in ref_e) if got_e.keys() == ref_e.keys() else np.inf
    print(f"  {tag:28s} train loss rel {rl:.1e}  eval loss rel {re:.1e} at steps {sorted(got_e)}  "
          f"accuracy diff {da:.1e}  (ref eval {[round(ref_e[s][0], 5) for s in sorted(ref_e)]})")
    if rl > 1e-5 or re > 1e-5 or da > 2e-3:
        bad.append(tag)
if bad:
    sys.exit(f"layouts whose losses differ from the single-rank run: {bad}")
PYEOF

echo "== --epochs 2 over the 219 samples of text/valid at batch 16: 2 x 13 steps"
"$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/text/valid" --loss cross_entropy --logits logits \
    --labels labels --batch 16 --epochs 2 --shuffle --losses "$OUT/epochs.losses" >"$OUT/epochs.log" 2>&1 ||
    { cat "$OUT/epochs.log"; exit 1; }
grep -E "^step 26/26  epoch 2/2 " "$OUT/epochs.log" && [ "$(wc -l <"$OUT/epochs.losses")" = 26 ] ||
    { echo "--epochs 2 did not run 26 steps"; tail -3 "$OUT/epochs.log"; exit 1; }

echo "== --shuffle after a resume: 15 steps, then --resume to the end of epoch 2, as one run of 26 steps"
common=(--model "$OUT/gpt.onnx" --data "$OUT/text/valid" --loss cross_entropy --logits logits --labels labels
        --batch 16 --shuffle --seed 3 --quiet)
"$ONNXPIPE" train "${common[@]}" --epochs 2 --losses "$OUT/straight.losses" >"$OUT/straight.log" 2>&1 ||
    { cat "$OUT/straight.log"; exit 1; }
"$ONNXPIPE" train "${common[@]}" --steps 15 --save "$OUT/ck" >"$OUT/part1.log" 2>&1 || { cat "$OUT/part1.log"; exit 1; }
timeout 300 mpirun --oversubscribe --bind-to none -np 2 -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT "$ONNXPIPE" train \
    "${common[@]}" --pp 2 --epochs 2 --save "$OUT/ck" --resume auto --losses "$OUT/resumed.losses" \
    >"$OUT/part2.log" 2>&1 || { cat "$OUT/part2.log"; exit 1; }
"$PY" - "$OUT/straight.losses" "$OUT/resumed.losses" <<'PYEOF'
import sys
import numpy as np
a, b = np.loadtxt(sys.argv[1]), np.loadtxt(sys.argv[2])
ref = {int(s): l for s, l in a}
got = {int(s): l for s, l in b}
assert sorted(got) == list(range(16, 27)), f"resumed steps {sorted(got)}"
rel = max(abs(got[s] - ref[s]) / ref[s] for s in got)
print(f"steps 16..26 after resuming at 15 on pp=2: loss rel diff {rel:.1e} against the straight single-rank run")
if rel > 1e-5:
    sys.exit("the resumed run read other samples (or other weights) than the straight run")
PYEOF
