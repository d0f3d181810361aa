#!/usr/bin/env bash
# The high-level trainer API (trainer.h) used by examples/pipeline_trainer.c under mpirun,
# pp 2 x dp 2 on the example GPT: its loss must fall on its synthetic task, and the
# checkpoint it saves, reloaded after training on, must evaluate and step bitwise as the
# trainer did when it saved (parameters, optimizer state and LR position restored).
set -euo pipefail
: "${BUILD_DIR:?}"
OUT=$BUILD_DIR/test-out/pipeline_trainer
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
if ! timeout 300 mpirun --oversubscribe --bind-to none -np 4 -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT \
    "$BUILD_DIR/example_pipeline_trainer" 40 "$OUT/ckpt" >"$OUT/log" 2>&1; then
    echo "FAIL: example_pipeline_trainer"
    cat "$OUT/log"
    exit 1
fi
cat "$OUT/log"
grep -q '^loss .*: falls$' "$OUT/log" || { echo "FAIL: the loss does not fall"; exit 1; }
grep -q '^reloaded step 40: .*: identical$' "$OUT/log" || { echo "FAIL: the reloaded checkpoint differs"; exit 1; }
for f in "$OUT/ckpt/step-40/manifest.json" "$OUT/ckpt/trained.onnx"; do
    [ -s "$f" ] || { echo "FAIL: $f missing"; exit 1; }
done
grep -q '"pp": *2' "$OUT/ckpt/step-40/manifest.json" || { echo "FAIL: the manifest does not record pp 2"; exit 1; }
echo "ok: loss falls, the reloaded checkpoint evaluates and steps identically, the model exports"
