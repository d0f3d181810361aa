#!/usr/bin/env bash
# Failure under mpirun: a rank killed mid-training ends the whole job non-zero within
# 30 s; ranks given different options refuse to start and say which; pp x dp that is
# not the number of ranks is a clear error on every rank.
set -uo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/train-fail
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null || exit 1
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null || exit 1
common=(--model "$OUT/gpt.onnx" --data "$OUT/text" --batch 8 --microbatches 2 --loss cross_entropy --logits logits
        --labels labels)
fail=0
check() {  # DESCRIPTION CONDITION...
    if "${@:2}"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi
}

# 1. kill -9 one rank of a running pp=2 job
timeout 120 mpirun --oversubscribe --bind-to none -np 2 -x OPENBLAS_NUM_THREADS \
    "$ONNXPIPE" train "${common[@]}" --pp 2 --steps 100000 --quiet >"$OUT/kill.log" 2>&1 &
job=$!
victim=""
for _ in $(seq 1 100); do   # wait until both ranks train
    sleep 0.2
    pids=$(pgrep -f "^$ONNXPIPE train --model $OUT/gpt.onnx" | sort -n)   # ranks, not mpirun
    [ "$(echo "$pids" | grep -c .)" -ge 2 ] && { victim=$(echo "$pids" | tail -n 1); break; }
done
sleep 1
t0=$(date +%s.%N)
[ -n "$victim" ] && kill -9 "$victim"
wait $job
rc=$?
t1=$(date +%s.%N)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
echo "killed pid $victim; mpirun exited with $rc after ${secs} s"
tail -n 5 "$OUT/kill.log"
check "a killed rank ends the job non-zero" test -n "$victim" -a "$rc" -ne 0 -a "$rc" -ne 124
check "within 30 s" awk -v s="$secs" 'BEGIN { exit !(s < 30) }'
check "the message names the lost rank" grep -qiE "rank [01].*(exited|killed|signal)|process rank [01]" "$OUT/kill.log"

# 2. ranks started with different options refuse to start
timeout 120 mpirun --oversubscribe --bind-to none -np 1 "$ONNXPIPE" train "${common[@]}" --dp 2 --steps 2 --lr 1e-3 : \
    -np 1 "$ONNXPIPE" train "${common[@]}" --dp 2 --steps 2 --lr 2e-3 >"$OUT/mismatch.log" 2>&1
rc=$?
tail -n 3 "$OUT/mismatch.log"
check "different options: non-zero exit" test "$rc" -ne 0 -a "$rc" -ne 124
check "different options: the message names the rank" grep -q "rank 1 was given a different model or different options" "$OUT/mismatch.log"

# 3. pp x dp is not the number of ranks
timeout 120 mpirun --oversubscribe --bind-to none -np 3 "$ONNXPIPE" train "${common[@]}" --pp 2 --dp 1 --steps 2 \
    >"$OUT/size.log" 2>&1
rc=$?
tail -n 2 "$OUT/size.log"
check "pp x dp != ranks: non-zero exit" test "$rc" -ne 0 -a "$rc" -ne 124
check "pp x dp != ranks: says how to launch" grep -q "mpirun -np 2" "$OUT/size.log"
exit $fail
