#!/usr/bin/env bash
# The main job (README, `make run`): build the example GPT, tokenize a text every Debian
# machine carries, preview the partition, and train it with mpirun on 4 ranks
# (pp=2 x dp=2) on the CPU, the loss falling step by step.
set -euo pipefail
BUILD=${1:-build}
OP=$BUILD/onnxpipe
OUT=${OUT:-out}
STEPS=${STEPS:-50}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
"$OP" example gpt --layers 4 --d-model 256 --heads 4 --vocab 256 --seq 128 -o "$OUT/gpt.onnx"
"$OP" data text /usr/share/common-licenses/GPL-3 -o "$OUT/gpl3" --seq 128
echo
echo "== partition preview: onnxpipe partition $OUT/gpt.onnx --stages 2 --batch 4 --microbatches 4"
"$OP" partition "$OUT/gpt.onnx" --stages 2 --batch 4 --microbatches 4
echo
echo "== training: mpirun -np 4 onnxpipe train --pp 2 --dp 2 (1f1b, 4 microbatches of 4 per replica)"
mpirun --oversubscribe --bind-to none -np 4 -x OPENBLAS_NUM_THREADS \
    "$OP" train --model "$OUT/gpt.onnx" --data "$OUT/gpl3" --pp 2 --dp 2 --schedule 1f1b \
    --batch 32 --microbatches 4 --steps "$STEPS" --optimizer adamw --lr 1e-3 --warmup 10 \
    --lr-schedule cosine --min-lr 1e-4 --weight-decay 0.01 --clip-norm 1.0 \
    --loss cross_entropy --logits logits --labels labels --export "$OUT/gpt-trained.onnx"
