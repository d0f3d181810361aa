#!/usr/bin/env python3
"""Tokenize text into a dataset that `onnxpipe train --data` reads in place.

Run it in the export venv (scripts/export-venv.sh prints its path; it has tokenizers,
sentencepiece, datasets, numpy and megatron-core):

    venv=$(scripts/export-venv.sh)
    $venv/bin/python examples/data/tokenize_data.py --tokenizer tokenizer.json \\
        corpus/*.txt -o train.bin
    onnxpipe data show train.bin --seq 1024

Inputs (any number, read in order):
* a text file: one document per file; --lines: one per line; --paragraphs: documents
  separated by blank lines;
* a JSONL file (.jsonl): one document per line, its --field (default "text");
* a folder written by HuggingFace datasets' save_to_disk: a Dataset, or a DatasetDict and
  --split NAME (its only split when it has one); the --field column.
Documents whose text is empty or only white space are skipped (and counted).

Tokenizer (a file you have; nothing is downloaded): --tokenizer tokenizer.json (HF
tokenizers; its truncation and padding are turned off) or --sentencepiece m.model. Text is
encoded without the tokenizer's special tokens; --bos puts its BOS before each document.

Each document ends with the EOS id (the tokenizer's: sentencepiece's eos_id, or for
tokenizer.json the eos_token of a tokenizer_config.json beside it, else its special token
<|endoftext|>, </s>, <|end_of_text|> or <eos>; --eos ID sets it; --no-eos leaves it out),
which is how `onnxpipe train --pack` finds document boundaries in a stream.

Outputs (-o):
* --format stream (default): OUT.bin, the tokens of all documents one after another,
  uint16 when every id of the vocabulary fits, else uint32 (--dtype forces one) -- nanoGPT's
  train.bin; --llmc adds llm.c's 1024-byte header (magic 20240520, version 1 = uint16,
  2 = uint32, the token count);
* --format megatron: PREFIX.bin + PREFIX.idx, a Megatron-LM indexed dataset with one
  document (of one sequence) per input document, uint16 or int32 (Megatron's DType has no
  uint32), written with megatron-core's IndexedDatasetBuilder when it imports, else by this
  script in the same byte layout (--writer own forces that).
"""
import argparse
import json
import logging
import os
import struct
import sys
import time
import warnings

import numpy as np

CHUNK = 1024  # documents encoded per batch
LLMC_MAGIC = 20240520
MEGATRON_HEADER = b"MMIDIDX\x00\x00"
MEGATRON_CODES = {np.uint16: 8, np.int32: 4}  # megatron.core.datasets.indexed_dataset.DType
EOS_NAMES = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>")
BOS_NAMES = ("<|begin_of_text|>", "<s>", "<bos>")


class InputError(Exception):
    """Bad input or options; main() prints it as one line and exits 1."""


# ---------------------------------------------------------------------------- inputs


def text_documents(path, split):
    """(where, text) of a text file: the whole file, its lines (without their line ends),
    or its paragraphs (runs of lines that are not blank). Lines are read as they come."""
    with open(path, encoding="utf-8") as f:
        if split == "file":
            yield path, f.read()
            return
        para, first = [], 0
        for i, line in enumerate(f, 1):
            if split == "lines":
                yield f"{path}:{i}", line.rstrip("\n")
            elif line.strip():
                first = first if para else i
                para.append(line)
            elif para:
                yield f"{path}:{first}", "".join(para).rstrip("\n")
                para = []
        if para:
            yield f"{path}:{first}", "".join(para).rstrip("\n")


def jsonl_documents(path, field):
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}:{i + 1}: not a JSON object ({e})") from None
            if not isinstance(row, dict) or field not in row:
                keys = ", ".join(row) if isinstance(row, dict) else type(row).__name__
                raise InputError(f"{path}:{i + 1} has no field '{field}' (it has: {keys}); pass --field NAME")
            if not isinstance(row[field], str):
                raise InputError(f"{path}:{i + 1}: field '{field}' is {type(row[field]).__name__}, not text")
            yield f"{path}:{i + 1}", row[field]


def datasets_documents(path, field, split):
    """Rows of a save_to_disk folder (a Dataset, or one split of a DatasetDict)."""
    import datasets

    ds = datasets.load_from_disk(path)
    where = path
    if isinstance(ds, datasets.DatasetDict):
        if split is None and len(ds) == 1:
            split = next(iter(ds))
        if split not in ds:
            raise InputError(f"'{path}' is a DatasetDict of splits {', '.join(ds)}; pass --split NAME")
        ds, where = ds[split], f"{path}[{split}]"
    elif split is not None:
        raise InputError(f"'{path}' is a Dataset, not a DatasetDict: it has no split '{split}'; leave --split out")
    if field not in ds.column_names:
        raise InputError(f"'{where}' has no column '{field}' (it has: {', '.join(ds.column_names)}); pass --field NAME")
    i = 0
    for rows in ds.select_columns([field]).iter(batch_size=CHUNK):
        for text in rows[field]:
            if not isinstance(text, str):
                raise InputError(f"'{where}' row {i}: column '{field}' is {type(text).__name__}, not text")
            yield f"{where} row {i}", text
            i += 1


def documents(args):
    for path in args.inputs:
        if os.path.isdir(path):
            if not any(os.path.exists(os.path.join(path, f)) for f in ("dataset_info.json", "dataset_dict.json")):
                raise InputError(f"'{path}' is a folder but not one HF datasets' save_to_disk wrote "
                                 "(no dataset_info.json / dataset_dict.json)")
            yield from datasets_documents(path, args.field, args.split)
        elif path.endswith(".jsonl"):
            yield from jsonl_documents(path, args.field)
        else:
            yield from text_documents(path, args.docs)


# ------------------------------------------------------------------------- tokenizers


class HFTokenizer:
    """A tokenizer.json of HF tokenizers; eos/bos from a tokenizer_config.json beside it."""

    def __init__(self, path):
        from tokenizers import Tokenizer

        try:
            self.tok = Tokenizer.from_file(path)
        except Exception as e:
            raise InputError(f"'{path}' is not an HF tokenizers file ({e}); a sentencepiece model goes to "
                             "--sentencepiece") from None
        self.tok.no_truncation()
        self.tok.no_padding()
        self.path = path
        self.vocab = self.tok.get_vocab_size(with_added_tokens=True)
        config = os.path.join(os.path.dirname(path), "tokenizer_config.json")
        self.config = json.load(open(config, encoding="utf-8")) if os.path.exists(config) else {}

    def special(self, key, names):
        token = self.config.get(key)
        if isinstance(token, dict):
            token = token.get("content")
        candidates = [token] if token else names
        for name in candidates:
            if self.tok.token_to_id(name) is not None:
                return self.tok.token_to_id(name), name
        return None, None

    def eos(self):
        return self.special("eos_token", EOS_NAMES)

    def bos(self):
        return self.special("bos_token", BOS_NAMES)

    def encode(self, texts):
        return [e.ids for e in self.tok.encode_batch(texts, add_special_tokens=False)]


class SPTokenizer:
    """A sentencepiece model file."""

    def __init__(self, path):
        import sentencepiece

        try:
            self.sp = sentencepiece.SentencePieceProcessor(model_file=path)
        except Exception as e:
            raise InputError(f"'{path}' is not a sentencepiece model ({e}); a tokenizer.json goes to --tokenizer") from None
        self.path = path
        self.vocab = self.sp.get_piece_size()

    def piece(self, i):
        return (i, self.sp.id_to_piece(i)) if i >= 0 else (None, None)

    def eos(self):
        return self.piece(self.sp.eos_id())

    def bos(self):
        return self.piece(self.sp.bos_id())

    def encode(self, texts):
        return self.sp.encode(texts)


# ---------------------------------------------------------------------------- writers


class StreamWriter:
    """Tokens one after another; with llmc, behind llm.c's 1024-byte header (int32[256]:
    magic, version, token count), written last, when the count is known."""

    def __init__(self, path, dtype, llmc):
        self.f, self.dtype, self.llmc, self.count = open(path, "wb"), dtype, llmc, 0
        if llmc:
            self.f.write(bytes(1024))

    def add(self, ids):
        self.f.write(ids.astype(self.dtype).tobytes())
        self.count += len(ids)

    def close(self):
        if self.llmc:
            if self.count >= 2**31:
                raise InputError(f"{self.count} tokens: more than llm.c's int32 header counts; leave --llmc out")
            header = np.zeros(256, np.int32)
            header[:3] = LLMC_MAGIC, 1 if self.dtype == np.uint16 else 2, self.count
            self.f.seek(0)
            self.f.write(header.tobytes())
        self.f.close()


class CoreMegatronWriter:
    """megatron-core's own IndexedDatasetBuilder: one item and end_document per document."""

    def __init__(self, prefix, dtype):
        # megatron.core imports its training side too, which warns about what it lacks
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import torch
            from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

        self.torch, self.prefix, self.count = torch, prefix, 0
        self.builder = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)

    def add(self, ids):
        self.builder.add_item(self.torch.from_numpy(ids))
        self.builder.end_document()
        self.count += len(ids)

    def close(self):
        self.builder.finalize(self.prefix + ".idx")


class OwnMegatronWriter:
    """The same files without megatron-core. PREFIX.idx: b"MMIDIDX\\0\\0", version 1
    (uint64), the dtype code (uint8), the sequence count and the count of document indices
    (uint64 each), then int32 sequence lengths, int64 byte offsets of the sequences, and the
    int64 document indices (0, then the sequence count after each document)."""

    def __init__(self, prefix, dtype):
        self.prefix, self.dtype = prefix, dtype
        self.bin = open(prefix + ".bin", "wb")
        self.lengths, self.count = [], 0

    def add(self, ids):
        self.bin.write(ids.astype(self.dtype).tobytes())
        self.lengths.append(len(ids))
        self.count += len(ids)

    def close(self):
        self.bin.close()
        lengths = np.array(self.lengths, np.int32)
        offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)[:-1]]) * np.dtype(self.dtype).itemsize
        doc_index = np.arange(len(lengths) + 1, dtype=np.int64)
        with open(self.prefix + ".idx", "wb") as f:
            f.write(MEGATRON_HEADER + struct.pack("<QB", 1, MEGATRON_CODES[self.dtype]))
            f.write(struct.pack("<QQ", len(lengths), len(doc_index)))
            for a in (lengths, offsets.astype(np.int64), doc_index):
                f.write(a.tobytes())


def megatron_writer(prefix, dtype, which):
    """The writer and how it writes: megatron-core's builder, or ours where it does not import."""
    if which == "own":
        return OwnMegatronWriter(prefix, dtype), "this script's writer (megatron-core's layout)"
    try:
        return CoreMegatronWriter(prefix, dtype), "megatron-core's IndexedDatasetBuilder"
    except Exception as e:  # not installed, or an install whose import fails
        if which == "megatron-core":
            raise InputError(f"--writer megatron-core: it does not import ({e})") from None
        return OwnMegatronWriter(prefix, dtype), f"this script's writer (megatron-core does not import: {e})"


# ------------------------------------------------------------------------------- main


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="text files, .jsonl files, save_to_disk folders")
    tok = p.add_mutually_exclusive_group(required=True)
    tok.add_argument("--tokenizer", metavar="tokenizer.json", help="an HF tokenizers file")
    tok.add_argument("--sentencepiece", metavar="m.model", help="a sentencepiece model")
    docs = p.add_mutually_exclusive_group()
    docs.add_argument("--lines", dest="docs", action="store_const", const="lines",
                      help="text files: one document per line (default: one per file)")
    docs.add_argument("--paragraphs", dest="docs", action="store_const", const="paragraphs",
                      help="text files: documents separated by blank lines")
    p.set_defaults(docs="file")
    p.add_argument("--field", default="text", help="JSONL field / datasets column of the text (default: text)")
    p.add_argument("--split", help="the split of a DatasetDict folder (e.g. train)")
    p.add_argument("--format", choices=("stream", "megatron"), default="stream",
                   help="a token stream .bin (default) or a Megatron-LM indexed dataset")
    p.add_argument("--llmc", action="store_true", help="stream: llm.c's 1024-byte header before the tokens")
    p.add_argument("--dtype", choices=("uint16", "uint32", "int32"),
                   help="token type (default: uint16 when the vocabulary fits; else uint32, int32 for megatron)")
    p.add_argument("--eos", type=int, metavar="ID", help="the id that ends each document (default: the tokenizer's)")
    p.add_argument("--no-eos", action="store_true", help="no EOS after documents (a stream then has no boundaries)")
    p.add_argument("--bos", action="store_true", help="the tokenizer's BOS before each document")
    p.add_argument("--writer", choices=("auto", "megatron-core", "own"), default="auto",
                   help="megatron: megatron-core's builder when it imports (auto), or this script's")
    p.add_argument("-o", "--out", required=True, help="stream: the .bin file; megatron: PREFIX (.bin/.idx)")
    args = p.parse_args(argv)
    if args.llmc and args.format != "stream":
        p.error("--llmc is a stream header; leave it out with --format megatron")
    if args.eos is not None and args.no_eos:
        p.error("--eos ID and --no-eos contradict each other")
    if args.eos is not None and args.eos < 0:
        p.error(f"--eos {args.eos}: token ids are 0 or more")
    wide = "uint32" if args.format == "stream" else "int32"
    if args.dtype not in (None, "uint16", wide):
        p.error(f"--format {args.format} stores uint16 or {wide}, not {args.dtype}")
    return args


def special_id(tokenizer, which, given):
    """The EOS/BOS id: given, else the tokenizer's, else a clear error."""
    if given is not None:
        return given
    i, name = tokenizer.eos() if which == "eos" else tokenizer.bos()
    if i is None:
        hint = "pass --eos ID or --no-eos" if which == "eos" else "leave --bos out"
        raise InputError(f"'{tokenizer.path}' names no {which.upper()} token; {hint}")
    print(f"{which.upper()}: {name!r} = {i}")
    return i


def run(args):
    for path in (args.tokenizer, args.sentencepiece):
        if path and not os.path.isfile(path):
            raise InputError(f"tokenizer '{path}' does not exist")
    for path in args.inputs:  # all of them before any is read
        if not os.path.exists(path):
            raise InputError(f"input '{path}' does not exist")
    tokenizer = HFTokenizer(args.tokenizer) if args.tokenizer else SPTokenizer(args.sentencepiece)
    eos = None if args.no_eos else special_id(tokenizer, "eos", args.eos)
    bos = special_id(tokenizer, "bos", None) if args.bos else None
    top = max(tokenizer.vocab - 1, eos or 0, bos or 0)  # the largest id a document can hold
    wide = np.uint32 if args.format == "stream" else np.int32
    dtype = {"uint16": np.uint16, "uint32": np.uint32, "int32": np.int32}.get(args.dtype)
    dtype = dtype or (np.uint16 if top <= 0xFFFF else wide)
    limit = np.iinfo(dtype).max
    if top > np.iinfo(wide).max:
        raise InputError(f"ids up to {top} do not fit {np.dtype(wide).name}")

    if args.format == "stream":
        out = args.out
        writer, how = StreamWriter(out, dtype, args.llmc), "llm.c header" if args.llmc else "raw"
        made = [out]
    else:
        out = args.out[:-4] if args.out.endswith((".bin", ".idx")) else args.out
        writer, how = megatron_writer(out, dtype, args.writer)
        made = [out + ".bin", out + ".idx"]
    try:
        ndocs, nskip, last = 0, 0, time.time()
        batch = []
        for where, text in documents(args):
            if text.strip():
                batch.append((where, text))
            else:
                nskip += 1
            if len(batch) == CHUNK:
                ndocs += write_batch(writer, tokenizer, batch, bos, eos, dtype, limit, top)
                batch = []
                if time.time() - last > 10:
                    print(f"  {ndocs} documents, {writer.count} tokens ...", file=sys.stderr)
                    last = time.time()
        ndocs += write_batch(writer, tokenizer, batch, bos, eos, dtype, limit, top)
        if ndocs == 0:
            raise InputError(f"no documents in {', '.join(args.inputs)}" + (f" ({nskip} empty)" if nskip else ""))
        ntok = writer.count
        writer.close()
    except BaseException:
        for path in made:
            if os.path.exists(path):
                os.remove(path)
        raise
    name = np.dtype(dtype).name
    ends = "no EOS" if eos is None else f"each ending in EOS {eos}"
    skipped = f"; skipped {nskip} empty documents" if nskip else ""
    print(f"wrote {ntok} tokens in {ndocs} documents ({ends}) as {name}, vocabulary {tokenizer.vocab}{skipped}")
    print(f"  {' + '.join(made)}: {args.format}, {how}")
    flag = " --token-dtype uint32" if args.format == "stream" and not args.llmc and dtype == np.uint32 else ""
    print(f"  next: onnxpipe data show {out} --seq T{flag}")


def write_batch(writer, tokenizer, batch, bos, eos, dtype, limit, top):
    """Encodes a batch of documents and adds each, BOS/EOS around; the number added."""
    head, tail = [bos] if bos is not None else [], [eos] if eos is not None else []
    for (where, _), ids in zip(batch, tokenizer.encode([t for _, t in batch])):
        doc = np.array(head + ids + tail, dtype=np.int64)
        if doc.max() > limit:
            raise InputError(f"{where}: token id {doc.max()} does not fit {np.dtype(dtype).name} "
                             f"(the vocabulary's largest id is {top}); leave --dtype out or pass a wider one")
        writer.add(doc)
    return len(batch)


def main(argv=None):
    args = parse_args(argv)
    try:
        run(args)
    except (InputError, OSError) as e:
        print(f"tokenize_data: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
