#!/usr/bin/env bash
# The rest of the model zoo: the exports that test_zoo_ref_mpi (the fast set) leaves out,
# with the same checks (tests/ref/zoo_train_ref.py --set rest). Label zoo: `make test`
# leaves it out, `make test-zoo` runs it with the fast set, and CI's `make test` runs it
# after the suite when its time budget allows (scripts/test.sh).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/zoo-full
rm -rf "$OUT"
mkdir -p "$OUT"
venv=$("$SRC_DIR/scripts/export-venv.sh" | tail -n 1)
"$venv/bin/python" "$SRC_DIR/tests/ref/zoo_train_ref.py" "$ONNXPIPE" "$OUT" --set rest
