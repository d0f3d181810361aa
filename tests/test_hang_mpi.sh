#!/usr/bin/env bash
# A hang names its culprit: in a pp=2 x dp=2 job with PP_COMM_TIMEOUT=5, (1) rank 1 is
# stopped (kill -STOP) mid-training, with --save (the status board in ck/.status); (2)
# rank 0 sleeps 30 s in its first microbatch (PP_DEBUG_SLOW_RANK: stuck in compute),
# without --save (the board in /dev/shm). Each job must end within 30 s of the hang, and
# its error must name the rank that never arrived and what it last did, beside each
# waiting rank's own wait; (3) a job that ends well leaves no board behind.
set -uo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/hang
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null || exit 1
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null || exit 1
common=(--model "$OUT/gpt.onnx" --data "$OUT/text" --batch 8 --microbatches 2 --loss cross_entropy --logits logits
        --labels labels --quiet)
fail=0
check() {  # DESCRIPTION CONDITION...
    if "${@:2}"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi
}
rank_pid() {  # RANK: the pid of that rank of the job on $OUT's model, or nothing
    for p in $(pgrep -f "^$ONNXPIPE train --model $OUT/gpt.onnx"); do
        [ "$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')" = "$1" ] && echo "$p"
    done
}
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
# the board of a job without --save, named in its report, is litter once it was killed
clean_board() { grep -o "status board /dev/shm/onnxpipe-status-[0-9a-f]*" "$1" | sort -u | cut -d' ' -f3 | xargs -r rm -rf; }

# 1. rank 1 stopped
timeout 120 mpirun --oversubscribe --bind-to none -np 4 -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT=5 \
    "$ONNXPIPE" train "${common[@]}" --pp 2 --dp 2 --steps 100000 --save "$OUT/ck" --save-every 100000 \
    >"$OUT/stop.log" 2>&1 &
job=$!
victim=""
for _ in $(seq 1 100); do   # until rank 1 trains (its record exists)
    sleep 0.2
    victim=$(rank_pid 1)
    [ -n "$victim" ] && [ -e "$OUT/ck/.status/rank-1" ] && break
done
sleep 1
t0=$(date +%s.%N)
[ -n "$victim" ] && kill -STOP "$victim"
wait $job
rc=$?
secs=$(elapsed "$t0")
[ -n "$victim" ] && kill -9 "$victim" 2>/dev/null
echo "stopped rank 1 (pid $victim); mpirun exited with $rc after $secs s; the report:"
grep -E "error: (\[rank [0-9]\] |  rank|the job)" "$OUT/stop.log" | grep -v "^\[rank 1\]" | head -n 20
check "stopped rank: the job ends non-zero" test -n "$victim" -a "$rc" -ne 0 -a "$rc" -ne 124
check "stopped rank: within 30 s" awk -v s="$secs" 'BEGIN { exit !(s < 30) }'
check "stopped rank: a waiting rank names rank 1 as the culprit, stopped, with its last completed action" \
    grep -Eq "rank 1 never arrived: its last completed action was [0-9A-Z_]+ of step [0-9]+, [0-9.]+ s ago.*its process $victim .* is stopped" "$OUT/stop.log"
check "stopped rank: the report gives the waiting ranks' own waits" \
    grep -Eq "rank [023] \(pid [0-9]+ on .*waiting [0-9.]+ s for (recv|send|allreduce|allgather|broadcast)" "$OUT/stop.log"

# 2. rank 0 stuck in compute (30 s in its first microbatch), no --save
t0=$(date +%s.%N)
timeout 120 mpirun --oversubscribe --bind-to none -np 4 -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT=5 \
    -x PP_DEBUG_SLOW_RANK=0:30 "$ONNXPIPE" train "${common[@]}" --pp 2 --dp 2 --steps 4 --straggler-warn 100 \
    >"$OUT/slow.log" 2>&1
rc=$?
secs=$(elapsed "$t0")
clean_board "$OUT/slow.log"
echo "rank 0 asleep in compute; mpirun exited with $rc after $secs s; the verdicts:"
grep -A1 "error: \[rank" "$OUT/slow.log" | grep -v "^--" | head -n 8
check "stuck rank: the job ends non-zero before the 30 s sleep ends" \
    bash -c "[ $rc -ne 0 ] && [ $rc -ne 124 ] && awk -v s=$secs 'BEGIN { exit !(s < 30) }'"
check "stuck rank: a waiting rank names rank 0, running its first forward, not waiting" \
    grep -Eq "rank 0 never arrived: it completed no step action yet; it has been running 0F0 for [0-9.]+ s; it is not waiting for anything" "$OUT/slow.log"
check "stuck rank: its board was in /dev/shm" grep -q "status board /dev/shm/onnxpipe-status-" "$OUT/slow.log"

# 3. a job that ends well removes its records
timeout 120 mpirun --oversubscribe --bind-to none -np 2 -x OPENBLAS_NUM_THREADS \
    "$ONNXPIPE" train "${common[@]}" --pp 2 --steps 2 --save "$OUT/ck2" >"$OUT/ok.log" 2>&1
rc=$?
check "a clean job: runs and leaves no $OUT/ck2/.status" test "$rc" -eq 0 -a ! -e "$OUT/ck2/.status"
exit $fail
