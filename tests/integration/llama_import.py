"""llama_import.py - Hugging Face files of a Llama-family model, and its logits.

  llama_import.py write DIR CONFIG.json DTYPE SHARDS SEED
      DIR/config.json (CONFIG.json's keys, as Hugging Face writes them) and
      random weights under Hugging Face's names, stored as DTYPE (F32, F16 or
      BF16) in one model.safetensors (SHARDS 1) or in SHARDS files listed by
      model.safetensors.index.json; DIR/reference.pt keeps the weights as
      stored, widened to float32.
  llama_import.py check DIR TRAIN.h5 LOGITS.f32 SAMPLES CONTEXT
      the logits of the Llama of llama_torch.py (written from the published
      formulas) with those weights, on the first SAMPLES windows of CONTEXT
      tokens of TRAIN.h5's stream, against dtrain-ckpt eval's (LOGITS.f32):
      within 1e-5 relative (max |difference| / max |value|).
  llama_import.py same DIR EXPORT.safetensors
      dtrain-ckpt export's file holds the tensors of DIR, the same names
      and the same values (as stored, widened to float32).

The safetensors files are written here from the format's description (an
8-byte little-endian header size, the JSON header, the data), as Hugging
Face's library lays them out; no Hugging Face package is needed.
"""
import json
import os
import struct
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from import_torch import read_safetensors  # noqa: E402
from llama_torch import Llama  # noqa: E402


def hf_tensors(cfg, g):
    """Hugging Face's names and shapes, random values (float32)"""
    C, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    NH = cfg["num_attention_heads"]
    NKV = cfg.get("num_key_value_heads", NH)
    hs = C // NH
    t = {"model.embed_tokens.weight": torch.randn(V, C, generator=g) * 0.5}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = 1 + 0.2 * torch.randn(C, generator=g)
        t[p + "post_attention_layernorm.weight"] = 1 + 0.2 * torch.randn(C, generator=g)
        for n, rows in (("q", NH * hs), ("k", NKV * hs), ("v", NKV * hs)):
            t[p + f"self_attn.{n}_proj.weight"] = torch.randn(rows, C, generator=g) * C ** -0.5
            if cfg["model_type"] == "qwen2":
                t[p + f"self_attn.{n}_proj.bias"] = 0.3 * torch.randn(rows, generator=g)
        t[p + "self_attn.o_proj.weight"] = torch.randn(C, NH * hs, generator=g) * (NH * hs) ** -0.5
        t[p + "mlp.gate_proj.weight"] = torch.randn(I, C, generator=g) * C ** -0.5
        t[p + "mlp.up_proj.weight"] = torch.randn(I, C, generator=g) * C ** -0.5
        t[p + "mlp.down_proj.weight"] = torch.randn(C, I, generator=g) * I ** -0.5
    t["model.norm.weight"] = 1 + 0.2 * torch.randn(C, generator=g)
    if not cfg.get("tie_word_embeddings", False):
        t["lm_head.weight"] = torch.randn(V, C, generator=g) * C ** -0.5
    return t


def stored(x, dtype):
    """the bytes of x as dtype, and x as those bytes read back (float32)"""
    if dtype == "F32":
        return x.numpy().astype("<f4").tobytes(), x
    if dtype == "F16":
        h = x.numpy().astype("<f2")
        return h.tobytes(), torch.from_numpy(h.astype(np.float32))
    b = x.to(torch.bfloat16)
    return b.view(torch.int16).numpy().astype("<i2").tobytes(), b.float()


def write_safetensors(path, items, dtype):
    header, data, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (raw, shape) in items:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + len(raw)]}
        data.append(raw)
        at += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(data))


def write(out, config_path, dtype, shards, seed):
    cfg = json.load(open(config_path))
    os.makedirs(out, exist_ok=True)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    g = torch.Generator().manual_seed(seed)
    ref, items = {}, []
    for name, x in hf_tensors(cfg, g).items():
        raw, back = stored(x, dtype)
        ref[name] = back
        items.append((name, (raw, tuple(x.shape))))
    torch.save(ref, os.path.join(out, "reference.pt"))
    if shards == 1:
        write_safetensors(os.path.join(out, "model.safetensors"), items, dtype)
        return
    per = -(-len(items) // shards)
    weight_map, total = {}, 0
    for k in range(shards):
        name = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = items[k * per:(k + 1) * per]
        write_safetensors(os.path.join(out, name), part, dtype)
        for n, (raw, _) in part:
            weight_map[n] = name
            total += len(raw)
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
              open(os.path.join(out, "model.safetensors.index.json"), "w"), indent=2)


def check(d, train, logits_path, samples, context):
    cfg = json.load(open(os.path.join(d, "config.json")))
    sd = torch.load(os.path.join(d, "reference.pt"))
    tied = cfg.get("tie_word_embeddings", False)
    if tied:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    rs = cfg.get("rope_scaling") or {}
    mine = {"layers": cfg["num_hidden_layers"], "heads": cfg["num_attention_heads"],
            "embd": cfg["hidden_size"], "kv_heads": cfg.get("num_key_value_heads", cfg["num_attention_heads"]),
            "rms_norm_eps": cfg.get("rms_norm_eps", 1e-6), "tie_word_embeddings": tied,
            "qkv_bias": cfg["model_type"] == "qwen2", "context": context,
            "rope_theta": cfg.get("rope_theta", 10000.0),
            "rope_scaling.rope_type": rs.get("rope_type", "default")}
    for k in ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"):
        if k in rs:
            mine["rope_scaling." + k] = rs[k]
    torch.set_num_threads(1)
    m = Llama(mine, sd)
    T, V = context, cfg["vocab_size"]
    tok = torch.from_numpy(h5py.File(train, "r")["tokens"][()].astype(np.int64))
    w = torch.stack([tok[k * T:k * T + T] for k in range(samples)])
    with torch.no_grad():
        logits = m(w)
    theirs = torch.from_numpy(np.fromfile(logits_path, dtype=np.float32)).view(samples, T, V)
    r = float((logits - theirs).abs().max() / logits.abs().max())
    print(f"  logits of {samples} windows of {T}: {r:.3g} relative to PyTorch's")
    assert r <= 1e-5, "dtrain's logits of the imported model differ from PyTorch's"


def same(d, exported):
    """the export holds the files' tensors, by name, bitwise (as float32)"""
    ref = torch.load(os.path.join(d, "reference.pt"))
    got = read_safetensors(exported)
    assert sorted(got) == sorted(ref), f"names differ: {sorted(set(got) ^ set(ref))}"
    for k in ref:
        assert torch.equal(got[k], ref[k]), f"{k} differs"
    print(f"  the export holds the {len(ref)} tensors of the Hugging Face files, bitwise")


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
    elif sys.argv[1] == "same":
        same(sys.argv[2], sys.argv[3])
    else:
        check(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
