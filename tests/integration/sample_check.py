#!/usr/bin/env python3
"""Are sampled tokens draws from the model's own distribution?

usage: sample_check.py TOKENS.bin LOGITS.f32 VOCAB CONTEXT PROMPT TEMPERATURE TOP_K TOP_P

TOKENS.bin: uint16 tokens, window k of the context at [k C, k C + C]: a
prompt of PROMPT tokens, then tokens drawn one by one by dtrain-ckpt sample.
LOGITS.f32: dtrain-ckpt eval --logits of those windows, [N][C][V] float32:
the model's logits at position j, from which the token at j + 1 was drawn.

Each drawn token x, under the distribution p that the temperature, top-k
and top-p make of its logits (Hugging Face's order), becomes
u = P(token < x) + v p(x) with v uniform (the randomised probability
integral transform): u is uniform on [0, 1) exactly when x is a draw from p.
Kolmogorov-Smirnov's D over the u must stay below 1.95 / sqrt(n) (its
0.1 % critical value); a draw of a token p excludes fails at once, unless
it sits at the cutoff within rounding (eval's batched products and
sample's single window sum in other orders): its logit within 1e-4 of the
k-th largest, or the probability before it within 1e-4 of top_p.
Exit 0 when they pass, 1 otherwise; one line either way.
"""
import math
import random
import struct
import sys


def probs(logits, temperature, top_k, top_p):
    """p over the vocabulary: softmax(l / T) over the top k, then the nucleus"""
    order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    n = len(logits)
    if 0 < top_k < n:
        kth = logits[order[top_k - 1]]
        n = sum(1 for x in logits if x >= kth)
    top = logits[order[0]]
    w = {i: math.exp((logits[i] - top) / temperature) for i in order[:n]}
    if top_p < 1.0:
        total, acc, kept = sum(w.values()), 0.0, 0
        for i in order[:n]:
            acc += w[i] / total
            kept += 1
            if acc >= top_p:
                break
        w = {i: w[i] for i in order[:kept]}
    total = sum(w.values())
    return [w.get(i, 0.0) / total for i in range(len(logits))]


def at_cutoff(logits, x, temperature, top_k, top_p):
    """x is set aside by a cutoff it misses only by rounding"""
    order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    if 0 < top_k < len(logits) and logits[x] >= logits[order[top_k - 1]] - 1e-4:
        return True
    if top_p < 1.0:
        p = probs(logits, temperature, top_k, 1.0)
        before = sum(p[i] for i in order[:order.index(x)])
        return before < top_p + 1e-4
    return False


def main():
    tokens_path, logits_path = sys.argv[1], sys.argv[2]
    V, C, prompt = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    temperature, top_k, top_p = float(sys.argv[6]), int(sys.argv[7]), float(sys.argv[8])
    raw = open(tokens_path, "rb").read()
    tokens = struct.unpack("<%dH" % (len(raw) // 2), raw)
    lraw = open(logits_path, "rb").read()
    windows = len(lraw) // (4 * C * V)
    rng = random.Random(1)
    us, impossible, edge = [], 0, 0
    for k in range(windows):
        for j in range(prompt - 1, C - 1):
            off = 4 * (k * C + j) * V
            logits = struct.unpack_from("<%df" % V, lraw, off)
            p = probs(logits, temperature, top_k, top_p)
            x = tokens[k * C + j + 1]
            if p[x] == 0.0 and at_cutoff(logits, x, temperature, top_k, top_p):
                edge += 1
                continue
            if p[x] == 0.0:
                impossible += 1
            us.append(sum(p[:x]) + rng.random() * p[x])
    us.sort()
    n = len(us)
    d = max(max((i + 1) / n - u, u - i / n) for i, u in enumerate(us))
    bound = 1.95 / math.sqrt(n)
    upper = sum(1 for u in us if u >= 0.5) / n
    ok = impossible == 0 and d <= bound
    print("%s: T %g top-k %d top-p %g: %d draws, KS D %.4f (bound %.4f), %.0f %% in the upper half, %d impossible, %d at a cutoff"
          % ("ok" if ok else "FAILED", temperature, top_k, top_p, n, d, bound, 100 * upper, impossible, edge))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
