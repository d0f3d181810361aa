#!/usr/bin/env bash
# Every key that `onnxpipe partition --json` and `onnxpipe plan --json` print is named in the
# key lists of docs/partition.md and docs/plan.md (a key added to the output fails here until
# the page documents it). Runs both on the example GPT; prints the keys seen and any key the
# page lists that these runs did not print (keys that only some models or options give).
set -euo pipefail
: "${ONNXPIPE:?}" "${BUILD_DIR:?}" "${SRC_DIR:?}"
OUT=$BUILD_DIR/test-out/json_doc
rm -rf "$OUT"
mkdir -p "$OUT"
cd "$OUT"
loss=(--loss cross_entropy --logits logits --labels labels)
"$ONNXPIPE" example gpt --layers 2 --d-model 64 --heads 2 --vocab 256 --seq 32 -o gpt.onnx >/dev/null
"$ONNXPIPE" partition gpt.onnx --stages 3 --batch 8 --microbatches 4 --balance memory "${loss[@]}" --json >p-memory.json
"$ONNXPIPE" partition gpt.onnx --stages 2 --batch 8 --balance time --link-gbps 10 --json >p-time.json
"$ONNXPIPE" plan --model gpt.onnx --devices 2 --batch 8 --gflops 50 "${loss[@]}" --json >plan.json
python3 - "$SRC_DIR" <<'PYEOF'
import json, re, sys
src = sys.argv[1]

def keys(o, acc):
    if isinstance(o, dict):
        for k, v in o.items():
            acc.add(k)
            keys(v, acc)
    elif isinstance(o, list):
        for v in o:
            keys(v, acc)
    return acc

def listed(page, start, end):
    text = open(f"{src}/docs/{page}").read()
    a = text.index(start)
    b = text.index(end, a + len(start))
    return set(re.findall(r"\b([a-z][a-z0-9_]*)\b", text[a:b]))

fail = 0
for page, start, end, files in [("partition.md", "`--json` keys (stable):", "Trainable parameters are",
                                 ["p-memory.json", "p-time.json"]),
                                ("plan.md", "`--json` keys:", "\n\n", ["plan.json"])]:
    seen = set()
    for f in files:
        keys(json.load(open(f)), seen)
    doc = listed(page, start, end)
    print(f"{page}: {len(seen)} keys printed by {', '.join(files)}")
    for k in sorted(seen - doc):
        print(f"FAIL: docs/{page} does not list the key '{k}' that the command prints"); fail = 1
    unseen = sorted(k for k in doc - seen if "_" in k)   # the prose's words have none
    if unseen:
        print(f"  listed, not printed by these runs (other models or options): {' '.join(unseen)}")
sys.exit(fail)
PYEOF
echo "ok: every --json key of partition and plan is documented"
