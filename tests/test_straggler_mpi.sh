#!/usr/bin/env bash
# --straggler-warn: a pp=2 job where one rank sleeps 100 ms per microbatch it feeds
# (PP_DEBUG_SLOW_RANK, 2 microbatches: 200 ms a step it is busy, not waiting; 40x the
# other stage's busy time when the machine is quiet; 50 ms a microbatch once fell under
# the 8x while the rest of the ASan suite ran beside it) names that rank, rank 0 or rank 1
# in turn, in the progress line, the --metrics JSON and TensorBoard, with a median busy
# time of at least the 200 ms injected; the same job without the delay names no one at
# the same factor.
set -uo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/straggler
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null || exit 1
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null || exit 1
fail=0
check() {  # DESCRIPTION CONDITION...
    if "${@:2}"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi
}
run() {  # TAG [SLOW]
    timeout 120 mpirun --oversubscribe --bind-to none -np 2 -x OPENBLAS_NUM_THREADS ${2:+-x PP_DEBUG_SLOW_RANK=$2} \
        "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/text" --loss cross_entropy --logits logits \
        --labels labels --batch 8 --microbatches 2 --pp 2 --steps 16 --straggler-warn 8 \
        --metrics "$OUT/$1.jsonl" --logdir "$OUT/$1-tb" >"$OUT/$1.log" 2>&1
}
for slow in 0 1; do
    run "slow$slow" "$slow:0.1"
    check "rank $slow slow: the job ran" test $? -eq 0
    grep "step 16/" "$OUT/slow$slow.log"
    check "rank $slow slow: the progress line names it" grep -q "step 16/16.*straggler rank $slow " "$OUT/slow$slow.log"
    check "rank $slow slow: --metrics names it, its median busy time >= the 0.2 s injected" "$PY" - "$OUT/slow$slow.jsonl" "$slow" <<'PYEOF'
import json, sys
last = [json.loads(l) for l in open(sys.argv[1])][-1]
print("  last metrics: straggler_rank %s, ratio %.1f, busy %.4f s, peers' median %.4f s" % (
    last["straggler_rank"], last["straggler_ratio"], last["straggler_busy_s"], last["straggler_peers_median_s"]))
sys.exit(not (last["straggler_rank"] == int(sys.argv[2]) and last["straggler_busy_s"] >= 0.2))
PYEOF
    check "rank $slow slow: TensorBoard has pipeline/straggler_rank" grep -qa "pipeline/straggler_rank" "$OUT/slow$slow-tb"/events.*
done
run fair
check "no delay: the job ran" test $? -eq 0
check "no delay: no straggler named" bash -c "! grep -q 'straggler rank' '$OUT/fair.log' && ! grep -q '\"straggler_rank\":[0-9]' '$OUT/fair.jsonl'"
grep "step 16/" "$OUT/fair.log"
exit $fail
