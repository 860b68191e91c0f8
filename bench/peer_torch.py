#!/usr/bin/python3
# peer_torch.py - the PyTorch peer of dtrain's benchmark suite (make bench, issue #6).
#
# Measures training throughput (samples/s) of a plain MLP on a dtrain-dataset HDF5 file
# with PyTorch, so that dtrain's numbers have a fair reference: the same model (Linear+ReLU
# per hidden width, then Linear to the classes), the same global batch, the same optimizer
# (SGD with momentum, mean cross-entropy), the same data in the same in-memory form, and the
# same split of each global batch over processes (process r takes rows r::P, as
# DistributedSampler does). With --procs N>1 it runs DistributedDataParallel over gloo with
# PyTorch's defaults (25 MB gradient buckets, allreduce overlapped with backward), which is
# what a PyTorch user would get. Each process uses --threads intra-op threads (and one
# inter-op thread), exactly as given, so thread counts can be matched to dtrain's.
#
# What is timed: after --warmup steps all processes meet at a barrier and rank 0 starts the
# clock; --steps steps follow, each one indexing the in-memory tensors for its rows (the
# gather is part of the step, as in dtrain), forward, backward, (allreduce,) optimizer step;
# then a barrier and rank 0 stops the clock. Loading the file is not timed. samples/s counts
# global-batch rows: steps * batch / seconds. Rank 0 also times windows of max(1, steps//5)
# steps and reports the median window rate, which is less sensitive to a noisy machine.
#
# --autocast bf16 (or PEER_TORCH_AUTOCAST=bf16 in the environment, which torch_gpt.py's
# steps obey too: they are timed here) runs each step under torch.autocast on the CPU in
# bfloat16, the bf16 peer of dtrain's train.precision "bf16" (bench/run.py's GPT rows).
#
# Output: one JSON line on stdout (rank 0); notes on stderr. Exit 0 ok, 2 bad arguments,
# 1 any other failure (one-line error on stderr).
import argparse
import json
import os
import re
import socket
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import h5py  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402


class Failure(Exception):
    pass


def note(msg):
    print("peer_torch: " + msg, file=sys.stderr, flush=True)


def load_data(path, read=True):
    """Return (features float32 [n][f], labels int64 [n], classes) or raise Failure;
    with read=False only check the file and return (n, features, classes)."""
    try:
        with h5py.File(path, "r") as f:
            if "features" not in f or "labels" not in f or "classes" not in f.attrs:
                raise Failure(f"{path}: not a dtrain-dataset file "
                              "(need /features, /labels and attribute 'classes')")
            fs, ls = f["features"], f["labels"]
            classes = int(f.attrs["classes"])
            if len(fs.shape) != 2 or ls.shape != (fs.shape[0],) or classes < 2:
                raise Failure(f"{path}: bad shapes: features {fs.shape}, labels {ls.shape}, "
                              f"classes {classes}")
            y = torch.from_numpy(ls[...]).long()
            if y.numel() and (int(y.min()) < 0 or int(y.max()) >= classes):
                raise Failure(f"{path}: labels outside 0..{classes - 1}")
            if not read:
                return fs.shape[0], fs.shape[1], classes
            x = torch.from_numpy(fs[...].astype("float32", copy=False))
    except (OSError, KeyError) as e:
        raise Failure(f"{path}: cannot read dataset: {e}") from None
    return x, y, classes


def batches(n, batch, rank, procs, seed):
    """Endless row indices for this process: epoch e is a permutation seeded by seed+e,
    cut into whole global batches; this process takes rows rank::procs of each."""
    g = torch.Generator()
    epoch = 0
    while True:
        g.manual_seed(seed + epoch)
        perm = torch.randperm(n, generator=g)
        for b in range(n // batch):
            yield perm[b * batch:(b + 1) * batch][rank::procs]
        epoch += 1


def timed_steps(step, a, rank, units):
    """a.warmup untimed calls of step(), then a.steps timed between barriers
    (a.procs > 1: every process); returns the last step's result, the
    seconds, and on rank 0 the rates (units per step / s) of windows of
    max(1, a.steps // 5) steps. Shared with torch_gpt.py.
    With PEER_TORCH_AUTOCAST=bf16 in the environment (set by --autocast, or
    by bench/run.py for torch_gpt.py, which reads no such option), every
    call of step() (forward, loss, backward, update) runs under
    torch.autocast("cpu", dtype=torch.bfloat16): the products in bf16
    (oneDNN), the parameters, gradients and update float32. One autocast
    region a step, so its cache of bf16 weights is dropped after each
    update (a region around the whole loop would keep the first step's)."""
    if os.environ.get("PEER_TORCH_AUTOCAST", "") not in ("", "bf16"):
        raise Failure("PEER_TORCH_AUTOCAST: want bf16 or nothing, got '%s'"
                      % os.environ["PEER_TORCH_AUTOCAST"])
    if os.environ.get("PEER_TORCH_AUTOCAST") == "bf16":
        plain = step

        def step():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return plain()

    def barrier():
        if a.procs > 1:
            dist.barrier()

    for _ in range(a.warmup):
        step()
    window = max(1, a.steps // 5)
    marks = []
    barrier()
    t0 = time.perf_counter()
    for i in range(a.steps):
        out = step()
        if rank == 0 and ((i + 1) % window == 0 or i + 1 == a.steps):
            marks.append((i + 1, time.perf_counter()))
    barrier()
    secs = time.perf_counter() - t0
    rates, prev = [], (0, t0)
    for m in marks:
        rates.append((m[0] - prev[0]) * units / (m[1] - prev[1]))
        prev = m
    return out, secs, rates


def setup_process(rank, a):
    """a.threads intra-op threads, one inter-op; gloo's group when a.procs > 1.
    PEER_TORCH_FLUSH_DENORMAL=1 in the environment flushes denormals to zero
    (torch.set_flush_denormal: FTZ and DAZ), which dtrain does not do, so it
    is off unless asked: a check of whether denormals slow the peer down
    (bench/README.md, "The PyTorch peer on a CPU without bf16").
    Shared with torch_gpt.py."""
    if os.environ.get("PEER_TORCH_FLUSH_DENORMAL") == "1" and not torch.set_flush_denormal(True):
        raise Failure("PEER_TORCH_FLUSH_DENORMAL=1: this CPU cannot flush denormals (no SSE3)")
    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    if a.procs > 1:
        dist.init_process_group("gloo", rank=rank, world_size=a.procs)


def torch_setup():
    """What besides the model decides the peer's speed, for its JSON line:
    torch's threads, the CPU kernels ATen dispatched to ("CPU capability
    usage"), the BLAS its fp32 products call (Debian's torch: the system
    libblas, BLAS_INFO=generic) and OpenBLAS's threads, whether oneDNN is
    there (bf16 autocast's products), whether denormals are flushed."""
    cfg = torch.__config__.show()
    cap = re.search(r"CPU capability usage: (\S+)", cfg)
    blas = re.search(r"BLAS_INFO=([^,\s]+)", cfg)
    return {"intra_threads": torch.get_num_threads(), "cpu_capability": cap.group(1) if cap else None,
            "blas_info": blas.group(1) if blas else None,
            "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
            "mkldnn": torch.backends.mkldnn.is_available(),
            "flush_denormal": os.environ.get("PEER_TORCH_FLUSH_DENORMAL") == "1"}


def worker(rank, a):
    setup_process(rank, a)
    x, y, classes = load_data(a.data)
    torch.manual_seed(a.seed)
    layers, width = [], x.shape[1]
    for h in a.hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, classes))
    model = nn.Sequential(*layers)
    if a.procs > 1:
        model = nn.parallel.DistributedDataParallel(model)  # default 25 MB buckets
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    rows = batches(x.shape[0], a.batch, rank, a.procs, a.seed)

    def step():
        idx = next(rows)
        xb, yb = x[idx], y[idx]
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    loss, secs, rates = timed_steps(step, a, rank, a.batch)
    loss = loss.detach()
    if a.procs > 1:
        dist.all_reduce(loss)
        loss /= a.procs
        # no destroy_process_group(): seen hanging in gloo here for 10
        # minutes after rank 0 had exited; spawned() ends the process
    if rank != 0:
        return
    print(json.dumps({
        "peer": "pytorch", "torch": torch.__version__, "hidden": a.hidden,
        "batch": a.batch, "procs": a.procs, "threads": a.threads, "steps": a.steps,
        "seconds": round(secs, 6),
        "samples_per_s": round(a.steps * a.batch / secs, 3),
        "samples_per_s_median_window": round(statistics.median(rates), 3),
        "autocast": os.environ.get("PEER_TORCH_AUTOCAST") or None,
        "final_loss": round(float(loss), 6), "setup": torch_setup(),
    }, separators=(",", ":")), flush=True)


def spawned(rank, a):
    try:
        worker(rank, a)
    except Failure as e:  # one line, not a traceback, in the parent's message
        raise SystemExit(f"peer_torch: error: {e}")
    # the result is out: leave without the interpreter's and gloo's
    # teardown, which can wait on a peer that is already gone
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    p = argparse.ArgumentParser(
        description="PyTorch peer for dtrain's benchmarks: MLP training throughput "
                    "(SGD, mean cross-entropy; DDP over gloo for --procs > 1). "
                    "Prints one JSON line.")
    p.add_argument("--data", required=True, metavar="FILE", help="dtrain-dataset HDF5 file")
    p.add_argument("--hidden", default="512,512",
                   help="hidden layer widths, comma-separated (default 512,512)")
    p.add_argument("--batch", type=int, default=64, help="global batch (default 64)")
    p.add_argument("--procs", type=int, default=1,
                   help="processes; >1 uses DistributedDataParallel over gloo (default 1)")
    p.add_argument("--threads", type=int, default=1,
                   help="intra-op threads per process (default 1)")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first (default 10)")
    p.add_argument("--steps", type=int, default=200, help="measured steps (default 200)")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate (default 0.01)")
    p.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (default 0.9)")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument("--autocast", choices=["bf16"],
                   help="each step under torch.autocast(\"cpu\", dtype=torch.bfloat16) "
                        "(the same as PEER_TORCH_AUTOCAST=bf16)")
    a = p.parse_args()
    if a.autocast:
        os.environ["PEER_TORCH_AUTOCAST"] = a.autocast  # the spawned processes inherit it
    try:
        a.hidden = [int(h) for h in a.hidden.split(",")]
        if any(h < 1 for h in a.hidden):
            raise ValueError
    except ValueError:
        p.error(f"--hidden: want positive integers separated by commas, got '{a.hidden}'")
    for name in ("batch", "procs", "threads", "steps"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be at least 1")
    if a.warmup < 0:
        p.error("--warmup must not be negative")
    if a.batch % a.procs:
        p.error(f"--batch {a.batch} is not a multiple of --procs {a.procs}")

    try:
        n, feats, classes = load_data(a.data, read=False)
        if n < a.batch:
            raise Failure(f"{a.data}: {n} samples, fewer than one batch of {a.batch}")
        note(f"torch {torch.__version__}, {n} samples x {feats} features, {classes} classes, "
             f"hidden {a.hidden}, batch {a.batch}, {a.procs} proc(s) x {a.threads} thread(s)")
        if a.procs == 1:
            worker(0, a)
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            os.environ["MASTER_ADDR"] = "127.0.0.1"
            os.environ["MASTER_PORT"] = str(port)
            mp.spawn(spawned, args=(a,), nprocs=a.procs, join=True)
    except Failure as e:
        print(f"peer_torch: error: {e}", file=sys.stderr)
        return 1
    except mp.ProcessRaisedException as e:
        lines = [ln for ln in str(e).splitlines() if ln.strip()]
        print(f"peer_torch: error: a worker failed: {lines[-1] if lines else e}",
              file=sys.stderr)
        return 1
    except mp.ProcessExitedException as e:
        print(f"peer_torch: error: a worker exited with code {e.exit_code}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001
        print(f"peer_torch: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
