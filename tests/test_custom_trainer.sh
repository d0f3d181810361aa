#!/usr/bin/env bash
# The library used through its public tier alone (examples/custom_trainer.c, which includes
# only <onnxpipe/onnxpipe.h>): partition, schedule, stages, and the schedule's actions walked
# by the trainer itself. Under each schedule kind it trains the example MLP, and PyTorch
# trains the same model on the same batches (tests/ref/custom_trainer_ref.py): per-step
# losses and the trained parameters must agree. The example must also include nothing else.
set -euo pipefail
: "${BUILD_DIR:?}" "${SRC_DIR:?}" "${PY:?}"
OUT="$BUILD_DIR/test-out/custom_trainer"

bad=$(grep -n '^#include' "$SRC_DIR/examples/custom_trainer.c" | grep -v '<onnxpipe/onnxpipe.h>\|<std[a-z]*\.h>\|<string\.h>' || true)
if [ -n "$bad" ]; then echo "FAIL: examples/custom_trainer.c includes more than the public tier: $bad"; exit 1; fi
echo "ok   examples/custom_trainer.c includes <onnxpipe/onnxpipe.h> and the C library only"

for run in "1f1b 2" "gpipe 3" "zb-h1 2" "interleaved 2" "zb-v 2"; do
    set -- $run
    dir="$OUT/$1-$2"
    rm -rf "$dir" && mkdir -p "$dir"
    echo "--- example_custom_trainer 30 $dir $1 $2"
    "$BUILD_DIR/example_custom_trainer" 30 "$dir" "$1" "$2"
    "$PY" "$SRC_DIR/tests/ref/custom_trainer_ref.py" "$dir"
done
