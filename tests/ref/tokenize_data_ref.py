"""examples/data/tokenize_data.py against the tokenizers' own encode() (tests/test_data_tokenize.sh).

Trains a tiny byte-level BPE (HF tokenizers; one with 65,600 added tokens for the wide
types, one without special tokens) and a tiny sentencepiece model on the paragraphs of a
licence text, writes those paragraphs as every input kind the script reads (a file per
document, blank-line paragraphs, lines, JSONL, a datasets Dataset and DatasetDict folder),
runs the script for each tokenizer kind and each output (raw stream, llm.c stream, Megatron
through megatron-core's builder and through the script's own writer; uint16, uint32 and
int32) and reads every output back with numpy / megatron-core's IndexedDataset: the tokens
equal encode() of each document followed by its EOS, document by document; a Megatron
output equals, byte for byte, what megatron-core's IndexedDatasetBuilder writes from those
encode() results. `onnxpipe data show` of each output equals the Python windows of the
same tokens.
Usage: tokenize_data_ref.py SRC_DIR ONNXPIPE OUT
"""
import json
import logging
import os
import subprocess
import sys
import warnings

warnings.filterwarnings("ignore")
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # megatron-core's import of torch
import numpy as np  # noqa: E402
import sentencepiece as spm  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

src, onnxpipe, out = sys.argv[1:4]
script = os.path.join(src, "examples/data/tokenize_data.py")
TEXT = "/usr/share/common-licenses/GPL-3"
SEQ = 16
WIDE = 65600  # added tokens that push the HF vocabulary past uint16

paras = [" ".join(p.split()) for p in open(TEXT, encoding="utf-8").read().split("\n\n")]
docs = [p for p in paras if p]
print(f"corpus: {len(docs)} paragraphs of {TEXT}, {sum(map(len, docs))} characters")


def bpe(path, specials, wide=False, truncate=False):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(docs, trainers.BpeTrainer(vocab_size=400, special_tokens=specials, show_progress=False,
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if wide:
        tok.add_tokens([f"<w{i}>" for i in range(WIDE)])
    if truncate:  # a saved truncation must not cut documents (the script turns it off)
        tok.enable_truncation(8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tok.save(path)
    ref = Tokenizer.from_file(path)
    ref.no_truncation()
    return ref


def write_inputs():
    os.makedirs(f"{out}/files")
    for i, d in enumerate(docs[:25]):
        open(f"{out}/files/doc{i:03d}.txt", "w").write(d)
    open(f"{out}/paragraphs.txt", "w").write("\n\n".join(docs) + "\n")
    open(f"{out}/lines.txt", "w").write("\n".join(docs[:10]) + "\n\n   \n" + "\n".join(docs[10:]) + "\n")
    with open(f"{out}/docs.jsonl", "w") as f:
        for i, d in enumerate(docs):
            f.write(json.dumps({"id": i, "text": d}) + "\n")
    wide_docs = [f"{d} <w{WIDE - 1 - i}>" for i, d in enumerate(docs)]
    with open(f"{out}/wide.jsonl", "w") as f:
        for d in wide_docs:
            f.write(json.dumps({"body": d}) + "\n")
    import datasets
    datasets.disable_progress_bars()
    datasets.Dataset.from_dict({"id": list(range(len(docs))), "text": docs}).save_to_disk(f"{out}/ds")
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": docs[:-40]}),
                          "valid": datasets.Dataset.from_dict({"text": docs[-40:]})}).save_to_disk(f"{out}/dd")
    return wide_docs


hf = bpe(f"{out}/hf/tokenizer.json", ["<|endoftext|>"], truncate=True)
hf_wide = bpe(f"{out}/hf-wide/tokenizer.json", ["<unk>", "</s>"], wide=True)
json.dump({"eos_token": {"content": "</s>"}}, open(f"{out}/hf-wide/tokenizer_config.json", "w"))
bpe(f"{out}/hf-noeos/tokenizer.json", [])
spm.SentencePieceTrainer.train(sentence_iterator=iter(docs), model_prefix=f"{out}/sp", vocab_size=300,
                               model_type="bpe", minloglevel=2)
sp = spm.SentencePieceProcessor(model_file=f"{out}/sp.model")
wide_docs = write_inputs()
print(f"tokenizers: BPE of {hf.get_vocab_size()} (EOS <|endoftext|> = {hf.token_to_id('<|endoftext|>')}), "
      f"the same + {WIDE} added tokens ({hf_wide.get_vocab_size()}, EOS </s> from tokenizer_config.json), "
      f"sentencepiece BPE of {sp.get_piece_size()} (eos_id {sp.eos_id()}, bos_id {sp.bos_id()})")


def hf_encode(tok):
    return lambda texts: [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def tokenize(*args):
    r = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"FAILED: tokenize_data.py {' '.join(args)}\n{r.stdout}{r.stderr}")
    return r.stdout


def data_show(path, stream, extra=()):
    """`onnxpipe data show` at a few samples equals the windows of stream (input_ids, next tokens)."""
    n = (len(stream) - 1) // SEQ
    for s in sorted({0, 1, n // 2, n - 1}):
        text = subprocess.run([onnxpipe, "data", "show", path, "--seq", str(SEQ), *extra, "--first", str(s),
                               "--count", "1"], check=True, capture_output=True, text=True).stdout.splitlines()
        assert f"{n} samples" in text[0], (path, text[0], n)
        row = json.loads(text[-1])
        assert row["input_ids"] == stream[s * SEQ:(s + 1) * SEQ].tolist(), (path, s)
        assert row["labels"] == stream[s * SEQ + 1:(s + 1) * SEQ + 1].tolist(), (path, s)
    return text[0].split(": ", 1)[1]


def check(tag, args, encode, texts, eos, kind, dtype, bos=None):
    """Runs the script, reads its output back, compares it with encode(texts) + EOS per document."""
    path = f"{out}/{tag}" + (".bin" if kind != "megatron" else "")
    said = tokenize(*args, "-o", path)
    head = [bos] if bos is not None else []
    want = [np.array(head + ids + [eos], np.int64) for ids in encode(texts)]
    flat = np.concatenate(want)
    extra = []
    if kind == "megatron":
        from megatron.core.datasets.indexed_dataset import IndexedDataset
        ds = IndexedDataset(path)
        assert ds.index.dtype == dtype, (tag, ds.index.dtype)
        assert len(ds) == len(want), (tag, len(ds), len(want))
        assert (ds.document_indices == np.arange(len(want) + 1)).all(), tag
        for i, w in enumerate(want):
            assert (ds[i].astype(np.int64) == w).all(), (tag, "document", i)
        got, reader = np.concatenate([ds[i] for i in range(len(ds))]).astype(np.int64), "IndexedDataset"
        import torch
        from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
        b = IndexedDatasetBuilder(f"{out}/{tag}-core.bin", dtype=dtype)
        for w in want:
            b.add_item(torch.from_numpy(w))
            b.end_document()
        b.finalize(f"{out}/{tag}-core.idx")
        for ext in (".bin", ".idx"):
            assert open(path + ext, "rb").read() == open(f"{out}/{tag}-core{ext}", "rb").read(), (tag, ext)
        reader += " and bytes of megatron-core's IndexedDatasetBuilder fed encode()"
    else:
        offset = 1024 if kind == "llmc" else 0
        if kind == "llmc":
            h = np.fromfile(path, np.int32, count=3)
            assert h.tolist() == [20240520, 1 if dtype == np.uint16 else 2, len(flat)], (tag, h)
        elif dtype == np.uint32:
            extra = ["--token-dtype", "uint32"]
        assert os.path.getsize(path) == offset + len(flat) * np.dtype(dtype).itemsize, tag
        got, reader = np.fromfile(path, dtype, offset=offset).astype(np.int64), "numpy"
    assert (got == flat).all(), (tag, np.flatnonzero(got != flat)[:5])
    assert f"wrote {len(flat)} tokens in {len(want)} documents" in said and np.dtype(dtype).name in said, said
    show = data_show(path, flat, extra)
    print(f"{tag:16s} {len(want):3d} documents, {len(flat):6d} {np.dtype(dtype).name:6s} tokens = encode() + EOS {eos} "
          f"per document ({reader}); data show: {show}")
    return said


HF, HFW, SP = f"{out}/hf/tokenizer.json", f"{out}/hf-wide/tokenizer.json", f"{out}/sp.model"
files = sorted(os.listdir(f"{out}/files"))
EOT, EOS_W = hf.token_to_id("<|endoftext|>"), hf_wide.token_to_id("</s>")
check("hf-files-raw", ["--tokenizer", HF, *[f"{out}/files/{f}" for f in files]], hf_encode(hf), docs[:25], EOT,
      "raw", np.uint16)
check("hf-paras-llmc", ["--tokenizer", HF, "--paragraphs", "--llmc", f"{out}/paragraphs.txt"], hf_encode(hf), docs,
      EOT, "llmc", np.uint16)
check("hf-jsonl-mega", ["--tokenizer", HF, "--format", "megatron", f"{out}/docs.jsonl"], hf_encode(hf), docs, EOT,
      "megatron", np.uint16)
said = check("sp-lines-raw", ["--sentencepiece", SP, "--lines", f"{out}/lines.txt"], sp.encode, docs, sp.eos_id(),
             "raw", np.uint16)
assert "skipped 2 empty documents" in said, said
check("sp-ds-llmc", ["--sentencepiece", SP, "--llmc", f"{out}/ds"], sp.encode, docs, sp.eos_id(), "llmc", np.uint16)
check("sp-dd-own", ["--sentencepiece", SP, "--format", "megatron", "--split", "valid", "--bos", "--writer", "own",
                    f"{out}/dd"], sp.encode, docs[-40:], sp.eos_id(), "megatron", np.uint16, bos=sp.bos_id())
check("wide-raw", ["--tokenizer", HFW, "--field", "body", f"{out}/wide.jsonl"], hf_encode(hf_wide), wide_docs, EOS_W,
      "raw", np.uint32)
check("wide-llmc", ["--tokenizer", HFW, "--field", "body", "--llmc", f"{out}/wide.jsonl"], hf_encode(hf_wide),
      wide_docs, EOS_W, "llmc", np.uint32)
check("wide-own", ["--tokenizer", HFW, "--field", "body", "--format", "megatron", "--writer", "own",
                   f"{out}/wide.jsonl"], hf_encode(hf_wide), wide_docs, EOS_W, "megatron", np.int32)
