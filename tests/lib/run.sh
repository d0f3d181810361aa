# Sourced by the tests. run_onnxpipe TAG NP ARGS...: `onnxpipe ARGS` on one process
# (NP = 1) or under `mpirun -np NP`, its output in $OUT/TAG.log; a failure prints the log
# and ends the test.
run_onnxpipe() {
    local tag=$1 np=$2
    shift 2
    if [ "$np" = 1 ]; then
        "$ONNXPIPE" "$@" >"$OUT/$tag.log" 2>&1
    else
        timeout 300 mpirun --oversubscribe --bind-to none -np "$np" -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT \
            "$ONNXPIPE" "$@" >"$OUT/$tag.log" 2>&1
    fi || { echo "FAILED: $tag"; cat "$OUT/$tag.log"; exit 1; }
}

# refused EXPECTED_TEXT COMMAND...: the command fails (its output in $OUT/refused.log) and
# says EXPECTED_TEXT; else the test ends.
refused() {  # EXPECTED_TEXT COMMAND...: fails (exit 1) and says EXPECTED_TEXT
    local want=$1
    shift
    if "$@" >"$OUT/refused.log" 2>&1; then echo "FAILED: accepted: $*"; exit 1; fi
    grep -q -- "$want" "$OUT/refused.log" || { echo "FAILED: no '$want' in:"; cat "$OUT/refused.log"; exit 1; }
    echo "  refused: $(grep -m1 'error' "$OUT/refused.log")"
}
