#!/usr/bin/env python3
"""bpe_ref.py - a reference of GPT-2's byte-level BPE for tests/integration/bpe.sh,
written from its published algorithm (Radford et al. 2019, and the encoder
of its released code as described there) with the standard library only.

  train OUT_DIR MERGES FILE...   learn MERGES merges on the files (the standard
                                 BPE training: the most frequent adjacent pair
                                 of symbols within pre-tokens, ties to the
                                 smallest pair), and write OUT_DIR/encoder.json
                                 and OUT_DIR/vocab.bpe in GPT-2's format
  encode ENCODER VOCAB FILE...   each file's ids, one a line, files one after
                                 the other

The pre-tokenizer is GPT-2's pattern
  's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
matched by hand: \\p{L} and \\p{N} are unicodedata's categories L* and N*,
\\s is Python `regex`'s (Unicode White_Space: str.isspace() but U+001C..001F),
as runtime/data/bpe.c has them. Bytes that are not UTF-8 become lone
surrogates (surrogateescape), category Cs: neither letter, number nor space.
"""
import collections
import heapq
import json
import os
import sys
import unicodedata


def bytes_to_unicode():
    """GPT-2's map: printable bytes are themselves, the 68 others 256, 257, ..."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs))), bs


BYTE_CHAR, BYTE_ORDER = bytes_to_unicode()


def cls(c):
    cat = unicodedata.category(c)
    if cat[0] == "L":
        return "L"
    if cat[0] == "N":
        return "N"
    if c.isspace() and c not in "\x1c\x1d\x1e\x1f":
        return "S"
    return "O"


def split(text):
    """The pre-tokens of text (a str), in order."""
    out, i, n = [], 0, len(text)
    while i < n:
        j = match_at(text, i, n)
        out.append(text[i:j])
        i = j
    return out


def run(text, i, n, c):
    while i < n and cls(text[i]) == c:
        i += 1
    return i


def match_at(text, i, n):
    """The end of the pattern's match at i (the first alternative that matches)."""
    if text[i] == "'":
        for k in ("s", "t", "re", "ve", "m", "ll", "d"):
            if text.startswith(k, i + 1):
                return i + 1 + len(k)
    c = cls(text[i])
    if text[i] == " " and i + 1 < n and cls(text[i + 1]) != "S":
        return run(text, i + 1, n, cls(text[i + 1]))  # ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
    if c != "S":
        return run(text, i, n, c)
    j = run(text, i, n, "S")
    if j < n and j - i >= 2:  # '\s+(?!\S)' gives back the last space
        return j - 1
    return j  # '\s+(?!\S)' to the end, or '\s+'


def symbols(piece):
    return tuple(BYTE_CHAR[b] for b in piece.encode("utf-8", "surrogateescape"))


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "surrogateescape")


# --- training ---

def train(files, n_merges, split=split):
    """The merges, learnt on the pre-tokens split(text) of the files."""
    words = collections.Counter()
    for path in files:
        for piece in split(read_text(path)):
            words[symbols(piece)] += 1
    words = [[list(w), f] for w, f in words.items()]
    pairs, where = collections.Counter(), collections.defaultdict(set)
    for k, (w, f) in enumerate(words):
        for p in zip(w, w[1:]):
            pairs[p] += f
            where[p].add(k)
    heap = [(-c, p) for p, c in pairs.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        c, p = heapq.heappop(heap)
        if pairs.get(p, 0) != -c or c == 0:
            continue  # stale
        merges.append(p)
        changed = set()
        for k in sorted(where.pop(p, ())):
            w, f = words[k]
            for q in zip(w, w[1:]):
                pairs[q] -= f
                changed.add(q)
            w[:] = merge_word(w, p)
            for q in zip(w, w[1:]):
                pairs[q] += f
                where[q].add(k)
                changed.add(q)
        pairs.pop(p, None)
        for q in changed:
            if q != p and pairs.get(q, 0) > 0:
                heapq.heappush(heap, (-pairs[q], q))
    return merges


def merge_word(w, p):
    out, i = [], 0
    while i < len(w):
        if i + 1 < len(w) and w[i] == p[0] and w[i + 1] == p[1]:
            out.append(w[i] + w[i + 1])
            i += 2
        else:
            out.append(w[i])
            i += 1
    return out


def write_tokenizer(out_dir, merges):
    os.makedirs(out_dir, exist_ok=True)
    encoder = {BYTE_CHAR[b]: i for i, b in enumerate(BYTE_ORDER)}
    for a, b in merges:
        encoder.setdefault(a + b, len(encoder))
    encoder["<|endoftext|>"] = len(encoder)
    with open(os.path.join(out_dir, "encoder.json"), "w") as f:
        json.dump(encoder, f)
    with open(os.path.join(out_dir, "vocab.bpe"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write("%s %s\n" % (a, b))


# --- encoding, as GPT-2's encoder does ---

def load(encoder_path, vocab_path):
    with open(encoder_path) as f:
        encoder = json.load(f)
    with open(vocab_path, encoding="utf-8") as f:
        lines = f.read().split("\n")[1:-1]
    ranks = {tuple(line.split(" ")): r for r, line in enumerate(lines)}
    return encoder, ranks


def bpe(word, ranks):
    """GPT-2's loop: merge the lowest-ranked pair, every occurrence, until none."""
    word = list(word)
    while len(word) > 1:
        pair = min(zip(word, word[1:]), key=lambda p: ranks.get(p, float("inf")))
        if pair not in ranks:
            break
        word = merge_word(word, pair)
    return word


def encode(text, encoder, ranks, cache):
    ids = []
    for piece in split(text):
        if piece not in cache:
            cache[piece] = [encoder[t] for t in bpe(symbols(piece), ranks)]
        ids.extend(cache[piece])
    return ids


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "train":
        write_tokenizer(sys.argv[2], train(sys.argv[4:], int(sys.argv[3])))
    elif len(sys.argv) >= 4 and sys.argv[1] == "encode":
        encoder, ranks = load(sys.argv[2], sys.argv[3])
        cache, out = {}, sys.stdout
        for path in sys.argv[4:]:
            out.write("".join("%d\n" % i for i in encode(read_text(path), encoder, ranks, cache)))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
