#!/usr/bin/python3
# torch_llama.py - a Llama in PyTorch 1.13, the peer of make bench's Llama
# rows (bench/run.py, through torch_gpt.py --model llama): written from the
# published formulas as Hugging Face's modeling_llama.py computes them
# (RMSNorm, rotary embeddings over halves of a head, grouped-query
# attention, SwiGLU, an untied head), attention written out (1.13 has no
# scaled_dot_product_attention), the module names Hugging Face's.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, C, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Layer(nn.Module):
    def __init__(self, C, NH, KV, I, T):
        super().__init__()
        self.NH, self.KV, self.hs = NH, KV, C // NH
        self.input_layernorm = RMSNorm(C)
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(C, C, bias=False)
        self.self_attn.k_proj = nn.Linear(C, KV * self.hs, bias=False)
        self.self_attn.v_proj = nn.Linear(C, KV * self.hs, bias=False)
        self.self_attn.o_proj = nn.Linear(C, C, bias=False)
        self.post_attention_layernorm = RMSNorm(C)
        self.mlp = nn.Module()
        self.mlp.gate_proj = nn.Linear(C, I, bias=False)
        self.mlp.up_proj = nn.Linear(C, I, bias=False)
        self.mlp.down_proj = nn.Linear(I, C, bias=False)
        self.mask = torch.tril(torch.ones(T, T, dtype=torch.bool))  # not a buffer (torch_gpt.py)

    def attention(self, x, cos, sin):
        B, T, C = x.shape
        a = self.self_attn
        q = a.q_proj(x).view(B, T, self.NH, self.hs).transpose(1, 2)
        k = a.k_proj(x).view(B, T, self.KV, self.hs).transpose(1, 2)
        v = a.v_proj(x).view(B, T, self.KV, self.hs).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(self.NH // self.KV, dim=1)
        v = v.repeat_interleave(self.NH // self.KV, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hs)
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
        return a.o_proj((att @ v).transpose(1, 2).reshape(B, T, C))

    def forward(self, x, cos, sin):
        x = x + self.attention(self.input_layernorm(x), cos, sin)
        m = self.mlp
        h = self.post_attention_layernorm(x)
        return x + m.down_proj(F.silu(m.gate_proj(h)) * m.up_proj(h))


class Llama(nn.Module):
    def __init__(self, V, T, L, NH, KV, C, I, theta=10000.0):
        super().__init__()
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(V, C)
        self.model.layers = nn.ModuleList(Layer(C, NH, KV, I, T) for _ in range(L))
        self.model.norm = RMSNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        hs = C // NH
        f = 1.0 / theta ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs)
        ang = torch.outer(torch.arange(T, dtype=torch.float64), f)
        ang = torch.cat((ang, ang), dim=-1)
        self.cos, self.sin = ang.cos().float(), ang.sin().float()  # [T][hs], not buffers

    def forward(self, idx):
        T = idx.shape[1]
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.model.embed_tokens(idx)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.model.norm(x))
