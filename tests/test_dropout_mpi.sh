#!/usr/bin/env bash
# Dropout does not depend on the layout: an MLP exported by PyTorch in training mode
# (nn.Dropout(0.3) -> ONNX Dropout with training_mode true) trained for 10 steps as one
# batch of 16, as 4 microbatches, on 2 replicas and on a 2-stage pipeline x 2 replicas
# gives the same per-step losses within 1e-5 relative: each sample draws its mask by its
# index in the global batch (pp_rng_key), not by the microbatch it lands in. A run with
# another --seed must differ (the masks do drop), and so must one without dropout.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/dropout
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
"$PY" - "$OUT" <<'PYEOF'
import json, os, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
out = sys.argv[1]
class M(nn.Module):
    def __init__(s, p):
        super().__init__()
        s.l1, s.d, s.l2 = nn.Linear(16, 64), nn.Dropout(p), nn.Linear(64, 10)
    def forward(s, x, labels):
        return F.cross_entropy(s.l2(s.d(torch.relu(s.l1(x)))), labels)
for name, p in (("dmlp", 0.3), ("plain", 0.0)):
    torch.manual_seed(0)
    torch.onnx.export(M(p).train(), (torch.randn(4, 16), torch.zeros(4, dtype=torch.int64)), f"{out}/{name}.onnx",
                      input_names=["x", "labels"], output_names=["loss"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      dynamic_axes={"x": {0: "batch"}, "labels": {0: "batch"}})
rng = np.random.default_rng(2)
d = f"{out}/data"
os.makedirs(d, exist_ok=True)
rng.standard_normal((256, 16)).astype(np.float32).tofile(f"{d}/x.bin")
rng.integers(0, 10, size=256).astype(np.int64).tofile(f"{d}/labels.bin")
json.dump({"format": "onnxpipe-dataset-1", "samples": 256, "arrays": [
    {"name": "x", "dtype": "float32", "shape": [16], "file": "x.bin"},
    {"name": "labels", "dtype": "int64", "shape": [], "file": "labels.bin"}]}, open(f"{d}/dataset.json", "w"))
PYEOF
run() {  # MODEL TAG NP PP DP MICROBATCHES EXTRA...
    local model=$1 tag=$2 np=$3 pp=$4 dp=$5 mbs=$6
    shift 6
    local args=(train --model "$OUT/$model.onnx" --data "$OUT/data" --batch 16 --steps 10 --optimizer sgd --lr 0.1
                --quiet --pp "$pp" --dp "$dp" --microbatches "$mbs" --losses "$OUT/$tag.losses" "$@")
    if [ "$np" = 1 ]; then "$ONNXPIPE" "${args[@]}" >/dev/null
    else timeout 300 mpirun --oversubscribe --bind-to none -np "$np" -x OPENBLAS_NUM_THREADS "$ONNXPIPE" "${args[@]}" >/dev/null; fi
}
run dmlp ref 1 1 1 1
run dmlp m4 1 1 1 4
run dmlp dp2 2 1 2 2
run dmlp pp2dp2 4 2 2 2
run dmlp seed2 1 1 1 1 --seed 2
run plain plain 1 1 1 1
"$PY" - "$OUT" <<'PYEOF'
import sys
import numpy as np
out = sys.argv[1]
ref = np.loadtxt(f"{out}/ref.losses")[:, 1]
bad = []
for tag in ("m4", "dp2", "pp2dp2"):
    got = np.loadtxt(f"{out}/{tag}.losses")[:, 1]
    rel = float(np.max(np.abs(got - ref) / np.abs(ref)))
    print(f"  dropout 0.3, {tag:7s} vs one batch of 16: max relative loss diff {rel:.2e}")
    if rel > 1e-5:
        bad.append(tag)
for tag, what in (("seed2", "--seed 2"), ("plain", "no dropout")):
    got = np.loadtxt(f"{out}/{tag}.losses")[:, 1]
    rel = float(np.max(np.abs(got - ref) / np.abs(ref)))
    print(f"  {what:10s} vs the reference: max relative loss diff {rel:.2e} (must differ)")
    if rel < 1e-3:
        bad.append(f"{tag} does not differ")
if bad:
    sys.exit("dropout depends on the layout or does not drop: " + ", ".join(bad))
PYEOF
