#!/usr/bin/env bash
# Real exports: PyTorch exports GPT-style models (opsets 13 and 17, static and dynamic
# axes), an MLP and a ResNet-18; onnxpipe partitions each into N stages, its parameter
# total must match the count from PyTorch, and the stage chain must reproduce the whole
# model in onnxruntime (tests/ref/run_chain.py; the checks of all cases in one Python).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/ref
REF=$SRC_DIR/tests/ref
rm -rf "$OUT"
mkdir -p "$OUT"

echo "== exporting with $("$PY" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null)"
"$PY" "$REF/export_models.py" "$OUT"

failures=()

# partition_case MODEL NSTAGES [DIM=V ...]: partition, and a line for the checks below
partition_case() {
    local model=$1 n=$2
    shift 2
    local dims=() d
    for d in "$@"; do dims+=(--dim "$d"); done
    local name=${model%.onnx}-$n dir=$OUT/${model%.onnx}-$n
    echo "== $model, $n stages${*:+ ($*)}: onnxpipe partition"
    if ! "$ONNXPIPE" partition "$OUT/$model" --stages "$n" --json --out-dir "$dir" ${dims[@]+"${dims[@]}"} \
            >"$dir.json" 2>"$dir.err"; then
        cat "$dir.err" >&2
        failures+=("$name: onnxpipe partition failed: $(tail -n 1 "$dir.err")")
        return
    fi
    echo "$name $model $n ${dims[*]+${dims[*]}}" >>"$OUT/cases.txt"
}

: >"$OUT/cases.txt"
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

# each case's parameter count and stage files (check_partition.py) and its stage chain in
# onnxruntime (run_chain.py), all in one Python
"$PY" - "$REF" "$OUT" <<'PYEOF' || failures+=("the cases FAILED above")
import os, sys
ref, out = sys.argv[1:3]
sys.path.insert(0, ref)
import check_partition, run_chain
bad = 0
for line in open(os.path.join(out, "cases.txt")):
    name, model, n, *dims = line.split()
    print(f"== {model}, {n} stages{' (' + ' '.join(dims[1::2]) + ')' if dims else ''}", flush=True)
    d = os.path.join(out, name)
    if check_partition.main(d + ".json", os.path.join(out, "params.json"), os.path.join(out, model), d):
        print(f"FAILED {name}: partition JSON disagrees with PyTorch's count or with its stage files", flush=True)
        bad += 1
    try:
        run_chain.main([os.path.join(out, model), d, n, *dims])
    except SystemExit as e:
        print(f"FAILED {name}: stage chain does not reproduce the model: {e}", flush=True)
        bad += 1
sys.exit(1 if bad else 0)
PYEOF

if ((${#failures[@]})); then
    echo "FAILED ${#failures[@]} case(s):" >&2
    printf '  %s\n' "${failures[@]}" >&2
    exit 1
fi
echo "all reference exports partition, count and chain correctly"
