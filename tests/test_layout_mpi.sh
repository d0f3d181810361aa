#!/usr/bin/env bash
# Numerics do not depend on layout: the example GPT (tied embedding) and an MLP trained
# for 20 steps under mpirun, every schedule {gpipe, 1f1b, interleaved, zb-h1} at pp 2 x dp 2
# and two of them at pp 4 x dp 2 for each model (the MLP gpipe and 1f1b, the GPT interleaved
# and zb-h1: each schedule at 8 ranks once), and the MLP at pp 2 (gpipe) and pp 4 (zb-h1):
# - dp=1: the single-rank per-step losses and final parameters, exactly (every layout adds
#   microbatches and the tied weight's uses in pp=1's order);
# - dp=2: the dp=2 single-stage run's, exactly (a sum of two replicas is the same in any
#   order), and the single-rank run's within 1e-5 relative (losses) and 1e-4 (parameters):
#   the all-reduce adds the replicas' sums where pp=1 adds microbatches one by one, and
#   AdamW divides each gradient element by its own running RMS, which turns the fp32
#   reordering noise of near-zero gradient elements into updates of a few percent of the
#   learning rate.
# The GPT's dp=1 pipelines (every schedule at pp 2 and 4) are test_bitwise_layout_mpi's,
# byte for byte, and so are pipelines of a PyTorch export with its own loss at pp 4 1f1b,
# pp 2 interleaved and pp 3 zb-v: here dp=1 keeps the MLP's two that it lacks
# (docs/tests.md, "What moved for time").
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
    if [ $model = gpt ]; then
        extra=(--data "$OUT/text" --loss cross_entropy --logits logits --labels labels)
        runs=(interleaved:4x2 zb-h1:4x2)
    else
        extra=(--data "$OUT/mlp-data")
        runs=(gpipe:2x1 zb-h1:4x1 gpipe:4x2 1f1b:4x2)
    fi
    runs+=(gpipe:2x2 1f1b:2x2 interleaved:2x2 zb-h1:2x2)
    train $model $model-ref 1 1 1 1f1b "${extra[@]}"
    train $model $model-1f1b-pp1-dp2 2 1 2 1f1b "${extra[@]}"
    cmp1=() cmp2=()
    for r in "${runs[@]}"; do
        sched=${r%%:*} layout=${r#*:}
        pp=${layout%x*} dp=${layout#*x}
        tag=$model-$sched-pp$pp-dp$dp
        train $model "$tag" $((pp * dp)) "$pp" "$dp" "$sched" "${extra[@]}"
        if [ "$dp" = 1 ]; then cmp1+=("$OUT/$tag.losses" "$OUT/$tag.onnx" "$model $sched pp=$pp dp=$dp")
        else cmp2+=("$OUT/$tag.losses" "$OUT/$tag.onnx" "$model $sched pp=$pp dp=$dp"); fi
    done
    if ((${#cmp1[@]})); then
        echo "== $model: $((${#cmp1[@]} / 3)) dp=1 layouts against the single-rank run: equal"
        "$PY" "$SRC_DIR/tests/ref/compare_runs.py" 0 0 "$OUT/$model-ref.losses" "$OUT/$model-ref.onnx" "${cmp1[@]}"
    fi
    echo "== $model: $((${#cmp2[@]} / 3)) dp=2 layouts against dp=2 on one stage (1f1b): equal"
    "$PY" "$SRC_DIR/tests/ref/compare_runs.py" 0 0 "$OUT/$model-1f1b-pp1-dp2.losses" "$OUT/$model-1f1b-pp1-dp2.onnx" \
        "${cmp2[@]}"
    echo "== $model: the dp=2 layouts against the single-rank run"
    "$PY" "$SRC_DIR/tests/ref/compare_runs.py" 1e-5 1e-4 "$OUT/$model-ref.losses" "$OUT/$model-ref.onnx" \
        "$OUT/$model-1f1b-pp1-dp2.losses" "$OUT/$model-1f1b-pp1-dp2.onnx" "$model 1f1b pp=1 dp=2" "${cmp2[@]}"
done
