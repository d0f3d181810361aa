#!/usr/bin/env bash
# Scale on paper: what the simulator predicts for one large job it cannot run here. A
# GPT-2-XL-sized model (L=48, D=1600, H=25, V=50257, T=1024: 1.56 G parameters) at
# pp=8 x dp=8 on 64 GPUs of 312 TFLOP/s (bf16) with 400 Gb/s links, global batch 512
# sequences (microbatch 1, so 64 microbatches per replica), for 1f1b, zb-h1 and zb-v: step
# time, bubble, tokens/s and the memory per rank from `onnxpipe schedule --model` (stage
# costs from the partition's FLOPs at the given rate, messages at the link rate, the
# data-parallel all-reduce of each stage's fp32 gradients as a ring over the dp replicas
# at the link rate). Rates at the nominal peak and at half of it (what a good kernel mix
# reaches), since the links' share of the step grows as compute gets faster.
# One JSON line per (schedule, rate). Usage: bench/paper.sh [BUILD_DIR]
# Env: PAPER_MODEL (an .onnx to use instead), PAPER_CACHE (where the model is kept).
#
# The model file: `onnxpipe example gpt` has no shapes-only mode and writes the weights
# (6.2 GB, about 2 minutes and 6.3 GB of memory, once); `schedule --model` reads only
# shapes, so the weights file is then replaced by a sparse file of the same size and the
# cache keeps 4 MB.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRC/build}
OP=$BUILD/onnxpipe
L=48 D=1600 H=25 V=50257 T=1024
PP=8 DP=8 BATCH=512 MB=1
GPU_GFLOPS=312000 LINK_GBPS=400
fail() { printf '{"bench": "paper", "error": "%s"}\n' "$1"; exit 1; }
[ -x "$OP" ] || fail "no onnxpipe at $OP (build first, or pass the build dir)"

cache=${PAPER_CACHE:-$HOME/.cache/onnxpipe/bench-models}
model=${PAPER_MODEL:-$cache/gpt-L$L-D$D-H$H-V$V-T$T-$("$OP" --version | tr -dc '0-9.').onnx}
if [ ! -f "$model" ]; then
    # written in a directory of its own, so the file's external-data location (its
    # basename) is already the final one
    tmp=$(dirname "$model")/tmp.$$
    mkdir -p "$tmp"
    f=$tmp/$(basename "$model")
    "$OP" example gpt --layers $L --d-model $D --heads $H --vocab $V --seq $T -o "$f" >/dev/null 2>&1 ||
        { rm -rf "$tmp"; fail "onnxpipe example gpt (GPT-2 XL size) failed: it needs 6.3 GB of memory and 6.2 GB of disk once"; }
    # shapes only from here on: the same external-data size, no bytes on disk
    size=$(stat -c %s "$f.data")
    rm -f "$f.data"
    truncate -s "$size" "$f.data"
    mv "$f.data" "$model.data" && mv "$f" "$model"
    rm -rf "$tmp"
fi

echo "{\"bench\": \"paper_machine\", \"model\": \"$model\", \"loadavg\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
LOSS=(--loss cross_entropy --logits logits --labels labels)
M=$((BATCH / (DP * MB)))
for frac in 1.0 0.5; do
    gflops=$(python3 -c "print($GPU_GFLOPS * $frac)")
    for kind in 1f1b zb-h1 zb-v; do
        sched=("$OP" schedule --model "$model" --batch $MB --pp $PP --microbatches $M --kind "$kind"
               --gflops "$gflops" --link-gbps $((LINK_GBPS / 8)) --precision bf16 "${LOSS[@]}" --json)
        first=$("${sched[@]}" 2>&1) || { printf '{"bench": "paper", "schedule": "%s", "error": "%s"}\n' "$kind" \
            "$(printf '%s' "$first" | tail -c 300 | tr '\n"\\' '   ')"; continue; }
        # ring all-reduce of the largest stage's fp32 gradients over dp replicas at the link rate
        ar=$(printf '%s' "$first" | python3 -c "
import json, sys
d = json.load(sys.stdin)
g = max(s['grads_bytes'] for s in d['memory_estimate']['stages'])
print(2 * ($DP - 1) / $DP * g / ($LINK_GBPS / 8 * 1e9))")
        "${sched[@]}" --allreduce "$ar" 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
m = d['memory_estimate']
gib = lambda b: round(b / 2**30, 2)
step = d['makespan_s']
print(json.dumps({
    'bench': 'paper', 'model': 'gpt L=$L D=$D H=$H V=$V T=$T (GPT-2 XL size)', 'params': $((V * D + T * D + L * (12 * D * D + 13 * D) + 2 * D)),
    'layout': 'pp=$PP x dp=$DP on 64 GPUs', 'schedule': d['kind'], 'chunks': d['chunks'],
    'gpu_tflops_bf16': $GPU_GFLOPS / 1000, 'rate_fraction_of_peak': $frac, 'link_gbit_s': $LINK_GBPS,
    'global_batch': $BATCH, 'microbatch': $MB, 'microbatches_per_replica': $M,
    'allreduce_s': round($ar, 4), 'step_s': round(step, 4), 'bubble': round(d['bubble'], 4),
    'closed_form_bubble': round(d['closed_form_bubble'], 4), 'tokens_per_s': round($BATCH * $T / step),
    # model FLOPs (3 x the forward products: 2·12·L·D² + 2·2·L·T·D + 2·D·V per token) over the GPUs' peak
    'model_flops_utilization': round(3 * (24 * $L * $D**2 + 4 * $L * $T * $D + 2 * $D * $V) * $BATCH * $T / step
                                     / ($PP * $DP * $GPU_GFLOPS * 1e9), 3),
    'memory_gib_per_rank': [gib(r['total_bytes']) for r in m['ranks']],
    'stash_gib_per_stage': [gib(s['stash_bytes']) for s in m['stages']],
    'memory_note': 'planned with the cpu kernels (this build has no CUDA): parameters, gradients and AdamW state fp32, activations bf16, no recompute',
    'costs': 'F from the partition FLOPs at the rate, B = W = F; messages at the link rate; the all-reduce after each stage\\'s last backward counts as idle in the bubble',
}))"
    done
done
