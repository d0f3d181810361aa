#!/usr/bin/env bash
# docs/ops.md is what scripts/gen-ops-doc.py makes from this build's `onnxpipe ops --json`
# and onnx's op schemas: regenerated into a temp file, it must equal the committed one.
set -euo pipefail
. "$(dirname "$0")/lib/generated_doc.sh"
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
reg=$("$ONNXPIPE" ops --json)
if ! grep -q '"cuda_backend": true' <<< "$reg"; then
    echo "test_ops_doc: this build has no cuda backend; docs/ops.md describes a CUDA build"
    exit 77
fi
OUT=$BUILD_DIR/test-out/ops_doc
mkdir -p "$OUT"
"$PY" "$SRC_DIR/scripts/gen-ops-doc.py" --onnxpipe "$ONNXPIPE" -o "$OUT/ops.md"
same_as_committed test_ops_doc "$SRC_DIR/docs/ops.md" "$OUT/ops.md" "the op list changed" \
    "$PY $SRC_DIR/scripts/gen-ops-doc.py --onnxpipe $ONNXPIPE"
echo "test_ops_doc: docs/ops.md matches the registry ($(grep -c '^| ' "$OUT/ops.md") table rows)"
