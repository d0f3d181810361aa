#!/usr/bin/env bash
# What `onnxpipe train` prints is true (tests/ref/train_lines.py computes each value
# independently): the plan line's closed-form bubble of every schedule (gpipe, 1f1b,
# interleaved, zb-h1, zb-v at pp 2 and 4; zb-h1 below pp microbatches and zb-v below
# 2pp-1 say in words that they have none), the progress lines (losses, elapsed, ETA,
# tok/s) and the final summary of a 30-step job, a 1-step job, the memory table's
# peak/estimate ratios; and no line of any of these jobs, nor of a resume with nothing
# left to train, says nan, inf or -0.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/train-lines
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null
"$ONNXPIPE" example gpt --layers 2 --d-model 64 --heads 2 --vocab 256 --seq 64 -o "$OUT/gpt64.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text64" --seq 64 >/dev/null
CHECK=("$PY" "$SRC_DIR/tests/ref/train_lines.py")

# shellcheck source=lib/run.sh
. "$SRC_DIR/tests/lib/run.sh"
gpt=(--loss cross_entropy --logits logits --labels labels --batch 16)

echo "== the plan line of each schedule"
for layout in 2:gpipe:1:4 2:1f1b:1:4 2:interleaved:2:4 2:zb-h1:1:4 2:zb-v:2:4 4:1f1b:1:8 4:zb-h1:1:8 4:zb-h1:1:2 \
              4:zb-v:2:8 4:zb-v:2:4; do
    IFS=: read -r pp sched chunks m <<<"$layout"
    tag=plan-pp$pp-$sched-m$m
    run_onnxpipe "$tag" "$pp" train --model "$OUT/gpt.onnx" --data "$OUT/text" "${gpt[@]}" --pp "$pp" \
        --schedule "$sched" --chunks "$chunks" --microbatches "$m" --steps 2
    "${CHECK[@]}" plan "$OUT/$tag.log" "$pp" "$sched" "$chunks" "$m"
done

echo "== progress lines and summary: 30 steps of 16 x 64 tokens"
run_onnxpipe long 1 train --model "$OUT/gpt64.onnx" --data "$OUT/text64" "${gpt[@]}" --microbatches 4 --steps 30 \
    --losses "$OUT/long.losses"
"${CHECK[@]}" progress "$OUT/long.log" "$OUT/long.losses" 30 1024
echo "== a 1-step job"
run_onnxpipe one 1 train --model "$OUT/gpt.onnx" --data "$OUT/text" "${gpt[@]}" --microbatches 4 --steps 1 \
    --losses "$OUT/one.losses"
"${CHECK[@]}" progress "$OUT/one.log" "$OUT/one.losses" 1 256

echo "== the memory table (pp=2 saving, fp16)"
run_onnxpipe saved 2 train --model "$OUT/gpt.onnx" --data "$OUT/text" "${gpt[@]}" --pp 2 --microbatches 4 --steps 3 \
    --precision fp16 --save "$OUT/ck" --save-every 3
"${CHECK[@]}" memory "$OUT/saved.log"
echo "== a resume with nothing left to train"
run_onnxpipe nothing 2 train --model "$OUT/gpt.onnx" --data "$OUT/text" "${gpt[@]}" --pp 2 --microbatches 4 --steps 3 \
    --precision fp16 --save "$OUT/ck" --resume auto
"${CHECK[@]}" clean "$OUT"/*.log
