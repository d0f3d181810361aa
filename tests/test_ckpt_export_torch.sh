#!/usr/bin/env bash
# Offline export (`onnxpipe ckpt export`) of checkpoints of a PyTorch export trained with
# --loss cross_entropy --logits --labels: a small LM whose embedding is tied to its output
# projection, trained as it is (pp=1), and with that tie undone and a layer frozen
# (--untie, --frozen; pp=2 under mpirun); each export runs in onnxruntime and gives the
# logits of PyTorch's model with the checkpoint's weights loaded (tests/ref/ckpt_export_ref.py).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/ckpt-export-torch
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
REF=$SRC_DIR/tests/ref/ckpt_export_ref.py
"$PY" "$REF" export "$OUT"
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null
m=(--model "$OUT/lm.onnx" --data "$OUT/text" --loss cross_entropy --logits logits --labels labels --batch 8
   --steps 3 --lr 3e-3 --quiet)

echo "== as exported (pp=1)"
"$ONNXPIPE" train "${m[@]}" --save "$OUT/ck"
"$ONNXPIPE" ckpt export "$OUT/ck/step-3" --model "$OUT/lm.onnx" -o "$OUT/lm-trained.onnx"
"$PY" "$REF" check "$OUT/ck/step-3" "$OUT/lm-trained.onnx" - -

echo "== --untie emb.weight --frozen 'fc.*' (pp=2)"
timeout 120 mpirun --oversubscribe --bind-to none -np 2 -x OPENBLAS_NUM_THREADS "$ONNXPIPE" train "${m[@]}" \
    --pp 2 --microbatches 2 --untie emb.weight --frozen 'fc.*' --save "$OUT/cku"
"$ONNXPIPE" ckpt export "$OUT/cku/step-3" --model "$OUT/lm.onnx" -o "$OUT/lm-untied.onnx"
"$PY" "$REF" check "$OUT/cku/step-3" "$OUT/lm-untied.onnx" emb.weight fc.

echo "== another model is refused, naming the tensor"
"$PY" - "$OUT" <<'PYEOF'
import os, sys, torch
sys.path.insert(0, os.path.join(os.environ["SRC_DIR"], "tests", "ref"))
import ckpt_export_ref as r
r.D = 24
os.makedirs(sys.argv[1] + "/other", exist_ok=True)
r.export(sys.argv[1] + "/other")
PYEOF
if "$ONNXPIPE" ckpt export "$OUT/ck/step-3" --model "$OUT/other/lm.onnx" -o "$OUT/x.onnx" 2>"$OUT/other.err"; then
    echo "FAIL: a checkpoint exported into another model"; exit 1
fi
cat "$OUT/other.err"
grep -q "another model" "$OUT/other.err"
echo "ok"
