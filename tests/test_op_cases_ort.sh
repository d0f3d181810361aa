#!/usr/bin/env bash
# Every case of tests/cuda_cases.h in onnxruntime: test_op_cases writes each as a one-node
# ONNX model with its inputs and the onnxpipe cpu outputs (and checks backward against
# finite differences on the way), tests/ref/op_cases_ort.py runs them and compares.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/op_cases
rm -rf "$OUT"
mkdir -p "$OUT"
"$BUILD_DIR/test_op_cases" "$OUT" > "$OUT/test_op_cases.log" 2>&1 ||
    { cat "$OUT/test_op_cases.log"; echo "test_op_cases failed (log above)" >&2; exit 1; }
tail -n 2 "$OUT/test_op_cases.log"
"$PY" "$SRC_DIR/tests/ref/op_cases_ort.py" "$OUT/index.json"
