#!/usr/bin/env bash
# Fold-only ops (op_list.h KINDS FOLD: NonZero, Size) in shape and constant chains load and
# train with no --dim (the data binds the symbolic seq), first loss against onnxruntime and
# every step against PyTorch float64; on the data path they are refused naming the input, and
# --dim or arrays that disagree on a dim are refused naming both (tests/ref/fold_only.py).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/fold_only
rm -rf "$OUT"
"$PY" "$SRC_DIR/tests/ref/fold_only.py" "$ONNXPIPE" "$OUT"
