#!/usr/bin/env bash
# --profile-steps A:B --profile FILE under mpirun, pp=2 x dp=2, zb-h1: the Perfetto JSON
# has a process per rank with rows for ops, communication and schedule actions; only
# steps A..B; every op's forward and backward on each rank for each microbatch; MatMul
# FLOPs equal 2*M*N*K from the op's own shapes; sends and receives name their peer (the
# pipeline neighbour) and bytes (the activation size); the all-reduce buckets appear; the
# per-op table's totals equal the JSON's; every rank's measured bubble is printed beside
# the simulator's; and the memory table has every rank's measured peak with the estimate.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/profile
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null
timeout 300 mpirun --oversubscribe --bind-to none -np 4 -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT "$ONNXPIPE" train \
    --model "$OUT/gpt.onnx" --data "$OUT/text" --loss cross_entropy --logits logits --labels labels \
    --pp 2 --dp 2 --schedule zb-h1 --batch 16 --microbatches 4 --steps 5 --profile-steps 2:3 \
    --profile "$OUT/prof.json" >"$OUT/run.log" 2>&1 || { cat "$OUT/run.log"; exit 1; }
sed -n '/^profile of/,/^bubble:/p;/^memory per rank/,/^(categories/p' "$OUT/run.log"
"$PY" - "$OUT/prof.json" "$OUT/run.log" <<'PYEOF'
import json, re, sys
from collections import defaultdict
d = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
ev = d["traceEvents"]
x = [e for e in ev if e.get("ph") == "X"]
bad = []
names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in ev if e.get("ph") == "M"}
for r in range(4):
    for t, want in [(None, "rank"), (0, "ops"), (1, "communication"), (2, "schedule actions")]:
        if want not in names.get((r, t), ""):
            bad.append(f"rank {r}: no '{want}' track")
steps = sorted({e["args"]["step"] for e in x})
if steps != [2, 3]:
    bad.append(f"steps {steps}, expected [2, 3]")
flops_checked = 0
for r in range(4):
    mine = [e for e in x if e["pid"] == r]
    ops = [e for e in mine if e["tid"] == 0]
    fw = defaultdict(int)
    bw = defaultdict(int)
    for e in ops:
        (bw if e["cat"] == "backward" else fw)[(e["name"], e["args"]["step"])] += 1
    # each op runs once per microbatch (4) and step in forward; backward ops at least as often
    if not fw or set(fw.values()) != {4}:
        bad.append(f"rank {r}: forward op calls per step {sorted(set(fw.values()))}, expected 4")
    if not bw:
        bad.append(f"rank {r}: no backward ops")
    for e in ops:
        if e["args"]["op_type"] == "MatMul" and e["cat"] == "forward":
            ins, out = e["args"]["shapes"].split(" -> ")
            a = [int(v) for v in ins.split(" ")[0].strip("[]").split(",")]
            y = [int(v) for v in out.strip("[]").split(",")]
            n = 1
            for v in y:
                n *= v
            if abs(e["args"]["flops"] - 2 * n * a[-1]) > 0.5:
                bad.append(f"rank {r}: {e['name']} flops {e['args']['flops']} != 2*{n}*{a[-1]}")
            flops_checked += 1
    comm = [e for e in mine if e["tid"] == 1]
    msgs = [e for e in comm if "SEND" in e["name"] or "RECV" in e["name"]]
    if len(msgs) != 2 * 8 or any(e["args"].get("bytes", 0) <= 0 or "peer" not in e["args"] for e in msgs):
        bad.append(f"rank {r}: {len(msgs)} messages, or one without peer and bytes")
    if len({e["args"]["peer"] for e in msgs}) != 1:
        bad.append(f"rank {r}: messages go to several peers {sorted({e['args']['peer'] for e in msgs})}")
    if not any(e["name"] == "allreduce bucket" and e["args"].get("bytes", 0) > 0 for e in comm):
        bad.append(f"rank {r}: no all-reduce bucket")
    acts = {e["name"] for e in mine if e["tid"] == 2}
    if not any(re.match(r"\dI\d", a) for a in acts) or not any(re.match(r"\dW\d", a) for a in acts):
        bad.append(f"rank {r}: zb-h1 actions without I and W: {sorted(acts)[:6]}")
# the table's totals are the JSON's
tot = defaultdict(float)
for e in x:
    if e["tid"] == 0:
        tot[e["args"]["op_type"] + (" (bw)" if e["cat"] == "backward" else "")] += e["dur"] / 1e3
    if e["tid"] == 3:   # the input row: feeds and reads ahead (test_train_prefetch_mpi checks them)
        tot[e["name"]] += e["dur"] / 1e3
rows = re.findall(r"^(\S+(?: \(bw\))?)\s+(\d+)\s+([0-9.]+)\s+[0-9.]+%\s+[0-9.]+$", log, re.M)
if not rows:
    bad.append("no per-op table in the output")
worst = max(abs(float(ms) - tot[t]) for t, _, ms in rows) if rows else 0
if worst > 0.002:
    bad.append(f"table totals differ from the trace by {worst:.4f} ms")
ranks = re.findall(r"^([0-3])\s+([01])\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+(-?[0-9.]+)%\s+(-?[0-9.]+)%\s+(-?[0-9.]+)%$", log,
                   re.M)
mem = re.findall(r"^([0-3])\s+[01]\s+peak\s+([0-9.]+ \w?i?B) .*\n\s+estimate\s+([0-9.]+ \w?i?B)", log, re.M)
if len(ranks) != 4:
    bad.append(f"{len(ranks)} ranks with measured, simulated and replayed bubble, expected 4")
if any(not 0 <= float(x) < 100 for _, _, b, s, y in ranks for x in (s, y)):
    bad.append(f"a simulated or replayed bubble outside [0, 100): {ranks}")
if len(mem) != 4:
    bad.append(f"{len(mem)} ranks in the memory table, expected 4")
print(f"{len(x)} events on 4 ranks, steps {steps}; {flops_checked} MatMul FLOPs = 2*M*N*K from their shapes; "
      f"{len(rows)} table rows within {worst:.4f} ms of the trace; bubbles measured/simulated/replayed "
      f"{[(b, s, y) for _, _, b, s, y in ranks]}")
if bad:
    sys.exit("profile: " + "; ".join(bad[:10]))
PYEOF
