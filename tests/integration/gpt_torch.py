"""gpt_torch.py - dtrain's GPT against PyTorch (Debian's python3-torch 1.13).

A nanoGPT-style GPT-2 (bench/torch_gpt.py, shared with make bench) is built from dtrain's export of checkpoint k, and must give
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
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from torch_gpt import GPT, adamw  # noqa: E402  the reference model, shared with make bench


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
    g = json.loads(open(sys.argv[9]).read())["train"]["optimizer"]
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
