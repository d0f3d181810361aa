#!/usr/bin/env bash
# onnxpipe train --trace: the executed last step as a Perfetto trace. With pp=2 x dp=2
# and zb-h1, every rank shows one F, I and W per microbatch of its stage, in schedule
# order on its compute row without overlaps, plus its sends, receives and reductions.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/trace
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null
timeout 300 mpirun --oversubscribe --bind-to none -np 4 -x OPENBLAS_NUM_THREADS "$ONNXPIPE" train \
    --model "$OUT/gpt.onnx" --data "$OUT/text" --loss cross_entropy --logits logits --labels labels \
    --pp 2 --dp 2 --schedule zb-h1 --batch 16 --microbatches 4 --steps 3 --quiet --trace "$OUT/step.json"
"$PY" - "$OUT/step.json" <<'PYEOF'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
bad = []
for rank in range(4):
    mine = [e for e in ev if e["pid"] == rank]
    comp = sorted((e for e in mine if e["tid"] == 0), key=lambda e: e["ts"])
    stage = rank % 2
    for kind in "FIW":
        got = sorted(e["name"] for e in comp if e["name"][1:2] == kind)
        want = sorted(f"{stage}{kind}{m}" for m in range(4))
        if got != want:
            bad.append(f"rank {rank}: {kind} actions {got}, expected {want}")
    if not any(e["name"] == "OPTIMIZER_STEP" for e in comp):
        bad.append(f"rank {rank}: no OPTIMIZER_STEP")
    for a, b in zip(comp, comp[1:]):
        if a["ts"] + a["dur"] > b["ts"] + 1e-3:
            bad.append(f"rank {rank}: {a['name']} overlaps {b['name']}")
    comm = [e["name"] for e in mine if e["tid"] == 1]
    want_comm = 8   # 4 sends and 4 receives per rank with pp=2, 4 microbatches
    if len([c for c in comm if "SEND" in c or "RECV" in c]) != want_comm:
        bad.append(f"rank {rank}: {len(comm)} message events: {comm}")
    print(f"rank {rank}: {len(comp)} compute events, {len(comm)} communication events, "
          f"step {max(e['ts'] + e['dur'] for e in mine) / 1e3:.1f} ms")
if bad:
    sys.exit("trace: " + "; ".join(bad))
PYEOF
