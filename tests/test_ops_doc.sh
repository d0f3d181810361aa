#!/usr/bin/env bash
# docs/ops.md is what scripts/gen-ops-doc.py makes from this build's `onnxpipe ops --json`
# and onnx's op schemas: regenerated into a temp file, it must equal the committed one.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
reg=$("$ONNXPIPE" ops --json)
if ! grep -q '"cuda_backend": true' <<< "$reg"; then
    echo "test_ops_doc: this build has no cuda backend; docs/ops.md describes a CUDA build"
    exit 77
fi
OUT=$BUILD_DIR/test-out/ops_doc
mkdir -p "$OUT"
"$PY" "$SRC_DIR/scripts/gen-ops-doc.py" --onnxpipe "$ONNXPIPE" -o "$OUT/ops.md"
if ! diff -u "$SRC_DIR/docs/ops.md" "$OUT/ops.md"; then
    echo "test_ops_doc: docs/ops.md is stale (the op list changed); regenerate it with:" >&2
    echo "  $PY $SRC_DIR/scripts/gen-ops-doc.py --onnxpipe $ONNXPIPE" >&2
    exit 1
fi
echo "test_ops_doc: docs/ops.md matches the registry ($(grep -c '^| ' "$OUT/ops.md") table rows)"
