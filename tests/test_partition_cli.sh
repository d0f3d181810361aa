#!/usr/bin/env bash
# `onnxpipe partition` end to end: argument errors, the table, JSON consistency
# (stage sums against the model totals, the bottleneck against its lower bound),
# --dot, and --out-dir stage files that reproduce the whole model in onnxruntime.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/partition_cli
rm -rf "$OUT"
mkdir -p "$OUT"
cd "$OUT"

expect_error() {   # expect_error "message part" args...
    local want=$1
    shift
    if "$ONNXPIPE" partition "$@" >out.txt 2>err.txt; then
        echo "expected failure: onnxpipe partition $*" >&2
        exit 1
    fi
    grep -q "^onnxpipe: error: .*$want" err.txt || { echo "no '$want' in: $(cat err.txt)" >&2; exit 1; }
    echo "ok: error '$want'"
}

"$ONNXPIPE" partition --help | grep -q "usage: onnxpipe partition MODEL --stages N"
"$ONNXPIPE" example gpt --layers 4 --d-model 64 --heads 2 --vocab 64 --seq 16 -o gpt.onnx >/dev/null
"$ONNXPIPE" example mlp -o mlp.onnx >/dev/null

expect_error "no model given" --stages 2
expect_error "--stages is required" gpt.onnx
expect_error "--stages expects an integer" gpt.onnx --stages 0
expect_error "unknown --balance" gpt.onnx --stages 2 --balance speed
expect_error "unknown option" gpt.onnx --stages 2 --frobnicate 1
expect_error "names no node and no tensor" gpt.onnx --stages 2 --cut no_such_node
expect_error "out of range" mlp.onnx --stages 1000
expect_error "needs known shapes" gpt.onnx --stages 2 --balance flops
expect_error "1 manual cut makes 2 stages, but 3" gpt.onnx --stages 3 --cut h.1.out

"$ONNXPIPE" partition gpt.onnx --stages 3 --batch 2 | tee table.txt
grep -q "optimal: no split into 3 contiguous stages" table.txt

for bal in params flops memory uniform; do
    "$ONNXPIPE" partition gpt.onnx --stages 3 --batch 2 --microbatches 6 --balance $bal --json >$bal.json
done
"$ONNXPIPE" partition gpt.onnx --cut h.0.out,h.2.out --batch 2 --json >manual.json
"$PY" - params.json flops.json memory.json uniform.json manual.json <<'PYEOF'
import json, sys
for path in sys.argv[1:]:
    p = json.load(open(path))
    st, b = p["stages"], p["bottleneck"]
    assert p["nstages"] == len(st) == len(p["boundaries"]) + 1, path
    assert sum(s["own_params"] for s in st) == p["params"], path
    assert sum(s["nodes"] for s in st) == p["model"]["nodes"], path
    assert [s["first_node"] for s in st] == [0] + [s["last_node"] + 1 for s in st[:-1]], path
    assert max(s["weight"] for s in st) == b["largest"] >= b["lower_bound"], path
    for bd in p["boundaries"]:
        assert bd["bytes"] == sum(t["bytes"] for t in bd["tensors"]), path
        assert st[bd["from"]]["send_bytes"] == bd["bytes"], path
    assert b["cut_bytes"] == sum(bd["bytes"] for bd in p["boundaries"]), path
    for s in st:
        m = s["memory"]
        assert m["inflight"] == min(p["nstages"] - s["stage"], p["microbatches"]), path
        assert m["total_bytes"] == 4 * s["param_bytes"] + m["stash_bytes"], path
    print(f"{path}: balance {p['balance']}, largest {b['largest']} {b['unit']} (bound {b['lower_bound']}), "
          f"cut {b['cut_bytes']} B, stages {[s['nodes'] for s in st]}")
m = json.load(open("manual.json"))
assert m["manual"] and [s["last"] for s in m["stages"][:2]] == ["h.0.out", "h.2.out"]
u = json.load(open("uniform.json"))
n, P = u["model"]["nodes"], u["nstages"]
assert max(s["nodes"] for s in u["stages"]) == -(-n // P)   # uniform: ceil(nodes / stages) exactly
PYEOF

"$ONNXPIPE" partition gpt.onnx --stages 4 --batch 2 --dot gpt.dot --out-dir stages >/dev/null
grep -q "style=bold" gpt.dot
"$PY" "$SRC_DIR/tests/ref/run_chain.py" gpt.onnx stages 4 --dim batch=2
"$ONNXPIPE" partition mlp.onnx --stages 3 --batch 4 --out-dir mlp-stages >/dev/null
"$PY" "$SRC_DIR/tests/ref/run_chain.py" mlp.onnx mlp-stages 3 --dim batch=4
echo "partition CLI: errors, table, JSON, dot and stage chains ok"
