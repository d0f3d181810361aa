#!/usr/bin/env bash
# Forward of the comparisons, logic and more elementwise ops (op_list.h's section of that name)
# in onnxpipe (`onnxpipe eval`, cpu kernels and the load-time folder) against onnxruntime on
# small models (tests/ref/logic_models.py): bool outputs exactly, floats within 1e-6 of max |y|;
# and models with a bad form of them (float Mod with fmod=0, And of floats, ...) are refused at load.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/logic_ops
rm -rf "$OUT"
mkdir -p "$OUT"
models=$("$PY" "$SRC_DIR/tests/ref/logic_models.py" "$OUT/models")
paths=()
for m in $models; do paths+=("$OUT/models/$m.onnx"); done
"$PY" "$SRC_DIR/tests/ref/forward_ref.py" "$ONNXPIPE" "$OUT/work" "${paths[@]}" --tol 1e-6   # one Python for all
n=${#paths[@]}
for m in "$OUT"/models/errors/*.onnx; do
    want=$(cat "${m%.onnx}.expect")
    if msg=$("$ONNXPIPE" partition "$m" --stages 1 2>&1); then
        echo "$(basename "$m"): loaded, expected an error with '$want'" >&2
        exit 1
    fi
    grep -qF "node 'n'" <<< "$msg" && grep -qF "$want" <<< "$msg" || { echo "$(basename "$m"): '$msg'" >&2; exit 1; }
    echo "  $(basename "$m"): refused: $msg"
done
echo "$n models: forward matches onnxruntime; bad ones are refused naming the node"
