"""gpt_torch.py - dtrain's GPT against PyTorch (Debian's python3-torch 1.13).

A nanoGPT-style GPT-2 (written out: PyTorch 1.13 has no scaled_dot_product_attention)
is built from dtrain's export of checkpoint k, and must give
  1. the logits and mean loss that `dtrain-ckpt eval` gave on the first windows
     of the training stream (<= 1e-5 relative: max |difference| / max |value|);
  2. after one AdamW step (PyTorch's torch.optim.AdamW with the checkpoint's
     moments, weight decay on 2-D tensors only, the gradient norm clipped to
     train.grad_clip) on the batch of step k + 1, the parameters of
     dtrain's checkpoint k + 1 (<= 1e-5 relative, every tensor; the key
     biases, whose exact gradient is zero, compared as noise).
usage: gpt_torch.py CK_K.h5 CK_K1.h5 TRAIN.h5 LOGITS.f32 EVAL_LOSS EVAL_SAMPLES BATCH GRAD_CLIP SPEC.json
"""
import json
import math
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, NH, T):
        super().__init__()
        self.NH = NH
        self.ln_1 = nn.LayerNorm(C)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(C, 3 * C)
        self.attn.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(C, 4 * C)
        self.mlp.c_proj = nn.Linear(4 * C, C)
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)), persistent=False)

    def attention(self, x):
        B, T, C = x.shape
        q, k, v = self.attn.c_attn(x).split(C, dim=2)
        hs = C // self.NH
        q, k, v = (t.view(B, T, self.NH, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
        return self.attn.c_proj((att @ v).transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, T, L, NH, C):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(V, C)
        self.transformer.wpe = nn.Embedding(T, C)
        self.transformer.h = nn.ModuleList(Block(C, NH, T) for _ in range(L))
        self.transformer.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied

    def forward(self, idx):
        tr = self.transformer
        x = tr.wte(idx) + tr.wpe(torch.arange(idx.shape[1]))
        for b in tr.h:
            x = b(x)
        return self.lm_head(tr.ln_f(x))


def load(path):
    f = h5py.File(path, "r")
    cfg = json.loads(f.attrs["model_config"])
    m = GPT(cfg["vocab_size"], cfg["context"], cfg["layers"], cfg["heads"], cfg["embd"])
    sd = {k: torch.from_numpy(f["model"][k][()]) for k in f["model"]}
    assert torch.equal(sd["lm_head.weight"], sd["transformer.wte.weight"]), "tied copies differ"
    print("  load_state_dict:", m.load_state_dict(sd, strict=True))
    return f, cfg, m


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-30))


def main():
    ck, ck1, train, logits_path, eval_loss, eval_n, batch, clip = sys.argv[1:9]
    eval_loss, eval_n, batch, clip = float(eval_loss), int(eval_n), int(batch), float(clip)
    torch.set_num_threads(1)
    f, cfg, m = load(ck)
    T, V = cfg["context"], cfg["vocab_size"]
    tok = torch.from_numpy(h5py.File(train, "r")["tokens"][()].astype(np.int64))

    def windows(first, n):  # window k: tokens [k T, k T + T], as dtrain reads them
        w = torch.stack([tok[k * T:k * T + T + 1] for k in range(first, first + n)])
        return w[:, :T], w[:, 1:]

    # 1. logits and loss
    x, y = windows(0, eval_n)
    with torch.no_grad():
        logits = m(x)
    theirs = torch.from_numpy(np.fromfile(logits_path, dtype=np.float32)).view(eval_n, T, V)
    loss = F.cross_entropy(logits.view(-1, V), y.reshape(-1)).item()
    r_logits, r_loss = rel(logits, theirs), abs(loss - eval_loss) / abs(eval_loss)
    print(f"  logits of {eval_n} windows: {r_logits:.3g} relative; loss {loss:.7f} vs dtrain {eval_loss:.7f}: {r_loss:.3g}")
    assert r_logits <= 1e-5 and r_loss <= 1e-5, "logits or loss differ from dtrain's"

    # 2. one AdamW step from checkpoint k, on the batch of step k + 1 (data.shuffle false)
    step, lr = int(f.attrs["step"]), float(f.attrs["lr"])
    decay = [p for n, p in m.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in m.named_parameters() if p.dim() < 2]
    g = json.loads(open(sys.argv[9]).read())["train"]["optimizer"]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": g["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=tuple(g["betas"]), eps=1e-8)
    for n, p in m.named_parameters():
        opt.state[p] = {"step": torch.tensor(float(f.attrs["optimizer_step"])),
                        "exp_avg": torch.from_numpy(f["optimizer/exp_avg"][n][()]),
                        "exp_avg_sq": torch.from_numpy(f["optimizer/exp_avg_sq"][n][()])}
    x, y = windows(step * batch, batch)
    loss = F.cross_entropy(m(x).view(-1, V), y.reshape(-1))
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(m.parameters(), clip) if clip > 0 else None
    opt.step()
    want = h5py.File(ck1, "r")["model"]
    sd = m.state_dict()
    C = cfg["embd"]
    # The key bias's gradient is zero in exact arithmetic (a query's scores
    # all shift by q . b_k, which the softmax cancels): both sides update it
    # from rounding noise, which Adam scales up. It must stay at noise level
    # on both; every other element is compared.
    key_noise = 0.0
    worst = (0.0, "")
    for k in want:
        a, b = sd[k], torch.from_numpy(want[k][()])
        if k.endswith("attn.c_attn.bias"):
            key_noise = max(key_noise, a[C:2 * C].abs().max().item(), b[C:2 * C].abs().max().item())
            a, b = torch.cat([a[:C], a[2 * C:]]), torch.cat([b[:C], b[2 * C:]])
        worst = max(worst, (rel(a, b), k))
    print(f"  one AdamW step (lr {lr:.6g}, loss {loss.item():.6f}, grad norm {float(norm) if norm is not None else 0:.6f}): "
          f"parameters within {worst[0]:.3g} relative of dtrain's step {step + 1} (worst: {worst[1]}); "
          f"key biases at noise level: |b_k| <= {key_noise:.3g}")
    assert worst[0] <= 1e-5, "the AdamW step differs from dtrain's"
    assert key_noise <= 1e-5, "a key bias moved beyond rounding noise"


main()
