# `onnxpipe schedule`: text and JSON output (bubble against the closed form), CSV out
# and back in (same step time), Perfetto trace (one process per rank, compute and comm
# rows), a hand-broken CSV refused with the stuck grid, bad arguments, and costs from a
# model's partition.
set -uo pipefail
: "${ONNXPIPE:?}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
PYTHON=${PY:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$ONNXPIPE" schedule --help >"$tmp/help" || fail "--help exited non-zero"
grep -q "usage: onnxpipe schedule" "$tmp/help" || fail "--help prints no usage"

"$ONNXPIPE" schedule --pp 4 --microbatches 8 --kind 1f1b >"$tmp/text" || fail "1f1b run failed"
cat "$tmp/text"
grep -q "bubble 27.27% (closed form (p-1)/(m+p-1) = 27.27%" "$tmp/text" || fail "1f1b bubble is not 3/11"
grep -q "^rank   3 |.  .  .  F0 B0 == F1" "$tmp/text" || fail "timeline row of rank 3 is not 1F1B's"

for kind in gpipe 1f1b interleaved zb-h1 zb-v; do
    "$ONNXPIPE" schedule --pp 4 --microbatches 8 --kind $kind --json >"$tmp/$kind.json" || fail "$kind --json failed"
done
"$PYTHON" - "$tmp" <<'EOF' || fail "JSON summaries do not match the closed forms"
import json, sys
d = sys.argv[1]
for kind in ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-v"]:
    j = json.load(open(f"{d}/{kind}.json"))
    diff = abs(j["bubble"] - j["closed_form_bubble"])
    peaks = [r["peak_inflight"] for r in j["ranks"]]
    print(f"{kind}: bubble {j['bubble']:.6f} closed form {j['closed_form_bubble']:.6f} |diff| {diff:.2e} peaks {peaks}")
    assert diff < 1e-12
    if kind == "1f1b" or kind == "zb-h1":
        assert peaks == [4, 3, 2, 1]
    if kind == "gpipe":
        assert peaks == [8, 8, 8, 8]
    if kind == "zb-v":  # 2p half-stages on every rank: what 1f1b's rank 0 holds
        assert peaks == [8, 8, 8, 8] and j["chunks"] == 2
    assert j["critical_path"][0] == "r0:0F0", j["critical_path"][:3]
EOF

"$ONNXPIPE" schedule --pp 3 --microbatches 6 --kind zb-h1 --costs 1,1,0.5,0.1 --csv "$tmp/zb.csv" \
    --trace "$tmp/zb.trace.json" --json >"$tmp/zb.json" || fail "zb-h1 with --csv/--trace failed"
"$ONNXPIPE" schedule --load-csv "$tmp/zb.csv" --costs 1,1,0.5,0.1 --json >"$tmp/zb-back.json" || fail "--load-csv failed"
"$PYTHON" - "$tmp" <<'EOF' || fail "CSV round trip or trace is wrong"
import json, sys
d = sys.argv[1]
a, b = json.load(open(f"{d}/zb.json")), json.load(open(f"{d}/zb-back.json"))
print(f"generated makespan {a['makespan_s']}, reloaded from CSV {b['makespan_s']}")
assert a["makespan_s"] == b["makespan_s"] and a["actions"] == b["actions"]
t = json.load(open(f"{d}/zb.trace.json"))["traceEvents"]
x = [e for e in t if e["ph"] == "X"]
pids = sorted({e["pid"] for e in x}); rows = sorted({e["tid"] for e in x})
end = max(e["ts"] + e["dur"] for e in x) / 1e6
print(f"trace: {len(x)} events, ranks {pids}, rows {rows}, last event ends at {end} s")
assert pids == [0, 1, 2] and rows == [0, 1]
assert abs(end - a["makespan_s"]) < 1e-9
EOF

# Hand-broken: both ranks send before receiving -> refused, grid on stderr.
printf '0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n' >"$tmp/bad.csv"
"$ONNXPIPE" schedule --load-csv "$tmp/bad.csv" >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/err"
[ $rc -eq 1 ] || fail "a deadlocking CSV exited $rc, expected 1"
grep -q "onnxpipe: error: .*deadlock" "$tmp/err" || fail "no deadlock error"
grep -q "first stuck" "$tmp/err" || fail "no grid with the first stuck action"

check_error() {  # expected-substring args...
    local want=$1; shift
    "$ONNXPIPE" schedule "$@" >/dev/null 2>"$tmp/err"
    local rc=$?
    [ $rc -eq 2 ] || fail "'$*' exited $rc, expected 2"
    grep -q "onnxpipe: error: .*$want" "$tmp/err" || { cat "$tmp/err"; fail "'$*' does not say '$want'"; }
    echo "ok: '$*' -> $(head -1 "$tmp/err")"
}
check_error "multiple of pp" --pp 4 --microbatches 6 --kind interleaved
check_error "unknown schedule kind" --pp 4 --microbatches 8 --kind 2f2b
check_error "are required" --pp 4 --kind 1f1b
check_error "expects an integer" --pp four --microbatches 8 --kind 1f1b
check_error "F,B,W" --pp 4 --microbatches 8 --kind 1f1b --costs 1
check_error "unknown option" --pp 4 --microbatches 8 --kind 1f1b --bubble
check_error "chunks must be 1" --pp 4 --microbatches 8 --kind 1f1b --chunks 2
check_error "chunks must be 2" --pp 4 --microbatches 8 --kind zb-v --chunks 3

# Costs from a model: a small GPT, partitioned into 4 stages by FLOPs.
"$ONNXPIPE" example gpt --layers 4 --d-model 64 --heads 2 --seq 16 -o "$tmp/gpt.onnx" >/dev/null || fail "example gpt"
"$ONNXPIPE" schedule --model "$tmp/gpt.onnx" --batch 4 --pp 2 --microbatches 4 --kind interleaved --gflops 10 \
    --json >"$tmp/model.json" || fail "--model run failed"
"$ONNXPIPE" schedule --model "$tmp/gpt.onnx" --batch 4 --pp 2 --microbatches 4 --kind interleaved --gflops 10 \
    | grep -A5 "^stage  rank" || fail "--model prints no stage table"
"$PYTHON" - "$tmp" <<'EOF' || fail "--model costs are not FLOP-proportional"
import json, sys
j = json.load(open(f"{sys.argv[1]}/model.json"))
busy = sum(r["busy_s"] for r in j["ranks"])
print(f"model: makespan {j['makespan_s']:.6g} s, busy total {busy:.6g} s, bubble {j['bubble']:.4f}")
assert j["makespan_s"] > 0 and all(r["peak_act_bytes"] > 0 for r in j["ranks"])
EOF
"$ONNXPIPE" schedule --model "$tmp/gpt.onnx" --pp 2 --microbatches 4 --kind 1f1b >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "batch" "$tmp/err" || fail "--model without --batch is not refused with a hint"
echo "ok: onnxpipe schedule"
