#!/usr/bin/python3
"""Writes small corpora in the formats elastrain reads (docs/datasets.md), with numpy and
the formats' published layouts only (no llm.c, nanoGPT or Megatron code):

  write_datasets.py llmc OUT.bin --tokens N [--version 1|2]
  write_datasets.py nanogpt OUT.bin --tokens N
  write_datasets.py megatron PREFIX --docs D [--dtype uint16|int32]
  write_datasets.py jsonl OUT.jsonl --docs D [--field text]

Token ids are below --vocab (default 256), from a seeded generator (--seed). --bad-at P
puts the id --vocab at token P of the stream (llmc, nanogpt, megatron), so that a test
can check the reader names that very position. Prints one line: what it wrote.
"""
import argparse
import json
import struct

import numpy as np

LLMC_MAGIC = 20240520
MMIDIDX = b"MMIDIDX\x00\x00"
MEGATRON_DTYPE_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6, "float32": 7,
                        "uint16": 8}


def tokens(args, n):
    rng = np.random.default_rng(args.seed)
    # Short arithmetic runs (learnable, so the loss can fall), random starts.
    starts = rng.integers(0, args.vocab, size=n // 16 + 1)
    t = (starts[:, None] + np.arange(16)[None, :]) % args.vocab
    t = t.reshape(-1)[:n].astype(np.int64)
    if args.bad_at is not None:
        t[args.bad_at] = args.vocab
    return t


def write_llmc(args):
    # llm.c dev/data/data_common.py: int32[256] header {magic, version, count}, then tokens.
    t = tokens(args, args.tokens)
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = LLMC_MAGIC, args.version, len(t)
    dtype = "<u2" if args.version == 1 else "<u4"
    with open(args.out, "wb") as f:
        f.write(header.tobytes())
        f.write(t.astype(dtype).tobytes())
    print(f"llm.c v{args.version}: {len(t)} tokens -> {args.out}")


def write_nanogpt(args):
    t = tokens(args, args.tokens)
    with open(args.out, "wb") as f:
        f.write(t.astype("<u2").tobytes())
    print(f"nanoGPT: {len(t)} tokens -> {args.out}")


def write_megatron(args):
    # Megatron-LM's MMIDIDX: magic, <Q version 1, <B dtype code, <Q sequences, <Q document
    # index entries, int32 lengths, int64 byte pointers, int64 document indices; each
    # document one sequence here, stored back to back in PREFIX.bin.
    rng = np.random.default_rng(args.seed + 1)
    lengths = rng.integers(5, 60, size=args.docs).astype("<i4")
    t = tokens(args, int(lengths.sum()))
    itemsize = np.dtype(args.dtype).itemsize
    pointers = np.zeros(args.docs, dtype="<i8")
    pointers[1:] = np.cumsum(lengths[:-1].astype(np.int64) * itemsize)
    doc_idx = np.arange(args.docs + 1, dtype="<i8")
    with open(args.out + ".bin", "wb") as f:
        f.write(t.astype("<" + np.dtype(args.dtype).str[1:]).tobytes())
    with open(args.out + ".idx", "wb") as f:
        f.write(MMIDIDX)
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", MEGATRON_DTYPE_CODES[args.dtype]))
        f.write(struct.pack("<Q", args.docs))
        f.write(struct.pack("<Q", len(doc_idx)))
        f.write(lengths.tobytes())
        f.write(pointers.tobytes())
        f.write(doc_idx.tobytes())
    print(f"megatron {args.dtype}: {args.docs} documents, {len(t)} tokens -> {args.out}.bin/.idx")


def write_jsonl(args):
    rng = np.random.default_rng(args.seed)
    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "café", "日本", "🙂"]
    with open(args.out, "w", encoding="utf-8") as f:
        for i in range(args.docs):
            text = " ".join(words[j] for j in rng.integers(0, len(words), size=int(rng.integers(8, 30))))
            f.write(json.dumps({"id": i, args.field: text, "meta": {"n": i}}, ensure_ascii=False) + "\n")
    print(f"jsonl: {args.docs} documents -> {args.out}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("format", choices=["llmc", "nanogpt", "megatron", "jsonl"])
    p.add_argument("out")
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--docs", type=int, default=100)
    p.add_argument("--version", type=int, default=1, choices=[1, 2])
    p.add_argument("--dtype", default="uint16", choices=["uint16", "int32"])
    p.add_argument("--field", default="text")
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bad-at", type=int, default=None)
    args = p.parse_args()
    {"llmc": write_llmc, "nanogpt": write_nanogpt, "megatron": write_megatron, "jsonl": write_jsonl}[args.format](args)


if __name__ == "__main__":
    main()
