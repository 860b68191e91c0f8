"""gpt_torch.py - dtrain's GPT against PyTorch (Debian's python3-torch 1.13).

A nanoGPT-style GPT-2 (bench/torch_gpt.py, shared with make bench) is built from dtrain's export of checkpoint k, and must give
  1. the logits and mean loss that `dtrain-ckpt eval` gave on the first windows
     of the training stream (<= 1e-5 relative: max |difference| / max |value|);
  2. after one AdamW step (PyTorch's torch.optim.AdamW with the checkpoint's
     moments, weight decay on 2-D tensors only, the gradient norm clipped to
     train.grad_clip) on the batch of step k + 1, the parameters of
     dtrain's checkpoint k + 1 (<= 1e-5 relative, every tensor; the key
     biases, whose exact gradient is zero, compared as noise).

With train.precision "bf16" in SPEC.json, the step of 2. runs PyTorch's
linear layers as dtrain's bf16 layers run (runtime/kernels/bf16.h): the
inputs of each product, forward and backward, rounded to bf16, the products
accumulated in float32, the bias and everything else float32 (BF16Linear
below); `dtrain-ckpt eval`, and so 1., stays float32. The two then differ
by the order of float32 sums, as in fp32, and by the roundings to bf16 that
this flips: a value that a sum's rounding moved across the midpoint of two
bf16 numbers rounds one bf16 step (2^-8 relative) the other way, which
moves a product by at most 2^-8 of that term. With float32 differences of
about 1e-7 relative, about 1e-7 / 2^-8 (3e-5) of the roundings flip, and a
gradient element whose largest term flipped moves by up to 2 x 2^-8
relative. AdamW's update of an element, lr m^ / (sqrt(v^) + eps), moves by
at most about lr times its gradient's relative change: the parameters
after the step agree within lr x 2^-6 (absolute; two such flips).
usage: gpt_torch.py CK_K.h5 CK_K1.h5 TRAIN.h5 LOGITS.f32 EVAL_LOSS EVAL_SAMPLES BATCH GRAD_CLIP SPEC.json
"""
import json
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from torch_gpt import GPT, adamw  # noqa: E402  the reference model, shared with make bench


def bf16(t):
    """t with every element rounded to bf16 (nearest, ties to even), in float32"""
    return t.to(torch.bfloat16).float()


class BF16Linear(torch.autograd.Function):
    """F.linear as dtrain's bf16 layers compute it: bf16 inputs, float32 sums"""

    @staticmethod
    def forward(ctx, x, w, b):
        xb, wb = bf16(x), bf16(w)
        ctx.save_for_backward(xb, wb)
        ctx.bias = b is not None
        y = xb @ wb.t()
        return y + b if b is not None else y

    @staticmethod
    def backward(ctx, dy):
        xb, wb = ctx.saved_tensors
        dyb = bf16(dy)
        dx = dyb @ wb
        dw = dyb.reshape(-1, dy.shape[-1]).t() @ xb.reshape(-1, xb.shape[-1])
        db = dy.reshape(-1, dy.shape[-1]).sum(0) if ctx.bias else None
        return dx, dw, db


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
    spec = json.loads(open(sys.argv[9]).read())
    precision = spec["train"].get("precision", "fp32")
    tol_step = 1e-5  # relative, fp32
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

    # 2. one AdamW step from checkpoint k, on the batch of step k + 1 (data.shuffle false),
    # in the run's precision
    if precision == "bf16":
        F.linear = lambda x, w, b=None: BF16Linear.apply(x, w, b)
    step, lr = int(f.attrs["step"]), float(f.attrs["lr"])
    g = spec["train"]["optimizer"]
    opt = adamw(m, lr, g["weight_decay"], tuple(g["betas"]))
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
    worst_abs = (0.0, "")
    for k in want:
        a, b = sd[k], torch.from_numpy(want[k][()])
        if k.endswith("attn.c_attn.bias"):
            key_noise = max(key_noise, a[C:2 * C].abs().max().item(), b[C:2 * C].abs().max().item())
            a, b = torch.cat([a[:C], a[2 * C:]]), torch.cat([b[:C], b[2 * C:]])
        worst = max(worst, (rel(a, b), k))
        worst_abs = max(worst_abs, (float((a - b).abs().max()), k))
    print(f"  one AdamW step in {precision} (lr {lr:.6g}, loss {loss.item():.6f}, grad norm {float(norm) if norm is not None else 0:.6f}): "
          f"parameters within {worst[0]:.3g} relative of dtrain's step {step + 1} (worst: {worst[1]}); "
          f"key biases at noise level: |b_k| <= {key_noise:.3g}")
    if precision == "bf16":
        bound = lr * 2.0 ** -6
        print(f"  bf16: largest difference {worst_abs[0]:.3g} ({worst_abs[1]}), bound lr x 2^-6 = {bound:.3g}")
        assert worst_abs[0] <= bound, "the bf16 AdamW step differs from dtrain's beyond the bf16 bound"
    else:
        assert worst[0] <= tol_step, "the AdamW step differs from dtrain's"
    assert key_noise <= 1e-5, "a key bias moved beyond rounding noise"


main()
