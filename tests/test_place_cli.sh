#!/usr/bin/env bash
# `onnxpipe place` end to end: argument and topology errors, the table on the XML GPU
# machine, JSON traffic against a count written here from the partition's own JSON
# (--model) and from --param-bytes, and the oversubscription warning.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/place_cli
rm -rf "$OUT"
mkdir -p "$OUT"
cd "$OUT"
XML=$SRC_DIR/tests/data/topo_2s4gpu.xml

expect_error() {   # expect_error "message part" args...
    local want=$1
    shift
    if "$ONNXPIPE" place "$@" >out.txt 2>err.txt; then
        echo "expected failure: onnxpipe place $*" >&2
        exit 1
    fi
    grep -q "^onnxpipe: error: .*$want" err.txt || { echo "no '$want' in: $(cat err.txt)" >&2; exit 1; }
    echo "ok: error '$want'"
}

"$ONNXPIPE" place --help | grep "usage: onnxpipe place --pp P --dp D" >/dev/null
expect_error "bad synthetic topology 'package:2 core:4'" --pp 2 --dp 2 --param-bytes 1 --synthetic "package:2 core:4"
expect_error "cannot use hwloc XML topology 'missing.xml'" --pp 2 --dp 2 --param-bytes 1 --topology missing.xml
expect_error "--pp and --dp are required" --dp 2 --param-bytes 1
expect_error "no stage sizes given" --pp 2 --dp 2
expect_error "--param-bytes has more than 2 values" --pp 2 --dp 2 --param-bytes 1,2,3
expect_error "--param-bytes has 2 values for 3 stages" --pp 3 --dp 2 --param-bytes 1,2
expect_error "do not split evenly over 3 hosts" --pp 2 --dp 2 --param-bytes 1 --hosts 3 --synthetic "core:4 pu:1"
expect_error "has no NVIDIA GPU" --pp 2 --dp 1 --param-bytes 1 --device cuda --synthetic "core:4 pu:1"
expect_error "--model needs --batch" --pp 2 --dp 1 --model x.onnx

# the table on the GPU machine: rank 2 gets GPU 2 next to its NIC and package 1's cores
"$ONNXPIPE" place --pp 2 --dp 2 --topology "$XML" --param-bytes 4000000 --send-bytes 1000000 --microbatches 8 | tee table.txt
grep -Eq "^ +2 +host0 +2 +0 +1 +8-11,24-27 +1 +2 0000:83:00.0 \(nic mlx5_1\)" table.txt
grep -q "stage-major   (chosen)" table.txt

# JSON traffic against a count from the rank table alone (rank blocks on hosts)
check_json() {   # check_json place.json "P0,P1,..." "S0,S1,..." M
    python3 - "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
P = [float(x) for x in sys.argv[2].split(",")]
S = [float(x) for x in sys.argv[3].split(",")]
M = float(sys.argv[4])
pp, dp = d["pp"], d["dp"]
for order in ("stage-major", "replica-major"):
    rk = (lambda s, r: r * pp + s) if order == "stage-major" else (lambda s, r: s * dp + r)
    host = [x["host"] for x in d["ranks"]]
    net = sum(2 * S[s] * M for r in range(dp) for s in range(pp - 1) if host[rk(s, r)] != host[rk(s + 1, r)])
    if dp > 1:
        net += sum(2 * (dp - 1) / dp * P[s] for s in range(pp) for r in range(dp)
                   if host[rk(s, r)] != host[rk(s, (r + 1) % dp)])
    got = d["traffic"][order]["network"]
    print(f"{order}: network bytes {got:.0f}, recount {net:.0f}, diff {abs(got - net):.3g}")
    assert abs(got - net) <= 1e-9 * max(1, net)
t = d["traffic"]
best = min(("stage-major", "replica-major"), key=lambda o: (t[o]["network"], t[o]["host"], t[o]["package"]))
assert t["stage-major"]["network"] == t["replica-major"]["network"] or d["order"] == best, (d["order"], best)
EOF
}
"$ONNXPIPE" place --pp 4 --dp 2 --hosts 2 --topology "$XML" --param-bytes 100,200,300,400 --send-bytes 5000 \
    --microbatches 8 --json >xml.json
check_json xml.json 100,200,300,400 5000,5000,5000,5000 8

"$ONNXPIPE" example gpt --layers 2 --d-model 64 --heads 2 --vocab 64 --seq 16 -o gpt.onnx >/dev/null
"$ONNXPIPE" partition gpt.onnx --stages 2 --batch 4 --json >part.json
"$ONNXPIPE" place --pp 2 --dp 4 --hosts 2 --synthetic "package:2 core:4 pu:1" --model gpt.onnx --batch 4 \
    --microbatches 4 --json >model.json
P=$(python3 -c "import json; print(','.join(str(s['param_bytes']) for s in json.load(open('part.json'))['stages']))")
S=$(python3 -c "import json; print(','.join(str(max(0, s['send_bytes'])) for s in json.load(open('part.json'))['stages']))")
echo "partition: param bytes $P, send bytes $S"
check_json model.json "$P" "$S" 4

# more ranks than cores: placed anyway, with a warning
"$ONNXPIPE" place --pp 4 --dp 2 --synthetic "core:4 pu:1" --param-bytes 1 >over.txt
grep -q "warning: oversubscribed: host0: 8 ranks share 4 cores" over.txt
echo "ok: oversubscription warned"
