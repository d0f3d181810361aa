#!/usr/bin/env bash
# Training through RMSNormalization, RotaryEmbedding, Attention, GroupNormalization, Resize
# and Einsum (one hand-written opset-23 block, tests/ref/train_nn_more.py) matches PyTorch
# float64 step by step within 1e-4, with 2 microbatches, and bit for bit under recompute.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/train_nn_more
rm -rf "$OUT"
"$PY" "$SRC_DIR/tests/ref/train_nn_more.py" "$ONNXPIPE" "$OUT"
