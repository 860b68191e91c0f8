#!/usr/bin/env python3
"""compare.py - two runs' loss curves, step by step (the device check's rows).

usage: compare.py A/metrics.jsonl B/metrics.jsonl [--from STEP] [--min N] [--tol T]

Prints "N steps, worst relative difference D at step S" and exits 0 when
both runs logged the same steps from STEP on (at least N of them) and every
loss agrees within T relative; 1 otherwise, saying why. Standard library
only: the lent GPU machines have no jq.
"""
import argparse
import json
import sys


def losses(path, first):
    out = {}
    with open(path) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("event") == "step" and e["step"] >= first:
                out[e["step"]] = e["loss"]
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--from", dest="first", type=int, default=1)
    p.add_argument("--min", type=int, default=20)
    p.add_argument("--tol", type=float, default=1e-5)
    args = p.parse_args()
    a, b = losses(args.a, args.first), losses(args.b, args.first)
    if sorted(a) != sorted(b):
        print("the runs logged different steps: %s vs %s" % (sorted(a)[:5], sorted(b)[:5]))
        return 1
    if len(a) < args.min:
        print("only %d steps (want %d)" % (len(a), args.min))
        return 1
    worst, at = 0.0, None
    for s in sorted(a):
        d = abs(a[s] - b[s]) / max(abs(a[s]), 1e-30)
        if d != d or d > worst:  # NaN counts as the worst
            worst, at = d, s
            if d != d:
                break
    print("%d steps, worst relative difference %.3g at step %s" % (len(a), worst, at))
    return 0 if worst <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
