#!/usr/bin/env bash
# Memory that is measured: the example GPT and an MLP trained 2 steps under mpirun with
# pp in {1, 2, 4} x {gpipe, 1f1b, interleaved}; each rank's peak from the device counters
# (train's table) is within 10% of what a separate preview process estimated for that
# rank's stages (`onnxpipe schedule --model ... --json`, and `onnxpipe partition --model
# ... --schedule K --json` for gpipe), and train's own estimate column is the preview's.
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

MB=4 M=4   # microbatch size and microbatches: train's --batch is MB x M
for model in gpt mlp; do
    if [ $model = gpt ]; then loss=(--loss cross_entropy --logits logits --labels labels) data=$OUT/text
    else loss=() data=$OUT/mlp-data; fi
    for pp in 1 2 4; do
        for sched in gpipe 1f1b interleaved; do
            tag=$model-$pp-$sched chunks=1
            [ $sched = interleaved ] && chunks=2
            if [ $sched = gpipe ]; then
                "$ONNXPIPE" partition --model "$OUT/$model.onnx" --stages $((pp * chunks)) --batch $MB \
                    --microbatches $M --schedule $sched --device cpu "${loss[@]}" --json >"$OUT/$tag.json"
            else
                "$ONNXPIPE" schedule --model "$OUT/$model.onnx" --pp $pp --kind $sched --batch $MB \
                    --microbatches $M --device cpu "${loss[@]}" --json >"$OUT/$tag.json"
            fi
            timeout 120 mpirun --oversubscribe --bind-to none -np $pp -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT \
                "$ONNXPIPE" train --model "$OUT/$model.onnx" --data "$data" "${loss[@]}" --device cpu --pp $pp \
                --schedule $sched --batch $((MB * M)) --microbatches $M --steps 2 >"$OUT/$tag.log" 2>&1 ||
                { echo "FAILED: $tag"; cat "$OUT/$tag.log"; exit 1; }
        done
    done
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
