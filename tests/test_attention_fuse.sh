#!/usr/bin/env bash
# Attention fused into one Attention op (stage/fuse_attention.c) on small HF GPT-2, Llama and
# BERT (padding mask) exports from both PyTorch exporters, trained on the cpu with --fused-attention on: every layer's
# attention fuses, the first loss equals onnxruntime's and a training step's loss and gradients
# equal those of the unfused chain (--fused-attention off) within 1e-5
# (tests/ref/attention_fuse_ref.py). Runs in the export venv (scripts/export-venv.sh).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/attention-fuse
rm -rf "$OUT"
mkdir -p "$OUT"
venv=$("$SRC_DIR/scripts/export-venv.sh" | tail -n 1)
"$venv/bin/python" "$SRC_DIR/tests/ref/attention_fuse_ref.py" "$ONNXPIPE" "$OUT"
