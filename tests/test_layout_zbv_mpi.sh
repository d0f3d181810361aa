#!/usr/bin/env bash
# Numerics do not depend on layout, for zb-v: the example GPT (its tied embedding and LM
# head both land on rank 0, which holds the first and the last of the V's stages) and an
# MLP, trained 20 steps with zb-v at (pp, dp) in {(1,1), (2,1), (4,1), (2,2)} under
# mpirun, give the single-rank 1f1b run's per-step losses and final parameters: exactly
# at dp=1 (test_layout_mpi.sh says why), within 1e-5 relative and 1e-4 at dp=2.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/layout-zbv
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null
"$ONNXPIPE" example mlp --in 16 --hidden 32,32,32,32,32,32,32 --classes 10 --loss -o "$OUT/mlp.onnx" >/dev/null
"$PY" "$SRC_DIR/tests/ref/mlp_data.py" "$OUT/mlp-data" 512 3

# shellcheck source=lib/run.sh
. "$SRC_DIR/tests/lib/run.sh"
train() {  # MODEL TAG NP PP DP SCHEDULE EXTRA...
    local model=$1 tag=$2 np=$3 pp=$4 dp=$5 sched=$6
    shift 6
    local args=(train --model "$OUT/$model.onnx" --pp "$pp" --dp "$dp" --schedule "$sched" --batch 16 --microbatches 4
                --steps 20 --optimizer adamw --lr 3e-3 --weight-decay 0.01 --clip-norm 1.0 --bucket-kb 4 --quiet
                --losses "$OUT/$tag.losses" --export "$OUT/$tag.onnx" "$@")
    run_onnxpipe "$tag" "$np" "${args[@]}"
}

for model in gpt mlp; do
    if [ $model = gpt ]; then extra=(--data "$OUT/text" --loss cross_entropy --logits logits --labels labels)
    else extra=(--data "$OUT/mlp-data"); fi
    train $model $model-ref 1 1 1 1f1b "${extra[@]}"
    cmp=()
    for layout in 1x1 2x1 4x1 2x2; do
        pp=${layout%x*} dp=${layout#*x}
        tag=$model-zbv-pp$pp-dp$dp
        train $model "$tag" $((pp * dp)) "$pp" "$dp" zb-v "${extra[@]}"
        [ "$dp" = 1 ] && cmp+=("$OUT/$tag.losses" "$OUT/$tag.onnx" "$model zb-v pp=$pp dp=$dp ($((2 * pp)) stages)")
    done
    echo "== $model: zb-v in 3 dp=1 layouts against the single-rank 1f1b run: equal"
    "$PY" "$SRC_DIR/tests/ref/compare_runs.py" 0 0 "$OUT/$model-ref.losses" "$OUT/$model-ref.onnx" "${cmp[@]}"
    echo "== $model: zb-v pp=2 dp=2 against the single-rank 1f1b run"
    "$PY" "$SRC_DIR/tests/ref/compare_runs.py" 1e-5 1e-4 "$OUT/$model-ref.losses" "$OUT/$model-ref.onnx" \
        "$OUT/$model-zbv-pp2-dp2.losses" "$OUT/$model-zbv-pp2-dp2.onnx" "$model zb-v pp=2 dp=2 (4 stages)"
done
