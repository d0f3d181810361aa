#!/usr/bin/env bash
# docs/cli.md is what scripts/gen-cli-doc.sh makes from this build's `onnxpipe <cmd> --help`:
# regenerated into a temp file, it must equal the committed one (an option added, renamed or
# given another default changes it).
set -euo pipefail
. "$(dirname "$0")/lib/generated_doc.sh"
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/cli_doc
mkdir -p "$OUT"
bash "$SRC_DIR/scripts/gen-cli-doc.sh" "$ONNXPIPE" "$OUT/cli.md"
same_as_committed test_cli_doc "$SRC_DIR/docs/cli.md" "$OUT/cli.md" "an option or a --help text changed" \
    "$SRC_DIR/scripts/gen-cli-doc.sh $ONNXPIPE"
echo "test_cli_doc: docs/cli.md matches every command's --help ($(grep -c '^## ' "$OUT/cli.md") commands," \
     "$(wc -l <"$OUT/cli.md") lines)"
