#!/usr/bin/env bash
# What a user watches, read back by tools nobody here wrote: the event files of --logdir
# through the tensorboard package (framing and masked CRC32C, then every scalar equal to
# --losses and --metrics, the text summary at step 0, the histograms), alone and under
# mpirun pp=2 x dp=2 (every rank's wait and memory series); and the eval loss, perplexity
# and accuracy after the last step against onnxruntime on the exported model. With --save,
# ckpt/saves and ckpt/stall_s are logged too.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/tensorboard
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
"$PY" -c "import tensorboard" 2>/dev/null || { echo "the test venv lacks tensorboard: run scripts/setup.sh"; exit 1; }
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 --split 0.9
args=(train --model "$OUT/gpt.onnx" --data "$OUT/text/train" --eval-data "$OUT/text/valid" --eval-every 4
      --eval-batches 3 --loss cross_entropy --logits logits --labels labels --batch 16 --microbatches 2 --steps 10
      --optimizer adamw --lr 3e-3 --log-every 3 --log-histograms 5)
echo "== one rank"
"$ONNXPIPE" "${args[@]}" --logdir "$OUT/tb1" --metrics "$OUT/m1.jsonl" --losses "$OUT/l1.txt" \
    --export "$OUT/trained.onnx" --save "$OUT/ck" --save-every 5 >"$OUT/one.log" 2>&1 || { cat "$OUT/one.log"; exit 1; }
grep -E "^step (4|10)/10 .* eval [0-9.]+ .*tok/s" "$OUT/one.log" || { echo "no eval loss in the progress line"; exit 1; }
"$PY" "$SRC_DIR/tests/ref/tb_check.py" "$OUT/tb1" "$OUT/l1.txt" "$OUT/m1.jsonl" 1 "$OUT/trained.onnx" 5
"$PY" "$SRC_DIR/tests/ref/eval_ref.py" "$OUT/trained.onnx" "$OUT/text/valid" 16 3 "$OUT/m1.jsonl" 1e-5
echo "== pp=2 x dp=2 under mpirun"
timeout 300 mpirun --oversubscribe --bind-to none -np 4 -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT \
    "$ONNXPIPE" "${args[@]}" --pp 2 --dp 2 --quiet --logdir "$OUT/tb4" --metrics "$OUT/m4.jsonl" \
    --losses "$OUT/l4.txt" >"$OUT/four.log" 2>&1 || { cat "$OUT/four.log"; exit 1; }
"$PY" "$SRC_DIR/tests/ref/tb_check.py" "$OUT/tb4" "$OUT/l4.txt" "$OUT/m4.jsonl" 4 "$OUT/trained.onnx" 5
