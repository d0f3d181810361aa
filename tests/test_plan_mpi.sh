#!/usr/bin/env bash
# `onnxpipe plan` against measured training on this machine. The example GPT is calibrated
# here (one core, as a rank runs) and planned for 2 devices and a global batch of 16 (fp32,
# no recompute); of the 2-rank layouts (pp 2 with each schedule, and dp 2) the planner's best
# microbatch count for each is trained with its own command line under `mpirun -np 2`, in
# rounds that alternate the layouts (other jobs on the machine then weigh on all alike); a
# layout's time is its fastest step of the 8 after 3 of warm-up, over the rounds: other work on
# the machine only adds to a step (in the sanitizer build of a 2-core CI machine a median moved
# by 20% between rounds, the fastest step by 4%), and the planner predicts a quiet machine. The planner's
# first choice must be within 5% of the best measured. On a shared machine one pass can be
# thrown by a burst of other work: when the check fails, the first choice and the best are
# measured again, alternating, 3 more rounds, and the check is made on all their steps. A
# gap smaller than the run-to-run spread of the two layouts themselves (each run's fastest
# step, over their runs: on this 2-core VM identical runs of one layout have come out 129 and
# 160 ms) is not a ranking the machine can measure: then the check passes at that spread
# and says so; on a quiet machine the spread is under 5% and the 5% binds.
# Prints predicted and measured per layout. ctest runs it alone (RUN_SERIAL): beside other
# tests on the same cores the layouts slow down unequally (dp 2 keeps both ranks busy, a
# pipeline's bubble hands its core to the other job), which is not what is compared.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/plan_mpi
rm -rf "$OUT"
mkdir -p "$OUT"
cd "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
LOSS=(--loss cross_entropy --logits logits --labels labels)
"$ONNXPIPE" example gpt --layers 4 --d-model 128 --heads 4 --vocab 256 --seq 64 -o gpt.onnx >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o data --seq 64 >/dev/null

"$ONNXPIPE" plan --calibrate --model gpt.onnx --costs cal.json --max-microbatch 16 --precision fp32 "${LOSS[@]}" \
    >calibrate.txt
"$ONNXPIPE" plan --model gpt.onnx --devices 2 --batch 16 --costs cal.json --precision fp32 --recompute none \
    --top 1000 --json --data data "${LOSS[@]}" >plan.json

# the best layout of each 2-rank family: "name predicted_s command"
python3 - >layouts.txt <<'EOF'
import json
plan = json.load(open("plan.json"))
best = {}
for p in plan["plans"]:
    if p["pp"] * p["dp"] != 2:
        continue
    name = "dp2" if p["dp"] == 2 else "pp2-" + p["schedule"]
    if name not in best:          # plans come fastest first
        best[name] = p
assert len(best) == 6, sorted(best)
for name, p in sorted(best.items(), key=lambda kv: kv[1]["step_s"]):
    print(name, p["microbatches"], p["step_s"], p["command"])
EOF
cat layouts.txt | cut -d' ' -f1-3

# train NAME: one run of that layout, its step times after warm-up appended to NAME.steps as one line
train() {
    local cmd
    cmd=$(grep "^$1 " layouts.txt | cut -d' ' -f4-)
    cmd=${cmd#mpirun -np 2 -x OPENBLAS_NUM_THREADS=1 onnxpipe train }
    # shellcheck disable=SC2086
    mpirun -q --oversubscribe -np 2 -x OPENBLAS_NUM_THREADS=1 -x PP_COMM_TIMEOUT "$ONNXPIPE" train $cmd \
        --steps 11 --quiet --metrics "$1.jsonl" >"$1.log" 2>&1 || { cat "$1.log"; exit 1; }
    python3 -c "
import json
steps = [json.loads(l)['step_s'] for l in open('$1.jsonl')]
print(' '.join(str(s) for s in steps[3:]))" >>"$1.steps"
}
names=$(cut -d' ' -f1 layouts.txt)
for round in 1 2; do
    for n in $names; do train "$n"; done
done

check() {
    python3 - "$@" <<'EOF'
import sys
rows = [l.split() for l in open("layouts.txt")]
first = rows[0][0]
fastest, runs = {}, {}
for r in rows:
    try:
        runs[r[0]] = [min(float(x) for x in line.split()) for line in open(r[0] + ".steps")]
    except FileNotFoundError:
        continue
    fastest[r[0]] = min(runs[r[0]])
best = min(fastest, key=fastest.get)
print("%-16s %5s %12s %12s %9s" % ("layout", "m", "predicted ms", "fastest ms", "ratio"))
for r in rows:
    pred = float(r[2])
    print("%-16s %5s %12.2f %12.2f %9.3f%s" % (r[0], r[1], 1e3 * pred, 1e3 * fastest[r[0]], fastest[r[0]] / pred,
                                          "  <- planner's first choice" if r[0] == first else
                                          "  <- best measured" if r[0] == best else ""))
pm = sorted(fastest, key=fastest.get)
pr = [r[0] for r in rows]
print("planner's order:  " + " ".join(pr))
print("measured order:   " + " ".join(pm))
gap = fastest[first] / fastest[best] - 1
print("first choice %s measured %.2f ms, best %s %.2f ms: %.1f%% slower (limit 5%%)" %
      (first, 1e3 * fastest[first], best, 1e3 * fastest[best], 100 * gap))
open("contenders", "w").write(first + " " + best + "\n")
if gap <= 0.05:
    sys.exit(0)
spread = max(max(runs[n]) / min(runs[n]) - 1 for n in (first, best))
for n in (first, best):
    print("%s: fastest step of each run (ms): %s" % (n, " ".join("%.2f" % (1e3 * x) for x in runs[n])))
print("run-to-run spread of these two layouts: %.1f%%" % (100 * spread))
if len(runs[first]) >= 5 and gap <= spread:
    print("the gap is within the machine's run-to-run spread: no ranking it can measure")
    sys.exit(0)
sys.exit(1)
EOF
}
if check; then
    exit 0
fi
echo "--- over 5%: measuring the first choice and the best again, alternating, 3 more rounds"
read -r first best <contenders
for round in 1 2 3; do
    train "$first"
    train "$best"
done
check
