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
# - a [batch, seq] padding mask gets 1 on tokens (the first loss of --pad against numpy);
# - what cannot be packed is refused, or warned about, naming what to do.
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
# a model with a [batch, seq] padding mask (its tokens see the sample's masked sum)
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
         h.make_node("ReduceSum", ["xm", "ax1"], ["pool"], keepdims=1),   # every token sees the sample's sum
         h.make_node("Add", ["xm", "pool"], ["hid"]),
         h.make_node("MatMul", ["hid", "w"], ["logits"])]
ax = h.make_tensor("ax", T.INT64, [1], [2])
ax1 = h.make_tensor("ax1", T.INT64, [1], [1])
g = h.make_graph(nodes, "mask2d",
                 [h.make_tensor_value_info("input_ids", T.INT64, ["batch", 16]),
                  h.make_tensor_value_info("attention_mask", T.INT64, ["batch", 16])],
                 [h.make_tensor_value_info("logits", T.FLOAT, ["batch", 16, 512])], [emb, w, ax, ax1])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), sys.argv[1])
PYEOF
# a [batch, seq] padding mask: 1 on tokens, 0 on padding; the first loss of --pad against numpy
m2=(--model "$OUT/mask2d.onnx" --batch 4 --steps 1 --data "$OUT/show/docs.bin" --seq 16 --eos 1 --loss cross_entropy
    --logits logits --labels labels)
run_onnxpipe mask2d-pad 1 train "${m2[@]}" --pad --losses "$OUT/mask2d.losses"
"$XPY" - "$SRC_DIR/tests/ref" "$OUT/mask2d.onnx" "$OUT/mask2d.losses" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import onnx
from onnx import numpy_helper
import pack_ref as pr
w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in onnx.load(sys.argv[2]).graph.initializer}
docs = pr.documents(3, 400, 500, 3 * pr.SEQ + 5)   # as in docs.bin
a, _ = pr.arrays(docs, pr.SEQ, pr.EOS, pad_only=True)
ids, y = a["input_ids"][:4], a["labels"][:4]
lengths = [p[0][2] for p in pr.pack([len(d) for d in docs], pr.SEQ, True)[:4]]
mask = np.array([[1] * n + [0] * (pr.SEQ - n) for n in lengths])
xm = w["emb"][ids] * mask[..., None]
z = (xm + xm.sum(1, keepdims=True)) @ w["w"]   # padding a mask let through would move every token's logits
z -= z.max(-1, keepdims=True)
lp = z - np.log(np.exp(z).sum(-1, keepdims=True))
keep = y != pr.IGNORE
ref = -lp[keep, y[keep]].mean()
got = float(open(sys.argv[3]).read().split()[1])
print(f"  --pad, a [batch, seq] padding mask: first loss {got:.8f} vs numpy {ref:.8f} (rel {abs(got - ref) / ref:.1e})")
sys.exit(0 if abs(got - ref) <= 1e-6 * ref else 1)
PYEOF
# --pack with it trains, and is told that the packed documents see each other
run_onnxpipe mask2d-pack 1 train "${m2[@]}" --pack
grep -q "padding mask, so the documents packed" "$OUT/mask2d-pack.log" || { echo "FAILED: no warning"; cat "$OUT/mask2d-pack.log"; exit 1; }
# a model with neither a mask nor position_ids trains, and is told its documents see each other
run_onnxpipe gpt-nomask 1 train "${g[@]}" --data "$OUT/show/docs.bin" --seq 16 --pack --eos 1
grep -q "attend to each other" "$OUT/gpt-nomask.log" || { echo "FAILED: no warning"; cat "$OUT/gpt-nomask.log"; exit 1; }
grep -m1 "^data: packed" "$OUT/gpt-nomask.log"
echo "  warned: $(grep -m1 'attend to each other' "$OUT/gpt-nomask.log")"
echo "PASSED"
