#!/usr/bin/env bash
# Plain exports, without the export recipe's metadata (issue 42 §2, §6): GPT-2 and BERT-MLM
# (TorchScript, the tied embedding written twice), Llama (dynamo: rotary frequencies, and folded
# rotary tables) and a GPT with a causal-mask buffer; onnxpipe's trained count equals PyTorch's
# parameters, 5 AdamW steps PyTorch's losses (pp=1; GPT-2 also pp=2), the trained set the
# checkpoint's, and `ckpt export` of the masked GPT's checkpoint PyTorch's trained logits
# (tests/ref/plain_exports_ref.py). Runs in the export venv (scripts/export-venv.sh).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/plain-exports
rm -rf "$OUT"
mkdir -p "$OUT"
venv=$("$SRC_DIR/scripts/export-venv.sh" | tail -n 1)
"$venv/bin/python" "$SRC_DIR/tests/ref/plain_exports_ref.py" "$ONNXPIPE" "$OUT"
