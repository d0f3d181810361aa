#!/usr/bin/env bash
# tokens/s counts tokens for any model whose input is [batch, seq] integer ids, whatever
# its name (the example GPT with its input renamed 'idx', as a PyTorch export names it):
# the rate is seq x samples per second of training time (checked against the metrics'
# own step times); a model without token input (the MLP) reports samples/s, labelled so.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/tokens
rm -rf "$OUT"
mkdir -p "$OUT"
"$ONNXPIPE" example gpt --layers 1 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" example mlp --in 8 --hidden 16 --classes 4 --loss -o "$OUT/mlp.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null
"$PY" - "$OUT" <<'PYEOF'
import json, os, sys
import numpy as np
import onnx
out = sys.argv[1]
m = onnx.load(f"{out}/gpt.onnx")
for i in m.graph.input:
    if i.name == "input_ids": i.name = "idx"
for n in m.graph.node:
    n.input[:] = ["idx" if x == "input_ids" else x for x in n.input]
onnx.save(m, f"{out}/gpt-idx.onnx")
d = f"{out}/text-idx"; os.makedirs(d, exist_ok=True)
h = json.load(open(f"{out}/text/dataset.json"))
for a in h["arrays"]:
    os.symlink(f"{out}/text/{a['file']}", f"{d}/{a['file']}")
    if a["name"] == "input_ids": a["name"] = "idx"
json.dump(h, open(f"{d}/dataset.json", "w"))
d = f"{out}/mlp-data"; os.makedirs(d, exist_ok=True)
np.zeros((64, 8), np.float32).tofile(f"{d}/x.bin"); np.zeros(64, np.int64).tofile(f"{d}/labels.bin")
json.dump({"format": "onnxpipe-dataset-1", "samples": 64, "arrays": [
    {"name": "x", "dtype": "float32", "shape": [8], "file": "x.bin"},
    {"name": "labels", "dtype": "int64", "shape": [], "file": "labels.bin"}]}, open(f"{d}/dataset.json", "w"))
PYEOF
"$ONNXPIPE" train --model "$OUT/gpt-idx.onnx" --data "$OUT/text-idx" --loss cross_entropy --logits logits \
    --labels labels --batch 8 --steps 6 --metrics "$OUT/gpt.jsonl" >"$OUT/gpt.log" 2>&1 || { cat "$OUT/gpt.log"; exit 1; }
"$ONNXPIPE" train --model "$OUT/mlp.onnx" --data "$OUT/mlp-data" --batch 8 --steps 6 --metrics "$OUT/mlp.jsonl" \
    >"$OUT/mlp.log" 2>&1 || { cat "$OUT/mlp.log"; exit 1; }
tail -n 2 "$OUT/gpt.log" "$OUT/mlp.log"
grep -qE "^step 6/6 .* tok/s " "$OUT/gpt.log" && grep -qE "^trained .* tokens/s" "$OUT/gpt.log" &&
    grep -qE "^step 6/6 .* samples/s " "$OUT/mlp.log" && grep -qE "^trained .* samples/s" "$OUT/mlp.log" ||
    { echo "the rates are not labelled tok/s (GPT with input 'idx') and samples/s (MLP)"; exit 1; }
"$PY" - "$OUT" <<'PYEOF'
import json, sys
out = sys.argv[1]
# over the run: rate x training time = units; the training time is the steps' time plus
# the loop's own (logging), so rate <= units / sum(step_s): a rate counting more units per
# sample (the MLP's 8 features) breaks that bound. A GPT rate counting samples, not 16
# tokens each, would sit at 1/16 of it; the GPT's steps (ms) dwarf the loop's own time,
# while the MLP's (0.1 ms) do not under load, so only the GPT has a lower bound.
for name, key, per, low in [("gpt", "tokens_per_s", 16, 0.25), ("mlp", "samples_per_s", 1, 0.0)]:
    lines = [json.loads(l) for l in open(f"{out}/{name}.jsonl")]
    assert all(key in m for m in lines), f"{name}: no {key} in the metrics"
    units = per * 8 * len(lines)
    bound = units / sum(m["step_s"] for m in lines)
    ratio = lines[-1][key] / bound
    print(f"{name}: {key} {lines[-1][key]:.0f} = {ratio:.3f} x ({per} x 8 samples x {len(lines)} steps / "
          f"the steps' time)")
    assert low < ratio <= 1.0 + 1e-9, f"{name}: {key} is not {per} units per sample"
PYEOF
