#!/usr/bin/env bash
# The indexing, padding, tiling, cumulative and extra reduction ops, and the opset 13-23
# forms of ReduceSum / ReduceMean / Squeeze / Unsqueeze / Split / Slice, forward through
# `onnxpipe eval` (loader, shape rules, folder, cpu kernels) against onnxruntime, one small
# model each (tests/ref/index_ops_models.py), and constant chains through every folder. The
# kernels' cases are in tests/cuda_cases.h (test_op_cases, test_op_cases_ort).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/index_ops
rm -rf "$OUT"
mkdir -p "$OUT"
models=$("$PY" "$SRC_DIR/tests/ref/index_ops_models.py" "$OUT")
paths=()
for m in $models; do paths+=("$OUT/$m"); done
"$PY" "$SRC_DIR/tests/ref/forward_ref.py" "$ONNXPIPE" "$OUT/work" "${paths[@]}" --tol 1e-5   # one Python for all
# constant chains fold at load: only x0 + w and the use of the folded constant remain
for m in $models; do
    case $m in
    fold_* | trilu_fold_*)
        nodes=$("$ONNXPIPE" partition "$OUT/$m" --stages 1 | sed -n 's/^ *\([0-9]*\) nodes,.*/\1/p')
        echo "  $m: $nodes nodes after folding (expected 2)"
        [ "$nodes" = 2 ] || { echo "$m: the constant chain did not fold" >&2; exit 1; }
        ;;
    esac
done
echo "${#paths[@]} models match onnxruntime"
