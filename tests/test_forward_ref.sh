#!/usr/bin/env bash
# Whole-model forward of onnxpipe (stage executor + cpu kernels) against onnxruntime on
# real PyTorch exports (GPT at opsets 13/17, static and dynamic axes, MLP, ResNet-18)
# and on our own example GPT: outputs must agree within 1e-4.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/forward
rm -rf "$OUT"
mkdir -p "$OUT"
"$PY" "$SRC_DIR/tests/ref/export_models.py" "$OUT" >/dev/null
"$ONNXPIPE" example gpt --layers 2 --d-model 64 --heads 4 --vocab 128 --seq 32 -o "$OUT/example_gpt.onnx" >/dev/null
"$ONNXPIPE" example gpt --layers 2 --d-model 64 --heads 4 --vocab 128 --seq 32 --opset 13 \
    -o "$OUT/example_gpt13.onnx" >/dev/null
run() { "$PY" "$SRC_DIR/tests/ref/forward_ref.py" "$ONNXPIPE" "$OUT/work" "$@"; }
run "$OUT"/{gpt_op13_static,gpt_op17_static,example_gpt,example_gpt13}.onnx
run "$OUT/gpt_op17_dynamic.onnx" --dim batch=2 --dim T=16
run "$OUT/mlp.onnx" --batch 4
run "$OUT/resnet18.onnx" --batch 1
echo "forward matches onnxruntime on every model"
