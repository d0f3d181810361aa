#!/usr/bin/env bash
# The model zoo (issue 24 §5): GPT-2, Llama, Qwen2, Mistral, BERT (MLM, classification), ViT,
# ResNet-50, MobileNetV3, EfficientNet, and (issue 42 §3) OPT and Swin, whose TorchScript files
# are trained plain (no parameter metadata); small and random-init, exported by both PyTorch
# exporters through examples/export/export_model.py; onnxpipe's trained element count equals
# PyTorch's parameters, its first loss onnxruntime's (1e-6), and 10 AdamW steps at pp=1, pp=2
# and pp=2 x dp=2 PyTorch's (1e-5 relative; or twice PyTorch float32's own error where that is
# larger: zoo_train_ref.py). This test runs the fast set (one model of each kind, each exporter,
# each layout: MODELS' first field); test_zoo_full_mpi the rest (make test-zoo). Runs in the
# export venv (scripts/export-venv.sh).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/zoo
rm -rf "$OUT"
mkdir -p "$OUT"
venv=$("$SRC_DIR/scripts/export-venv.sh" | tail -n 1)
"$venv/bin/python" "$SRC_DIR/tests/ref/zoo_train_ref.py" "$ONNXPIPE" "$OUT" --set fast
