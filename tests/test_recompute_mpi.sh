#!/usr/bin/env bash
# Activation recomputation changes no bit: the example GPT and an MLP with Dropout
# (exported by PyTorch in training mode, so masks are drawn again on the re-run) trained
# for 10 steps at pp=2 under gpipe, 1f1b, interleaved and zb-h1 (and pp=1 gpipe) with
# --recompute selective and full give byte-identical per-step losses and exported
# weights to the same run with --recompute none (cmp). A profiled zb-h1 step shows the
# re-runs as "recompute" events, and a bad --recompute value is refused naming the valid ones.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/recompute
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null
"$PY" "$SRC_DIR/tests/ref/mlp_data.py" "$OUT/mlp-data" 256 3
"$PY" - "$OUT/dmlp.onnx" <<'PYEOF'
import sys, warnings
warnings.filterwarnings("ignore")
import torch
import torch.nn as nn
import torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.l1, s.d1, s.l2, s.d2, s.l3 = nn.Linear(16, 64), nn.Dropout(0.3), nn.Linear(64, 64), nn.Dropout(0.2), nn.Linear(64, 10)
    def forward(s, x, labels):
        h = s.d1(torch.relu(s.l1(x)))
        return F.cross_entropy(s.l3(s.d2(torch.tanh(s.l2(h)))), labels)
torch.manual_seed(0)
torch.onnx.export(M().train(), (torch.randn(4, 16), torch.zeros(4, dtype=torch.int64)), sys.argv[1],
                  input_names=["x", "labels"], output_names=["loss"], opset_version=17,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  dynamic_axes={"x": {0: "batch"}, "labels": {0: "batch"}})
PYEOF

# shellcheck source=lib/run.sh
. "$SRC_DIR/tests/lib/run.sh"
train() {  # MODEL TAG PP SCHEDULE RECOMPUTE EXTRA...
    local model=$1 tag=$2 pp=$3 sched=$4 rc=$5
    shift 5
    run_onnxpipe "$tag" "$pp" train --model "$OUT/$model.onnx" --pp "$pp" --schedule "$sched" --batch 16 \
        --microbatches 4 --steps 10 --optimizer adamw --lr 3e-3 --quiet --recompute "$rc" \
        --losses "$OUT/$tag.losses" --export "$OUT/$tag.onnx" "$@"
}

bad=0
runs=0
for model in gpt dmlp; do
    if [ $model = gpt ]; then extra=(--data "$OUT/text" --loss cross_entropy --logits logits --labels labels)
    else extra=(--data "$OUT/mlp-data"); fi
    for sched in gpipe 1f1b interleaved zb-h1; do
        for pp in 1 2; do
            # one rank: gpipe only (F F F F B B B B re-runs every backward; the others' orders
            # at pp=1 are 1F1B's, whose backward finds its own forward in the arena)
            [ $sched != gpipe ] && [ $pp = 1 ] && continue
            ref=$model-$sched-pp$pp-none
            train $model "$ref" $pp $sched none "${extra[@]}"
            for rc in selective full; do
                tag=$model-$sched-pp$pp-$rc
                train $model "$tag" $pp $sched $rc "${extra[@]}"
                runs=$((runs + 1))
                if cmp -s "$OUT/$ref.losses" "$OUT/$tag.losses" && cmp -s "$OUT/$ref.onnx" "$OUT/$tag.onnx"; then
                    echo "  $model $sched pp=$pp --recompute $rc: losses and exported weights byte-identical to none" \
                         "(loss $(head -1 "$OUT/$tag.losses" | cut -d' ' -f2) -> $(tail -1 "$OUT/$tag.losses" | cut -d' ' -f2))"
                else
                    echo "  $model $sched pp=$pp --recompute $rc: DIFFERS from none"
                    "$PY" "$SRC_DIR/tests/ref/compare_runs.py" 0 0 "$OUT/$ref.losses" "$OUT/$ref.onnx" \
                        "$OUT/$tag.losses" "$OUT/$tag.onnx" "$tag" || true
                    bad=$((bad + 1))
                fi
            done
        done
    done
done
# the same seed without Dropout's masks drawn again would differ: the MLP does drop
train dmlp dmlp-seed2 1 gpipe full --data "$OUT/mlp-data" --seed 2
if cmp -s "$OUT/dmlp-gpipe-pp1-full.losses" "$OUT/dmlp-seed2.losses"; then
    echo "  dropout MLP with --seed 2 gives the same losses: the masks do not drop"; bad=$((bad + 1))
fi
[ $bad = 0 ] || { echo "$bad of $runs recompute runs differ from none"; exit 1; }
echo "$runs recompute runs byte-identical to --recompute none"

# a profiled zb-h1 step at pp=2: the re-runs appear as events of category "recompute"
train gpt gpt-prof 2 zb-h1 full --data "$OUT/text" --loss cross_entropy --logits logits --labels labels \
    --profile "$OUT/prof.json" --profile-steps 2:2
n=$(grep -o '"cat":"recompute"' "$OUT/prof.json" | wc -l)
echo "  profiled zb-h1 step, --recompute full: $n recompute op events"
[ "$n" -gt 0 ] || { echo "no recompute events in the profile"; exit 1; }

# bad values
if "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/text" --recompute some >"$OUT/bad.log" 2>&1; then
    echo "--recompute some was accepted"; exit 1
fi
grep -q "unknown --recompute 'some': use none, selective or full" "$OUT/bad.log" || { cat "$OUT/bad.log"; exit 1; }
for cmd in "partition $OUT/gpt.onnx --stages 2" "schedule --pp 2 --microbatches 4 --kind 1f1b --model $OUT/gpt.onnx"; do
    # shellcheck disable=SC2086
    if "$ONNXPIPE" $cmd --recompute all >"$OUT/bad.log" 2>&1; then echo "$cmd --recompute all was accepted"; exit 1; fi
    grep -q "unknown --recompute 'all': use none, selective or full" "$OUT/bad.log" || { cat "$OUT/bad.log"; exit 1; }
done
echo "  bad --recompute values refused: $(cat "$OUT/bad.log")"
