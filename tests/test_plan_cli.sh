#!/usr/bin/env bash
# `onnxpipe plan` end to end without MPI: bad arguments refused naming the value; the JSON
# (keys, the options passed on into each command line, --precision/--recompute only where
# they are not the default); links from --link-gbps and hosts from an hwloc topology (the
# XML GPU machine's 4 GPUs, a synthetic one's cores); --seq checked against the model; and
# the calibration cache: the first plan without costs calibrates and saves under
# ~/.cache/onnxpipe/calibration, the second reads it.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/plan_cli
rm -rf "$OUT"
mkdir -p "$OUT"
cd "$OUT"
export OPENBLAS_NUM_THREADS=1
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 64 --seq 16 -o gpt.onnx >/dev/null
LOSS=(--loss cross_entropy --logits logits --labels labels)
BASE=(--model gpt.onnx --devices 4 --batch 8 --gflops 10)

expect_error() {   # expect_error "message part" args...
    local want=$1
    shift
    if "$ONNXPIPE" plan "$@" >out.txt 2>err.txt; then
        echo "expected failure: onnxpipe plan $*" >&2
        exit 1
    fi
    grep -qF -- "$want" err.txt || { echo "no '$want' in: $(cat err.txt)" >&2; exit 1; }
    grep -q "^onnxpipe: error: " err.txt
    echo "ok: error '$want'"
}

"$ONNXPIPE" plan --help | grep "usage: onnxpipe plan --model M.onnx --devices N --batch B" >/dev/null
"$ONNXPIPE" --help | grep "plan " >/dev/null
expect_error "--model is required" --devices 2 --batch 8
expect_error "--devices and --batch are required" --model gpt.onnx --devices 2
expect_error "--devices expects an integer in 1..1048576, got '0'" --model gpt.onnx --devices 0 --batch 8
expect_error "--device-memory expects a size > 0, got '80XB'" "${BASE[@]}" --device-memory 80XB
expect_error "--schedule: unknown '2f2b' (one of gpipe, 1f1b, interleaved, zb-h1, zb-v)" "${BASE[@]}" --schedule 1f1b,2f2b
expect_error "--precision: unknown 'fp8'" "${BASE[@]}" --precision fp8
expect_error "--recompute: unknown 'some'" "${BASE[@]}" --recompute some
expect_error "--chunks expects an integer in 2..64, got '1'" "${BASE[@]}" --chunks 1
expect_error "--link-gbps: unknown level 'rack'" "${BASE[@]}" --link-gbps rack=3
expect_error "--link-gbps expects a number" "${BASE[@]}" --link-gbps host=fast
expect_error "--gflops cannot go with --costs or --calibrate" "${BASE[@]}" --costs x.json
expect_error "cannot read calibration 'missing.json'" --model gpt.onnx --devices 2 --batch 8 --costs missing.json
expect_error "--seq 32: the model's input 'input_ids' has a fixed length 16" "${BASE[@]}" --seq 32
expect_error "dp 3 out of range (1..2 devices)" --model gpt.onnx --devices 2 --batch 8 --gflops 10 --dp 3
expect_error "none of the" "${BASE[@]}" --device-memory 1KiB "${LOSS[@]}"
expect_error "missing.onnx" --model missing.onnx --devices 2 --batch 8 --gflops 10
expect_error "unknown option '--bubble'" "${BASE[@]}" --bubble

# JSON: the keys, and each command line carries what the layout and the options say
"$ONNXPIPE" plan "${BASE[@]}" --seq 16 --top 50 --json --data mydata --optimizer sgd --device cpu \
    --link-gbps host=100,network=1 "${LOSS[@]}" >plan.json
python3 - <<'EOF'
import json, re
d = json.load(open("plan.json"))
for k in ["model", "devices", "batch", "device_memory", "costs", "host_gbps", "network_gbps", "latency_s",
          "tokens_per_sample", "layouts", "memory_pruned", "simulated", "exact_checked", "complete", "seconds", "plans"]:
    assert k in d, k
assert d["host_gbps"] == 100 and d["network_gbps"] == 1 and d["tokens_per_sample"] == 16, d
assert d["complete"] and len(d["plans"]) == 50
steps = [p["step_s"] for p in d["plans"]]
assert steps == sorted(steps)
for p in d["plans"]:
    c = p["command"]
    assert c.startswith("mpirun -np %d -x OPENBLAS_NUM_THREADS=1 onnxpipe train --model gpt.onnx --data mydata "
                        "--pp %d --dp %d --schedule %s" % (p["pp"] * p["dp"], p["pp"], p["dp"], p["schedule"])), c
    assert "--batch 8 --microbatches %d" % p["microbatches"] in c
    assert p["microbatch"] * p["dp"] * p["microbatches"] == 8
    assert ("--precision " + p["precision"] in c) == (p["precision"] != "fp32"), c
    assert ("--recompute " + p["recompute"] in c) == (p["recompute"] != "none"), c
    assert "--optimizer sgd" in c and "--device cpu" in c and "--logits logits --labels labels" in c, c
    assert p["memory_exact"] and len(p["rank_bytes"]) == p["pp"] and p["peak_bytes"] == max(p["rank_bytes"])
    assert p["tokens_per_s"] > 0 and abs(p["tokens_per_s"] - 8 * 16 / p["step_s"]) < 1e-6 * p["tokens_per_s"]
print("ok: %d plans, keys and command lines" % len(d["plans"]))
EOF

# hosts from a topology: the XML machine's 4 GPUs (GPU jobs), a synthetic machine's cores
XML=$SRC_DIR/tests/data/topo_2s4gpu.xml
"$ONNXPIPE" plan "${BASE[@]}" --devices 8 --synthetic "package:1 core:2 pu:1" --json "${LOSS[@]}" >syn.json
python3 -c "
import json; d = json.load(open('syn.json')); assert d['devices_per_host'] == 2, d['devices_per_host']
assert any(p['order'] in ('stage-major', 'replica-major') for p in d['plans'])
print('ok: synthetic topology: hosts of', d['devices_per_host'], 'cores')"
"$ONNXPIPE" plan "${BASE[@]}" --devices 8 --device cuda --topology "$XML" --json "${LOSS[@]}" >xml.json
python3 -c "
import json; d = json.load(open('xml.json')); assert d['devices_per_host'] == 4, d['devices_per_host']
assert d['host_gbps'] == 25, d['host_gbps']
for p in d['plans']:
    assert p['command'].startswith('mpirun -np %d onnxpipe train' % (p['pp'] * p['dp'])) and '--device cuda' in p['command']
    assert p['memory_exact'] or 'cuda' in p['memory_note'], p
print('ok: the XML machine: hosts of', d['devices_per_host'], 'GPUs at', d['host_gbps'], 'GB/s')"

# the text form: the table and a command line per layout
"$ONNXPIPE" plan "${BASE[@]}" --top 3 "${LOSS[@]}" | tee text.txt
[ "$(grep -c '^   mpirun -np ' text.txt)" = 3 ]
grep -q "no layout left unsimulated could be faster" text.txt

# the calibration cache
export HOME=$OUT/home
mkdir -p "$HOME"
"$ONNXPIPE" plan --model gpt.onnx --devices 2 --batch 4 --precision fp32 --max-microbatch 2 "${LOSS[@]}" >first.txt
grep -q "^calibrating 'gpt.onnx' on this machine" first.txt
ls "$HOME"/.cache/onnxpipe/calibration/*-cpu-*.json
grep -q "(measured now)" first.txt
"$ONNXPIPE" plan --model gpt.onnx --devices 2 --batch 4 --precision fp32 "${LOSS[@]}" >second.txt
grep -q "(cached)" second.txt
! grep -q "^calibrating" second.txt
# asking for a precision the cached file lacks calibrates again
"$ONNXPIPE" plan --model gpt.onnx --devices 2 --batch 4 --precision bf16 --max-microbatch 1 "${LOSS[@]}" >third.txt
grep -q "^calibrating" third.txt
grep -q "calibrate: fp32 microbatch 1" third.txt   # ... keeping the precision it had
"$ONNXPIPE" plan --model gpt.onnx --devices 2 --batch 4 --precision fp32,bf16 "${LOSS[@]}" >fourth.txt
grep -q "(cached)" fourth.txt
echo "ok: calibration cached, reused, and redone for a precision it lacked (keeping the one it had)"

# another model's calibration: its op types' rates apply, with a warning
"$ONNXPIPE" example mlp --loss -o mlp.onnx >/dev/null
cal=$(ls "$HOME"/.cache/onnxpipe/calibration/*.json | head -1)
"$ONNXPIPE" plan --model mlp.onnx --devices 2 --batch 4 --costs "$cal" >mlp.txt 2>warn.txt
grep -q "warning: the calibration was measured on another model" warn.txt
grep -q "^   mpirun -np " mlp.txt
echo "ok: another model's calibration used with a warning"
