#!/usr/bin/python3
# torch_gpt.py - a nanoGPT-style GPT-2 in PyTorch 1.13 (attention written out:
# 1.13 has no scaled_dot_product_attention), the reference of dtrain's GPT:
#   - as a module: GPT(V, T, L, NH, C), whose state_dict names are dtrain's
#     checkpoint names (tests/integration/gpt_torch.py loads exports into it);
#   - as a program: the PyTorch peer of make bench's GPT rows (bench/run.py):
#     training throughput in tokens/s on a dtrain token stream, the same
#     model, batch of windows, AdamW (decay on 2-D tensors), clipping at 1.0,
#     as dtrain trains it; --procs N > 1 runs DistributedDataParallel over
#     gloo (25 MB buckets, allreduce overlapped with backward). With
#     --model llama the same for a Llama (bench/torch_llama.py: --kv-heads,
#     --intermediate), the peer of the Llama rows.
# What is timed and printed is as bench/peer_torch.py does for the MLP: after
# --warmup steps, --steps steps, the median rate over windows of
# max(1, steps // 5) steps; one JSON line on stdout. Exit 0, 1 failure, 2 usage.
import argparse
import json
import math
import os
import socket
import statistics
import sys
import warnings

warnings.filterwarnings("ignore")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from peer_torch import setup_process, timed_steps, torch_setup  # noqa: E402  (this directory)
from torch_llama import Llama  # noqa: E402  (this directory)


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
        # a plain attribute, not a buffer: outside the state_dict, and DDP
        # does not try to broadcast a bool tensor over gloo
        self.mask = torch.tril(torch.ones(T, T, dtype=torch.bool))

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


def adamw(model, lr, weight_decay, betas=(0.9, 0.95)):
    """AdamW as dtrain configures it: weight decay on 2-D tensors only."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": rest, "weight_decay": 0.0}], lr=lr, betas=betas, eps=1e-8)


def worker(rank, a):
    setup_process(rank, a)
    tok = torch.from_numpy(h5py.File(a.tokens, "r")["tokens"][()].astype(np.int64))
    T = a.context
    n = (tok.numel() - 1) // T
    torch.manual_seed(a.seed)
    if a.model == "llama":
        model = Llama(a.vocab, T, a.layers, a.heads, a.kv_heads, a.embd, a.intermediate)
    else:
        model = GPT(a.vocab, T, a.layers, a.heads, a.embd)
    opt = adamw(model, 6e-4, 0.1)
    if a.procs > 1:
        model = nn.parallel.DistributedDataParallel(model)
    g = torch.Generator()
    g.manual_seed(a.seed)
    order = torch.randperm(n, generator=g)
    at = [0]

    def step():
        k = order[(at[0] + torch.arange(a.batch)) % n][rank::a.procs]
        at[0] += a.batch
        w = torch.stack([tok[i * T:i * T + T + 1] for i in k.tolist()])
        opt.zero_grad()
        loss = F.cross_entropy(model(w[:, :T]).reshape(-1, a.vocab), w[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    _, _, rates = timed_steps(step, a, rank, a.batch * T)
    if rank != 0:
        return
    print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "procs": a.procs,
                      "threads": a.threads, "steps": a.steps, "batch": a.batch, "context": T,
                      "tokens_per_s_median_window": round(statistics.median(rates), 3),
                      "autocast": os.environ.get("PEER_TORCH_AUTOCAST") or None, "setup": torch_setup()},
                     separators=(",", ":")), flush=True)


def spawned(rank, a):
    worker(rank, a)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # gloo's teardown can wait on a peer already gone (peer_torch.py)


def main():
    p = argparse.ArgumentParser(description="PyTorch peer of dtrain's GPT and Llama benchmark rows: tokens/s")
    p.add_argument("--tokens", required=True, help="a dtrain token stream (HDF5, /tokens)")
    p.add_argument("--model", choices=("gpt", "llama"), default="gpt")
    for name, default in (("vocab", 256), ("context", 128), ("layers", 4), ("heads", 4), ("embd", 128),
                          ("kv-heads", 2), ("intermediate", 352), ("batch", 16), ("procs", 1),
                          ("threads", 1), ("steps", 20), ("warmup", 3), ("seed", 0)):
        p.add_argument("--" + name, type=int, default=default)
    a = p.parse_args()
    if min(a.vocab, a.context, a.layers, a.heads, a.embd, a.kv_heads, a.intermediate, a.batch, a.procs,
           a.threads, a.steps) < 1 or a.batch % a.procs or a.embd % a.heads or a.heads % a.kv_heads:
        p.error("sizes must be positive, --batch a multiple of --procs, --embd of --heads, --heads of --kv-heads")
    try:
        if a.procs == 1:
            worker(0, a)
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                os.environ["MASTER_PORT"] = str(s.getsockname()[1])
            os.environ["MASTER_ADDR"] = "127.0.0.1"
            mp.spawn(spawned, args=(a,), nprocs=a.procs, join=True)
    except Exception as e:  # noqa: BLE001
        print(f"torch_gpt: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
