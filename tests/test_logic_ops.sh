#!/usr/bin/env bash
# Forward of the comparisons, logic and more elementwise ops (op_list.h's section of that name)
# in onnxpipe (`onnxpipe eval`, cpu kernels and the load-time folder) against onnxruntime on
# small models (tests/ref/logic_models.py): bool outputs exactly, floats within 1e-6 of max |y|.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/logic_ops
rm -rf "$OUT"
mkdir -p "$OUT"
n=0
for m in $("$PY" "$SRC_DIR/tests/ref/logic_models.py" "$OUT/models"); do
    "$PY" "$SRC_DIR/tests/ref/forward_ref.py" "$ONNXPIPE" "$OUT/models/$m.onnx" "$OUT/work-$m" --tol 1e-6
    n=$((n + 1))
done
echo "$n models: forward matches onnxruntime"
