#!/usr/bin/env bash
# docs/cli.md is what scripts/gen-cli-doc.sh makes from this build's `onnxpipe <cmd> --help`:
# regenerated into a temp file, it must equal the committed one (an option added, renamed or
# given another default changes it).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/cli_doc
mkdir -p "$OUT"
bash "$SRC_DIR/scripts/gen-cli-doc.sh" "$ONNXPIPE" "$OUT/cli.md"
if ! diff -u "$SRC_DIR/docs/cli.md" "$OUT/cli.md"; then
    echo "test_cli_doc: docs/cli.md is stale (an option or a --help text changed); regenerate it with:" >&2
    echo "  $SRC_DIR/scripts/gen-cli-doc.sh $ONNXPIPE" >&2
    exit 1
fi
echo "test_cli_doc: docs/cli.md matches every command's --help ($(grep -c '^## ' "$OUT/cli.md") commands," \
     "$(wc -l <"$OUT/cli.md") lines)"
