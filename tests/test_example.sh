#!/usr/bin/env bash
# `onnxpipe example gpt|mlp`: writes models that pass onnx.checker, hold the closed-form
# parameter count and the documented seeded weights, and compute what PyTorch computes
# (tests/ref/example_check.py); bad arguments exit non-zero with a clear message.
set -euo pipefail
: "${ONNXPIPE:?}" "${BUILD_DIR:?}" "${SRC_DIR:?}" "${PY:?}"
OUT="$BUILD_DIR/test-out/example"
mkdir -p "$OUT"
CHECK="$SRC_DIR/tests/ref/example_check.py"

# Builds with the CLI, then checks with the same arguments: gen NAME MODEL ARGS...
gen() {
    local name=$1 model=$2
    shift 2
    echo "--- onnxpipe example $model $* -o $OUT/$name.onnx"
    local summary
    summary=$("$ONNXPIPE" example "$model" "$@" -o "$OUT/$name.onnx")
    echo "$summary"
    # the parameter count onnxpipe itself found in the graph it built
    local nparams=${summary#*nodes, }
    "$PY" "$CHECK" "$model" "$OUT/$name.onnx" "$@" --summary-params "${nparams%% parameters*}"
}

gen gpt_op17 gpt --layers 2 --d-model 64 --heads 4 --vocab 128 --seq 16
gen gpt_op17_loss gpt --layers 2 --d-model 64 --heads 4 --vocab 128 --seq 16 --loss --seed 5
gen gpt_op13_loss gpt --layers 2 --d-model 32 --heads 2 --vocab 64 --seq 8 --batch 2 --opset 13 --loss --seed 7
gen gpt_op21 gpt --layers 1 --d-model 16 --heads 1 --vocab 16 --seq 4 --batch 1 --opset 21
gen gpt_default gpt --loss
gen mlp mlp --in 8 --hidden 16,16 --classes 5
gen mlp_loss mlp --in 12 --hidden 32 --classes 7 --batch 4 --seed 3 --loss --opset 13

# Same seed, same bytes; another seed, other weights.
"$ONNXPIPE" example gpt --layers 2 --d-model 64 --heads 4 --vocab 128 --seq 16 -o "$OUT/again.onnx" >/dev/null
cmp "$OUT/gpt_op17.onnx" "$OUT/again.onnx"
"$ONNXPIPE" example gpt --layers 2 --d-model 64 --heads 4 --vocab 128 --seq 16 --seed 1 -o "$OUT/seed1.onnx" >/dev/null
if cmp -s "$OUT/gpt_op17.onnx" "$OUT/seed1.onnx"; then echo "FAIL: --seed 1 wrote the same file"; exit 1; fi
echo "ok   same seed writes identical files, another seed does not"

# Bad arguments: exit code 2 and a message naming the problem.
expect_error() {
    local want=$1
    shift
    local rc=0 msg
    msg=$("$ONNXPIPE" example "$@" 2>&1 >/dev/null) || rc=$?
    if [[ $rc -eq 0 || $msg != *"$want"* ]]; then
        echo "FAIL: onnxpipe example $* exited $rc with '$msg' (expected non-zero and '$want')"
        exit 1
    fi
    echo "ok   example $* -> exit $rc: ${msg%%$'\n'*}"
}
expect_error "not divisible by --heads" gpt --d-model 100 --heads 3 -o "$OUT/x.onnx"
expect_error "--layers expects an integer in 1.." gpt --layers 0 -o "$OUT/x.onnx"
expect_error "--vocab expects an integer" gpt --vocab abc -o "$OUT/x.onnx"
expect_error "--opset expects an integer in 13..21" gpt --opset 12 -o "$OUT/x.onnx"
expect_error "no output file" gpt
expect_error "no output file" mlp --in 4
expect_error "--hidden expects an integer" mlp --hidden 16,0 -o "$OUT/x.onnx"
expect_error "unknown option '--bogus'" mlp --bogus -o "$OUT/x.onnx"
expect_error "unknown example 'cnn'" cnn
expect_error "-o needs a value" gpt -o
"$ONNXPIPE" example gpt --help | grep -- "--d-model" >/dev/null && echo "ok   example gpt --help"
"$ONNXPIPE" example mlp --help | grep -- "--hidden" >/dev/null && echo "ok   example mlp --help"
echo "test_example: all checks passed"
