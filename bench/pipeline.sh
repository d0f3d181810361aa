#!/usr/bin/env bash
# Pipeline training throughput of the example GPT (L=4, D=256, H=4, T=128, V=256, AdamW;
# global batch 64 = 16 microbatches of 4) on this machine's cores, one BLAS thread per
# rank: onnxpipe pp=2 under mpirun (1f1b and gpipe, --bind-to core and none), next to,
# in the same run, pp=1 on one core and PyTorch (bench/torch_step.py, batch 64 as 16
# microbatches of 4 and in one pass) with OPENBLAS_NUM_THREADS x torch threads in {1,2}^2.
# The measured bubble is 1 - sum of ranks' compute / (ranks x step time), per step, from the per-rank timing
# `onnxpipe train` logs at PP_LOG=info; the prediction is `onnxpipe schedule --model`.
# One JSON line per figure. Usage: bench/pipeline.sh [BUILD_DIR] (env STEPS, default 6;
# PY: python with torch; the first step is a warm-up and not counted).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRC/build}
OP=$BUILD/onnxpipe
PY=${PY:-$HOME/.cache/onnxpipe/venv/bin/python}
STEPS=${STEPS:-6}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
BATCH=64 MB=16 SEQ=128

fail() { printf '{"bench": "pipeline", "error": "%s"}\n' "$1"; exit 1; }
[ -x "$OP" ] || fail "no onnxpipe at $OP (build first, or pass the build dir)"
"$OP" example gpt --layers 4 --d-model 256 --heads 4 --vocab 256 --seq $SEQ -o "$TMP/gpt.onnx" >/dev/null ||
    fail "onnxpipe example gpt failed"
TEXT=/usr/share/common-licenses/GPL-3
"$OP" data text "$TEXT" -o "$TMP/data" --seq $SEQ >/dev/null || fail "onnxpipe data text $TEXT failed"
TRAIN=(train --model "$TMP/gpt.onnx" --data "$TMP/data" --batch $BATCH --microbatches $MB --steps "$STEPS"
       --optimizer adamw --lr 1e-3 --weight-decay 0.01 --loss cross_entropy --logits logits --labels labels)

# summarize LOG NAME RANKS EXTRA_JSON: tokens/s from the median step time (steps >= 2, the
# slowest rank's time per step) and the measured bubble, from the ranks' log lines
summarize() {
    python3 - "$1" "$2" "$3" "$4" $BATCH $SEQ <<'EOF'
import json, re, statistics, sys
log, name, ranks, extra, batch, seq = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
steps = {}
pat = re.compile(r"(?:\[rank (\d+)\] )?.*step (\d+): ([0-9.]+) s, compute ([0-9.]+) s, wait ([0-9.]+) s")
for line in open(log, errors="replace"):
    m = pat.search(line)
    if m:
        r, s = int(m.group(1) or 0), int(m.group(2))
        steps.setdefault(s, {})[r] = (float(m.group(3)), float(m.group(4)), float(m.group(5)))
full = [s for s in sorted(steps) if s >= 2 and len(steps[s]) == ranks]
if not full:
    print(json.dumps({"bench": "pipeline", "config": name, "error": "no per-step timing in the log", "log_tail": open(log, errors="replace").read()[-400:]}))
    sys.exit(0)
step_s = [max(t for t, _, _ in steps[s].values()) for s in full]
bubble = [1 - sum(c for _, c, _ in steps[s].values()) / (ranks * max(t for t, _, _ in steps[s].values())) for s in full]
med = statistics.median(step_s)
out = {"bench": "pipeline", "config": name, "ranks": ranks, "global_batch": batch, "microbatches": 16,
       "steps_timed": len(full), "step_s_median": round(med, 4), "tokens_per_s": round(batch * seq / med, 1),
       "bubble_measured": round(statistics.median(bubble), 4),
       "compute_s_per_rank": [round(statistics.median(steps[s][r][1] for s in full), 4) for r in range(ranks)]}
out.update(json.loads(extra))
print(json.dumps(out))
EOF
}

# simulator prediction for pp=2 with per-stage costs from the model's partition
predict() {
    "$OP" schedule --pp 2 --microbatches $MB --kind "$1" --model "$TMP/gpt.onnx" --batch $((BATCH / MB)) --json 2>/dev/null |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("bubble", -1))' 2>/dev/null || echo -1
}

echo "{\"bench\": \"pipeline_machine\", \"cores\": $(nproc), \"loadavg\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}"

# pp=1 on one core
PP_LOG=info taskset -c 0 "$OP" "${TRAIN[@]}" --pp 1 --quiet >"$TMP/pp1.log" 2>&1
summarize "$TMP/pp1.log" "onnxpipe pp=1 (1 core)" 1 '{"bind": "taskset core 0"}'

# pp=2, every schedule and binding
for kind in 1f1b gpipe; do
    pred=$(predict $kind)
    for bind in core none; do
        # one file per rank, so the ranks' log lines cannot interleave
        rm -rf "$TMP/out"
        PP_LOG=info mpirun -np 2 --bind-to $bind --output-filename "$TMP/out" -x OPENBLAS_NUM_THREADS -x PP_LOG \
            "$OP" "${TRAIN[@]}" --pp 2 --dp 1 --schedule $kind --quiet >/dev/null 2>&1
        cat "$TMP"/out/*/rank.*/stderr >"$TMP/pp2.log" 2>/dev/null
        summarize "$TMP/pp2.log" "onnxpipe pp=2 $kind" 2 \
            "{\"bind\": \"$bind\", \"schedule\": \"$kind\", \"bubble_predicted\": $pred}"
    done
done

# PyTorch on the same cores, each thread configuration, the batch of 64 as 16 accumulated
# microbatches of 4 (the same work split) and in one pass (TORCH_MB)
if "$PY" -c 'import torch' 2>/dev/null; then
    for m in ${TORCH_MB:-16 1}; do
        for bt in 1 2; do
            for tt in 1 2; do
                "$PY" "$SRC/bench/torch_step.py" --batch $BATCH --microbatches "$m" --steps $((STEPS - 1)) \
                    --blas-threads $bt --torch-threads $tt --tag pipeline_torch 2>/dev/null ||
                    printf '{"bench": "pipeline_torch", "blas_threads": %d, "torch_threads": %d, "error": "failed"}\n' $bt $tt
            done
        done
    done
else
    echo "{\"bench\": \"pipeline_torch\", \"error\": \"no python with torch at $PY (set PY)\"}"
fi
