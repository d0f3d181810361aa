#!/usr/bin/env bash
# Bad input to onnxpipe train gives a clear error and a non-zero exit, never a crash:
# an op outside the supported set, labels out of range, a dataset too short for one
# batch, data whose shape does not fit the model, bad options, and NaN/Inf in the loss
# (named by step, microbatch and node or input) or in the gradients (step, parameter).
# Every dataset/model mismatch (also of --eval-data) is found before step 1 with what to
# change: a missing array, dtype, per-sample shape, a fixed batch dim; labels out of range
# when the step (or evaluation) that reads them does, naming the file and byte.
set -uo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/train-errors
rm -rf "$OUT"
mkdir -p "$OUT"
fail=0
expect() {  # DESCRIPTION PATTERN COMMAND...: non-zero exit, no signal, stderr matches
    local what=$1 pattern=$2
    shift 2
    "$@" >"$OUT/out.txt" 2>"$OUT/err.txt"
    local rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qE -e "$pattern" "$OUT/err.txt"; then
        echo "ok   $what: $(head -c 300 "$OUT/err.txt" | head -n 1)"
    else
        echo "FAIL $what (exit $rc): $(cat "$OUT/err.txt")"
        fail=1
    fi
}
"$ONNXPIPE" example gpt --layers 1 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null || exit 1
"$ONNXPIPE" example mlp --in 8 --hidden 16 --classes 4 --loss -o "$OUT/mlp.onnx" >/dev/null || exit 1
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/d16" --seq 16 >/dev/null || exit 1
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/d8" --seq 8 >/dev/null || exit 1
head -c 100 /usr/share/common-licenses/GPL-3 >"$OUT/short.txt"
"$ONNXPIPE" data text "$OUT/short.txt" -o "$OUT/dshort" --seq 16 >/dev/null || exit 1
"$PY" - "$OUT" <<'PYEOF'
import json, os, sys
import numpy as np
import onnx
from onnx import helper, TensorProto
out = sys.argv[1]
# an MLP dataset whose labels go past the 4 classes
d = os.path.join(out, "mlp-bad"); os.makedirs(d, exist_ok=True)
np.zeros((16, 8), np.float32).tofile(f"{d}/x.bin")
np.arange(16, dtype=np.int64).tofile(f"{d}/labels.bin")
json.dump({"format": "onnxpipe-dataset-1", "samples": 16, "arrays": [
    {"name": "x", "dtype": "float32", "shape": [8], "file": "x.bin"},
    {"name": "labels", "dtype": "int64", "shape": [], "file": "labels.bin"}]}, open(f"{d}/dataset.json", "w"))
# a model with an op outside the supported set
w = helper.make_tensor("w", TensorProto.FLOAT, [8, 8], np.ones(64, np.float32))
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                       helper.make_node("Hardmax", ["h"], ["y"], name="odd_hardmax")],
                      "odd", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(out, "hardmax.onnx"))
# a model whose input has a fixed batch of 1, and data for it
w = helper.make_tensor("w1", TensorProto.FLOAT, [8, 4], np.ones(32, np.float32) * 0.1)
g = helper.make_graph([helper.make_node("MatMul", ["input", "w1"], ["logits"], name="mm")], "fixed",
                      [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8]),
                       helper.make_tensor_value_info("labels", TensorProto.INT64, [1])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 4])], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(out, "fixed.onnx"))
d = os.path.join(out, "fixed-data"); os.makedirs(d, exist_ok=True)
np.zeros((16, 8), np.float32).tofile(f"{d}/input.bin")
np.zeros(16, np.int64).tofile(f"{d}/labels.bin")
json.dump({"format": "onnxpipe-dataset-1", "samples": 16, "arrays": [
    {"name": "input", "dtype": "float32", "shape": [8], "file": "input.bin"},
    {"name": "labels", "dtype": "int64", "shape": [], "file": "labels.bin"}]}, open(f"{d}/dataset.json", "w"))
# MLP data without its input array, and with float64 features
for name, arrays in [("mlp-noinput", [("labels", "int64", [])]), ("mlp-f64", [("x", "float64", [8]), ("labels", "int64", [])])]:
    d = os.path.join(out, name); os.makedirs(d, exist_ok=True)
    for a, dt, sh in arrays:
        np.zeros([16] + sh, dt).tofile(f"{d}/{a}.bin")
    json.dump({"format": "onnxpipe-dataset-1", "samples": 16, "arrays": [
        {"name": a, "dtype": dt, "shape": sh, "file": f"{a}.bin"} for a, dt, sh in arrays]}, open(f"{d}/dataset.json", "w"))
# an MLP dataset with one NaN feature in sample 5 (microbatch 1 of 2 x 4)
d = os.path.join(out, "mlp-nan"); os.makedirs(d, exist_ok=True)
x = np.ones((16, 8), np.float32); x[5, 3] = np.nan; x.tofile(f"{d}/x.bin")
np.zeros(16, np.int64).tofile(f"{d}/labels.bin")
json.dump({"format": "onnxpipe-dataset-1", "samples": 16, "arrays": [
    {"name": "x", "dtype": "float32", "shape": [8], "file": "x.bin"},
    {"name": "labels", "dtype": "int64", "shape": [], "file": "labels.bin"}]}, open(f"{d}/dataset.json", "w"))
PYEOF
L=(--loss cross_entropy --logits logits --labels labels)
expect "unsupported op" "odd_hardmax.*Hardmax.*not supported" \
    "$ONNXPIPE" train --model "$OUT/hardmax.onnx" --data "$OUT/d16" "${L[@]}" --steps 1 --quiet
expect "labels out of range" "label 4 .*out of range \[0, 4\)" \
    "$ONNXPIPE" train --model "$OUT/mlp.onnx" --data "$OUT/mlp-bad" --batch 16 --steps 1 --quiet
expect "dataset too short for one batch" "holds 6 samples, fewer than one batch of 8" \
    "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/dshort" "${L[@]}" --batch 8 --steps 1 --quiet
expect "data shape does not fit the model" "array 'input_ids' is int64 \[8\] per sample, but the model's input 'input_ids' is int64 \[8, 16\] per microbatch of 8 .*--seq" \
    "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/d8" "${L[@]}" --batch 8 --steps 1 --quiet
expect "no loss named" "no SoftmaxCrossEntropyLoss output.*--loss cross_entropy" \
    "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/d16" --steps 1 --quiet
expect "batch not divisible" "--batch 10 must be a positive multiple of dp x microbatches = 4" \
    "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/d16" "${L[@]}" --batch 10 --microbatches 4 --steps 1
expect "unknown device" "--device 'tpu': use auto, cpu or cuda" \
    "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/d16" "${L[@]}" --device tpu --steps 1
expect "missing model file" "nonexistent.onnx" \
    "$ONNXPIPE" train --model "$OUT/nonexistent.onnx" --data "$OUT/d16" --steps 1
expect "bad number" "--lr expects a number" \
    "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/d16" --lr fast
expect "a NaN loss names step, microbatch and where it came from" "step 1, microbatch 1: input 'x' of the stage holds NaN" \
    "$ONNXPIPE" train --model "$OUT/mlp.onnx" --data "$OUT/mlp-nan" --batch 8 --microbatches 2 --steps 1 --quiet
expect "NaN/Inf gradients name step, parameter and node" "step [0-9]+: the gradient of parameter '[^']+' \(read by node '[^']+' \([A-Za-z]+\)\) is NaN or Inf.*--skip-nonfinite" \
    "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/d16" "${L[@]}" --optimizer sgd --lr 1000 --steps 20 --quiet
expect "a fixed batch dim says how to fix it" "the model's input 'input' has a fixed batch of 1 but the microbatch is 4: export with a dynamic batch axis or use --batch/--microbatches so that the microbatch is 1" \
    "$ONNXPIPE" train --model "$OUT/fixed.onnx" --data "$OUT/fixed-data" --loss cross_entropy --logits logits \
    --labels labels --batch 8 --microbatches 2 --steps 1 --quiet
expect "a missing array is named with the arrays there are" "has no array 'x' for the model's input 'x' \(float32 \[8\] per sample\); it has 'labels'" \
    "$ONNXPIPE" train --model "$OUT/mlp.onnx" --data "$OUT/mlp-noinput" --batch 8 --steps 1 --quiet
expect "a wrong dtype" "array 'x' is float64 \[8\] per sample, but the model's input 'x' is float32" \
    "$ONNXPIPE" train --model "$OUT/mlp.onnx" --data "$OUT/mlp-f64" --batch 8 --steps 1 --quiet
expect "eval data that does not fit is found at start" "^onnxpipe: error: --eval-data '[^']*d8': array 'input_ids' is int64 \[8\]" \
    "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/d16" --eval-data "$OUT/d8" "${L[@]}" --batch 8 --steps 1 --quiet
expect "eval labels out of range" "--eval-data .*label 4 .*out of range \[0, 4\)" \
    "$ONNXPIPE" train --model "$OUT/mlp.onnx" --data "$OUT/mlp-nan" --eval-data "$OUT/mlp-bad" --batch 4 --steps 1 --quiet
expect "eval data shorter than a global batch" "--eval-data '[^']*' holds 6 samples, fewer than one global batch of 8" \
    "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/d16" --eval-data "$OUT/dshort" "${L[@]}" --batch 8 --steps 1 --quiet
expect "--profile-steps without --profile" "--profile-steps and --profile go together" \
    "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/d16" "${L[@]}" --profile-steps 2:3
expect "a bad step range" "--profile-steps expects A:B with 1 <= A <= B, got '5:3'" \
    "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/d16" "${L[@]}" --profile-steps 5:3 --profile p.json
if "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/d16" "${L[@]}" --optimizer sgd --lr 1000 --steps 20 --quiet \
        --skip-nonfinite >"$OUT/skip.txt" 2>&1; then
    echo "ok   --skip-nonfinite trains on past the bad steps"
else
    echo "FAIL --skip-nonfinite: $(cat "$OUT/skip.txt")"
    fail=1
fi
exit $fail
