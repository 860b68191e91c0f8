"""llama_torch.py - dtrain's Llama against PyTorch (Debian's python3-torch 1.13).

A Llama written here from the published formulas (Touvron et al. 2023 and
Hugging Face's modeling_llama.py: RMSNorm, rotary embeddings over halves of
a head (rotate_half) with Llama 3.1's rope_scaling, grouped-query attention
(repeat_kv), SwiGLU, q/k/v biases as Qwen2's, a tied or untied head) is
built from dtrain's export of checkpoint k, and must give
  1. the logits and mean loss that `dtrain-ckpt eval` gave on the first
     windows of the training stream (<= 1e-5 relative: max |difference| /
     max |value|);
  2. after one AdamW step (torch.optim.AdamW with the checkpoint's moments,
     weight decay on 2-D tensors only, the gradient norm clipped to
     train.grad_clip) on the batch of step k + 1, the parameters of
     dtrain's checkpoint k + 1 (<= 1e-5 relative, every tensor; the key
     biases' elements whose frequency turns by less than 0.1 radian over
     the context, whose gradient is rounding noise, within lr: main() says
     why).
The rotary angles are computed in float64 and rounded to float32, as
dtrain computes its tables (runtime/model/llama.h).
usage: llama_torch.py CK_K.h5 CK_K1.h5 TRAIN.h5 LOGITS.f32 EVAL_LOSS EVAL_SAMPLES BATCH GRAD_CLIP SPEC.json
"""
import json
import math
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F


def rope_freqs(cfg, hs):
    """f_i = theta^(-2i/hs), rescaled as rope_scaling "llama3" says (float64)"""
    f = [1.0 / cfg["rope_theta"] ** (2 * i / hs) for i in range(hs // 2)]
    if cfg["rope_scaling.rope_type"] != "llama3":
        return f
    fac, lo, hi = cfg["rope_scaling.factor"], cfg["rope_scaling.low_freq_factor"], cfg["rope_scaling.high_freq_factor"]
    old = cfg["rope_scaling.original_max_position_embeddings"]
    out = []
    for x in f:
        w = 2 * math.pi / x
        if w < old / hi:
            out.append(x)
        elif w > old / lo:
            out.append(x / fac)
        else:
            s = (old / w - lo) / (hi - lo)
            out.append((1 - s) * x / fac + s * x)
    return out


class Llama:
    def __init__(self, cfg, sd):
        self.cfg = cfg
        self.L, self.NH, self.C = cfg["layers"], cfg["heads"], cfg["embd"]
        self.NKV, self.hs = cfg["kv_heads"], cfg["embd"] // cfg["heads"]
        self.eps = cfg["rms_norm_eps"]
        self.tied = cfg["tie_word_embeddings"]
        self.P = {k: v.clone().requires_grad_(True) for k, v in sd.items()
                  if not (self.tied and k == "lm_head.weight")}
        T = cfg["context"]
        ang = torch.outer(torch.arange(T, dtype=torch.float64), torch.tensor(rope_freqs(cfg, self.hs), dtype=torch.float64))
        self.cos = torch.cat([ang.cos(), ang.cos()], -1).float()  # [T][hs]
        self.sin = torch.cat([ang.sin(), ang.sin()], -1).float()

    def head_weight(self):
        return self.P["model.embed_tokens.weight" if self.tied else "lm_head.weight"]

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x):  # x [B][heads][T][hs]
        h = self.hs // 2
        rot = torch.cat([-x[..., h:], x[..., :h]], -1)  # rotate_half
        return x * self.cos + rot * self.sin

    def lin(self, x, p, bias=False):
        return F.linear(x, self.P[p + ".weight"], self.P[p + ".bias"] if bias else None)

    def attention(self, l, x):
        B, T, _ = x.shape
        p, bias = f"model.layers.{l}.self_attn.", self.cfg["qkv_bias"]
        q = self.lin(x, p + "q_proj", bias).view(B, T, self.NH, self.hs).transpose(1, 2)
        k = self.lin(x, p + "k_proj", bias).view(B, T, self.NKV, self.hs).transpose(1, 2)
        v = self.lin(x, p + "v_proj", bias).view(B, T, self.NKV, self.hs).transpose(1, 2)
        q, k = self.rope(q), self.rope(k)
        rep = self.NH // self.NKV  # repeat_kv: query head h reads kv head h // rep
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.hs)
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, self.NH * self.hs)
        return self.lin(y, p + "o_proj")

    def __call__(self, idx):
        x = self.P["model.embed_tokens.weight"][idx]
        for l in range(self.L):
            p = f"model.layers.{l}."
            x = x + self.attention(l, self.rms(x, self.P[p + "input_layernorm.weight"]))
            h = self.rms(x, self.P[p + "post_attention_layernorm.weight"])
            x = x + self.lin(F.silu(self.lin(h, p + "mlp.gate_proj")) * self.lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
        return F.linear(self.rms(x, self.P["model.norm.weight"]), self.head_weight())


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-30))


def load(path):
    f = h5py.File(path, "r")
    cfg = json.loads(f.attrs["model_config"])
    sd = {k: torch.from_numpy(f["model"][k][()]) for k in f["model"]}
    if cfg["tie_word_embeddings"]:
        assert torch.equal(sd["lm_head.weight"], sd["model.embed_tokens.weight"]), "tied copies differ"
    return f, cfg, Llama(cfg, sd)


def step(f, cfg, m, spec, tok, batch, clip, T, V):
    """one AdamW step from checkpoint f on the batch of its next step"""
    g = spec["train"]["optimizer"]
    decay = [p for p in m.P.values() if p.dim() >= 2]
    rest = [p for p in m.P.values() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": g["weight_decay"]},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=float(f.attrs["lr"]), betas=tuple(g["betas"]), eps=1e-8)
    for n, p in m.P.items():
        opt.state[p] = {"step": torch.tensor(float(f.attrs["optimizer_step"])),
                        "exp_avg": torch.from_numpy(f["optimizer/exp_avg"][n][()]),
                        "exp_avg_sq": torch.from_numpy(f["optimizer/exp_avg_sq"][n][()])}
    k0 = int(f.attrs["step"]) * batch
    w = torch.stack([tok[k * T:k * T + T + 1] for k in range(k0, k0 + batch)])
    loss = F.cross_entropy(m(w[:, :T]).reshape(-1, V), w[:, 1:].reshape(-1))
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(list(m.P.values()), clip) if clip > 0 else None
    opt.step()
    return loss.item(), float(norm) if norm is not None else 0.0


def main():
    ck, ck1, train, logits_path, eval_loss, eval_n, batch, clip = sys.argv[1:9]
    eval_loss, eval_n, batch, clip = float(eval_loss), int(eval_n), int(batch), float(clip)
    spec = json.loads(open(sys.argv[9]).read())
    torch.set_num_threads(1)
    f, cfg, m = load(ck)
    T, V = cfg["context"], cfg["vocab_size"]
    tok = torch.from_numpy(h5py.File(train, "r")["tokens"][()].astype(np.int64))

    # 1. logits and loss on windows 0 .. eval_n - 1
    w = torch.stack([tok[k * T:k * T + T + 1] for k in range(eval_n)])
    with torch.no_grad():
        logits = m(w[:, :T])
    theirs = torch.from_numpy(np.fromfile(logits_path, dtype=np.float32)).view(eval_n, T, V)
    loss = F.cross_entropy(logits.reshape(-1, V), w[:, 1:].reshape(-1)).item()
    r_logits, r_loss = rel(logits, theirs), abs(loss - eval_loss) / abs(eval_loss)
    print(f"  logits of {eval_n} windows: {r_logits:.3g} relative; loss {loss:.7f} vs dtrain {eval_loss:.7f}: {r_loss:.3g}")
    assert r_logits <= 1e-5 and r_loss <= 1e-5, "logits or loss differ from dtrain's"

    # 2. one AdamW step from checkpoint k, on the batch of step k + 1 (data.shuffle false)
    loss, norm = step(f, cfg, m, spec, tok, batch, clip, T, V)
    want = h5py.File(ck1, "r")["model"]
    # A key bias b adds q_t . R(t2 - t) b to the score of key t2 for query t:
    # in a frequency whose rotation over the whole context is small, that
    # is nearly the same for every key, which the softmax cancels; the
    # gradient of those elements is rounding noise (exactly zero with no
    # rotation, as the GPT's key bias), which Adam scales up to about lr.
    # They are compared against that bound, every other element at 1e-5.
    lr = float(f.attrs["lr"])
    f_i = torch.tensor(rope_freqs(cfg, m.hs), dtype=torch.float64)
    slow = (f_i * (T - 1) < 0.1).repeat(2).repeat(m.NKV)  # per element of a k bias
    worst, noise = (0.0, ""), 0.0
    for k in want:
        a = (m.head_weight() if k == "lm_head.weight" else m.P[k]).detach()
        b = torch.from_numpy(want[k][()])
        if k.endswith("k_proj.bias"):
            noise = max(noise, float((a - b)[slow].abs().max()) if slow.any() else 0.0)
            a, b = a[~slow], b[~slow]
        worst = max(worst, (rel(a, b), k))
    print(f"  one AdamW step (loss {loss:.6f}, grad norm {norm:.6f}): parameters within "
          f"{worst[0]:.3g} relative of dtrain's step {int(f.attrs['step']) + 1} (worst: {worst[1]})"
          + (f"; key biases of the {int(slow.sum()) // (2 * m.NKV)} slow frequencies of a head within {noise:.3g}"
             f" (bound lr = {lr:.3g})" if cfg["qkv_bias"] else ""))
    assert worst[0] <= 1e-5, "the AdamW step differs from dtrain's"
    assert noise <= lr, "a key bias of a slow frequency moved beyond lr"

if __name__ == "__main__":
    main()
