#!/usr/bin/env bash
# Layout independence on GPUs (label gpu; exits 77, skipped, where no GPU answers): the
# example GPT (tied embedding) trained for 20 steps with --device cuda, one rank per GPU,
# NCCL carrying activations, gradients and the data-parallel all-reduce, gives the
# per-step losses and final parameters of the single-rank cpu run. TF32 is off
# (NVIDIA_TF32_OVERRIDE=0) so both sides compute in fp32 and differ by summation order
# only; SGD with momentum keeps that noise from being amplified (AdamW would divide
# near-zero gradient elements by their own RMS). Layouts: every schedule on one GPU (one
# rank holds every virtual stage of the interleaved one), then pp=2, dp=2 and pp=2 x
# dp=2 where the host has the GPUs for them. PP_TEXT_FILE: the training text (default
# GPL-3; scripts/gpu-check.sh passes its bundled copy on hosts that lack it).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/layout-cuda
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
export NVIDIA_TF32_OVERRIDE=0
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text "${PP_TEXT_FILE:-/usr/share/common-licenses/GPL-3}" -o "$OUT/text" --seq 16 >/dev/null

train() {  # TAG DEVICE NP PP DP SCHEDULE EXTRA...
    local tag=$1 device=$2 np=$3 pp=$4 dp=$5 sched=$6
    shift 6
    local args=(train --model "$OUT/gpt.onnx" --data "$OUT/text" --loss cross_entropy --logits logits --labels labels
                --device "$device" --pp "$pp" --dp "$dp" --schedule "$sched" --batch 16 --microbatches 4 --steps 20
                --optimizer sgd --momentum 0.9 --lr 0.05 --clip-norm 1.0 --bucket-kb 4 --quiet
                --losses "$OUT/$tag.losses" --export "$OUT/$tag.onnx" "$@")
    timeout 600 mpirun --oversubscribe --bind-to none -np "$np" -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT \
        -x NVIDIA_TF32_OVERRIDE "$ONNXPIPE" "${args[@]}" >"$OUT/$tag.log" 2>&1
}

# skipped only where no GPU answers; any other failure of the probe is a failure
if ! train probe cuda 1 1 1 gpipe --steps 1; then
    if grep -qE "no CUDA device|not compiled into this build" "$OUT/probe.log"; then
        echo "skipped: $(grep -m1 error "$OUT/probe.log")"
        exit 77
    fi
    cat "$OUT/probe.log"
    exit 1
fi
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "$gpus" -ge 1 ] || gpus=1   # the probe ran on one, whatever nvidia-smi says
echo "GPUs on this host: $gpus"

train ref cpu 1 1 1 1f1b || { cat "$OUT/ref.log"; exit 1; }
cmp=()
layouts=(1x1)
[ "$gpus" -ge 2 ] && layouts+=(2x1 1x2)
[ "$gpus" -ge 4 ] && layouts+=(2x2)
for layout in "${layouts[@]}"; do
    pp=${layout%x*} dp=${layout#*x}
    for sched in gpipe 1f1b interleaved zb-h1; do
        tag=cuda-$sched-pp$pp-dp$dp
        train "$tag" cuda $((pp * dp)) "$pp" "$dp" "$sched" || { echo "FAILED: $tag"; cat "$OUT/$tag.log"; exit 1; }
        cmp+=("$OUT/$tag.losses" "$OUT/$tag.onnx" "cuda $sched pp=$pp dp=$dp")
    done
done
echo "== GPT on cuda (NCCL), ${#layouts[@]} layouts x 4 schedules, against the single-rank cpu run"
"$PY" "$SRC_DIR/tests/ref/compare_runs.py" 1e-4 1e-4 "$OUT/ref.losses" "$OUT/ref.onnx" "${cmp[@]}"
