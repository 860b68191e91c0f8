#!/usr/bin/env python3
"""import_torch.py - the PyTorch side of tests/integration/import.sh (#37).

A GPT-2 in Hugging Face's layout, written here (Conv1D weights [in][out],
the head tied to wte), small: V 256, T 32, L 2, NH 2, C 48. Its files are
written by writers in this script, from the formats' specifications:
  - safetensors: 8-byte little-endian header length, a JSON header
    {name: {dtype, shape, data_offsets}}, then the raw little-endian data;
  - llm.c: 256 int32 (magic 20240326, version 3, maxT, V, L, NH, C, Vp),
    then float32 arrays wte [Vp][C] (rows V.. padding), wpe, and the layers'
    tensors array by array, each projection [out][in] (nn.Linear's).

usage: import_torch.py write DIR
         DIR/hf/{model.safetensors,config.json} (GPT2Model's names, with the
         attn.bias mask buffers old files carry; vocab.json and merges.txt, a
         GPT-2-format tokenizer of V tokens trained on the riddles by
         bpe_ref.py), DIR/hf-lm/ (GPT2LMHeadModel's
         names, float16), DIR/gpt2.bin (llm.c, float32), DIR/gpt2-bf16.bin (llm.c
         version 5, bfloat16), DIR/ref.pt
       import_torch.py logits DIR TRAIN.h5 LOGITS.f32 N [--half | --bf16]
         the reference's logits on N windows against dtrain's (1e-5 relative;
         --half, --bf16: the model of the weights rounded so)
       import_torch.py load DIR EXPORT.safetensors TRAIN.h5 N
         EXPORT loaded into the model class with strict=True: its logits equal
         the reference's (1e-5)
       import_torch.py greedy DIR PROMPT N OUT
         the prompt and N greedy tokens of the reference, as bytes, into OUT
       import_torch.py hostile DIR
         broken files for the refusals: DIR/bad-* (bad-nan, bad-inf.bin: a NaN
         and an infinity among the weights).
"""
import json
import math
import os
import struct
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

V, T, L, NH, C = 300, 32, 2, 2, 48  # V: the tokenizer's 256 bytes, 43 merges, <|endoftext|>
VP = 320  # llm.c's padded vocabulary


class Conv1D(nn.Module):  # Hugging Face's: y = x W + b, W [in][out]
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.empty(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = Conv1D(C, 3 * C)
        self.c_proj = Conv1D(C, C)

    def forward(self, x):
        B, t, _ = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(B, t, NH, C // NH).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH)
        att = att.masked_fill(torch.ones(t, t).tril() == 0, float("-inf")).softmax(-1)
        return self.c_proj((att @ v).transpose(1, 2).reshape(B, t, C))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = Conv1D(C, 4 * C)
        self.c_proj = Conv1D(4 * C, C)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(C), Attn()
        self.ln_2, self.mlp = nn.LayerNorm(C), MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):  # GPT2LMHeadModel's names; the head is wte (tied, no tensor of its own)
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(V, C), wpe=nn.Embedding(T, C),
            h=nn.ModuleList([Block() for _ in range(L)]), ln_f=nn.LayerNorm(C)))

    def forward(self, idx):
        tr = self.transformer
        x = tr.wte(idx) + tr.wpe(torch.arange(idx.shape[1]))
        for b in tr.h:
            x = b(x)
        return tr.ln_f(x) @ tr.wte.weight.t()


def reference():
    torch.manual_seed(37)
    m = GPT2()
    with torch.no_grad():
        for name, p in m.named_parameters():  # every tensor away from its init value
            p.copy_(torch.randn_like(p) * (0.3 if p.dim() == 1 else 0.08) + (1.0 if "ln" in name and name.endswith("weight") else 0.0))
    return m


# --- writers ---

def write_safetensors(path, tensors, dtype="F32"):
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        a = t.detach().numpy().astype(np.float16 if dtype == "F16" else np.float32)
        b = a.astype("<" + a.dtype.str[1:]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def config(path):
    with open(path, "w") as f:
        json.dump({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V,
                   "n_positions": T, "n_ctx": T, "n_embd": C, "n_layer": L, "n_head": NH,
                   "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
                   "tie_word_embeddings": True}, f)


def write_llmc(path, m, version=3):  # version 5: bfloat16 (the top half of each float32, rounded)
    sd = m.state_dict()
    h = "transformer.h.%d."
    lay = lambda k, t=False: torch.stack([sd[h % l + k].t() if t else sd[h % l + k] for l in range(L)])
    wte = torch.cat([sd["transformer.wte.weight"], torch.full((VP - V, C), 1e30)])  # padding: must be dropped
    arrays = [wte, sd["transformer.wpe.weight"], lay("ln_1.weight"), lay("ln_1.bias"),
              lay("attn.c_attn.weight", True), lay("attn.c_attn.bias"),
              lay("attn.c_proj.weight", True), lay("attn.c_proj.bias"),
              lay("ln_2.weight"), lay("ln_2.bias"), lay("mlp.c_fc.weight", True),
              lay("mlp.c_fc.bias"), lay("mlp.c_proj.weight", True), lay("mlp.c_proj.bias"),
              sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]]
    head = np.zeros(256, dtype="<i4")
    head[:8] = [20240326, version, T, V, L, NH, C, VP]
    with open(path, "wb") as f:
        f.write(head.tobytes())
        for a in arrays:
            a = a.detach().contiguous()
            if version == 5:
                f.write(a.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes())
            else:
                f.write(a.numpy().astype("<f4").tobytes())


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe_ref  # noqa: E402  GPT-2's algorithm, the reference of tests/integration/bpe.sh

RIDDLES = "/usr/share/games/fortunes/riddles"


def tokenizer(d):  # a GPT-2-format tokenizer of V tokens, under Hugging Face's file names
    os.makedirs(d + "/tok", exist_ok=True)
    bpe_ref.write_tokenizer(d + "/tok", bpe_ref.train([RIDDLES], V - 257))
    enc = json.load(open(d + "/tok/encoder.json"))
    assert len(enc) == V, len(enc)
    os.replace(d + "/tok/encoder.json", d + "/vocab.json")
    os.replace(d + "/tok/vocab.bpe", d + "/merges.txt")
    os.rmdir(d + "/tok")


def write(d):
    m = reference()
    sd = m.state_dict()
    os.makedirs(d + "/hf", exist_ok=True)
    os.makedirs(d + "/hf-lm", exist_ok=True)
    bare = {k[len("transformer."):]: v for k, v in sd.items()}
    for l in range(L):  # the causal mask buffers old GPT2Model files carry
        bare["h.%d.attn.bias" % l] = torch.ones(1, 1, T, T).tril()
    write_safetensors(d + "/hf/model.safetensors", bare)
    config(d + "/hf/config.json")
    tokenizer(d + "/hf")
    write_safetensors(d + "/hf-lm/model.safetensors", sd, "F16")
    config(d + "/hf-lm/config.json")
    write_llmc(d + "/gpt2.bin", m)
    write_llmc(d + "/gpt2-bf16.bin", m, 5)
    torch.save(sd, d + "/ref.pt")


# --- checks ---

def windows(train, n):  # window k: tokens [k T, k T + T], as dtrain reads them
    tok = torch.from_numpy(h5py.File(train, "r")["tokens"][()].astype(np.int64))
    return torch.stack([tok[k * T:k * T + T] for k in range(n)])


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


def model_from(d, half=None):
    m = GPT2()
    sd = torch.load(d + "/ref.pt")
    if half:  # the weights as a float16 or bfloat16 file holds them
        sd = {k: v.to(half).float() for k, v in sd.items()}
    m.load_state_dict(sd, strict=True)
    return m


def logits(d, train, path, n, half=None):
    x = windows(train, n)
    with torch.no_grad():
        ours = model_from(d, half)(x)
    theirs = torch.from_numpy(np.fromfile(path, dtype=np.float32)).view(n, T, V)
    r = rel(theirs, ours)
    print(f"  logits of {n} windows: {r:.3g} relative to PyTorch's")
    assert r <= 1e-5, "dtrain's logits differ from PyTorch's"


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    assert header.pop("__metadata__", {}).get("format") == "pt", "no format pt in the metadata"
    out = {}
    for name, h in header.items():
        assert h["dtype"] == "F32", name
        b, e = h["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(raw[8 + n + b:8 + n + e], dtype="<f4").copy()).view(h["shape"])
    return out


def load(d, path, train, n):
    sd = read_safetensors(path)
    m = GPT2()
    print("  load_state_dict(strict=True):", m.load_state_dict(sd, strict=True))
    x = windows(train, n)
    with torch.no_grad():
        r = rel(m(x), model_from(d)(x))
    print(f"  the export's logits: {r:.3g} relative to the reference's")
    assert r <= 1e-5


def greedy(d, prompt, n, out):  # the reference's greedy continuation, through the tokenizer
    encoder, ranks = bpe_ref.load(d + "/hf/vocab.json", d + "/hf/merges.txt")
    byte_of = {c: b for b, c in bpe_ref.BYTE_CHAR.items()}
    decoder = {i: bytes(byte_of[c] for c in t) for t, i in encoder.items()}
    ids = bpe_ref.encode(prompt, encoder, ranks, {})
    m = model_from(d)
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(m(torch.tensor([ids[-T:]]))[0, -1].argmax()))
    with open(out, "wb") as f:
        f.write(b"".join(decoder[i] for i in ids))


def hostile(d):
    good = open(d + "/hf/model.safetensors", "rb").read()
    n = struct.unpack("<Q", good[:8])[0]
    header = json.loads(good[8:8 + n])

    def bad(name, hdr, tail=None):
        os.makedirs(d + "/bad-" + name, exist_ok=True)
        h = json.dumps(hdr).encode() if isinstance(hdr, dict) else hdr
        body = good[8 + n:] if tail is None else tail
        with open(d + "/bad-" + name + "/model.safetensors", "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + body)
        config(d + "/bad-" + name + "/config.json")

    def edit(fn):
        h = json.loads(json.dumps(header))
        fn(h)
        return h
    # a header length beyond the file
    os.makedirs(d + "/bad-long", exist_ok=True)
    with open(d + "/bad-long/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(good) * 2) + good[8:])
    config(d + "/bad-long/config.json")
    bad("past", edit(lambda h: h["wpe.weight"].update(data_offsets=[h["wpe.weight"]["data_offsets"][0], len(good)])))
    bad("overlap", edit(lambda h: h["wpe.weight"].update(data_offsets=h["wte.weight"]["data_offsets"][:1] + [h["wte.weight"]["data_offsets"][0] + T * C * 4])))
    bad("dtype", edit(lambda h: h["wpe.weight"].update(dtype="I64", shape=[T, C // 2])))
    bad("truncated", header, good[8 + n:8 + n + 1000])
    end = len(good) - 8 - n
    bad("arch", edit(lambda h: h.update({"h.0.crossattention.c_attn.weight": {"dtype": "F32", "shape": [C], "data_offsets": [end, end + 4 * C]}})),
        good[8 + n:] + bytes(4 * C))
    # another architecture by its config
    os.makedirs(d + "/bad-gemma", exist_ok=True)
    with open(d + "/bad-gemma/model.safetensors", "wb") as f:
        f.write(good)
    with open(d + "/bad-gemma/config.json", "w") as f:
        json.dump({"model_type": "gemma", "vocab_size": V}, f)
    # llm.c: a wrong magic, a truncated file
    llmc = open(d + "/gpt2.bin", "rb").read()
    with open(d + "/bad-magic.bin", "wb") as f:
        f.write(struct.pack("<i", 20240327) + llmc[4:])
    with open(d + "/bad-short.bin", "wb") as f:
        f.write(llmc[:len(llmc) - 4])
    # non-finite weights: a NaN at [5][7] of h.1's c_attn (the file's [in][out]),
    # an infinity at [3][4] of llm.c's wpe
    at = 8 + n + header["h.1.attn.c_attn.weight"]["data_offsets"][0] + 4 * (5 * 3 * C + 7)
    os.makedirs(d + "/bad-nan", exist_ok=True)
    with open(d + "/bad-nan/model.safetensors", "wb") as f:
        f.write(good[:at] + struct.pack("<f", float("nan")) + good[at + 4:])
    config(d + "/bad-nan/config.json")
    at = 256 * 4 + 4 * (VP * C + 3 * C + 4)
    with open(d + "/bad-inf.bin", "wb") as f:
        f.write(llmc[:at] + struct.pack("<f", float("inf")) + llmc[at + 4:])


def main():
    torch.set_num_threads(1)
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "write":
        write(d)
    elif cmd == "logits":
        logits(d, sys.argv[3], sys.argv[4], int(sys.argv[5]),
               torch.float16 if "--half" in sys.argv else torch.bfloat16 if "--bf16" in sys.argv else None)
    elif cmd == "load":
        load(d, sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif cmd == "greedy":
        greedy(d, sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif cmd == "hostile":
        hostile(d)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
