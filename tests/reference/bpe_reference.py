#!/usr/bin/env python3
"""Independent reference for elastrain's GPT-2 and tiktoken BPE tokenizers.

Written from the published descriptions of the two algorithms, not from elastrain's C++:
- GPT-2 (openai/gpt-2 src/encoder.py, "Language Models are Unsupervised Multitask
  Learners" section 2.2): bytes_to_unicode, the pre-tokenization regex, and bpe(): take
  the bigram of lowest merge rank, merge every occurrence of it left to right, repeat
  until no bigram has a rank.
- tiktoken (openai/tiktoken src/lib.rs, _byte_pair_merge; Llama 3 uses it with its own
  regex): a piece that is a token is that token; otherwise start from single bytes and
  repeatedly merge the adjacent pair whose concatenation has the lowest rank (the
  leftmost on ties).

It learns a small vocabulary of each kind on a corpus held here (BPE training: count
adjacent pairs over the pre-tokenized words, merge the most frequent, ties broken by the
pair's bytes), writes the files elastrain reads (vocab.json + merges.txt; a tiktoken
file), a test text covering accents, combining marks, CJK, emoji with ZWJ and skin tones,
flags, whitespace runs, newlines, digit runs and contractions, and the ids this
reference encodes it to. It checks decode(encode(text)) == text itself.

A second text, every code point assigned in this Python's Unicode database (unicodedata;
Debian 12: Unicode 14, the version PCRE2 10.42 knows) in a short context (alone, after a
space, doubled, before a digit), checks the character classes of the whole of Unicode.

Usage: bpe_reference.py OUT_DIR
  writes OUT_DIR/gpt2/{vocab.json,merges.txt}, OUT_DIR/tiktoken.model, OUT_DIR/text.txt,
  OUT_DIR/expected_gpt2.txt and OUT_DIR/expected_tiktoken.txt (ids, space-separated), and
  the same for the code points: codepoints.txt, expected_gpt2_codepoints.txt,
  expected_tiktoken_codepoints.txt.
Needs the `regex` module (Debian python3-regex) for \\p{L} and \\p{N}.
"""
import base64
import collections
import json
import os
import sys
import unicodedata

import regex

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
                  r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

TEST_TEXT = (
    "Hello, world! It's a naïve café; don't you think? I'M sure we'll see, they've said she'd come.\n"
    "Ünïcödé: e\u0301 (e + combining acute) vs é, n\u0303 vs ñ, a\u0300\u0301\u0302 stacked marks.\n"
    "Español: ¿Cómo está el niño? Ελληνικά και Русский текст.\n"
    "日本語の文章です。中文字符和标点，한국어 텍스트도 있습니다.\n"
    "Emoji: 👍🏽 👨\u200d👩\u200d👧\u200d👦 family, 🏳\ufe0f\u200d🌈 flag, 🇫🇷🇯🇵 flags, ❤\ufe0f!\n"
    "Whitespace:    four spaces,\t\ttabs,  \u00a0nbsp,\u3000ideographic space, trailing   \n"
    # White_Space or not: VT, FF, NEL, U+1680, U+2028, U+202F, U+205F are; U+180E (since
    # Unicode 6.3), U+200B and the information separators U+001C..U+001F are not.
    "Odd spaces:\x0b\x0c|\x85|\u1680|\u2028|\u202f|\u205f|a\u180eb|a\u200bb|\x1c\x1f x\x0b\x0b\n"
    "\n\n\nthree newlines above, CRLF next\r\n"
    "Digits: 1234567890 3.14159 2024-06-01 007 12,345,678 and x2y3z4.\n"
    "Code: for (int i = 0; i < n; ++i) { sum += a[i]; } // done!!!\n"
    "<|endoftext|> is plain text here, and so is <|begin_of_text|>.\n"
    "   leading spaces and a last line without newline   "
)

CORPUS = (TEST_TEXT + "\n") * 3 + (
    "The quick brown fox jumps over the lazy dog. It's the dog's day; they're here.\n"
    "Numbers 123 456 7890 and more numbers 42 4242 424242.\n"
    "Café crème, jalapeño, façade, coöperate, résumé.\n"
    "東京は日本の首都です。北京是中国的首都。\n"
) * 5


def bytes_to_unicode():
    """GPT-2's table: printable Latin-1 bytes map to themselves, the rest to 256 + n."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def count_pairs(words):
    pairs = collections.Counter()
    for word, freq in words.items():
        for a, b in zip(word, word[1:]):
            pairs[(a, b)] += freq
    return pairs


def apply_merge(words, a, b, joined):
    out = collections.Counter()
    for word, freq in words.items():
        merged, i = [], 0
        while i < len(word):
            if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                merged.append(joined)
                i += 2
            else:
                merged.append(word[i])
                i += 1
        out[tuple(merged)] += freq
    return out


def learn(words, num_merges, join):
    """Greedy BPE training; ties between equally frequent pairs go to the smaller pair."""
    merges = []
    for _ in range(num_merges):
        pairs = count_pairs(words)
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], tuple(-x for x in _key(kv[0]))))[0]
        merges.append(best)
        words = apply_merge(words, best[0], best[1], join(best[0], best[1]))
    return merges


def _key(pair):
    a, b = pair
    enc = (lambda s: s.encode("utf-8")) if isinstance(a, str) else (lambda s: s)
    return tuple(enc(a) + b"\x00" + enc(b))


# ---------------------------------------------------------------- GPT-2

class Gpt2Reference:
    def __init__(self, encoder, merges):
        self.encoder = encoder
        self.decoder = {v: k for k, v in encoder.items()}
        self.bpe_ranks = {pair: i for i, pair in enumerate(merges)}
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {v: k for k, v in self.byte_encoder.items()}
        self.pat = regex.compile(GPT2_PATTERN)

    def bpe(self, token):
        word = tuple(token)
        while len(word) > 1:
            pairs = set(zip(word, word[1:]))
            bigram = min(pairs, key=lambda p: self.bpe_ranks.get(p, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word, i = [], 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                except ValueError:
                    new_word.extend(word[i:])
                    break
                new_word.extend(word[i:j])
                i = j
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
        return word

    def encode(self, text):
        ids = []
        for token in regex.findall(self.pat, text):
            token = "".join(self.byte_encoder[b] for b in token.encode("utf-8"))
            ids.extend(self.encoder[t] for t in self.bpe(token))
        return ids

    def decode(self, ids):
        text = "".join(self.decoder[i] for i in ids)
        return bytes(self.byte_decoder[c] for c in text).decode("utf-8")


def build_gpt2(num_merges=300):
    byte_encoder = bytes_to_unicode()
    words = collections.Counter()
    for token in regex.findall(GPT2_PATTERN, CORPUS):
        words[tuple(byte_encoder[b] for b in token.encode("utf-8"))] += 1
    merges = learn(words, num_merges, lambda a, b: a + b)
    # Ids: the 256 byte characters in byte order, then each new merged token, then the special.
    encoder = {byte_encoder[b]: b for b in range(256)}
    for a, b in merges:
        encoder.setdefault(a + b, len(encoder))
    encoder["<|endoftext|>"] = len(encoder)
    return encoder, merges


# ---------------------------------------------------------------- tiktoken

class TiktokenReference:
    def __init__(self, ranks):
        self.ranks = ranks
        self.decoder = {v: k for k, v in ranks.items()}
        self.pat = regex.compile(LLAMA3_PATTERN)

    def byte_pair_merge(self, piece):
        parts = [piece[i:i + 1] for i in range(len(piece))]
        while len(parts) > 1:
            best, best_rank = None, None
            for i in range(len(parts) - 1):
                r = self.ranks.get(parts[i] + parts[i + 1])
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best is None:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        return [self.ranks[p] for p in parts]

    def encode(self, text):
        ids = []
        for piece in regex.findall(self.pat, text):
            piece = piece.encode("utf-8")
            if piece in self.ranks:
                ids.append(self.ranks[piece])
            else:
                ids.extend(self.byte_pair_merge(piece))
        return ids

    def decode(self, ids):
        return b"".join(self.decoder[i] for i in ids).decode("utf-8")


def build_tiktoken(num_merges=300):
    # Single bytes take the first 256 ranks in GPT-2's table order (printable first), as
    # tiktoken's published files do, so that a rank is not simply the byte's value.
    order = list(bytes_to_unicode().keys())
    ranks = {bytes([b]): i for i, b in enumerate(order)}
    words = collections.Counter()
    for piece in regex.findall(LLAMA3_PATTERN, CORPUS):
        words[tuple(bytes([b]) for b in piece.encode("utf-8"))] += 1
    for a, b in learn(words, num_merges, lambda a, b: a + b):
        ranks.setdefault(a + b, len(ranks))
    return ranks


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "gpt2"), exist_ok=True)

    encoder, merges = build_gpt2()
    with open(os.path.join(out, "gpt2", "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(encoder, f, ensure_ascii=False)
    with open(os.path.join(out, "gpt2", "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")
    gpt2 = Gpt2Reference(encoder, merges)
    gpt2_ids = gpt2.encode(TEST_TEXT)
    assert gpt2.decode(gpt2_ids) == TEST_TEXT, "GPT-2 reference does not round-trip"
    assert len(gpt2_ids) < len(TEST_TEXT.encode("utf-8")), "GPT-2 merges do not compress the text"

    ranks = build_tiktoken()
    with open(os.path.join(out, "tiktoken.model"), "w", encoding="ascii") as f:
        for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
            f.write(f"{base64.b64encode(token).decode('ascii')} {rank}\n")
    tik = TiktokenReference(ranks)
    tik_ids = tik.encode(TEST_TEXT)
    assert tik.decode(tik_ids) == TEST_TEXT, "tiktoken reference does not round-trip"
    assert len(tik_ids) < len(TEST_TEXT.encode("utf-8")), "tiktoken merges do not compress the text"

    with open(os.path.join(out, "text.txt"), "wb") as f:
        f.write(TEST_TEXT.encode("utf-8"))
    with open(os.path.join(out, "expected_gpt2.txt"), "w") as f:
        f.write(" ".join(map(str, gpt2_ids)) + "\n")
    with open(os.path.join(out, "expected_tiktoken.txt"), "w") as f:
        f.write(" ".join(map(str, tik_ids)) + "\n")
    cps = "".join(f"{c} {c}{c}1\n" for c in map(chr, range(1, 0x110000))
                  if unicodedata.category(c) not in ("Cn", "Cs", "Co"))
    with open(os.path.join(out, "codepoints.txt"), "wb") as f:
        f.write(cps.encode("utf-8"))
    with open(os.path.join(out, "expected_gpt2_codepoints.txt"), "w") as f:
        f.write(" ".join(map(str, gpt2.encode(cps))) + "\n")
    with open(os.path.join(out, "expected_tiktoken_codepoints.txt"), "w") as f:
        f.write(" ".join(map(str, tik.encode(cps))) + "\n")
    print(f"gpt2: {len(encoder)} tokens, {len(merges)} merges, {len(gpt2_ids)} ids; "
          f"tiktoken: {len(ranks)} ranks, {len(tik_ids)} ids; text {len(TEST_TEXT.encode('utf-8'))} bytes; "
          f"{len(cps) // 6} code points of Unicode {unicodedata.unidata_version}")


if __name__ == "__main__":
    main()
