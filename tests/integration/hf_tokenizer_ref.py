#!/usr/bin/env python3
"""hf_tokenizer_ref.py - a reference of Hugging Face's byte-level BPE
tokenizer.json for tests/integration/hf_tokenizer.sh, written from the
published behaviour of the `tokenizers` library, with Python's `regex`
module (Debian's python3-regex) running each family's pre-tokenizer
pattern as tokenizer.json spells it.

  train OUT KIND MERGES FILE...  learn MERGES merges on the files, cut by
                                 KIND's pre-tokenizer (bpe_ref.py's
                                 training), and write OUT, a tokenizer.json
                                 of KIND: llama3, qwen2, smollm or gpt2
  encode TOKENIZER_JSON FILE...  each file's ids, one a line, files one
                                 after the other, each as one text

What the tokenizers of the families have, and each KIND's file has:
  llama3  a Split on Llama 3's regex then ByteLevel, ignore_merges, added
          tokens after the vocabulary, a template putting
          <|begin_of_text|> first; the vocabulary is padded with tokens
          "~" + four letters to 70000, so that ids pass 65535 (and one of
          them, a whole pre-token of a text, tests ignore_merges)
  qwen2   its NFC normalizer, a Split on Qwen2's regex (digits one by one)
          then ByteLevel, added tokens after the vocabulary, merges as
          [a, b] pairs
  smollm  Digits one by one, then ByteLevel with GPT-2's regex; its special
          tokens are the vocabulary's first ids, and added tokens too
  gpt2    ByteLevel with GPT-2's regex, <|endoftext|> the last id

Encoding a text: the added tokens are found first (the leftmost, the
longest there), every span between is normalized (NFC, where the
tokenizer says so) and cut into pre-tokens, each mapped to
GPT-2's byte alphabet; with ignore_merges a pre-token that is a token is
that token, else the pair of lowest rank (the leftmost of equals) is
merged until none has a rank; then the template's ids. Bytes that are not
UTF-8 are lone surrogates (surrogateescape), as bpe_ref.py has them.
"""
import json
import os
import sys
import unicodedata

import regex

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe_ref  # noqa: E402  (the byte alphabet, the training, reading text)

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
          r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
PAD_TO = {"llama3": 70000}


def isolated(pattern, text):
    """A Split with behavior Isolated: every match, and the text between."""
    out, at = [], 0
    for m in regex.finditer(pattern, text):
        if m.start() > at:
            out.append(text[at:m.start()])
        if m.end() > m.start():
            out.append(m.group())
        at = m.end()
    if at < len(text):
        out.append(text[at:])
    return out


def digits(text):
    """Digits(individual_digits): every numeric character alone."""
    out, at = [], 0
    for i, c in enumerate(text):
        if regex.match(r"\p{N}", c):
            if i > at:
                out.append(text[at:i])
            out.append(c)
            at = i + 1
    if at < len(text):
        out.append(text[at:])
    return out


def pre_tokens(kind, text):
    if kind == "llama3":
        return isolated(LLAMA3, text)
    if kind == "qwen2":
        return isolated(QWEN2, text)
    if kind == "smollm":
        return [p for part in digits(text) for p in isolated(GPT2, part)]
    return isolated(GPT2, text)


# --- writing a tokenizer.json ---

def byte_level(use_regex):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
            "use_regex": use_regex}


def pre_tokenizer(kind):
    if kind in ("llama3", "qwen2"):
        split = {"type": "Split", "pattern": {"Regex": LLAMA3 if kind == "llama3" else QWEN2},
                 "behavior": "Isolated", "invert": False}
        return {"type": "Sequence", "pretokenizers": [split, byte_level(False)]}
    if kind == "smollm":
        return {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, byte_level(True)]}
    return byte_level(True)


def added(content, i, special=True):
    return {"id": i, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": False, "special": special}


def filler(k):
    """The k-th padding token: "~" and four letters."""
    s = ""
    for _ in range(4):
        s = chr(ord("a") + k % 26) + s
        k //= 26
    return "~" + s


def vocabulary(kind, merges):
    vocab, specials = {}, []
    if kind == "smollm":  # its special tokens first, in the vocabulary
        for s in ("<|endoftext|>", "<|im_start|>", "<|im_end|>"):
            specials.append(added(s, len(vocab)))
            vocab[s] = len(vocab)
    for b in bpe_ref.BYTE_ORDER:
        vocab[bpe_ref.BYTE_CHAR[b]] = len(vocab)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    k = 0
    while len(vocab) < PAD_TO.get(kind, 0):
        vocab.setdefault(filler(k), len(vocab))
        k += 1
    if kind == "gpt2":
        vocab["<|endoftext|>"] = len(vocab)
        specials.append(added("<|endoftext|>", len(vocab) - 1))
    names = {"llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
             "qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]}.get(kind, [])
    for s in names:
        specials.append(added(s, len(vocab) + len(specials)))
    if kind in ("llama3", "qwen2"):  # an added token that is not special
        specials.append(added("<tool>", len(vocab) + len(specials), False))
    return vocab, specials


def post_processor(kind, specials):
    if kind != "llama3":
        return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                "use_regex": False}
    bos = specials[0]
    template = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos["content"], "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [], "special_tokens": {bos["content"]: {
                    "id": bos["content"], "ids": [bos["id"]], "tokens": [bos["content"]]}}}
    return {"type": "Sequence", "processors": [byte_level(False), template]}


def write(out, kind, merges):
    vocab, specials = vocabulary(kind, merges)
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": specials,
           "normalizer": {"type": "NFC"} if kind == "qwen2" else None,
           "pre_tokenizer": pre_tokenizer(kind),
           "post_processor": post_processor(kind, specials),
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                       "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False,
                     "ignore_merges": kind == "llama3", "vocab": vocab,
                     "merges": [[a, b] if kind == "qwen2" else a + " " + b for a, b in merges]}}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)


# --- encoding ---

class Tokenizer:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        model = doc["model"]
        self.vocab = model["vocab"]
        self.ranks = {}
        for r, m in enumerate(model["merges"]):
            self.ranks[tuple(m.split(" ") if isinstance(m, str) else m)] = r
        self.ignore_merges = model.get("ignore_merges", False)
        self.added = {t["content"]: t["id"] for t in doc["added_tokens"]}
        self.nfc = (doc.get("normalizer") or {}).get("type") == "NFC"
        pre = json.dumps(doc["pre_tokenizer"])
        self.kind = ("llama3" if json.dumps(LLAMA3) in pre else "qwen2" if json.dumps(QWEN2) in pre
                     else "smollm" if "Digits" in pre else "gpt2")
        self.before = []
        post = doc["post_processor"]
        for p in post.get("processors", [post]):
            if p["type"] == "TemplateProcessing":
                for e in p["single"]:
                    if "SpecialToken" in e:
                        self.before += p["special_tokens"][e["SpecialToken"]["id"]]["ids"]
        self.cache = {}

    def bpe(self, piece):
        word = list(bpe_ref.symbols(piece))
        if self.ignore_merges and "".join(word) in self.vocab:
            return [self.vocab["".join(word)]]
        while len(word) > 1:
            best = min(range(len(word) - 1),
                       key=lambda i: (self.ranks.get((word[i], word[i + 1]), float("inf")), i))
            if (word[best], word[best + 1]) not in self.ranks:
                break
            word[best:best + 2] = [word[best] + word[best + 1]]
        return [self.vocab[t] for t in word]

    def spans(self, text):
        """The text cut at its added tokens: (str, None) and (None, id); the
        leftmost first, the longest of those that start there."""
        at = 0
        names = sorted(self.added, key=len, reverse=True)
        for m in regex.finditer("|".join(regex.escape(a) for a in names), text) if names else ():
            if m.start() > at:
                yield text[at:m.start()], None
            yield None, self.added[m.group()]
            at = m.end()
        if at < len(text):
            yield text[at:], None

    def encode(self, text):
        ids = list(self.before)
        for span, special in self.spans(text):
            if span is None:
                ids.append(special)
                continue
            if self.nfc:
                span = unicodedata.normalize("NFC", span)
            for piece in pre_tokens(self.kind, span):
                if piece not in self.cache:
                    self.cache[piece] = self.bpe(piece)
                ids += self.cache[piece]
        return ids


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "train":
        kind = sys.argv[3]
        merges = bpe_ref.train(sys.argv[5:], int(sys.argv[4]),
                               split=lambda text: pre_tokens(kind, text))
        write(sys.argv[2], kind, merges)
    elif len(sys.argv) >= 3 and sys.argv[1] == "encode":
        tok = Tokenizer(sys.argv[2])
        for path in sys.argv[3:]:
            sys.stdout.write("".join("%d\n" % i for i in tok.encode(bpe_ref.read_text(path))))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
