#!/usr/bin/env bash
# Real exports: PyTorch exports GPT-style models (opsets 13 and 17, static and dynamic
# axes), an MLP and a ResNet-18; onnxpipe partitions each into N stages, its parameter
# total must match the count from PyTorch, and the stage chain must reproduce the whole
# model in onnxruntime (tests/ref/run_chain.py).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/ref
REF=$SRC_DIR/tests/ref
rm -rf "$OUT"
mkdir -p "$OUT"

echo "== exporting with $("$PY" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null)"
"$PY" "$REF/export_models.py" "$OUT"

failures=()

# partition_case MODEL NSTAGES [DIM=V ...]: partition, compare the parameter total, run the chain
partition_case() {
    local model=$1 n=$2
    shift 2
    local dims=() d
    for d in "$@"; do dims+=(--dim "$d"); done
    local name=${model%.onnx}-$n dir=$OUT/${model%.onnx}-$n
    echo "== $model, $n stages${*:+ ($*)}"
    if ! "$ONNXPIPE" partition "$OUT/$model" --stages "$n" --json --out-dir "$dir" ${dims[@]+"${dims[@]}"} \
            >"$dir.json" 2>"$dir.err"; then
        cat "$dir.err" >&2
        failures+=("$name: onnxpipe partition failed: $(tail -n 1 "$dir.err")")
        return
    fi
    if ! "$PY" "$REF/check_partition.py" "$dir.json" "$OUT/params.json" "$OUT/$model" "$dir"; then
        failures+=("$name: partition JSON disagrees with PyTorch's count or with its stage files")
    fi
    if ! "$PY" "$REF/run_chain.py" "$OUT/$model" "$dir" "$n" ${dims[@]+"${dims[@]}"}; then
        failures+=("$name: stage chain does not reproduce the model")
    fi
}

for n in 2 4; do
    partition_case gpt_op13_static.onnx "$n"
    partition_case gpt_op17_static.onnx "$n"
    partition_case gpt_op17_static_nofold.onnx "$n"
    partition_case gpt_op17_dynamic.onnx "$n" batch=$((n + 1)) T=$((18 - n))
    partition_case mlp.onnx "$n"
done
partition_case resnet18.onnx 3
partition_case resnet18.onnx 4
partition_case resnet18_bn.onnx 3

if ((${#failures[@]})); then
    echo "FAILED ${#failures[@]} case(s):" >&2
    printf '  %s\n' "${failures[@]}" >&2
    exit 1
fi
echo "all reference exports partition, count and chain correctly"
