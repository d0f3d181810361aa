#!/usr/bin/env bash
# Our saved models are valid ONNX: a model written with onnx.helper (external data,
# typed-field initializers) is loaded and saved by onnxpipe, inline and with external
# data; onnx.checker passes on both copies and onnxruntime gives the same outputs.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/graph_save
rm -rf "$OUT"
mkdir -p "$OUT"
"$PY" "$SRC_DIR/tests/ref/check_onnx.py" make "$OUT/helper.onnx"
"$BUILD_DIR/test_graph_io" --roundtrip "$OUT/helper.onnx" "$OUT/inline.onnx"
"$BUILD_DIR/test_graph_io" --roundtrip "$OUT/helper.onnx" "$OUT/external.onnx" --external
test -s "$OUT/external.onnx.data" || { echo "external.onnx.data was not written" >&2; exit 1; }
test ! -e "$OUT/inline.onnx.data" || { echo "inline.onnx.data should not exist" >&2; exit 1; }
# a copy of a copy: external data read back from our own layout
"$BUILD_DIR/test_graph_io" --roundtrip "$OUT/external.onnx" "$OUT/again.onnx"
"$PY" "$SRC_DIR/tests/ref/check_onnx.py" compare "$OUT/helper.onnx" \
    "$OUT/inline.onnx" "$OUT/external.onnx" "$OUT/again.onnx"
echo "test_graph_save: ok"
