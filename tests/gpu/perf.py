#!/usr/bin/env python3
"""perf.py - the device check's performance rows (#32): GPT-2 small on the
lent GPU, dtrain against a PyTorch peer and against cuBLAS on its own shapes.

usage: perf.py BUNDLE WORK LOGS [--steps N] [--budget S]
       perf.py BUNDLE WORK LOGS --smoke     (the dtrain half, a tiny GPT on the CPU)
       perf.py --params                     (the PyTorch peer's parameter count)

BUNDLE is the unpacked GPU bundle (bin/, env.sh, data/fortunes/train.h5),
WORK a scratch directory, LOGS where the logs go. On one GPU, one after the
other (never two at once: each needs tens of GiB):

  1. dtrain-run, one rank, GPT-2 small (V 50257, T 1024, 12 layers, 12 heads,
     C 768), batch 8, AdamW (lr 6e-4, betas 0.9 0.95, weight decay 0.1),
     grad clip 1.0, N steps on the bundle's byte-level token stream, with
     train.tf32 false and true. A step's time is metrics.jsonl's
     time.step_s (log_every 1); the first 2 steps are warm-up; the median of
     the rest. A sample is one window of T tokens.
  2. A PyTorch peer written here: the same model (pre-LN, tanh GELU, wte tied
     to the head, attention written out as softmax(mask(q k^T / sqrt(d))) v:
     no flash attention, no torch.compile), fp32 eager, torch.optim.AdamW (fused=False, foreach
     default), the same hyper-parameters and batch, random byte-level ids,
     torch.cuda.synchronize() around each step; TF32 off, then on.
  3. cuBLAS on the step's own GEMMs (below, gemms()): each timed with
     torch.matmul in fp32 (TF32 off), summed over one step. step_vs_cublas =
     their summed time / dtrain's step time, which is dtrain's FLOP/s over
     theirs for the same FLOPs (the issue's target: >= 0.60).

Prints `RESULT name=value` lines as it measures (check.sh makes its rows from
dtrain_fp32_tok_s, torch_fp32_tok_s, dtrain_tf32_tok_s, torch_tf32_tok_s,
step_vs_cublas), then a summary. Targets are reported, not asserted.
Exit codes: 0 everything measured; 1 a part failed to run (the last line
says which and why); 2 usage. Standard library and torch only.

PyTorch brings its own CUDA libraries: when LD_LIBRARY_PATH carries what the
bundle's env.sh put in front of it, perf.py starts itself again without
those entries, and runs dtrain's programs under env.sh.
"""
import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

B, T = 8, 1024
GPT2 = dict(V=50257, T=1024, L=12, NH=12, C=768)
GPT2_PARAMS = 124439808  # tied wte/lm_head, wpe included, as GPT-2 small
LR, BETAS, WD, CLIP = 6e-4, (0.9, 0.95), 0.1, 1.0
WARMUP = 2  # steps left out of the median
MIN_TIMED = 3  # fewest timed steps a run may give


def say(*a):
    print("perf.py:", *a, flush=True)


def result(name, value):
    print("RESULT %s=%s" % (name, value), flush=True)


class Failed(Exception):
    """A part that did not run: its message is the row's detail."""


# --- the environment ---

def own_env(bundle):
    """The caller's environment before env.sh, as far as LD_LIBRARY_PATH
    goes: env.sh puts the bundle's directories, then NCCL's wheel directory,
    then ${CUDA_HOME:-/usr/local/cuda}/lib64 in front of the old value."""
    parts = os.environ.get("LD_LIBRARY_PATH", "").split(":")
    root = os.path.realpath(bundle) + os.sep
    i = 0
    while i < len(parts) and (os.path.realpath(parts[i]) + os.sep).startswith(root):
        i += 1
    if i == 0:
        return None
    if i < len(parts) and "/nvidia/nccl/lib" in parts[i]:
        i += 1
    cuda = os.path.join(os.environ.get("CUDA_HOME") or "/usr/local/cuda", "lib64")
    if i < len(parts) and os.path.normpath(parts[i]) == os.path.normpath(cuda):
        i += 1
    env = dict(os.environ)
    rest = ":".join(p for p in parts[i:] if p)
    if rest:
        env["LD_LIBRARY_PATH"] = rest
    else:
        env.pop("LD_LIBRARY_PATH", None)
    return env


def restart_without_bundle_libs(bundle):
    if os.environ.get("DTRAIN_PERF_RESTARTED"):
        return
    env = own_env(bundle)
    if env is None:
        return
    env["DTRAIN_PERF_RESTARTED"] = "1"
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


# --- dtrain ---

class Child:
    """The one dtrain run under way, in a session of its own, so that a
    signal to perf.py and perf.py's own time limit end all of it: mpirun
    puts each rank in a process group of its own, but not a session."""
    proc = None

    @staticmethod
    def session(sid):
        pids = []
        for d in os.listdir("/proc"):
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
                # pid (comm) state ppid pgrp session ...; comm may hold spaces
                if d.isdigit() and int(st[st.rindex(")") + 2:].split()[3]) == sid:
                    pids.append(int(d))
            except (OSError, ValueError, IndexError):
                continue
        return pids

    @classmethod
    def stop(cls):
        """SIGKILL to all of it: a rank given SIGTERM would first save a
        checkpoint of the preempted run (1.5 GB), which nobody reads."""
        p = cls.proc
        if p is None:
            return
        for pid in cls.session(p.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            pass


def on_signal(sig, _frame):
    Child.stop()
    print("perf.py: stopped by signal %d" % sig, flush=True)
    sys.exit(1)


def under_env(bundle, argv):
    """argv run with the bundle's env.sh sourced."""
    return ["bash", "-c", '. "$0/env.sh" && exec "$@"', bundle] + argv


def last_line(path, n=110):
    try:
        with open(path, errors="replace") as f:
            lines = [l.strip() for l in f if l.strip() and not set(l.strip()) <= set("-")]
    except OSError:
        return "(no log)"
    for l in lines:  # dtrain's own first error says most
        if l.startswith("dtrain-") and any(w in l for w in ("error", "cannot", "failed", "not ", "no ")):
            return l[:n]
    return lines[-1][:n] if lines else "(empty log)"


def step_events(path):
    """{step: step_s} of the metrics' one-step windows."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a stopped run
                if e.get("event") == "step" and e.get("steps") == 1:
                    out[e["step"]] = float(e["time"]["step_s"])
    except OSError:
        pass
    return out


def dtrain_spec(work, model, data, steps, batch):
    spec = {
        "name": "perf-gpt",
        "model": dict(type="gpt", vocab_size=model["V"], context=model["T"], layers=model["L"],
                      heads=model["NH"], embd=model["C"]),
        "data": {"train": data},
        "train": {"max_steps": steps, "epochs": 100000, "global_batch": batch, "log_every": 1,
                  "optimizer": {"type": "adamw", "lr": LR, "betas": list(BETAS), "weight_decay": WD},
                  "lr_schedule": {"warmup_steps": 0, "decay": "constant"},
                  "grad_clip": CLIP},
        "checkpoint": {"every_steps": 0, "resume": "never"},
    }
    path = os.path.join(work, "perf-gpt.json")
    with open(path, "w") as f:
        json.dump(spec, f, indent=1)
    return path


def run_dtrain(a, name, spec, sets, steps, batch, ctx, limit_s):
    """One dtrain run: the median step time and how many steps it is of."""
    bundle, bin_ = a.bundle, os.path.join(a.bundle, "bin")
    run_dir = os.path.join(a.work, name)
    resolved = os.path.join(a.work, name + ".json")
    log = os.path.join(a.logs, name + ".log")
    shutil.rmtree(run_dir, ignore_errors=True)  # validate wants a new one
    argv = [os.path.join(bin_, "dtrain-submit"), "validate", spec, "--set", "run_dir=" + run_dir]
    for s in sets:
        argv += ["--set", s]
    spec_log = os.path.join(a.logs, name + ".spec.log")
    with open(resolved, "w") as out, open(spec_log, "w") as err:
        rc = subprocess.call(under_env(bundle, argv), stdout=out, stderr=err, timeout=60)
    if rc:
        raise Failed("%s: dtrain-submit validate: %s" % (name, last_line(spec_log)))
    os.makedirs(run_dir)
    metrics = os.path.join(run_dir, "metrics.jsonl")
    argv = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "1",
            os.path.join(bin_, "dtrain-run"), resolved]
    t0 = time.monotonic()
    how = "exit"
    with open(log, "w") as out:
        Child.proc = subprocess.Popen(under_env(bundle, argv), stdout=out, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        done_at = None
        while Child.proc.poll() is None:
            time.sleep(0.5)
            now = time.monotonic()
            if done_at is None and steps in step_events(metrics):
                done_at = now
            # every step is in: its end checkpoint (1.5 GB) is not timed
            if done_at is not None and now - done_at > 15:
                how = "stopped in its end checkpoint"
                break
            if now - t0 > limit_s:
                how = "timed out after %.0f s" % limit_s
                break
        Child.stop()
        rc = Child.proc.returncode
        Child.proc = None
    wall = time.monotonic() - t0
    ev = step_events(metrics)
    if os.path.exists(metrics):
        shutil.copy(metrics, os.path.join(a.logs, name + ".metrics.jsonl"))
    if how == "exit" and rc != 0:
        raise Failed("%s: exit %s: %s" % (name, rc, last_line(log)))
    timed = [ev[s] for s in sorted(ev) if s > WARMUP]
    if len(timed) < MIN_TIMED:
        raise Failed("%s: %s after %d step(s) (%s)" % (name, how if how != "exit" else "ended", len(ev),
                                                        last_line(log)))
    step_s = statistics.median(timed)
    note = "" if how == "exit" else ", " + how
    say("%s: %d timed steps of %d, median %.4f s a step, %.0f tokens/s, %.0f s in all%s (%s)" %
        (name, len(timed), steps, step_s, batch * ctx / step_s, wall, note, log))
    return step_s, len(timed)


# --- the PyTorch peer ---

def peer_model(torch, device, V, T, L, NH, C):
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(C, 3 * C, device=device)
            self.c_proj = nn.Linear(C, C, device=device)

        def forward(self, x, keep):
            b, t, _ = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (z.view(b, t, NH, C // NH).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // NH))
            att = att.masked_fill(~keep[:, :, :t, :t], float("-inf"))
            y = torch.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, C))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(C, 4 * C, device=device)
            self.c_proj = nn.Linear(4 * C, C, device=device)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C, device=device)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(C, device=device)
            self.mlp = MLP()

        def forward(self, x, keep):
            x = x + self.attn(self.ln_1(x), keep)
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(V, C, device=device), wpe=nn.Embedding(T, C, device=device),
                h=nn.ModuleList(Block() for _ in range(L)), ln_f=nn.LayerNorm(C, device=device)))
            self.lm_head = nn.Linear(C, V, bias=False, device=device)
            self.lm_head.weight = self.transformer.wte.weight  # tied
            keep = torch.ones(T, T, dtype=torch.bool, device=device).tril()
            self.register_buffer("keep", keep.view(1, 1, T, T), persistent=False)

        def forward(self, idx):
            t = idx.shape[1]
            pos = torch.arange(t, device=idx.device)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for blk in self.transformer.h:
                x = blk(x, self.keep)
            return self.lm_head(self.transformer.ln_f(x))

        def init_weights(self):  # GPT-2's, as dtrain's gpt.h says
            with torch.no_grad():
                for n, p in self.named_parameters():
                    if n.endswith("c_proj.weight"):
                        p.normal_(0.0, 0.02 / math.sqrt(2 * L))
                    elif n.endswith(".weight") and p.dim() == 2:
                        p.normal_(0.0, 0.02)
                    elif "ln_" in n and n.endswith(".weight"):
                        p.fill_(1.0)
                    else:
                        p.zero_()

    return GPT()


def param_count(model):
    return sum(p.numel() for p in model.parameters())  # a tied tensor once


def check_params(torch):
    m = peer_model(torch, "meta", **GPT2)
    n = param_count(m)
    assert n == GPT2_PARAMS, "the PyTorch GPT-2 small has %d parameters, not %d" % (n, GPT2_PARAMS)
    return n


def set_tf32(torch, on):
    """TF32 for matrix products (and cuDNN, unused here) on or off. PyTorch
    2.9 and later: the fp32_precision settings only (mixing them with the old
    allow_tf32 flags is an error); before: allow_tf32."""
    mm = torch.backends.cuda.matmul
    if hasattr(torch.backends, "fp32_precision"):  # mm's own __getattr__ asserts before 2.9
        mode = "tf32" if on else "ieee"
        mm.fp32_precision = mode
        for part in ("conv", "rnn"):
            sub = getattr(torch.backends.cudnn, part, None)
            if sub is not None and hasattr(sub, "fp32_precision"):
                sub.fp32_precision = mode
        return "fp32_precision=%s" % mm.fp32_precision
    mm.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    return "allow_tf32=%s" % mm.allow_tf32


def matmul_error(torch):
    """The relative error of a 1024^3 float32 product against float64: about
    1e-7 in IEEE float32, 1e-4 and more with TF32's 10-bit mantissas."""
    g = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(1024, 1024, device="cuda", generator=g)
    y = torch.randn(1024, 1024, device="cuda", generator=g)
    ref = x.double() @ y.double()
    return ((x @ y).double() - ref).norm().item() / ref.norm().item()


def run_peer(torch, name, tf32, steps):
    F = torch.nn.functional
    mode = set_tf32(torch, tf32)
    err = matmul_error(torch)
    if not tf32 and err > 1e-5:
        raise Failed("%s: float32 products are not IEEE (relative error %.2g with %s)" % (name, err, mode))
    torch.manual_seed(1234)
    model = peer_model(torch, "cuda", **GPT2)
    n = param_count(model)
    assert n == GPT2_PARAMS, "the PyTorch GPT-2 small has %d parameters, not %d" % (n, GPT2_PARAMS)
    model.init_weights()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=1e-8, fused=False)
    g = torch.Generator(device="cuda").manual_seed(3)
    data = torch.randint(0, 256, (steps, B, T + 1), device="cuda", generator=g)
    torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(data[i, :, :-1])
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), data[i, :, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        loss.item()  # dtrain reads its loss every step too
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated() / 2**30
    del model, opt, data, logits, loss, decay, rest, groups
    torch.cuda.empty_cache()
    step_s = statistics.median(times[WARMUP:])
    say("%s: %s (product error %.1e), %d timed steps of %d, median %.4f s a step, %.0f tokens/s, "
        "peak memory %.1f GiB" % (name, mode, err, steps - WARMUP, steps, step_s, B * T / step_s, peak))
    return step_s


# --- cuBLAS on the step's GEMMs ---

def gemms(V, T, L, NH, C, batch):
    """Every matrix product of one training step: (name, count a step,
    batch, M, N, K, layout), FLOPs 2 M N K per batch entry. A linear layer
    y = x w^T over R = batch T rows ([R][in] x [out][in]) has three: the
    forward, dx = dy w, dw = dy^T x. Attention, per (sample, head), hs =
    C/NH: s = q k^T, y = p v; back dp = dy v^T, dv = p^T dy, dq = ds k,
    dk = ds^T q, all of full T x T (the causal half is not subtracted,
    as in the 12 L T^2 C count of PaLM's appendix B)."""
    R, hs, BH = batch * T, C // NH, batch * NH
    out = []
    for lname, fi, fo, n in (("qkv", C, 3 * C, L), ("attn proj", C, C, L), ("fc", C, 4 * C, L),
                             ("fc proj", 4 * C, C, L), ("lm head", C, V, 1)):
        out += [(lname + " fwd", n, 1, R, fo, fi, "nt"),     # x [R][in] w^T
                (lname + " dx", n, 1, R, fi, fo, "nn"),      # dy [R][out] w [out][in]
                (lname + " dw", n, 1, fo, fi, R, "tn")]      # dy^T x
    out += [("att q k^T", L, BH, T, T, hs, "nt"), ("att p v", L, BH, T, hs, T, "nn"),
            ("att dp = dy v^T", L, BH, T, T, hs, "nt"), ("att dv = p^T dy", L, BH, T, hs, T, "tn"),
            ("att dq = ds k", L, BH, T, hs, T, "nn"), ("att dk = ds^T q", L, BH, T, hs, T, "tn")]
    return out


def step_flops(shapes):
    return sum(2.0 * n * b * m * nn * k for _, n, b, m, nn, k, _ in shapes)


def time_gemms(torch, shapes, reps=5):
    """Seconds of one step's GEMMs (each the median of reps), and the table."""
    total = 0.0
    rows = ["%-18s %-4s %5s x %6s x %6s x %5s  %12s  %13s" % ("product", "n", "batch", "M", "N", "K", "time",
                                                              "rate")]
    for name, n, b, m, nn, k, lay in shapes:
        a = torch.randn((b, k, m) if lay[0] == "t" else (b, m, k), device="cuda")
        w = torch.randn((b, nn, k) if lay[1] == "t" else (b, k, nn), device="cuda")
        if b == 1:
            a, w = a[0], w[0]
        x = a.transpose(-2, -1) if lay[0] == "t" else a
        y = w.transpose(-2, -1) if lay[1] == "t" else w
        c = torch.empty((b, m, nn) if b > 1 else (m, nn), device="cuda")
        torch.matmul(x, y, out=c)  # warm-up: cuBLAS's heuristics, the handle
        ts = []
        for _ in range(reps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            torch.matmul(x, y, out=c)
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) / 1e3)
        del a, w, x, y, c
        t = statistics.median(ts)
        total += n * t
        rows.append("%-18s x%-3d %5d x %6d x %6d x %5d  %9.3f ms  %6.1f TFLOP/s" %
                    (name, n, b, m, nn, k, t * 1e3, 2.0 * b * m * nn * k / t / 1e12))
    torch.cuda.empty_cache()
    return total, rows


# --- the parts ---

def smoke(a):
    """The dtrain half on the CPU with a tiny GPT: the spec, the run and the
    metrics reading, without a GPU."""
    model = dict(V=256, T=64, L=2, NH=2, C=32)
    spec = dtrain_spec(a.work, model, os.path.join(a.bundle, "data/fortunes/train.h5"), a.steps, B)
    step_s, n = run_dtrain(a, "perf-smoke", spec, [], a.steps, B, model["T"], 120)
    result("dtrain_smoke_tok_s", "%.1f" % (B * model["T"] / step_s))
    return 0


def bundle_ok(bundle):
    for f in ("bin/dtrain-run", "bin/dtrain-submit", "env.sh", "data/fortunes/train.h5"):
        if not os.path.exists(os.path.join(bundle, f)):
            say("failed: %s: not in the bundle (site/gpu-bundle.sh makes it)" % os.path.join(bundle, f))
            return False
    return True


def main():
    p = argparse.ArgumentParser(description="the device check's performance rows")
    p.add_argument("bundle", nargs="?")
    p.add_argument("work", nargs="?")
    p.add_argument("logs", nargs="?")
    p.add_argument("--steps", type=int, default=12, help="steps of each run (default 12; 2 are warm-up)")
    p.add_argument("--budget", type=float, default=150, help="seconds for everything (default 150)")
    p.add_argument("--smoke", action="store_true", help="the dtrain half, a tiny GPT on the CPU")
    p.add_argument("--params", action="store_true", help="the PyTorch GPT-2 small's parameter count")
    a = p.parse_args()
    if a.params:
        import torch
        print(check_params(torch))
        return 0
    if not (a.bundle and a.work and a.logs):
        p.print_usage(sys.stderr)
        return 2
    if a.steps < WARMUP + MIN_TIMED:
        p.error("--steps: at least %d" % (WARMUP + MIN_TIMED))
    restart_without_bundle_libs(a.bundle)
    a.bundle, a.work, a.logs = (os.path.abspath(d) for d in (a.bundle, a.work, a.logs))
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.logs, exist_ok=True)
    signal.signal(signal.SIGTERM, on_signal)
    deadline = time.monotonic() + a.budget
    if a.smoke:
        if not bundle_ok(a.bundle):
            return 1
        try:
            return smoke(a)
        except (Failed, subprocess.SubprocessError, OSError) as e:
            say("failed:", e)
            return 1
    # NVML, not the CUDA runtime: no context in this process while dtrain runs
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    try:
        import torch
    except ImportError as e:
        say("failed: no PyTorch for %s: %s" % (sys.executable, e))
        return 1
    if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
        say("failed: no CUDA device visible to PyTorch %s (built for CUDA %s): the performance rows "
            "need the lent GPU" % (torch.__version__, torch.version.cuda))
        return 1

    if not bundle_ok(a.bundle):
        return 1
    data = os.path.join(a.bundle, "data/fortunes/train.h5")
    res, failed = {}, []
    spec = dtrain_spec(a.work, GPT2, data, a.steps, B)
    cuda = ["train.device=cuda", "resources.gpus_per_node=1"]
    # what each part may take at most, and what it leaves for the ones after
    plan = (("fp32", ["train.tf32=false"], 60, 70), ("tf32", ["train.tf32=true"], 50, 35))
    for mode, sets, cap, after in plan:
        name = "perf-dtrain-" + mode
        limit = min(cap, deadline - time.monotonic() - after)
        try:
            if limit < 25:
                raise Failed("%s: no time left (%.0f s)" % (name, limit))
            s, _ = run_dtrain(a, name, spec, cuda + sets, a.steps, B, T, limit)
            res["dtrain_%s_step_s" % mode] = s
            result("dtrain_%s_tok_s" % mode, "%.1f" % (B * T / s))
        except (Failed, subprocess.SubprocessError, OSError) as e:
            failed.append(str(e))
            say("failed:", e)

    try:
        dev = torch.cuda.get_device_properties(0)
        say("GPU %s, %.0f GiB, PyTorch %s, CUDA %s; the peer's attention: explicit "
            "softmax(mask(q k^T / sqrt(d))) v" % (dev.name, dev.total_memory / 2**30, torch.__version__,
                                                 torch.version.cuda))
        # a stopped rank's memory comes back when its process is gone
        for _ in range(20):
            free, total = torch.cuda.mem_get_info()
            if free > 0.8 * total:
                break
            time.sleep(0.5)
        for mode in ("fp32", "tf32"):
            name = "torch-" + mode
            try:
                if deadline - time.monotonic() < 15:
                    raise Failed("%s: no time left" % name)
                s = run_peer(torch, name, mode == "tf32", a.steps)
                res["torch_%s_step_s" % mode] = s
                result("torch_%s_tok_s" % mode, "%.1f" % (B * T / s))
            except Exception as e:  # noqa: BLE001 - a row, not a traceback
                failed.append("%s: %s" % (name, str(e).splitlines()[0] if str(e) else type(e).__name__))
                say("failed:", failed[-1])
            finally:  # after the except clause: its traceback held the model
                torch.cuda.empty_cache()

        shapes = gemms(batch=B, **GPT2)
        flop = step_flops(shapes)
        P = GPT2_PARAMS - GPT2["V"] * GPT2["C"] - GPT2["T"] * GPT2["C"]
        approx = 6.0 * P * B * T + 12.0 * GPT2["L"] * T * T * GPT2["C"] * B
        result("step_gflop", "%.1f" % (flop / 1e9))
        say("a step's GEMMs: %.4g FLOP (6 N_non-embedding B T + 12 L T^2 C B = %.4g, without the head)" %
            (flop, approx))
        table = []
        for mode in ("fp32", "tf32"):
            how = set_tf32(torch, mode == "tf32")
            err = matmul_error(torch)
            if mode == "fp32" and err > 1e-5:
                raise Failed("cuBLAS fp32: products are not IEEE (relative error %.2g with %s)" % (err, how))
            g_s, rows = time_gemms(torch, shapes)
            table += ["cuBLAS %s (torch.matmul)" % mode] + rows + ["one step: %.4f s, %.1f TFLOP/s" %
                                                                    (g_s, flop / g_s / 1e12), ""]
            res["cublas_%s_s" % mode] = g_s
            result("cublas_%s_tflops" % mode, "%.2f" % (flop / g_s / 1e12))
            d_s = res.get("dtrain_%s_step_s" % mode)
            if d_s:
                result("dtrain_%s_tflops" % mode, "%.2f" % (flop / d_s / 1e12))
                result("step_vs_cublas" + ("" if mode == "fp32" else "_tf32"), "%.3f" % (g_s / d_s))
            say("cuBLAS %s on the step's GEMMs: %.4f s, %.1f TFLOP/s%s" %
                (mode, g_s, flop / g_s / 1e12, "; dtrain's step %.4f s, %.1f TFLOP/s, %.2f of cuBLAS's" %
                 (d_s, flop / d_s / 1e12, g_s / d_s) if d_s else ""))
        set_tf32(torch, False)
        with open(os.path.join(a.logs, "perf-gemms.txt"), "w") as f:
            f.write("\n".join(table) + "\n")
    except Exception as e:  # noqa: BLE001
        failed.append("PyTorch: %s" % (str(e).splitlines()[0] if str(e) else type(e).__name__))
        say("failed:", failed[-1])

    with open(os.path.join(a.logs, "perf.json"), "w") as f:
        json.dump(dict(results=res, failed=failed), f, indent=1)
    if failed:
        say("failed: %d part(s): %s" % (len(failed), "; ".join(failed))[:300])
        return 1
    print("\nGPT-2 small, batch %d x %d tokens, %d steps of which %d warm-up, one GPU" %
          (B, T, a.steps, WARMUP))
    print("%-6s %14s %14s %8s" % ("", "dtrain tok/s", "PyTorch tok/s", "ratio"))
    for mode in ("fp32", "tf32"):
        d, t = res["dtrain_%s_step_s" % mode], res["torch_%s_step_s" % mode]
        print("%-6s %14.0f %14.0f %8.2f" % (mode, B * T / d, B * T / t, t / d))
    for mode in ("fp32", "tf32"):
        d, g = res["dtrain_%s_step_s" % mode], res["cublas_%s_s" % mode]
        print("%s: dtrain's step %.4f s, its GEMMs alone on cuBLAS %.4f s: %.2f of cuBLAS's FLOP/s" %
              (mode, d, g, g / d))
    print(flush=True)
    say("measured: dtrain/PyTorch tokens/s x%.2f in fp32, x%.2f in tf32; dtrain's step %.2f of "
        "cuBLAS's FLOP/s on its GEMMs (target 0.60)" %
        (res["torch_fp32_step_s"] / res["dtrain_fp32_step_s"],
         res["torch_tf32_step_s"] / res["dtrain_tf32_step_s"],
         res["cublas_fp32_s"] / res["dtrain_fp32_step_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
