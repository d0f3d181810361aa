#!/usr/bin/env bash
# HF's rotary embedding (x * cos + rotate_half(x) * sin) fused into one RotaryEmbedding
# (stage/fuse_rope.c) on small HF Llama exports from both PyTorch exporters: the fusion
# fires for q and k in every layer, the first loss equals onnxruntime's and a training
# step's loss and gradients equal those of an unfused twin of the export (1e-5;
# tests/ref/rope_fuse_ref.py). Runs in the export venv (scripts/export-venv.sh).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/rope-fuse
rm -rf "$OUT"
mkdir -p "$OUT"
venv=$("$SRC_DIR/scripts/export-venv.sh" | tail -n 1)
"$venv/bin/python" "$SRC_DIR/tests/ref/rope_fuse_ref.py" "$ONNXPIPE" "$OUT"
