#!/usr/bin/env bash
# --pack (issue 26 §2): documents packed into sequences, against a Python statement of
# the same rule (tests/ref/pack_ref.py):
# - every sample `onnxpipe data show --pack` prints, of an EOS-separated token stream and
#   of a Megatron indexed dataset (megatron-core), equals the rule's, padding fraction too;
# - a random-init HF Llama exported by both exporters with a 4-D attention_mask and
#   position_ids trains 10 AdamW steps on the packed stream at pp=1 and pp=2 x dp=2 with
#   PyTorch float64's losses (the HF module on the rule's samples, masks and positions):
#   first loss within 1e-6, every step within 1e-5 relative; and the dynamo export on
#   --pad --seq-buckets 4,8,16 (each step at its bucket's length, in the sampler's order,
#   restated in Python) at pp=1, pp=2 and pp=2 x dp=2, the same bounds;
# - what cannot be packed is refused, naming what to do.
# Python: the export venv (scripts/export-venv.sh).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/pack
rm -rf "$OUT"
mkdir -p "$OUT"
XPY=$("$SRC_DIR/scripts/export-venv.sh" | tail -n 1)/bin/python
export PP_COMM_TIMEOUT=60

echo "== the packing rule"
"$XPY" "$SRC_DIR/tests/ref/pack_ref.py" show "$ONNXPIPE" "$OUT/show" 2>&1 | grep -v "^W[0-9]"
echo "== a packed, masked HF Llama against PyTorch; padded documents in sequence buckets"
"$XPY" "$SRC_DIR/tests/ref/pack_ref.py" llama "$ONNXPIPE" "$OUT/llama" 2>&1 | grep -v "^W[0-9]"

# shellcheck source=lib/run.sh
. "$SRC_DIR/tests/lib/run.sh"
echo "== what cannot be packed"
"$ONNXPIPE" example gpt --layers 1 --d-model 16 --heads 2 --vocab 512 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
g=(--model "$OUT/gpt.onnx" --batch 4 --steps 2 --loss cross_entropy --logits logits --labels labels)
refused "pass --eos ID" "$ONNXPIPE" train "${g[@]}" --data "$OUT/show/docs.bin" --seq 16 --pack
refused "add --pack or --pad" "$ONNXPIPE" train "${g[@]}" --data "$OUT/show/docs.bin" --seq 16 --eos 1
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/own" --seq 16 >/dev/null
refused "(onnxpipe) holds samples already made" "$ONNXPIPE" train "${g[@]}" --data "$OUT/own" --pack
# a model whose attention_mask is a [batch, seq] padding mask cannot keep documents apart
"$XPY" - "$OUT/mask2d.onnx" <<'PYEOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h
emb = h.make_tensor("emb", T.FLOAT, [512, 8], np.random.default_rng(0).standard_normal(512 * 8).tolist())
w = h.make_tensor("w", T.FLOAT, [8, 512], np.random.default_rng(1).standard_normal(8 * 512).tolist())
nodes = [h.make_node("Gather", ["emb", "input_ids"], ["x"]),
         h.make_node("Cast", ["attention_mask"], ["m"], to=T.FLOAT),
         h.make_node("Unsqueeze", ["m", "ax"], ["m3"]),
         h.make_node("Mul", ["x", "m3"], ["xm"]),
         h.make_node("MatMul", ["xm", "w"], ["logits"])]
ax = h.make_tensor("ax", T.INT64, [1], [2])
g = h.make_graph(nodes, "mask2d",
                 [h.make_tensor_value_info("input_ids", T.INT64, ["batch", 16]),
                  h.make_tensor_value_info("attention_mask", T.INT64, ["batch", 16])],
                 [h.make_tensor_value_info("logits", T.FLOAT, ["batch", 16, 512])], [emb, w, ax])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), sys.argv[1])
PYEOF
refused "a \[batch, seq\] padding mask cannot keep" "$ONNXPIPE" train --model "$OUT/mask2d.onnx" --batch 4 --steps 1 \
    --data "$OUT/show/docs.bin" --seq 16 --pack --eos 1 --loss cross_entropy --logits logits --labels labels
# a model with neither a mask nor position_ids trains, and is told its documents see each other
run_onnxpipe gpt-nomask 1 train "${g[@]}" --data "$OUT/show/docs.bin" --seq 16 --pack --eos 1
grep -q "attend to each other" "$OUT/gpt-nomask.log" || { echo "FAILED: no warning"; cat "$OUT/gpt-nomask.log"; exit 1; }
grep -m1 "^data: packed" "$OUT/gpt-nomask.log"
echo "  warned: $(grep -m1 'attend to each other' "$OUT/gpt-nomask.log")"
echo "PASSED"
