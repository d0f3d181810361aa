#!/usr/bin/env bash
# The order search on PyTorch's exports (tests/ref/export_models.py: ResNet-18 with BatchNorm
# folded, kept, and as torchvision makes it fresh, whose zero biases the exporter merges and
# names again by Identity nodes at the file's head; a GPT whose tied embedding is read through
# a Transpose): for 2, 3, 4, 6 and 8 stages by parameters, the largest stage found over the searched
# orders is at most the exact optimum of the file's own node order (a brute force,
# tests/ref/file_order_split.py, weighing each node by the parameters it reads) and of
# onnxpipe's graph order (--order graph); a reordered split's stage files
# reproduce the model in onnxruntime (tests/ref/run_chain.py), and training on it under
# mpirun gives the single-rank run's losses and weights (tests/ref/compare_runs.py).
# And `onnxpipe train` splits as the preview does with the same options (--balance time).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/partition_order_ref
REF=$SRC_DIR/tests/ref
rm -rf "$OUT"
mkdir -p "$OUT"
cd "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60

"$PY" "$REF/export_models.py" "$OUT" >/dev/null
STAGES="2 3 4 6 8"
MODELS="resnet18 resnet18_bn resnet18_fresh gpt_op17_static_nofold"
for model in $MODELS; do
    for n in $STAGES; do
        for order in search graph; do
            "$ONNXPIPE" partition $model.onnx --stages "$n" --order $order --balance-tolerance 0 --json \
                >$model-$n-$order.json
        done
        "$ONNXPIPE" partition $model.onnx --stages "$n" --json >$model-$n-tol.json   # the default 0.02
    done
    "$PY" "$REF/file_order_split.py" $model.onnx $model-2-search.json $STAGES >$model.file.json
done
"$PY" - $MODELS -- $STAGES <<'PYEOF'
import json, sys
models, stages = sys.argv[1:sys.argv.index("--")], sys.argv[sys.argv.index("--") + 1:]
gains = 0
for model in models:
    file_opt = json.load(open(f"{model}.file.json"))
    print(f"{model}: stages, largest stage (params): searched orders / onnxpipe's graph order / the file's order")
    for n in stages:
        s, g, t = (json.load(open(f"{model}-{n}-{o}.json")) for o in ("search", "graph", "tol"))
        bs, bg, bf, bt = s["bottleneck"]["largest"], g["bottleneck"]["largest"], file_opt[n], t["bottleneck"]["largest"]
        assert s["order"]["searched"] and not g["order"]["searched"], n
        assert bs == s["bottleneck"]["optimum"] and bg == g["bottleneck"]["optimum"], n
        # the graph's order is the file's (as file_order_split.py reads it), solved exactly
        assert bg == bf, (model, n, bg, bf)
        assert bs <= bg and bs <= bf and bs >= s["bottleneck"]["lower_bound"], (model, n, bs, bg, bf)
        # with the default tolerance, within 2% of the optimum, so of the file's order's
        assert t["bottleneck"]["optimum"] == bs and bt <= bs + int(bs * 0.02), (model, n, bt, bs)
        gains += bs < bf
        print(f"  {n}: {bs:>9} / {bg:>9} / {bf:>9}   {bf - bs:>7} lighter than the file's order, "
              f"{s['order']['moved']} node(s) moved; tolerance 0.02: {bt}")
assert gains, "the search never beat the file's order"
PYEOF

# a reordered split runs: its stage files chain in onnxruntime, and it trains as one rank does
"$ONNXPIPE" partition resnet18.onnx --stages 5 --balance-tolerance 0 --out-dir stages --json >split5.json
"$PY" -c "import json, sys; j = json.load(open('split5.json')); sys.exit(0 if j['order']['moved'] else 1)" ||
    { echo "the 5-stage ResNet-18 split is not reordered" >&2; exit 1; }
"$PY" "$REF/run_chain.py" resnet18.onnx stages 5
"$PY" - <<'PYEOF'
import json, numpy as np
rng, n = np.random.default_rng(0), 20
rng.standard_normal((n, 3, 64, 64)).astype(np.float32).tofile("input.bin")
rng.integers(0, 10, n).astype(np.int64).tofile("labels.bin")
json.dump({"format": "onnxpipe-dataset-1", "samples": n, "arrays": [
    {"name": "input", "dtype": "float32", "shape": [3, 64, 64], "file": "input.bin"},
    {"name": "labels", "dtype": "int64", "shape": [], "file": "labels.bin"}]}, open("dataset.json", "w"))
PYEOF
for pp in 1 5; do
    timeout 300 mpirun --oversubscribe --bind-to none -np $pp -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT \
        "$ONNXPIPE" train --model resnet18.onnx --data . --pp $pp --batch 5 --microbatches 5 --steps 4 --lr 1e-4 \
        --balance-tolerance 0 --loss cross_entropy --logits output --labels labels --quiet \
        --losses pp$pp.losses --export pp$pp.onnx >pp$pp.log 2>&1 || { cat pp$pp.log; exit 1; }
done
echo "== ResNet-18 on the searched 5-stage split against one rank"
"$PY" "$REF/compare_runs.py" 1e-5 1e-4 pp1.losses pp1.onnx pp5.losses pp5.onnx "resnet18 pp=5 (reordered)"

# train prints the split it runs: the same stages as the preview with the same options
"$ONNXPIPE" example gpt --layers 4 --d-model 32 --heads 2 --vocab 256 --seq 16 -o gpt.onnx >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o text --seq 16 >/dev/null
split=(--balance time --link-gbps 1 --balance-tolerance 0.05)
"$ONNXPIPE" partition gpt.onnx --stages 3 --batch 2 --microbatches 6 "${split[@]}" >preview.txt
timeout 300 mpirun --oversubscribe --bind-to none -np 3 -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT \
    "$ONNXPIPE" train --model gpt.onnx --data text --pp 3 --batch 12 --microbatches 6 --steps 2 "${split[@]}" \
    --loss cross_entropy --logits logits --labels labels >train.log 2>&1 || { cat train.log; exit 1; }
grep -q "partition: 3 stages, balance time" train.log
stages() { grep -E '^ +[0-9]+ +[0-9]+ ' "$1" | head -3 | awk '{print $NF}'; }
[ "$(stages preview.txt)" = "$(stages train.log)" ] || { echo "train split differs from the preview" >&2; exit 1; }
echo "train splits by --balance time as the preview does: last nodes $(stages train.log | tr '\n' ' ')"
echo "order search on ResNet-18: never heavier than the file's order, and the reordered split runs"
