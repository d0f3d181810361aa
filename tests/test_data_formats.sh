#!/usr/bin/env bash
# The data users have (issue 26 §1), read in place: one byte-level text as
# - onnxpipe's own dataset (`onnxpipe data text`),
# - a folder of NAME.npy files (np.save),
# - a raw uint16 token stream (nanoGPT's .bin) and a uint32 one (--token-dtype uint32),
# - llm.c's .bin (its 1024-byte header),
# - a Megatron-LM indexed dataset written by megatron-core's IndexedDatasetBuilder, as
#   several documents;
# `onnxpipe data show` of each is compared with a Python reader of the same file (numpy,
# megatron-core's IndexedDataset), sample by sample; training on each gives the same
# losses bit for bit (they are the same samples); and each mismatch is refused naming the
# file and what to change. Python: the export venv (scripts/export-venv.sh).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/data-formats
rm -rf "$OUT"
mkdir -p "$OUT"
XPY=$("$SRC_DIR/scripts/export-venv.sh" | tail -n 1)/bin/python   # numpy, torch, megatron-core
TEXT=/usr/share/common-licenses/GPL-3
SEQ=16
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq $SEQ -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text "$TEXT" -o "$OUT/own" --seq $SEQ >/dev/null

"$XPY" - "$TEXT" "$OUT" <<'PYEOF'
import os, struct, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
text, out = sys.argv[1], sys.argv[2]
tok = np.frombuffer(open(text, "rb").read(), dtype=np.uint8)
seq = 16
n = (len(tok) - 1) // seq
os.makedirs(f"{out}/npy")
np.save(f"{out}/npy/input_ids.npy", tok[: n * seq].astype(np.int64).reshape(n, seq))
np.save(f"{out}/npy/labels.npy", tok[1 : n * seq + 1].astype(np.int64).reshape(n, seq))
tok.astype(np.uint16).tofile(f"{out}/stream16.bin")
tok.astype(np.uint32).tofile(f"{out}/stream32.bin")
hdr = np.zeros(256, dtype=np.int32)
hdr[0], hdr[1], hdr[2] = 20240520, 1, len(tok)
with open(f"{out}/llmc.bin", "wb") as f:
    f.write(hdr.tobytes())
    f.write(tok.astype(np.uint16).tobytes())
import torch  # noqa: E402
from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
b = IndexedDatasetBuilder(f"{out}/mega.bin", dtype=np.uint16)
cuts = [0, 1000, 1001, 9000, 20000, len(tok)]   # documents of every length, one of a single token
for a, z in zip(cuts, cuts[1:]):
    b.add_document(torch.from_numpy(tok[a:z].astype(np.int64)), [z - a])
b.finalize(f"{out}/mega.idx")
print(f"wrote {len(tok)} tokens as npy, uint16/uint32 streams, llm.c and a Megatron dataset of {len(cuts) - 1} documents")
PYEOF

# Python's view of sample s (input_ids and labels), per form, against `onnxpipe data show`
"$XPY" - "$OUT" "$ONNXPIPE" <<'PYEOF'
import json, subprocess, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
out, onnxpipe = sys.argv[1], sys.argv[2]
seq = 16
def windows(stream):
    n = (len(stream) - 1) // seq
    return {"input_ids": stream[: n * seq].reshape(n, seq), "labels": stream[1 : n * seq + 1].reshape(n, seq)}
from megatron.core.datasets.indexed_dataset import IndexedDataset
mega = IndexedDataset(f"{out}/mega")
mega_stream = np.concatenate([mega[i] for i in range(len(mega))]).astype(np.int64)
forms = {
    "npy": ([f"{out}/npy"], {k: np.load(f"{out}/npy/{k}.npy") for k in ("input_ids", "labels")}),
    "uint16 stream": ([f"{out}/stream16.bin", "--seq", "16"], windows(np.fromfile(f"{out}/stream16.bin", np.uint16).astype(np.int64))),
    "uint32 stream": ([f"{out}/stream32.bin", "--seq", "16", "--token-dtype", "uint32"],
                      windows(np.fromfile(f"{out}/stream32.bin", np.uint32).astype(np.int64))),
    "llm.c": ([f"{out}/llmc.bin", "--seq", "16"], windows(np.fromfile(f"{out}/llmc.bin", np.uint16, offset=1024).astype(np.int64))),
    "megatron": ([f"{out}/mega", "--seq", "16"], windows(mega_stream)),
}
for name, (args, ref) in forms.items():
    n = len(ref["input_ids"])
    picks = [0, 1, 62, n // 2, n - 1]
    for s in picks:
        text = subprocess.run([onnxpipe, "data", "show", *args, "--first", str(s), "--count", "1"], check=True,
                              capture_output=True, text=True).stdout.splitlines()
        head, row = text[0], json.loads(text[-1])
        assert f"{n} samples" in head, (name, head, n)
        for k in ("input_ids", "labels"):
            assert row[k] == ref[k][s].tolist(), (name, s, k, row[k], ref[k][s].tolist())
    print(f"{name:14s} {head.split(': ', 1)[1]:28s} samples {picks} equal the Python reader's "
          f"({'numpy' if name != 'megatron' else 'megatron-core IndexedDataset'})")
PYEOF

g=(--model "$OUT/gpt.onnx" --loss cross_entropy --logits logits --labels labels --batch 8 --microbatches 2 --steps 6
   --quiet --shuffle)
"$ONNXPIPE" train "${g[@]}" --data "$OUT/own" --losses "$OUT/own.losses" >/dev/null
for form in "npy:$OUT/npy" "stream16:$OUT/stream16.bin --seq $SEQ" "stream32:$OUT/stream32.bin --seq $SEQ --token-dtype uint32" \
            "llmc:$OUT/llmc.bin --seq $SEQ" "megatron:$OUT/mega --seq $SEQ"; do
    tag=${form%%:*}
    read -ra data <<<"${form#*:}"
    "$ONNXPIPE" train "${g[@]}" --data "${data[@]}" --losses "$OUT/$tag.losses" >/dev/null
    cmp "$OUT/own.losses" "$OUT/$tag.losses"
done
echo "training on each form: the same 6 losses as onnxpipe's own dataset, bit for bit ($(tail -1 "$OUT/own.losses"))"

# shellcheck source=lib/run.sh
. "$SRC_DIR/tests/lib/run.sh"
echo "== mismatches are refused before step 1, naming the file"
refused "pass --seq T" "$ONNXPIPE" train "${g[@]}" --data "$OUT/stream16.bin"
refused "needs int64 \[16\]\|must be int64\|shape" "$ONNXPIPE" train "${g[@]}" --data "$OUT/stream16.bin" --seq 8
printf 'x' >>"$OUT/stream32.bin"
refused "stream32.bin' has .* bytes, not a whole number of uint32 tokens" "$ONNXPIPE" train "${g[@]}" \
    --data "$OUT/stream32.bin" --seq $SEQ --token-dtype uint32
head -c 3000 "$OUT/mega.bin" >"$OUT/cut.bin" && cp "$OUT/mega.idx" "$OUT/cut.idx"
refused "cut.bin' holds 3000 bytes, but its index" "$ONNXPIPE" train "${g[@]}" --data "$OUT/cut" --seq $SEQ
mkdir -p "$OUT/empty"
refused "holds neither dataset.json nor .npy files" "$ONNXPIPE" train "${g[@]}" --data "$OUT/empty"
"$XPY" -c "import numpy as np; np.save('$OUT/npy/labels.npy', np.zeros((5, 16), np.int64))"
refused "labels.npy' holds 5 samples, the dataset's other arrays" "$ONNXPIPE" train "${g[@]}" --data "$OUT/npy"
