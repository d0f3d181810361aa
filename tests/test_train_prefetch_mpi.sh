#!/usr/bin/env bash
# Reading ahead (train/prefetch.c) changes no byte: the example GPT trained at pp=2 x dp=2
# (zb-h1) from a uint16 token stream, --shuffle over 3 epochs (the permutation changes at
# each wrap), with an evaluation every 4 steps, saving at step 7 (mid-epoch), writes the
# same --losses and the same exported model, byte for byte, with the reader thread as with
# PP_PREFETCH=0 (every feed reads then); a run resumed from step 7 with the thread
# continues as both; the metrics say the thread read (input_read_s > 0) only when on.
# --profile-steps prints the input rows: a feed per microbatch on each rank and a read per
# profiled step (made a step or two ahead of it).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/prefetch
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$PY" -c "import numpy as np, sys; np.random.default_rng(7).integers(0, 256, 16 * 40 + 1).astype(np.uint16).tofile(sys.argv[1])" \
    "$OUT/tokens.bin"   # 40 samples of 16: 5 steps an epoch at batch 8

run() {   # NAME PREFETCH ARGS...: a pp=2 x dp=2 run
    local name=$1 pf=$2
    shift 2
    PP_PREFETCH=$pf timeout 300 mpirun --oversubscribe --bind-to none -np 4 -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT \
        -x PP_PREFETCH "$ONNXPIPE" train --model "$OUT/gpt.onnx" --data "$OUT/tokens.bin" --seq 16 \
        --loss cross_entropy --logits logits --labels labels --pp 2 --dp 2 --schedule zb-h1 --batch 8 \
        --microbatches 2 --epochs 3 --shuffle --seed 5 --eval-data "$OUT/tokens.bin" --eval-every 4 --eval-batches 2 \
        --optimizer adamw --lr 0.01 --losses "$OUT/$name.losses" --export "$OUT/$name.onnx" \
        --metrics "$OUT/$name.jsonl" --log-every 1 --quiet "$@" >"$OUT/$name.log" 2>&1 || { cat "$OUT/$name.log"; exit 1; }
}
run ahead 1 --save "$OUT/ck" --save-every 7 --profile-steps 2:3 --profile "$OUT/prof.json"
run direct 0
run resumed 1 --resume "$OUT/ck/step-7"

cmp "$OUT/ahead.losses" "$OUT/direct.losses" || { paste "$OUT/ahead.losses" "$OUT/direct.losses"; exit 1; }
cmp "$OUT/ahead.onnx" "$OUT/direct.onnx"
cmp "$OUT/resumed.losses" <(sed -n '8,$p' "$OUT/ahead.losses") || { paste "$OUT/resumed.losses" "$OUT/ahead.losses"; exit 1; }
cmp "$OUT/resumed.onnx" "$OUT/ahead.onnx"
echo "15 steps (3 shuffled epochs, evaluations at 4, 8, 12, 15): losses and exported weights equal byte for byte" \
     "with and without the reader; the run resumed at step 7 equals both"
sed -n '/^op type/,/^$/p' "$OUT/ahead.log" | grep -E "^(op type|input)"
"$PY" - "$OUT" <<'PYEOF'
import json, re, sys
out = sys.argv[1]
bad = []
for name, on in [("ahead", True), ("direct", False), ("resumed", True)]:
    lines = [json.loads(l) for l in open(f"{out}/{name}.jsonl")]
    read = [sum(m["input_read_s_per_rank"]) for m in lines]
    feed = [min(m["input_s_per_rank"]) for m in lines]
    evals = sum("eval_loss" in m for m in lines)
    if on and min(read) <= 0 or not on and max(read) != 0:
        bad.append(f"{name}: reader time per step {read[:4]}..., expected {'> 0' if on else '0'}")
    if min(feed) <= 0:
        bad.append(f"{name}: a rank fed in no time {feed[:4]}...")
    print(f"{name}: {len(lines)} steps, {evals} evaluations, reader {sum(read) * 1e3:.2f} ms, "
          f"feeds {sum(sum(m['input_s_per_rank']) for m in lines) * 1e3:.2f} ms (all ranks)")
ahead = {json.loads(l)["step"]: json.loads(l).get("eval_loss") for l in open(f"{out}/ahead.jsonl")}
direct = {json.loads(l)["step"]: json.loads(l).get("eval_loss") for l in open(f"{out}/direct.jsonl")}
if ahead != direct or sum(v is not None for v in ahead.values()) != 4:
    bad.append(f"eval losses differ or not 4: {ahead} vs {direct}")
log = open(f"{out}/ahead.log").read()
rows = dict((n, int(c)) for n, c in re.findall(r"^(input(?: read \(thread\))?)\s+(\d+)\s+[0-9.]+\s+[0-9.]+%", log, re.M))
# steps 2..3 on 4 ranks, each rank's stage fed in 2 microbatches, and each step read once
if rows != {"input": 16, "input read (thread)": 8}:
    bad.append(f"profile input rows {rows}, expected input 16 calls and input read (thread) 8")
ev = [e for e in json.load(open(f"{out}/prof.json"))["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "input"]
if len(ev) != 24 or {e["pid"] for e in ev} != {0, 1, 2, 3}:
    bad.append(f"{len(ev)} input events on the timeline on ranks {sorted({e['pid'] for e in ev})}, expected 24 on 4")
if bad:
    sys.exit("prefetch: " + "; ".join(bad))
print(f"profile: input rows {rows}; {len(ev)} input events on the timeline")
PYEOF
