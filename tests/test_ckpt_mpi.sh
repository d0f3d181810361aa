#!/usr/bin/env bash
# Checkpoints under mpirun (ckpt/, train --save/--resume, onnxpipe ckpt):
# - resume with the same layout (pp 2 x dp 2) is bitwise the uninterrupted run: losses
#   and exported weights; resume with other layouts ((1,1) with 2 microbatches, (4,1)
#   zb-h1, (2,1) interleaved) continues within 1e-5 relative (weights 1e-4, as in
#   test_layout_mpi); on the example GPT (tied embedding, cosine LR with warmup, clipping)
#   an MLP (SGD with Nesterov momentum), and a PyTorch export of an MLP with BatchNorm in
#   training mode (its running statistics are checkpointed and exported; no other layout,
#   since batch statistics depend on the microbatch, as in PyTorch);
# - the shards open in safetensors, and `ckpt export` equals `train --export` in onnxruntime;
# - a flipped byte, a truncated or deleted shard, another model: refused naming the file;
# - a full disk (file size limit) fails clearly and leaves the previous checkpoint whole;
# - 4 SIGKILLs of a rank at random moments of a --save-every 1 run (0 to 3 s after the
#   start: before the first save, during a save, between saves; the 4 of the fixed seed hit
#   each, as 8 did): each time `latest` names a checkpoint that verifies and --resume auto
#   goes on.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/ckpt
umount "$OUT/disk" 2>/dev/null || true   # a killed run's tmpfs
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null
"$ONNXPIPE" example mlp --in 16 --hidden 32,32 --classes 10 --loss -o "$OUT/mlp.onnx" >/dev/null
"$ONNXPIPE" example mlp --in 16 --hidden 32,48 --classes 10 --loss -o "$OUT/other.onnx" >/dev/null
"$PY" "$SRC_DIR/tests/ref/mlp_data.py" "$OUT/mlp-data" 512 5
"$PY" - "$OUT/mlp-data" <<'PYEOF'
import os, sys
d = sys.argv[1]
import warnings
warnings.filterwarnings("ignore")
import torch
import torch.nn as nn
import torch.nn.functional as F
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.body = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 32),
                               nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 10))
    def forward(s, x, labels):
        return F.cross_entropy(s.body(x), labels)
torch.manual_seed(0)
torch.onnx.export(M().train(), (torch.randn(4, 16), torch.zeros(4, dtype=torch.int64)),
                  os.path.join(os.path.dirname(d), "bn.onnx"), input_names=["x", "labels"], output_names=["loss"],
                  opset_version=17, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  dynamic_axes={"x": {0: "batch"}, "labels": {0: "batch"}})
PYEOF

# shellcheck source=lib/run.sh
. "$SRC_DIR/tests/lib/run.sh"
run() {  # TAG NP ARGS...: onnxpipe train, alone or under mpirun
    local tag=$1 np=$2
    shift 2
    run_onnxpipe "$tag" "$np" train "$@"
}

for model in gpt mlp bn; do
    if [ $model = gpt ]; then
        m=(--model "$OUT/gpt.onnx" --data "$OUT/text" --loss cross_entropy --logits logits --labels labels
           --optimizer adamw --lr 3e-3 --weight-decay 0.01 --lr-schedule cosine --warmup 3 --clip-norm 1.0)
    elif [ $model = mlp ]; then
        m=(--model "$OUT/mlp.onnx" --data "$OUT/mlp-data" --optimizer sgd --lr 0.05 --momentum 0.9 --nesterov)
    else
        m=(--model "$OUT/bn.onnx" --data "$OUT/mlp-data" --optimizer adam --lr 0.01)
    fi
    m+=(--batch 16 --steps 10 --quiet --bucket-kb 4)
    # the GPT saves synchronously; the MLP is written by 2 replicas x 4 interleaved stages
    if [ $model = mlp ]; then lay=(--schedule interleaved); else lay=(--schedule 1f1b); fi
    sync=(); [ $model = gpt ] && sync=(--save-sync)
    ck=$OUT/$model-ck
    # the uninterrupted run saves at steps 5 and 10
    run $model-ref 4 "${m[@]}" --pp 2 --dp 2 --microbatches 4 "${lay[@]}" "${sync[@]}" --save "$ck" --save-every 5 \
        --losses "$OUT/$model-ref.losses" --export "$OUT/$model-ref.onnx"
    tail -n 5 "$OUT/$model-ref.losses" >"$OUT/$model-ref-tail.losses"
    test "$(cat "$ck/latest")" = step-10
    "$ONNXPIPE" ckpt verify "$ck/step-5"
    # same layout from step 5: bitwise
    run $model-same 4 "${m[@]}" --pp 2 --dp 2 --microbatches 4 "${lay[@]}" --resume "$ck/step-5" \
        --losses "$OUT/$model-same.losses" --export "$OUT/$model-same.onnx"
    cmp "$OUT/$model-ref-tail.losses" "$OUT/$model-same.losses"
    cmp "$OUT/$model-ref.onnx" "$OUT/$model-same.onnx"
    echo "== $model: resumed at step 5 with the same layout: losses of steps 6-10 and the exported model are bitwise equal"
    [ $model = bn ] || {
    cmp_args=()
    for layout in "1 1 1f1b 2" "4 1 zb-h1 4" "2 1 interleaved 4"; do
        read -r pp dp sched mbs <<<"$layout"
        tag=$model-pp$pp-dp$dp-$sched
        run "$tag" $((pp * dp)) "${m[@]}" --pp "$pp" --dp "$dp" --schedule "$sched" --microbatches "$mbs" \
            --resume "$ck/step-5" --losses "$OUT/$tag.losses" --export "$OUT/$tag.onnx"
        cmp_args+=("$OUT/$tag.losses" "$OUT/$tag.onnx" "$model resumed pp=$pp dp=$dp $sched mb=$mbs")
    done
    echo "== $model: resumed at step 5 (written with pp 2 x dp 2) on other layouts, steps 6-10"
    "$PY" "$SRC_DIR/tests/ref/compare_runs.py" 1e-5 1e-4 "$OUT/$model-ref-tail.losses" "$OUT/$model-ref.onnx" "${cmp_args[@]}"
    }
    "$ONNXPIPE" ckpt export "$ck/step-10" --model "$OUT/$model.onnx" -o "$OUT/$model-ckpt.onnx" >/dev/null
    "$PY" "$SRC_DIR/tests/ref/check_ckpt.py" "$ck/step-10" "$OUT/$model-ref.onnx" "$OUT/$model-ckpt.onnx"
done

echo "== corrupt checkpoints are refused with the file named"
good=$OUT/gpt-ck/step-5 bad=$OUT/bad
g=(--model "$OUT/gpt.onnx" --data "$OUT/text" --loss cross_entropy --logits logits --labels labels --batch 16 --steps 6 --quiet)
shard=shard-s001-r000.safetensors
rm -rf "$bad" && cp -r "$good" "$bad"
printf 'Z' | dd of="$bad/$shard" bs=1 seek=$(( $(stat -c%s "$bad/$shard") - 7 )) conv=notrunc status=none
refused "$shard': tensor" "$ONNXPIPE" ckpt verify "$bad"
refused "fails its checksum" "$ONNXPIPE" train "${g[@]}" --resume "$bad"
rm -rf "$bad" && cp -r "$good" "$bad" && truncate -s 1000 "$bad/$shard"
refused "truncated" "$ONNXPIPE" ckpt verify "$bad"
rm -rf "$bad" && cp -r "$good" "$bad" && rm "$bad/$shard"
refused "$shard" "$ONNXPIPE" ckpt verify "$bad"
refused "another model" "$ONNXPIPE" ckpt export "$OUT/mlp-ck/step-10" --model "$OUT/other.onnx" -o "$OUT/x.onnx"
refused "another model" "$ONNXPIPE" train --model "$OUT/other.onnx" --data "$OUT/mlp-data" --batch 16 --steps 12 \
    --optimizer sgd --momentum 0.9 --resume "$OUT/mlp-ck/step-10" --quiet
refused "pass --seed 0" "$ONNXPIPE" train "${g[@]}" --seed 3 --resume "$good"
refused "optimizer sgd" "$ONNXPIPE" train --model "$OUT/mlp.onnx" --data "$OUT/mlp-data" --batch 16 --steps 12 \
    --optimizer adam --resume "$OUT/mlp-ck/step-10" --quiet

echo "== a full disk (a 600 KiB tmpfs) fails the save clearly and keeps the last checkpoint"
disk=$OUT/disk
mkdir -p "$disk"
if mount -t tmpfs -o size=600k tmpfs "$disk" 2>/dev/null; then
    trap 'umount "$disk" 2>/dev/null || true' EXIT
    cp -r "$OUT/gpt-ck/step-5" "$disk/" && echo step-5 >"$disk/latest"
    if "$ONNXPIPE" train "${g[@]}" --steps 8 --save "$disk" --save-every 1 --resume auto >"$OUT/disk.log" 2>&1; then
        echo "FAILED: a save onto a full disk succeeded"; exit 1
    fi
    grep -m1 "error" "$OUT/disk.log"
    grep -q "checkpoint step [67]: cannot write '.*safetensors': No space left on device" "$OUT/disk.log"
    test "$(cat "$disk/latest")" = step-5
    "$ONNXPIPE" ckpt verify "$disk/step-5"
else
    echo "  (skipped: this machine cannot mount a tmpfs)"
fi

echo "== 4 SIGKILLs of a rank during --save-every 1 training: each time latest verifies and resume goes on"
crash=$OUT/crash
RANDOM=17
c=(--model "$OUT/gpt.onnx" --data "$OUT/text" --loss cross_entropy --logits logits --labels labels --batch 8
   --microbatches 2 --pp 2 --steps 100000 --quiet --save "$crash" --save-every 1 --keep 3 --resume auto)
for i in $(seq 1 4); do
    timeout 120 mpirun --oversubscribe --bind-to none -np 2 -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT \
        "$ONNXPIPE" train "${c[@]}" >"$OUT/crash-$i.log" 2>&1 &
    job=$!
    sleep "0.$((RANDOM % 9 + 1))$((RANDOM % 10))"
    sleep $((i % 3))
    pids=($(pgrep -f -- "--save $crash" | grep -v "^$job\$" || true))
    ranks=()
    for p in "${pids[@]}"; do [ "$(ps -o comm= -p "$p" 2>/dev/null)" = onnxpipe ] && ranks+=("$p"); done
    [ ${#ranks[@]} -gt 0 ] && kill -9 "${ranks[$((RANDOM % ${#ranks[@]}))]}" 2>/dev/null || true
    wait "$job" 2>/dev/null || true
    if [ -f "$crash/latest" ]; then
        latest=$(cat "$crash/latest")
        "$ONNXPIPE" ckpt verify "$crash/$latest" >/dev/null || { echo "FAILED: kill $i: $latest does not verify"; exit 1; }
        echo "  kill $i: latest $latest verifies ($(ls "$crash" | tr '\n' ' '))"
    else
        echo "  kill $i: before the first checkpoint"
    fi
done
latest=$(cat "$crash/latest")
n=${latest#step-}
final=()
for a in "${c[@]}"; do [ "$a" = --quiet ] || final+=("${a/100000/$((n + 3))}"); done
timeout 120 mpirun --oversubscribe --bind-to none -np 2 -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT \
    "$ONNXPIPE" train "${final[@]}" >"$OUT/crash-final.log" 2>&1 || { cat "$OUT/crash-final.log"; exit 1; }
grep -q "resumed from '$crash/$latest': step $n" "$OUT/crash-final.log" || { cat "$OUT/crash-final.log"; exit 1; }
test "$(cat "$crash/latest")" = "step-$((n + 3))"
"$ONNXPIPE" ckpt verify "$crash/step-$((n + 3))"
echo "resumed from $latest and trained to step $((n + 3)); ckpt list:"
"$ONNXPIPE" ckpt list "$crash"
