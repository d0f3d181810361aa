#!/usr/bin/env bash
# A mean loss divides by the weight of its labels, which differs between microbatches:
# (1) the example GPT with padding, labels equal to ignore_index (-100) spread unevenly
# over the batch; (2) an MLP exported by PyTorch with F.cross_entropy(weight=class
# weights, ignore_index=-100), whose SoftmaxCrossEntropyLoss takes the weights as an
# initializer, on labels with uneven classes and some ignored. The loss is the mean over
# the global batch's weighted labels, so 4 microbatches, 2 replicas and a 2-stage pipeline
# give the losses of one batch of 16 within 1e-5 relative; the first loss of (2) is also
# PyTorch's on the same batch.
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
"$PY" - "$OUT" <<'PYEOF'
import json, os, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
out = sys.argv[1]
W = [0.5, 1, 2, 1, 1, 3, 1, 0.25, 1, 1.5]
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.l1, s.l2 = nn.Linear(16, 32), nn.Linear(32, 10)
        s.register_buffer("w", torch.tensor(W))
    def forward(s, x, labels):
        return F.cross_entropy(s.l2(torch.relu(s.l1(x))), labels, weight=s.w, ignore_index=-100)
torch.manual_seed(0)
m = M()
torch.onnx.export(m, (torch.randn(4, 16), torch.zeros(4, dtype=torch.int64)), f"{out}/wmlp.onnx",
                  input_names=["x", "labels"], output_names=["loss"], opset_version=17,
                  dynamic_axes={"x": {0: "batch"}, "labels": {0: "batch"}})
rng = np.random.default_rng(11)
x = rng.standard_normal((256, 16)).astype(np.float32)
y = rng.choice(10, size=256, p=[.3, .02, .2, .02, .02, .2, .02, .1, .02, .1]).astype(np.int64)
y[rng.random(256) < 0.2] = -100
d = f"{out}/wdata"
os.makedirs(d, exist_ok=True)
x.tofile(f"{d}/x.bin")
y.tofile(f"{d}/labels.bin")
json.dump({"format": "onnxpipe-dataset-1", "samples": 256, "arrays": [
    {"name": "x", "dtype": "float32", "shape": [16], "file": "x.bin"},
    {"name": "labels", "dtype": "int64", "shape": [], "file": "labels.bin"}]}, open(f"{d}/dataset.json", "w"))
with torch.no_grad():
    ref = float(m(torch.tensor(x[:16].tolist()), torch.tensor(y[:16].tolist())))
open(f"{out}/wmlp.torch", "w").write(f"{ref:.9g}\n")
PYEOF
run() {  # MODEL DATA TAG NP PP DP MICROBATCHES EXTRA...
    local model=$1 data=$2 tag=$3 np=$4 pp=$5 dp=$6 mbs=$7
    shift 7
    local args=(train --model "$OUT/$model.onnx" --data "$OUT/$data" --batch 16 --steps 10 --optimizer adamw --lr 3e-3
                --quiet --pp "$pp" --dp "$dp" --microbatches "$mbs" --losses "$OUT/$tag.losses" "$@")
    if [ "$np" = 1 ]; then "$ONNXPIPE" "${args[@]}" >/dev/null
    else timeout 300 mpirun --oversubscribe --bind-to none -np "$np" -x OPENBLAS_NUM_THREADS "$ONNXPIPE" "${args[@]}" >/dev/null; fi
}
gpt=(--loss cross_entropy --logits logits --labels labels)
for m in gpt wmlp; do
    data=text extra=("${gpt[@]}")
    [ $m = wmlp ] && data=wdata extra=()
    run $m $data $m-ref 1 1 1 1 "${extra[@]}"
    run $m $data $m-m4 1 1 1 4 "${extra[@]}"
    run $m $data $m-dp2 2 1 2 2 "${extra[@]}"
    run $m $data $m-pp2dp2 4 2 2 2 "${extra[@]}"
done
"$PY" - "$OUT" <<'PYEOF'
import sys
import numpy as np
out = sys.argv[1]
bad = []
for m in ("gpt", "wmlp"):
    ref = np.loadtxt(f"{out}/{m}-ref.losses")[:, 1]
    for tag in ("m4", "dp2", "pp2dp2"):
        got = np.loadtxt(f"{out}/{m}-{tag}.losses")[:, 1]
        rel = float(np.max(np.abs(got - ref) / np.abs(ref)))
        print(f"  {m:5s} {tag:7s} vs one batch of 16: max relative loss diff {rel:.2e}")
        if rel > 1e-5:
            bad.append(f"{m} {tag}")
torch_first = float(open(f"{out}/wmlp.torch").read())
ref0 = np.loadtxt(f"{out}/wmlp-ref.losses")[0, 1]
print(f"  wmlp first loss {ref0:.7f}, PyTorch's on the same batch {torch_first:.7f}")
if abs(ref0 - torch_first) > 1e-5 * abs(torch_first):
    bad.append("wmlp first loss vs PyTorch")
if bad:
    sys.exit("layouts that differ with weighted labels: " + ", ".join(bad))
PYEOF
