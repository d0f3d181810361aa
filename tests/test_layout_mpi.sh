#!/usr/bin/env bash
# Numerics do not depend on layout: the example GPT (tied embedding) and an MLP trained
# for 20 steps with (pp, dp) in {(1,1), (2,1), (1,2), (2,2), (4,1), (4,2)} x schedules
# {gpipe, 1f1b, interleaved, zb-h1} under mpirun:
# - dp=1: the single-rank per-step losses and final parameters, exactly (every layout adds
#   microbatches and the tied weight's uses in pp=1's order);
# - dp=2: the dp=2 single-stage run's, exactly (a sum of two replicas is the same in any
#   order), and the single-rank run's within 1e-5 relative (losses) and 1e-4 (parameters):
#   the all-reduce adds the replicas' sums where pp=1 adds microbatches one by one, and
#   AdamW divides each gradient element by its own running RMS, which turns the fp32
#   reordering noise of near-zero gradient elements into updates of a few percent of the
#   learning rate.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/layout
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null
"$ONNXPIPE" example mlp --in 16 --hidden 32,32,32 --classes 10 --loss -o "$OUT/mlp.onnx" >/dev/null
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
    cmp1=() cmp2=()
    for sched in gpipe 1f1b interleaved zb-h1; do
        for layout in 1x1 2x1 1x2 2x2 4x1 4x2; do
            pp=${layout%x*} dp=${layout#*x}
            tag=$model-$sched-pp$pp-dp$dp
            train $model "$tag" $((pp * dp)) "$pp" "$dp" "$sched" "${extra[@]}"
            if [ "$dp" = 1 ]; then cmp1+=("$OUT/$tag.losses" "$OUT/$tag.onnx" "$model $sched pp=$pp dp=$dp")
            else cmp2+=("$OUT/$tag.losses" "$OUT/$tag.onnx" "$model $sched pp=$pp dp=$dp"); fi
        done
    done
    echo "== $model: 12 dp=1 layouts against the single-rank run: equal"
    "$PY" "$SRC_DIR/tests/ref/compare_runs.py" 0 0 "$OUT/$model-ref.losses" "$OUT/$model-ref.onnx" "${cmp1[@]}"
    echo "== $model: 12 dp=2 layouts against dp=2 on one stage (1f1b): equal"
    "$PY" "$SRC_DIR/tests/ref/compare_runs.py" 0 0 "$OUT/$model-1f1b-pp1-dp2.losses" "$OUT/$model-1f1b-pp1-dp2.onnx" \
        "${cmp2[@]}"
    echo "== $model: 12 dp=2 layouts against the single-rank run"
    "$PY" "$SRC_DIR/tests/ref/compare_runs.py" 1e-5 1e-4 "$OUT/$model-ref.losses" "$OUT/$model-ref.onnx" "${cmp2[@]}"
done
