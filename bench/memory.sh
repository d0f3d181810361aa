#!/usr/bin/env bash
# The memory levers on the example GPT with long sequences (L=8, D=256, H=4, T=512, V=256,
# AdamW; global batch 8 = 8 microbatches of 1), pp=2 1f1b under mpirun, one BLAS thread per
# rank: for {fp32, bf16} x {none, selective, full} recompute, each rank's measured peak (the
# device counters, by category) next to the preview's estimate (`onnxpipe schedule --model`
# with the same options), the median step time, and the largest tensor crossing the stage
# boundary. The yardstick is the fp32/none run of the same invocation: every line carries
# its stash and step time as ratios to it, and the issue's targets (full recompute: stash
# <= 1/(layers per stage) of none at <= 1.4x the step time; bf16: half the stash and half
# the pipeline bytes). "stash" is the slots only; the recompute arena (one microbatch's
# recomputed tensors, shared by the slots) is reported beside it.
# One JSON line per figure. Usage: bench/memory.sh [BUILD_DIR] (env STEPS, default 4; the
# first step is a warm-up and not counted).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRC/build}
OP=$BUILD/onnxpipe
STEPS=${STEPS:-4}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
LAYERS=8 PP=2 BATCH=8 MB=8 SEQ=512

fail() { printf '{"bench": "memory", "error": "%s"}\n' "$1"; exit 1; }
[ -x "$OP" ] || fail "no onnxpipe at $OP (build first, or pass the build dir)"
"$OP" example gpt --layers $LAYERS --d-model 256 --heads 4 --vocab 256 --seq $SEQ -o "$TMP/gpt.onnx" >/dev/null ||
    fail "onnxpipe example gpt failed"
"$OP" data text /usr/share/common-licenses/GPL-3 -o "$TMP/data" --seq $SEQ >/dev/null || fail "onnxpipe data text failed"
LOSS=(--loss cross_entropy --logits logits --labels labels)

for prec in fp32 bf16; do
    for rc in none selective full; do
        tag=$prec-$rc
        lever=(--precision $prec --recompute $rc)
        "$OP" schedule --model "$TMP/gpt.onnx" --pp $PP --kind 1f1b --batch $((BATCH / MB)) --microbatches $MB \
            --device cpu "${LOSS[@]}" "${lever[@]}" --json >"$TMP/$tag.json" 2>"$TMP/$tag.err" ||
            fail "onnxpipe schedule --model ($tag) failed: $(tail -c 200 "$TMP/$tag.err" | tr '\n"' '  ')"
        PP_LOG=info mpirun --oversubscribe --bind-to core -np $PP -x OPENBLAS_NUM_THREADS -x PP_LOG \
            "$OP" train --model "$TMP/gpt.onnx" --data "$TMP/data" "${LOSS[@]}" "${lever[@]}" --device cpu --pp $PP \
            --schedule 1f1b --batch $BATCH --microbatches $MB --steps "$STEPS" --optimizer adamw --lr 1e-3 \
            >"$TMP/$tag.log" 2>&1 || fail "onnxpipe train ($tag) failed: $(tail -c 300 "$TMP/$tag.log" | tr '\n"' '  ')"
    done
done

python3 - "$TMP" $LAYERS $PP $BATCH $SEQ "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PYEOF'
import json, re, statistics, sys
tmp, layers, pp, batch, seq, load = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
units = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}
def nbytes(v, u): return round(float(v) * units[u])
cats = ["total", "params", "grads", "optimizer", "stash", "scratch", "comm", "other"]
size = r"([0-9.]+) (B|KiB|MiB|GiB)"
peak_row = re.compile(r"^(\d+)\s+\S+\s+peak\s+" + r"\s+".join([size] * 8), re.M)
step_pat = re.compile(r"step (\d+): ([0-9.]+) s, compute")
rows = {}
for prec in ["fp32", "bf16"]:
    for rc in ["none", "selective", "full"]:
        tag = f"{prec}-{rc}"
        log = open(f"{tmp}/{tag}.log", errors="replace").read()
        est = json.load(open(f"{tmp}/{tag}.json"))["memory_estimate"]
        steps = {}
        for m in step_pat.finditer(log):
            s = int(m.group(1))
            steps[s] = max(steps.get(s, 0), float(m.group(2)))
        timed = [t for s, t in sorted(steps.items()) if s >= 2]
        ranks = []
        for m in peak_row.finditer(log):
            r = int(m.group(1))
            peak = {c: nbytes(m.group(2 + 2 * k), m.group(3 + 2 * k)) for k, c in enumerate(cats)}
            e = est["ranks"][r]
            ranks.append({"rank": r, "peak_bytes": peak["total"], "estimate_bytes": e["total_bytes"],
                          "peak_stash_bytes": peak["stash"], "estimate_stash_slots_bytes": e["stash_bytes"] - e["recompute_bytes"],
                          "estimate_recompute_arena_bytes": e["recompute_bytes"], "peak_scratch_bytes": peak["scratch"],
                          "slots": e["slots"], "boundary_tensor_bytes": e["port_max_bytes"]})
        rows[tag] = {"bench": "memory", "config": tag, "precision": prec, "recompute": rc, "pp": pp, "layers": layers,
                     "seq": seq, "global_batch": batch, "microbatches": 8, "steps_timed": len(timed),
                     "step_s_median": round(statistics.median(timed), 4) if timed else None, "ranks": ranks, "loadavg": load}
base = rows["fp32-none"]
for tag, row in rows.items():
    if row["step_s_median"] and base["step_s_median"]:
        row["step_time_vs_fp32_none"] = round(row["step_s_median"] / base["step_s_median"], 3)
    row["stash_slots_vs_fp32_none"] = [round(r["estimate_stash_slots_bytes"] / b["estimate_stash_slots_bytes"], 4)
                                       for r, b in zip(row["ranks"], base["ranks"])]
    row["peak_vs_estimate"] = [round(r["peak_bytes"] / r["estimate_bytes"], 4) for r in row["ranks"]]
    print(json.dumps(row))
lps = layers / pp
full, none = rows["fp32-full"], rows["fp32-none"]
bf = rows["bf16-none"]
print(json.dumps({"bench": "memory", "summary": True, "layers_per_stage": lps,
    "full_stash_vs_none": max(full["stash_slots_vs_fp32_none"]), "target_full_stash": round(1 / lps, 4),
    "full_step_time_vs_none": full.get("step_time_vs_fp32_none"), "target_full_step_time": 1.4,
    "bf16_stash_vs_fp32": max(r["estimate_stash_slots_bytes"] / b["estimate_stash_slots_bytes"] for r, b in zip(bf["ranks"], none["ranks"])),
    "bf16_boundary_bytes_vs_fp32": max(r["boundary_tensor_bytes"] / b["boundary_tensor_bytes"] for r, b in zip(bf["ranks"], none["ranks"])),
    "max_peak_vs_estimate": max(max(abs(x - 1) for x in r["peak_vs_estimate"]) for r in rows.values()) + 1}))
PYEOF
