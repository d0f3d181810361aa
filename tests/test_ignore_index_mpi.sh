#!/usr/bin/env bash
# Padding: labels equal to ignore_index (-100) spread unevenly over the batch. The loss is
# the mean over the counted labels of the global batch, so 4 microbatches, 2 replicas and
# a 2-stage pipeline give the losses of one batch of 16 within 1e-5 relative.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/ignore
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null
"$PY" - "$OUT/text/labels.bin" <<'PYEOF'
import sys
import numpy as np
y = np.fromfile(sys.argv[1], dtype=np.int64).reshape(-1, 16)
rng = np.random.default_rng(5)
for i in range(len(y)):          # uneven padding: 0 to 15 ignored labels at the end of a sample
    k = int(rng.integers(0, 16)) if i % 3 else 0
    if k: y[i, 16 - k:] = -100
y.tofile(sys.argv[1])
print(f"{int((y == -100).sum())} of {y.size} labels are ignore_index")
PYEOF
run() {  # TAG NP PP DP MICROBATCHES
    local args=(train --model "$OUT/gpt.onnx" --data "$OUT/text" --loss cross_entropy --logits logits --labels labels
                --batch 16 --steps 10 --optimizer adamw --lr 3e-3 --quiet --pp "$3" --dp "$4" --microbatches "$5"
                --losses "$OUT/$1.losses")
    if [ "$2" = 1 ]; then "$ONNXPIPE" "${args[@]}" >/dev/null
    else timeout 300 mpirun --oversubscribe --bind-to none -np "$2" -x OPENBLAS_NUM_THREADS "$ONNXPIPE" "${args[@]}" >/dev/null; fi
}
run ref 1 1 1 1
run m4 1 1 1 4
run dp2 2 1 2 2
run pp2dp2 4 2 2 2
"$PY" - "$OUT" <<'PYEOF'
import sys
import numpy as np
out = sys.argv[1]
ref = np.loadtxt(f"{out}/ref.losses")[:, 1]
bad = []
for tag in ("m4", "dp2", "pp2dp2"):
    got = np.loadtxt(f"{out}/{tag}.losses")[:, 1]
    rel = float(np.max(np.abs(got - ref) / np.abs(ref)))
    print(f"  {tag:7s} vs one batch of 16: max relative loss diff {rel:.2e}")
    if rel > 1e-5:
        bad.append(tag)
if bad:
    sys.exit("layouts that differ with ignore_index labels: " + ", ".join(bad))
PYEOF
