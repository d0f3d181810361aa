#!/usr/bin/env bash
# `onnxpipe partition` end to end: argument errors, the table, JSON consistency
# (stage sums against the model totals, the bottleneck against its lower bound and
# the optimum within the tolerance, every balance), the tolerance's tie-break on a GPT
# shaped like a 760M one (block-boundary cuts instead of cuts inside an MLP), --dot,
# and --out-dir stage files that reproduce the whole model in onnxruntime.
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

"$ONNXPIPE" partition --help | grep "usage: onnxpipe partition MODEL --stages N" >/dev/null
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
expect_error "needs known shapes" gpt.onnx --stages 2 --balance time
expect_error "1 manual cut makes 2 stages, but 3" gpt.onnx --stages 3 --cut h.1.out
expect_error "--balance-tolerance expects a number in" gpt.onnx --stages 2 --balance-tolerance -1
expect_error "--balance-tolerance expects a number in" gpt.onnx --stages 2 --balance-tolerance 2%
expect_error "unknown --order 'best'" gpt.onnx --stages 2 --order best
expect_error "--link-gbps expects a number in" gpt.onnx --stages 2 --balance time --link-gbps 0
expect_error "--gflops expects a number in" gpt.onnx --stages 2 --gflops -5
expect_error "--op-overhead expects a number in" gpt.onnx --stages 2 --op-overhead x

"$ONNXPIPE" partition gpt.onnx --stages 3 --batch 2 | tee table.txt
# every command reads --opt=value as --opt value (cli/main.c), a value's own '=' kept
"$ONNXPIPE" partition gpt.onnx --stages=3 --batch=2 >table_eq.txt
cmp table.txt table_eq.txt && echo "ok: --stages=3 --batch=2 prints what --stages 3 --batch 2 does"
"$ONNXPIPE" partition gpt.onnx --stages=3 --dim=batch=2 >/dev/null
"$ONNXPIPE" example gpt --layers=4 --d-model=64 --heads=2 --vocab=64 --seq=16 --out=gpt_eq.onnx >/dev/null
cmp gpt.onnx gpt_eq.onnx && echo "ok: example gpt --layers=4 ... writes the same model"
expect_error "--stages expects an integer" gpt.onnx --stages=0
grep -Eq "optimal: no split into 3 stages in the orders searched|optimum .*within the tolerance 2%" table.txt
grep -q "order: searched over every order" table.txt
"$ONNXPIPE" partition gpt.onnx --stages 3 --batch 2 --order graph --balance-tolerance 0 >graph_order.txt
grep -q "optimal: no split into 3 stages of this order" graph_order.txt

for bal in params flops memory uniform time; do
    "$ONNXPIPE" partition gpt.onnx --stages 3 --batch 2 --microbatches 6 --balance $bal --link-gbps 10 \
        --loss cross_entropy --logits logits --labels input_ids --json >$bal.json
done
"$ONNXPIPE" partition gpt.onnx --cut h.0.out,h.2.out --batch 2 --json >manual.json
"$PY" - params.json flops.json memory.json uniform.json time.json manual.json <<'PYEOF'
import json, sys
for path in sys.argv[1:]:
    p = json.load(open(path))
    st, b = p["stages"], p["bottleneck"]
    assert p["nstages"] == len(st) == len(p["boundaries"]) + 1, path
    assert sum(s["own_params"] for s in st) == p["params"], path
    assert sum(s["nodes"] for s in st) == p["model"]["nodes"], path
    assert [s["first_node"] for s in st] == [0] + [s["last_node"] + 1 for s in st[:-1]], path
    assert max(s["weight"] for s in st) == b["largest"] >= b["lower_bound"], path
    if not p["manual"]:   # within the tolerance of the optimum, which no split beats
        assert b["lower_bound"] <= b["optimum"] <= b["largest"] <= b["optimum"] * (1 + b["tolerance"]), path
    if p["balance"] == "memory":
        assert b["memory_model"] == "planner", path   # the stage planner's profile, not an estimate
    for bd in p["boundaries"]:
        assert bd["bytes"] == sum(t["bytes"] for t in bd["tensors"]), path
        assert st[bd["from"]]["send_bytes"] == bd["bytes"], path
    assert b["cut_bytes"] == sum(bd["bytes"] for bd in p["boundaries"]), path
    for s in st:
        m = s["memory"]
        # the driver's 1F1B slots: min(P - s, M), one more after stage 0 (the next one received)
        assert m["inflight"] == min(p["nstages"] - s["stage"] + (s["stage"] > 0), p["microbatches"]), path
        assert m["stash_bytes"] == m["inflight"] * m["slot_bytes"], path
        assert m["total_bytes"] == (2 * m["param_bytes"] + m["optimizer_bytes"] + m["param_copy_bytes"] +
                                    m["constant_bytes"] + m["stash_bytes"] + m["recompute_bytes"] +
                                    m["scratch_bytes"]), path
    print(f"{path}: balance {p['balance']}, largest {b['largest']} {b['unit']} (bound {b['lower_bound']}), "
          f"cut {b['cut_bytes']} B, stages {[s['nodes'] for s in st]}")
m = json.load(open("manual.json"))
assert m["manual"] and [s["last"] for s in m["stages"][:2]] == ["h.0.out", "h.2.out"]
u = json.load(open("uniform.json"))
n, P = u["model"]["nodes"], u["nstages"]
assert max(s["nodes"] for s in u["stages"]) == -(-n // P)   # uniform: ceil(nodes / stages) exactly
PYEOF

# The tie-break's tolerance on a GPT shaped like a 760M one (24 blocks, vocabulary / width
# as 50257 / 1536): into 6 stages by parameters the optimum cuts inside MLPs (the 4D hidden
# and the residual cross, 5 x the residual's bytes); within 2% every cut is one residual.
"$ONNXPIPE" example gpt --layers 24 --d-model 96 --heads 4 --vocab 3141 --seq 64 --batch 1 -o gpt24.onnx >/dev/null
"$ONNXPIPE" partition gpt24.onnx --stages 6 --balance-tolerance 0 --json >tol0.json
"$ONNXPIPE" partition gpt24.onnx --stages 6 --json >tol2.json
"$PY" - tol0.json tol2.json <<'PYEOF'
import json, sys
t0, t2 = (json.load(open(f)) for f in sys.argv[1:])
resid = 64 * 96 * 4                                   # [1, 64, 96] float32
b0, b2 = t0["bottleneck"], t2["bottleneck"]
assert b0["largest"] == b0["optimum"] == b2["optimum"]
inside = [bd for bd in t0["boundaries"] if bd["bytes"] > resid]
assert inside and any(t["name"].endswith(("mlp.gelu.out", "mlp.fc.matmul")) for bd in inside for t in bd["tensors"])
assert all(len(bd["tensors"]) == 1 and bd["bytes"] == resid for bd in t2["boundaries"]), t2["boundaries"]
assert b2["largest"] <= b2["optimum"] * 1.02 and b2["cut_bytes"] < b0["cut_bytes"]
print(f"tolerance: optimum {b0['optimum']} params crossing {b0['cut_bytes']} B "
      f"({len(inside)} cuts inside an MLP); within 2%: {b2['largest']} (+{b2['largest'] / b2['optimum'] - 1:.2%}) "
      f"crossing {b2['cut_bytes']} B, every cut one residual")
PYEOF

"$ONNXPIPE" partition gpt.onnx --stages 4 --batch 2 --dot gpt.dot --out-dir stages >/dev/null
grep -q "style=bold" gpt.dot
"$PY" "$SRC_DIR/tests/ref/run_chain.py" gpt.onnx stages 4 --dim batch=2
"$ONNXPIPE" partition mlp.onnx --stages 3 --batch 4 --out-dir mlp-stages >/dev/null
"$PY" "$SRC_DIR/tests/ref/run_chain.py" mlp.onnx mlp-stages 3 --dim batch=4
echo "partition CLI: errors, table, JSON, dot and stage chains ok"
