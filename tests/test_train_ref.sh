#!/usr/bin/env bash
# Training matches PyTorch: the example GPT (tied embedding) and MLP, SGD (momentum,
# Nesterov, weight decay) and AdamW, 30 steps: per-step losses within 1e-4 relative,
# final weights close, and 4 microbatches equal one batch (gradient accumulation).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/train
rm -rf "$OUT"
for model in gpt mlp; do
    for opt in adamw sgd; do
        "$PY" "$SRC_DIR/tests/ref/train_ref.py" "$ONNXPIPE" "$OUT" "$model" "$opt" --steps 30
    done
done
