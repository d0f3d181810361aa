#!/usr/bin/env bash
# --pack against padding each document to the longest (issue 26 §5): a random-init HF Llama
# (L=2, D=128, H=4, V=512, T=128 by default) exported with a 4-D attention_mask and
# position_ids (examples/export/export_model.py, dynamo), trained one epoch over the same
# corpus both ways: DOCS documents of log-normal lengths (median 48 tokens, sigma 0.8, at
# most T, so --pad pads every document to the longest), EOS-separated in a uint16 stream.
# Both runs train on every token of every document once (an epoch's whole batches); tokens/s
# counts the tokens that are not padding, so the rates compare the same work. A third run
# pads in sequence buckets (--pad --seq-buckets T/4,T/2,T): each step at its bucket's length.
#
# One JSON line per run (mode, samples, steps, padding, seconds, tokens/s, first and last
# loss), then the ratios pack / pad and buckets / pad. One process on one core
# (OPENBLAS_NUM_THREADS=1).
#
# Usage: bench/pack.sh [BUILD_DIR]   (a Release build)
# Env: DOCS (3000), SEQ (128), BATCH (16), LAYERS (2), DIM (128), BUCKETS (T/4,T/2,T), WORK (keep files there)
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" 2>/dev/null && pwd) || BUILD=${1:-$SRC/build}
ONNXPIPE=$BUILD/onnxpipe
DOCS=${DOCS:-3000} SEQ=${SEQ:-128} BATCH=${BATCH:-16} LAYERS=${LAYERS:-2} DIM=${DIM:-128}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
export OPENBLAS_NUM_THREADS=1
XPY=$("$SRC/scripts/export-venv.sh" | tail -n 1)/bin/python

fail() { echo "{\"bench\": \"pack\", \"error\": \"$1\"}"; exit 1; }
[ -x "$ONNXPIPE" ] || fail "no $ONNXPIPE"
"$XPY" "$SRC/examples/export/export_model.py" --model llama --exporter dynamo --attention-mask 4d --position-ids \
    --layers "$LAYERS" --d-model "$DIM" --heads 4 --vocab 512 --seq "$SEQ" --no-check \
    -o "$WORK/llama.onnx" >"$WORK/export.log" 2>&1 || fail "export failed: $(tail -1 "$WORK/export.log")"
"$XPY" - "$WORK/docs.bin" "$DOCS" "$SEQ" <<'PYEOF' || fail "corpus"
import sys
import numpy as np
path, n, seq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
lengths = np.clip(rng.lognormal(np.log(48), 0.8, n).astype(int), 2, seq)
lengths[0] = seq  # the longest document is T long
docs = [np.append(rng.integers(2, 512, k - 1), 1) for k in lengths]
np.concatenate(docs).astype(np.uint16).tofile(path)
PYEOF

BUCKETS=${BUCKETS:-$((SEQ / 4)),$((SEQ / 2)),$SEQ}
for mode in pad pack buckets; do
    log=$WORK/$mode.log
    how=("--$mode")
    [ "$mode" = buckets ] && how=(--pad --seq-buckets "$BUCKETS")
    taskset -c 0 "$ONNXPIPE" train --model "$WORK/llama.onnx" --data "$WORK/docs.bin" --seq "$SEQ" "${how[@]}" --eos 1 \
        --batch "$BATCH" --epochs 1 --loss cross_entropy --logits logits --labels labels \
        --optimizer adamw --lr 1e-3 --losses "$WORK/$mode.losses" >"$log" 2>&1 || fail "$mode: $(grep -m1 error "$log")"
    data=$(grep -m1 '^data: ' "$log")
    last=$(grep '^trained ' "$log" | tail -1)
    # data: packed D documents (N tokens) into S samples of T tokens: P% padding
    # trained K steps in X s: loss A -> B, R tokens/s
    "$XPY" - "$mode" "$data" "$last" "$WORK/$mode.losses" <<'PYEOF'
import json, re, sys
import numpy as np
mode, data, last, losses = sys.argv[1:5]
d = re.search(r"(\d+) documents \((\d+) tokens\) into (\d+) samples of (\d+) tokens: ([\d.]+)% padding", data)
t = re.search(r"trained (\d+) steps in ([\d.]+) s: .*?, (\d+) tokens/s", last)
l = np.loadtxt(losses, ndmin=2)[:, 1]
print(json.dumps({"bench": "pack", "mode": mode, "documents": int(d[1]), "tokens": int(d[2]), "samples": int(d[3]),
                  "seq": int(d[4]), "padding": float(d[5]) / 100, "steps": int(t[1]), "seconds": float(t[2]),
                  "tokens_per_s": int(t[3]), "loss_first": float(l[0]), "loss_last": float(l[-1])}))
PYEOF
done | tee "$WORK/lines.jsonl"
"$XPY" -c "
import json, sys
r = {j['mode']: j for j in map(json.loads, open('$WORK/lines.jsonl'))}
print(json.dumps({'bench': 'pack', 'figure': 'tokens/s pack / pad', 'ratio': round(r['pack']['tokens_per_s'] / r['pad']['tokens_per_s'], 3),
                  'padding_pack': r['pack']['padding'], 'padding_pad': r['pad']['padding'], 'cores': 1,
                  'loadavg': open('/proc/loadavg').read().split()[:3]}))
print(json.dumps({'bench': 'pack', 'figure': 'tokens/s pad in buckets / pad', 'buckets': '$BUCKETS',
                  'ratio': round(r['buckets']['tokens_per_s'] / r['pad']['tokens_per_s'], 3), 'cores': 1}))"
