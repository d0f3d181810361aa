#!/usr/bin/env bash
# examples/data/tokenize_data.py (issue 26 §1): text, JSONL and HF datasets folders,
# tokenized with HF tokenizers and sentencepiece models trained here, written as token
# streams (raw, llm.c) and Megatron-LM indexed datasets, read back with numpy and
# megatron-core and compared with the tokenizers' own encode(), document by document, EOS
# included (tests/ref/tokenize_data_ref.py); `onnxpipe data show` of each output equals the
# Python windows; training on the llm.c stream and on the Megatron dataset of the same
# documents gives the same losses bit for bit; bad input is refused with a clear error.
# Python: the export venv (scripts/export-venv.sh).
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/data-tokenize
rm -rf "$OUT"
mkdir -p "$OUT"
XPY=$("$SRC_DIR/scripts/export-venv.sh" | tail -n 1)/bin/python   # tokenizers, sentencepiece, datasets, megatron-core
"$XPY" "$SRC_DIR/tests/ref/tokenize_data_ref.py" "$SRC_DIR" "$ONNXPIPE" "$OUT"

g=(--model "$OUT/gpt.onnx" --loss cross_entropy --logits logits --labels labels --batch 8 --microbatches 2 --steps 4
   --seq 16 --quiet --shuffle)
"$ONNXPIPE" example gpt --layers 1 --d-model 32 --heads 2 --vocab 400 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" train "${g[@]}" --data "$OUT/hf-paras-llmc.bin" --losses "$OUT/llmc.losses" >/dev/null
"$ONNXPIPE" train "${g[@]}" --data "$OUT/hf-jsonl-mega" --losses "$OUT/mega.losses" >/dev/null
cmp "$OUT/llmc.losses" "$OUT/mega.losses"
echo "training on the llm.c stream and on the Megatron dataset of the same documents: the same 4 losses," \
     "bit for bit (last $(tail -1 "$OUT/mega.losses"))"

# shellcheck source=lib/run.sh
. "$SRC_DIR/tests/lib/run.sh"
echo "== bad input is refused, naming the file and what to do"
tok=("$XPY" "$SRC_DIR/examples/data/tokenize_data.py")
refused "docs.jsonl:1 has no field 'body' (it has: id, text); pass --field NAME" \
    "${tok[@]}" --tokenizer "$OUT/hf/tokenizer.json" --field body "$OUT/docs.jsonl" -o "$OUT/x.bin"
refused "ds' has no column 'body' (it has: id, text)" \
    "${tok[@]}" --sentencepiece "$OUT/sp.model" --field body "$OUT/ds" -o "$OUT/x.bin"
refused "dd' is a DatasetDict of splits train, valid; pass --split NAME" \
    "${tok[@]}" --sentencepiece "$OUT/sp.model" "$OUT/dd" -o "$OUT/x.bin"
printf '\n  \n\n' >"$OUT/blank.txt"
refused "no documents in .*blank.txt (3 empty)" \
    "${tok[@]}" --sentencepiece "$OUT/sp.model" --lines "$OUT/blank.txt" -o "$OUT/x.bin"
refused "token id 6[0-9]* does not fit uint16 .*leave --dtype out" \
    "${tok[@]}" --tokenizer "$OUT/hf-wide/tokenizer.json" --field body --dtype uint16 "$OUT/wide.jsonl" -o "$OUT/x.bin"
[ ! -e "$OUT/x.bin" ] || { echo "FAILED: a refused run left $OUT/x.bin"; exit 1; }
refused "names no EOS token; pass --eos ID or --no-eos" \
    "${tok[@]}" --tokenizer "$OUT/hf-noeos/tokenizer.json" "$OUT/docs.jsonl" -o "$OUT/x.bin"
refused "sp.model' is not an HF tokenizers file .*goes to --sentencepiece" \
    "${tok[@]}" --tokenizer "$OUT/sp.model" "$OUT/docs.jsonl" -o "$OUT/x.bin"
refused "stores uint16 or int32, not uint32" \
    "${tok[@]}" --tokenizer "$OUT/hf/tokenizer.json" --format megatron --dtype uint32 "$OUT/docs.jsonl" -o "$OUT/x"
