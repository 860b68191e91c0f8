#!/usr/bin/python3
# run.py - `make bench`: dtrain against its peers, every figure a ratio measured
# in this one run (bench/README.md explains each row and the targets).
#
#   1. training throughput, dtrain vs PyTorch 1.13 (bench/peer_torch.py): the
#      small (784-512-512-10) and large (784-4096-4096-4096-10) MLP, batch 64,
#      SGD with momentum, same data; 1 process and 2 data-parallel processes
#      (DDP over gloo for PyTorch). Runs alternate dtrain and the peer, in 3
#      rounds; the sgemm and memory peaks of rows 2 and 3 are measured in
#      every round too, and each figure is the median of its rounds.
#   2. compute efficiency: the large MLP's step against OpenBLAS sgemm on the
#      step's own shapes (bench/sgemm.c) and on square matrices.
#   3. data-parallel scaling against two concurrent sgemm processes, each
#      speed-up from quartets of short runs (1, 2, 2, 1 processes).
#   4. gradient synchronisation: exposed allreduce time per step against one
#      blocking MPI_Allreduce of the whole gradient (bench/allreduce.c).
#   5. pipeline: idle fraction of gpipe and 1f1b against (p-1)/m.
#   (4b and 4d: the GPT and the Llama against PyTorch 1.13 running the same
#   model, bench/torch_gpt.py and bench/torch_llama.py.)
#   6. checkpoints (bench/checkpoint.sh) and 7. start-up (bench/startup.sh).
#   8. the 2x2 example on the local cluster without a site file against the
#      same job with site/site.json (bench/nosite.sh).
#
# Thread counts: a run of P processes gives each nproc/P threads (OpenBLAS for
# dtrain, intra-op for PyTorch), so neither oversubscribes the cores. The peer
# also runs with 1 thread in the 1-process rows, and the faster of its two
# results is the one compared: the ratio is against PyTorch at its best here.
#
# Usage: bench/run.py BUILD_DIR [--quick] [--only ROWS]; prints the table and
# writes BUILD_DIR/bench/results.json. Exit 0 when it ran (targets missed are
# reported, not errors), 1 when a run failed, 2 on bad arguments.
import argparse
import json
import re
import os
import shutil
import statistics
import subprocess
import sys
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"  # Debian's python, with python3-torch
MODELS = {"small": [512, 512], "large": [4096, 4096, 4096]}
# the GPT rows' configs (issue #20): a tiny byte-level GPT, and GPT-2 small
# at a short context; measured steps and window per config
GPTS = {"tiny": {"vocab": 256, "context": 128, "layers": 4, "heads": 4, "embd": 128, "batch": 16,
                 "steps": 40, "window": 10},
        "gpt2-small": {"vocab": 50257, "context": 64, "layers": 12, "heads": 12, "embd": 768, "batch": 4,
                       "steps": 6, "window": 2}}
# the Llama rows' config: jobs/llama-tiny-2x2.json's model (issue #47)
LLAMA = {"vocab": 256, "context": 128, "layers": 4, "heads": 4, "kv_heads": 2, "embd": 128,
         "intermediate": 352, "batch": 16, "steps": 40, "window": 10}
INPUTS, CLASSES, BATCH = 784, 10, 64


class Failed(Exception):
    """A run or a peer failed: the message says which and shows its output."""


def cpu_info():
    """This machine's CPU: its model and its bf16 instructions (avx512_bf16,
    amx_bf16; Arm's bf16), from /proc/cpuinfo's first processor, or
    DTRAIN_CPU_MODEL and DTRAIN_CPU_FLAGS as dtrain-run reads them
    (base/cpus.h). Without them oneDNN emulates bf16 products with float32
    instructions (slower than fp32: 0.39x to 0.44x measured on a Xeon with
    AVX-512 but no BF16), so every row says which CPU it was measured on."""
    model, flags = "", []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() in ("flags", "Features"):
                    flags = value.split()
    except OSError:
        pass
    model = os.environ.get("DTRAIN_CPU_MODEL", model) or "unknown"
    if "DTRAIN_CPU_FLAGS" in os.environ:
        flags = os.environ["DTRAIN_CPU_FLAGS"].split()
    have = [w for w in ("avx512_bf16", "amx_bf16", "bf16") if w in flags]
    return {"model": model, "bf16": bool(have), "bf16_flags": have,
            "text": "%s, bf16 %s" % (model, "native (%s)" % " ".join(have) if have else "emulated (no avx512_bf16 or amx_bf16)")}


def die(msg):
    raise Failed(msg)


def sh(cmd, env=None, what=None, timeout=1800):
    """Runs cmd (a list); returns its stdout; dies naming `what` on failure
    or when it runs past `timeout` seconds (a hung peer)."""
    e = dict(os.environ)
    e.update(env or {})
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        die("%s did not end within %d s: %s" % (what or cmd[0], timeout, " ".join(cmd)))
    if p.returncode != 0:
        die("%s failed (exit %d): %s\n%s" % (what or cmd[0], p.returncode, " ".join(cmd),
                                            (p.stdout + p.stderr)[-3000:]))
    return p.stdout


def last_json(out, what):
    for line in reversed(out.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    die("%s printed no JSON:\n%s" % (what, out[-2000:]))


def progress(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


class Bench:
    def __init__(self, build, quick):
        self.build = os.path.abspath(build)
        self.bin = os.path.join(self.build, "bin")
        self.work = os.path.join(self.build, "bench", "run")
        self.quick = quick
        self.cores = os.cpu_count() or 1
        self.runs = 0
        self.last_out = None  # the last dtrain-run's output (rank_memory)
        os.makedirs(self.work, exist_ok=True)
        for prog in ("dtrain-run", "dtrain-submit", "dtrain-data", "dtrain-bench-sgemm",
                     "dtrain-bench-allreduce", "dtrain-bench-membw"):
            if not os.access(os.path.join(self.bin, prog), os.X_OK):
                die("%s/%s missing: build first (make build)" % (self.bin, prog))
        self.data = os.path.join(self.build, "data", "bench-784.h5")
        if not os.path.exists(self.data):
            os.makedirs(os.path.dirname(self.data), exist_ok=True)
            sh([self.bin + "/dtrain-data", "synthetic", self.data, "--samples", "16384",
                "--features", str(INPUTS), "--classes", str(CLASSES)], what="dtrain-data")

    # --- peers ---

    def sgemm(self, args, threads=1, copies=1, seconds=2.0, split=False, lockstep=False, waits=None):
        """GFLOP/s of dtrain-bench-sgemm, summed over `copies` started at once.
        split: copy k runs block k of every layer (--part k/copies), pinned
        to core k as dtrain's ranks are (mpirun --bind-to core); lockstep:
        and the copies wait for each other after every layer, or without
        split, each running the whole products, once a step (--copies);
        waits: a list that gets the copies' mean share of time spent
        waiting for each other (the grad sync section reads it)."""
        base = [self.bin + "/dtrain-bench-sgemm", "--threads", str(threads), "--seconds",
                str(seconds)]
        barrier = os.path.join(self.work, "lockstep.barrier")
        if os.path.exists(barrier):
            os.unlink(barrier)
        cmds = []
        for k in range(copies):
            cmd = base
            if split or lockstep:
                cmd = ["taskset", "-c", str(k % self.cores)] + base
                cmd += ["--part", "%d/%d" % (k, copies)] if split else ["--copies", str(copies)]
                if lockstep:
                    cmd += ["--lockstep", barrier]
            cmds.append(cmd + args)
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for cmd in cmds]
        total, shares = 0.0, []
        for p, cmd in zip(procs, cmds):
            out, _ = p.communicate()
            if p.returncode != 0:
                die("dtrain-bench-sgemm failed: " + " ".join(cmd))
            r = last_json(out, "dtrain-bench-sgemm")
            total += r["gflops"]
            shares.append(r["wait_s"] / r["seconds"])
        if waits is not None:
            waits.append(statistics.mean(shares))
        if os.path.exists(barrier):
            os.unlink(barrier)
        return total

    def membw(self, floats, threads=1, copies=1, seconds=2.0):
        """dtrain-bench-membw's update pattern over `floats` per copy: GB/s
        summed over `copies` started at once, and the slowest pass (s)."""
        cmd = [self.bin + "/dtrain-bench-membw", "--threads", str(threads), "--seconds",
               str(seconds), "update", str(floats)]
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(copies)]
        gbps, pass_s = 0.0, 0.0
        for p in procs:
            out, _ = p.communicate()
            if p.returncode != 0:
                die("dtrain-bench-membw failed: " + " ".join(cmd))
            r = last_json(out, "dtrain-bench-membw")
            gbps += r["gbps"]
            pass_s = max(pass_s, r["pass_s"])
        return {"gbps": gbps, "pass_s": pass_s}

    def peer_best(self, cmd, procs, threads, key, what, env=None, blas_all=True):
        """A PyTorch peer's rate at its best. Debian's torch calls the system
        libblas (OpenBLAS, pthreads), whose threads torch.set_num_threads
        does not set: OPENBLAS_NUM_THREADS does. A process of `threads`
        threads gets that many BLAS threads; with 1 thread in 1 process it
        also runs with the BLAS on every core (what a user who sets nothing
        gets: torch's ops on 1 thread, the products on all), and the faster
        counts. env: more of the peer's environment; blas_all=False skips
        the second try (under bf16 autocast the products are oneDNN's, on
        torch's own threads, and OpenBLAS's count does not matter)."""
        tries = [threads] + ([self.cores] if blas_all and procs == 1 and threads == 1 and self.cores > 1 else [])
        best = 0.0
        for blas in tries:
            out = sh(cmd, env=dict(env or {}, OPENBLAS_NUM_THREADS=str(blas)), what=what, timeout=900)
            best = max(best, last_json(out, what)[key])
        return best

    def torch(self, model, procs, threads, steps):
        return self.peer_best(
            [PY, os.path.join(SRC, "bench", "peer_torch.py"), "--data", self.data,
             "--hidden", ",".join(map(str, MODELS[model])), "--batch", str(BATCH),
             "--procs", str(procs), "--threads", str(threads), "--steps", str(steps),
             "--warmup", str(max(3, steps // 10))], procs, threads,
            "samples_per_s_median_window", "peer_torch.py")

    def torch_gpt(self, cfg, procs, threads, steps, bf16=False):
        """torch_gpt.py's tokens/s at its best; bf16: every step under
        torch.autocast("cpu", dtype=torch.bfloat16) (peer_torch.py's
        timed_steps, which torch_gpt.py times with, reads the variable)."""
        c = GPTS[cfg]
        return self.peer_best(
            [PY, os.path.join(SRC, "bench", "torch_gpt.py"), "--tokens", self.gpt_data(cfg)]
            + sum((["--" + k, str(c[k])] for k in ("vocab", "context", "layers", "heads", "embd", "batch")), [])
            + ["--procs", str(procs), "--threads", str(threads), "--steps", str(steps),
               "--warmup", "2"], procs, threads, "tokens_per_s_median_window",
            "torch_gpt.py" + (" (autocast bf16)" if bf16 else ""),
            env={"PEER_TORCH_AUTOCAST": "bf16" if bf16 else ""}, blas_all=not bf16)

    def torch_llama(self, threads, steps):
        """torch_gpt.py --model llama's tokens/s at its best (fp32)."""
        c = LLAMA
        keys = ("vocab", "context", "layers", "heads", "kv_heads", "embd", "intermediate", "batch")
        return self.peer_best(
            [PY, os.path.join(SRC, "bench", "torch_gpt.py"), "--model", "llama", "--tokens", self.gpt_data("tiny")]
            + sum((["--" + k.replace("_", "-"), str(c[k])] for k in keys), [])
            + ["--threads", str(threads), "--steps", str(steps), "--warmup", "2"], 1, threads,
            "tokens_per_s_median_window", "torch_gpt.py --model llama")

    def dtrain_llama(self, threads=1, steps=20, window=5):
        """dtrain-run of the Llama config, one process; the step events after the first window."""
        c = LLAMA
        self.runs += 1
        name = "run-%03d" % self.runs
        run_dir = os.path.join(self.work, name)
        subprocess.run(["rm", "-rf", run_dir])
        sets = ["name=bench-llama", "run_dir=" + run_dir, "data.train=" + self.gpt_data("tiny"),
                "data.test=null", "model.vocab_size=%d" % c["vocab"], "model.context=%d" % c["context"],
                "model.layers=%d" % c["layers"], "model.heads=%d" % c["heads"],
                "model.kv_heads=%d" % c["kv_heads"], "model.embd=%d" % c["embd"],
                "model.intermediate_size=%d" % c["intermediate"], "parallel.data=1", "parallel.pipeline=1",
                "parallel.micro_batches=1", "resources.nodes=1", "resources.tasks_per_node=1",
                "resources.cpus_per_task=%d" % threads, "train.global_batch=%d" % c["batch"],
                "train.epochs=1000", "train.max_steps=%d" % (steps + window), "train.log_every=%d" % window,
                "train.eval_every=0", "train.optimizer.lr=0.0006", "train.lr_schedule.warmup_steps=0",
                "checkpoint.every_steps=0", "checkpoint.resume=never"]
        return self.run_spec(name, run_dir, "llama-tiny-2x2.json", sets, 1, threads)

    def gpt_data(self, cfg):
        """The config's token stream: the fortunes byte-level (vocabulary 256),
        else random tokens below the vocabulary (as the issue measured)."""
        c = GPTS[cfg]
        out = os.path.join(self.build, "data", "bench-gpt-%d" % c["vocab"])
        path = os.path.join(out, "train.h5")
        if os.path.exists(path):
            return path
        if c["vocab"] == 256:
            d = "/usr/share/games/fortunes"
            texts = sorted(os.path.join(d, f) for f in os.listdir(d)
                           if "." not in f and os.path.isfile(os.path.join(d, f)))
            sh([self.bin + "/dtrain-data", "text"] + texts + [out], what="dtrain-data text")
        else:
            raw = out + ".bin"
            sh([PY, "-c", "import numpy as np; np.random.seed(0); np.random.randint(0, %d, size=2000000, "
                "dtype=np.uint16).tofile('%s')" % (c["vocab"], raw)], what="random tokens")
            sh([self.bin + "/dtrain-data", "tokens", raw, out, "--vocab", str(c["vocab"])],
               what="dtrain-data tokens")
            os.unlink(raw)
        return path

    def dtrain_gpt(self, cfg, data=1, threads=1, steps=20, window=5, extra=()):
        """dtrain-run of a GPT config under mpirun; the step events after the first window."""
        c = GPTS[cfg]
        self.runs += 1
        name = "run-%03d" % self.runs
        run_dir = os.path.join(self.work, name)
        subprocess.run(["rm", "-rf", run_dir])
        sets = ["name=bench-gpt-" + cfg, "run_dir=" + run_dir, "data.train=" + self.gpt_data(cfg),
                "data.test=null", "model.vocab_size=%d" % c["vocab"], "model.context=%d" % c["context"],
                "model.layers=%d" % c["layers"], "model.heads=%d" % c["heads"], "model.embd=%d" % c["embd"],
                "parallel.data=%d" % data, "parallel.pipeline=1", "parallel.micro_batches=1",
                "parallel.stage_layers=[]", "resources.nodes=1", "resources.tasks_per_node=%d" % data,
                "resources.cpus_per_task=%d" % threads, "train.global_batch=%d" % c["batch"],
                "train.epochs=1000", "train.max_steps=%d" % (steps + window), "train.log_every=%d" % window,
                "train.eval_every=0", "train.optimizer.lr=0.0006", "train.lr_schedule.warmup_steps=0",
                "checkpoint.every_steps=0", "checkpoint.resume=never"] + list(extra)
        return self.run_spec(name, run_dir, "gpt-tiny-2x2.json", sets, data, threads)

    # --- dtrain ---

    def dtrain(self, model, data=1, pipeline=1, threads=1, steps=100, window=20, micro=1,
               schedule="gpipe", hidden=None, stage_layers=None, extra=()):
        """Runs dtrain-run under mpirun; returns the step events after the first window."""
        self.runs += 1
        name = "run-%03d" % self.runs
        run_dir = os.path.join(self.work, name)
        subprocess.run(["rm", "-rf", run_dir])
        hid = hidden or MODELS[model]
        sets = ["name=bench-" + model, "run_dir=" + run_dir, "data.train=" + self.data,
                "model.inputs=%d" % INPUTS, "model.outputs=%d" % CLASSES,
                "model.hidden=" + json.dumps(hid), "parallel.data=%d" % data,
                "parallel.pipeline=%d" % pipeline, "parallel.micro_batches=%d" % micro,
                "resources.nodes=1", "resources.tasks_per_node=%d" % (data * pipeline),
                "parallel.schedule=" + schedule, "resources.cpus_per_task=%d" % threads,
                "train.global_batch=%d" % BATCH, "train.epochs=1000",
                "train.max_steps=%d" % (steps + window), "train.log_every=%d" % window,
                "train.optimizer.type=sgd", "train.optimizer.lr=0.01",
                "train.optimizer.momentum=0.9", "checkpoint.every_steps=0",
                "checkpoint.resume=never"]
        if stage_layers:
            sets.append("parallel.stage_layers=" + json.dumps(stage_layers))
        sets += list(extra)
        return self.run_spec(name, run_dir, "single.json", sets, data * pipeline, threads)

    def run_spec(self, name, run_dir, base, sets, ranks, threads):
        """jobs/<base> with sets, validated, run by mpirun on `ranks` ranks;
        the step events of its metrics after the first window."""
        spec = os.path.join(self.work, name + ".json")
        cmd = [self.bin + "/dtrain-submit", "validate", os.path.join(SRC, "jobs", base)]
        for s in sets:
            cmd += ["--set", s]
        with open(spec, "w") as f:
            f.write(sh(cmd, what="dtrain-submit validate"))
        bind = "core" if threads == 1 and ranks <= self.cores else "none"
        self.last_out = sh(["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", bind, "-np",
                            str(ranks), self.bin + "/dtrain-run", "--quiet", spec],
                           env={"OMPI_MCA_mpi_yield_when_idle": "1"}, what="dtrain-run (%s)" % name)
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            ev = [json.loads(l) for l in f if '"event":"step"' in l]
        # every run ends with a save (a trained model out): 294 MB for the
        # large MLP, about 40 of them in a bench, which filled this
        # machine's disk once; only the metrics are kept
        shutil.rmtree(os.path.join(run_dir, "checkpoints"), ignore_errors=True)
        if len(ev) < 2:
            die("%s: fewer than 2 step windows in %s/metrics.jsonl" % (name, run_dir))
        return ev[1:]  # the first window warms up

    def rank_most(self, key):
        """The last run's ranks: the most of `key` (MiB) and of peak RSS any
        rank reported on its closing line (dtrain-run's, one a rank)."""
        got, rss = [], []
        for line in (self.last_out or "").splitlines():
            f = line.split()
            if key in f and "peak_rss_mib" in f:
                got.append(float(f[f.index(key) + 1]))
                rss.append(float(f[f.index("peak_rss_mib") + 1]))
        if not got:
            die("the last run reported no %s per rank" % key)
        return max(got), max(rss)

    def rank_memory(self):
        """The most optimizer state and peak RSS (MiB) of a rank."""
        return self.rank_most("optimizer_mib")

    def rank_acts(self):
        """The most activation memory and peak RSS (MiB) of a rank."""
        return self.rank_most("activations_mib")

    def rank_peaks(self):
        """The last run's peak RSS (MiB) of each rank, in rank order."""
        got = {}
        for line in (self.last_out or "").splitlines():
            f = line.split()
            if len(f) > 2 and f[1] == "rank" and "peak_rss_mib" in f:
                got[int(f[2])] = float(f[f.index("peak_rss_mib") + 1])
        if not got:
            die("the last run reported no memory per rank")
        return [got[k] for k in sorted(got)]

    @staticmethod
    def rate(ev):
        return statistics.median(e["samples_per_s"] for e in ev)

    @staticmethod
    def times(ev):
        """Per-step times averaged over the windows (weighted by steps)."""
        n = sum(e["steps"] for e in ev)
        return {k: sum(e["time"][k] * e["steps"] for e in ev) / n for k in ev[0]["time"]}


def flop_per_sample(hidden):
    """Matrix-product flops of one sample's training step: forward x W^T per
    layer, dW per layer, dx for every layer but the first (as kernels.c)."""
    w = [INPUTS] + hidden + [CLASSES]
    f = 0
    for l in range(len(w) - 1):
        f += 2 * w[l] * w[l + 1] * (3 if l > 0 else 2)
    return f


def mlp_shapes(hidden, batch=BATCH):
    """dtrain-bench-sgemm's arguments for a step's products at batch rows."""
    return ["mlp", str(batch), ",".join(map(str, [INPUTS] + hidden + [CLASSES]))]


def params(hidden):
    w = [INPUTS] + hidden + [CLASSES]
    return sum(w[l] * w[l + 1] + w[l + 1] for l in range(len(w) - 1))


def main():
    ap = argparse.ArgumentParser(description="dtrain's benchmarks against their peers (make bench)")
    ap.add_argument("build", help="the build directory (make build)")
    ap.add_argument("--quick", action="store_true", help="fewer steps and rounds (a smoke run)")
    ap.add_argument("--only", default="throughput,compute,grad,replicas,gpt,llama,shard,pipeline,checkpoint,startup,nosite,data",
                    help="comma list of sections to run (default: all)")
    a = ap.parse_args()
    only = set(a.only.split(","))
    b = Bench(a.build, a.quick)
    cores = b.cores
    rounds = 1 if a.quick else 3
    steps = {"small": 150 if a.quick else 500, "large": 8 if a.quick else 20}
    win = {"small": 50 if a.quick else 100, "large": 4 if a.quick else 5}
    cpu = cpu_info()
    res = {"rows": [], "cores": cores, "rounds": rounds, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                     "loadavg_before": os.getloadavg(), "cpu": cpu}
    progress("CPU: " + cpu["text"])

    def row(section, what, ours, peer, unit, ratio, target, note="", target_is_max=False):
        """target: the least ratio wanted, or with target_is_max the most.
        Every row names the CPU it was measured on and its bf16 support."""
        ok = None if target is None else (ratio < target if target_is_max else ratio >= target)
        # on a CPU without bf16 instructions PyTorch's peer has run GPT-2
        # small 7x slower than on one with them, unexplained yet
        # (docs/performance.md): no ratio against it counts until that is found
        if not cpu["bf16"] and re.search(r"PyTorch|DDP|torch", what + " " + note):
            ok = None
            note = (note + "; " if note else "") + "unverified: the PyTorch peer on a CPU without bf16 instructions"
        res["rows"].append({"section": section, "what": what, "dtrain": ours, "peer": peer,
                            "unit": unit, "ratio": ratio, "target": target,
                            "target_is_max": target_is_max, "met": ok, "note": note,
                            "cpu": cpu["model"], "cpu_bf16": cpu["bf16"]})

    # --- peaks: OpenBLAS and the memory on this machine ---
    def peaks():
        sg = {"square_1thread": b.sgemm(["square", "2048"], threads=1),
              "square_2procs": b.sgemm(["square", "2048"], threads=1, copies=2),
              "square_all": b.sgemm(["square", "2048"], threads=cores), "mlp_shapes": {}}
        for m, hid in MODELS.items():
            shapes = mlp_shapes(hid)
            half = mlp_shapes(hid, BATCH // 2)
            sg["mlp_shapes"][m] = {"1x%d" % cores: b.sgemm(shapes, threads=cores),
                                   "1x1": b.sgemm(shapes, threads=1),
                                   "2x1": b.sgemm(half, threads=1, copies=2),
                                   # the split way's blocks (runtime/parallel/dp.h), free (in
                                   # lockstep: the quartets, section 3)
                                   "split_2x1": b.sgemm(shapes, threads=1, copies=2, split=True)}
        # the update's floor: its bytes at the memory's speed
        mem = {}
        for m, hid in MODELS.items():
            n = params(hid)
            mem[m] = {"1x%d" % cores: b.membw(n, threads=cores), "1x1": b.membw(n, threads=1),
                      "2x1": b.membw(n // 2, threads=1, copies=2)}
        return sg, mem

    def median_of(dicts):
        """The per-key median of equally shaped nested dicts of numbers."""
        if isinstance(dicts[0], dict):
            return {k: median_of([d[k] for d in dicts]) for k in dicts[0]}
        return statistics.median(dicts)

    # --- 1. throughput, and the runs later rows read ---
    # Rounds: the peaks, then every run of dtrain and of PyTorch; the peaks
    # move with the machine's load as much as the runs do, so they are
    # measured in every round too and each side's median is compared.
    ev = {}
    need_peaks = bool(only & {"throughput", "compute", "grad"})
    combos = []
    for m in MODELS:
        for procs in (1, 2):
            # threads per process: all cores shared out; 1 process also
            # tries 1 thread (OpenBLAS and PyTorch both lose on small
            # shapes with 2); each side is compared at its best
            combos.append((m, procs, [max(1, cores // procs)] + ([1] if procs == 1 and cores > 1 else [])))
    rates = {(m, procs, th): [] for m, procs, opts in combos for th in opts}
    peer_rates = {k: [] for k in rates}
    peak_rounds = []
    for r in range(rounds if need_peaks else 0):
        progress("sgemm and memory peaks (dtrain-bench-sgemm, dtrain-bench-membw), round %d/%d"
                 % (r + 1, rounds))
        peak_rounds.append(peaks())
        for m, procs, opts in combos:
            for th in opts:
                progress("throughput %s MLP, %d process(es) x %d thread(s), round %d/%d"
                         % (m, procs, th, r + 1, rounds))
                e = b.dtrain(m, data=procs, threads=th, steps=steps[m], window=win[m])
                ev.setdefault((m, procs, th), []).extend(e)
                rates[(m, procs, th)].append(b.rate(e))
                peer_rates[(m, procs, th)].append(b.torch(m, procs, th, steps[m]))
    if need_peaks:
        res["sgemm"] = median_of([sg for sg, _ in peak_rounds])
        res["membw"] = median_of([mem for _, mem in peak_rounds])
        res["peak_rounds"] = [{"sgemm": sg, "membw": mem} for sg, mem in peak_rounds]
        for m, procs, opts in combos:
            best_o = max(opts, key=lambda th: statistics.median(rates[(m, procs, th)]))
            best_p = max(opts, key=lambda th: statistics.median(peer_rates[(m, procs, th)]))
            o, p = statistics.median(rates[(m, procs, best_o)]), statistics.median(peer_rates[(m, procs, best_p)])
            ev[(m, procs)] = ev[(m, procs, best_o)]
            res.setdefault("best_threads", {})["%s-%d" % (m, procs)] = best_o
            target = (2.0 if m == "small" else 1.1) if procs == 1 else 2.0
            row("throughput", "%s MLP, %d process%s (samples/s)" % (m, procs, "es" if procs > 1 else ""),
                o, p, "samples/s", o / p, target,
                "threads/process: dtrain %d, PyTorch %d (each its best of %s)"
                % (best_o, best_p, "/".join(map(str, opts))) if len(opts) > 1 else
                "%d thread(s) per process" % best_o)
            for th in opts:
                res.setdefault("throughput_runs", []).append(
                    {"model": m, "procs": procs, "threads": th, "dtrain": rates[(m, procs, th)],
                     "pytorch": peer_rates[(m, procs, th)]})
        for m in MODELS:
            ev[(m, "1x1")] = ev.get((m, 1, 1), ev[(m, 1)])

    # --- 2. compute efficiency of the large MLP ---
    # The target row comes from triplets: sgemm on the step's shapes, a
    # short run of the large MLP, sgemm again, back to back; each triplet's
    # ratio is the step's rate over the mean of its two sgemm, and the row
    # is the median of the ratios. The rounds' medians (the rows below it)
    # compare a run with peaks measured minutes apart, while the host's
    # speed moves within seconds (bench/README.md, "How the runs are
    # interleaved").
    def triplets(n, th, fl):
        shapes = mlp_shapes(MODELS["large"])
        out = []
        for k in range(n):
            progress("compute: triplets sgemm / large MLP step / sgemm, %d/%d" % (k + 1, n))
            before = b.sgemm(shapes, threads=th, seconds=1.0)
            e = b.dtrain("large", data=1, threads=th, steps=12, window=3)
            after = b.sgemm(shapes, threads=th, seconds=1.0)
            step = fl / b.times(e)["step_s"] * 1e-9
            out.append({"sgemm": [before, after], "step": step,
                        "ratio": step / ((before + after) / 2)})
        return out

    if only & {"throughput", "compute"} and ("large", 1) in ev:
        fl = flop_per_sample(MODELS["large"]) * BATCH
        t = b.times(ev[("large", 1)])
        ach = fl / t["step_s"] * 1e-9
        comp = fl / t["compute_s"] * 1e-9
        th = res["best_threads"]["large-1"]
        shp = res["sgemm"]["mlp_shapes"]["large"]["1x%d" % th]
        tri = triplets(2 if a.quick else 7, th, fl)
        res["compute_triplets"] = tri
        row("compute", "large MLP step, 1 process (GFLOP/s)",
            statistics.median(x["step"] for x in tri),
            statistics.median((x["sgemm"][0] + x["sgemm"][1]) / 2 for x in tri), "GFLOP/s",
            statistics.median(x["ratio"] for x in tri), 0.8,
            "peer: sgemm on the step's shapes, %d thread(s) as the run; medians of %d triplets "
            "sgemm-step-sgemm (ratio: the median of theirs)" % (th, len(tri)))
        row("compute", "  the same from the rounds (GFLOP/s)", ach, shp, "GFLOP/s", ach / shp, None,
            "the throughput rounds' runs against the rounds' sgemm peaks")
        row("compute", "  forward+backward only (GFLOP/s)", comp, shp, "GFLOP/s", comp / shp, None,
            "the step minus optimizer and data")
        sq = res["sgemm"]["square_all"] if th > 1 else res["sgemm"]["square_1thread"]
        row("compute", "  against square sgemm 2048 (GFLOP/s)", ach, sq, "GFLOP/s", ach / sq, None,
            "%d thread(s)" % th)
        # what a step can reach here: the products at sgemm's rate on
        # their shapes, plus the update's 24 bytes a parameter at the
        # memory's speed (the update cannot hide: both cores do the products)
        upd = res["membw"]["large"]["1x%d" % th]["pass_s"]
        row("compute", "  the update alone (s/step)", t["optim_s"], upd, "s", t["optim_s"] / upd, None,
            "peer: the same bytes at memory speed (dtrain-bench-membw, best pass), %d thread(s)" % th,
            target_is_max=True)
        floor = fl / (fl / (shp * 1e9) + upd) * 1e-9
        row("compute", "  vs sgemm shapes + update at memory speed (GFLOP/s)", ach,
            floor, "GFLOP/s", ach / floor, None, "the most a step can reach on this machine")
        res["large_1proc_times"] = t

    # --- 3. data-parallel scaling ---
    # A speed-up is a ratio of two runs, and this host's speed drifts within
    # seconds (sgemm on 1 core: 67-104 GFLOP/s in one hour; 2 sgemm
    # processes measured up to 2.19x one, 2 s apart, which 2 cores cannot
    # do). So each speed-up of a target row comes from quartets: 1, 2, 2, 1
    # processes back to back, short runs, (two_a + two_b) / (one_a + one_b)
    # (a drift linear over the quartet cancels); quartets of sgemm, the
    # small and the large MLP take turns, and each side is the median of
    # its quartets. Two more sgemm quartets per model say what a
    # synchronous step of the model's products reaches here, with no
    # dtrain in it: the split way's blocks meeting where its replicas do
    # (--part k/2 --lockstep), and plain data parallelism's half batches
    # meeting once a step (--copies 2 --lockstep), each against 1 process
    # on the whole products.
    def quartet(one, two):
        o1, t1 = one(), two()
        t2, o2 = two(), one()
        return {"one": [o1, o2], "two": [t1, t2], "speedup": (t1 + t2) / (o1 + o2)}

    def quartets(n):
        qsteps = {"small": 300, "large": 8}
        qwin = {"small": 50, "large": 2}
        out = {"sgemm": []}
        for k in range(n):
            progress("scaling: quartets 1-2-2-1 processes of sgemm and of the MLPs, %d/%d" % (k + 1, n))
            out["sgemm"].append(quartet(
                lambda: b.sgemm(["square", "2048"], threads=1, seconds=1.0),
                lambda: b.sgemm(["square", "2048"], threads=1, copies=2, seconds=1.0)))
            for m in MODELS:
                out.setdefault(m, []).append(quartet(
                    lambda: b.rate(b.dtrain(m, data=1, threads=1, steps=qsteps[m], window=qwin[m])),
                    lambda: b.rate(b.dtrain(m, data=2, threads=1, steps=qsteps[m], window=qwin[m]))))
                shapes = mlp_shapes(MODELS[m])
                half = mlp_shapes(MODELS[m], BATCH // 2)
                whole = lambda: b.sgemm(shapes, threads=1, seconds=1.0)
                lock_waits = out.setdefault(m + "_lockstep_wait_share", [])
                out.setdefault(m + "_lockstep", []).append(quartet(
                    whole, lambda: b.sgemm(shapes, copies=2, seconds=1.0, split=True, lockstep=True,
                                           waits=lock_waits)))
                out.setdefault(m + "_dp_step", []).append(quartet(
                    whole, lambda: b.sgemm(half, copies=2, seconds=1.0, lockstep=True)))
        return out

    if only & {"throughput"} and ("small", 2) in ev:
        # speed-ups are ratios of two runs of the same round (the machine's
        # speed moves between rounds), then the median over the rounds
        def per_round(f):
            return statistics.median(f(r) for r in range(len(peak_rounds)))

        sg = [pr[0] for pr in peak_rounds]
        mems = [pr[1] for pr in peak_rounds]
        q = quartets(2 if a.quick else 7)
        res["scaling_quartets"] = q
        peer_q = statistics.median(x["speedup"] for x in q["sgemm"])
        for m in MODELS:
            two = (m, 2, max(1, cores // 2))
            ours_q = statistics.median(x["speedup"] for x in q[m])
            row("scaling", "%s MLP, 2 processes / 1 (speed-up)" % m, ours_q, peer_q, "x",
                ours_q / peer_q, 0.9, "peer: 2 concurrent sgemm processes / 1 (square); "
                "medians of %d quartets 1-2-2-1, alternating with the peer's" % len(q[m]))
            # what synchronous steps of the same products reach against
            # the target's peer: the best of the two is the most a
            # synchronous step of them can reach here
            lock_q = statistics.median(x["speedup"] for x in q[m + "_lockstep"])
            dps_q = statistics.median(x["speedup"] for x in q[m + "_dp_step"])
            row("scaling", "  %s MLP's products, split blocks, in lockstep" % m, lock_q, peer_q, "x",
                lock_q / peer_q, None, "dtrain column: 2 pinned dtrain-bench-sgemm --part k/2 "
                "--lockstep (meeting where the split way's replicas do) / 1 on the whole "
                "products; peer: the target's; quartets")
            row("scaling", "  %s MLP's products, half batches, once a step" % m, dps_q,
                peer_q, "x", dps_q / peer_q, None, "dtrain column: 2 pinned dtrain-bench-sgemm "
                "--copies 2 --lockstep at batch %d (plain data parallelism's products, one "
                "meeting a step) / 1 at %d; peer: the target's; quartets" % (BATCH // 2, BATCH))
            best = max(lock_q, dps_q)
            row("scaling", "  %s MLP against the better synchronous sgemm" % m, ours_q, best, "x",
                ours_q / best, None, "peer: the better of the two rows above (quartets)")
            # the rows below compare the rounds' runs (each a median of
            # 3 rounds), as the row above did before it took quartets
            ours = per_round(lambda r: rates[two][r] / rates[(m, 1, 1)][r])
            shp = per_round(lambda r: sg[r]["mlp_shapes"][m]["2x1"] / sg[r]["mlp_shapes"][m]["1x1"])
            peer_scale = per_round(lambda r: sg[r]["square_2procs"] / sg[r]["square_1thread"])
            row("scaling", "  %s MLP, the same from the rounds" % m, ours, peer_scale, "x",
                ours / peer_scale, None, "the throughput rounds' runs: 2 / 1 process within a "
                "round, median of the rounds, against the rounds' sgemm peaks")
            row("scaling", "  %s MLP against sgemm at half the batch" % m, ours, shp, "x",
                ours / shp, None, "peer: 2 sgemm processes on the step's shapes at batch %d "
                "(plain data parallelism's) / 1 at %d" % (BATCH // 2, BATCH))
            # what the split way runs: each process a block of every layer
            # over the whole batch, free (in lockstep: the quartets above)
            sp = per_round(lambda r: sg[r]["mlp_shapes"][m]["split_2x1"] / sg[r]["mlp_shapes"][m]["1x1"])
            row("scaling", "  %s MLP against sgemm on its split blocks" % m, ours, sp, "x", ours / sp,
                None, "peer: 2 processes, dtrain-bench-sgemm --part k/2, pinned / 1 on the whole "
                "products")
            msc = per_round(lambda r: mems[r][m]["2x1"]["gbps"] / mems[r][m]["1x1"]["gbps"])
            row("scaling", "  %s MLP's update: memory, 2 processes / 1" % m, ours, msc, "x",
                ours / msc, None, "peer: dtrain-bench-membw, 2 processes on half the "
                "parameters each / 1 on all")
            res.setdefault("dp_times", {})[m] = {"1x1": b.times(ev[(m, "1x1")]),
                                                 "2x1": b.times(ev[(m, 2)])}
        # the default grad_sync ("auto", here "split": the 2 replicas share
        # the parameters in memory and cut every layer between them,
        # runtime/parallel/dp.h) against "shared" (a gradient slot per replica, each
        # updates half) and "allreduce" (every replica for itself, MPI)
        for m in MODELS:
            auto = b.rate(ev[(m, 2)])
            for way, what in (("shared", "a gradient slot per replica, each updates half"),
                              ("allreduce", "MPI allreduce between the replicas")):
                progress("throughput %s MLP, 2 processes, grad_sync %s" % (m, way))
                e = b.dtrain(m, data=2, threads=1, steps=steps[m], window=win[m],
                             extra=["parallel.grad_sync=" + way])
                other = b.rate(e)
                row("scaling", "  %s MLP, 2 processes: grad_sync auto / %s" % (m, way), auto,
                    other, "samples/s", auto / other, None,
                    "auto = split: layers cut between the replicas; vs " + what)
                res["dp_times"][m]["2x1_" + way] = b.times(e)

    # --- 4. gradient synchronisation ---
    if only & {"throughput", "grad"} and ("large", 2) in ev:
        t = b.times(ev[("large", 2)])
        progress("blocking allreduce of the large MLP's gradient (dtrain-bench-allreduce)")
        out = sh(["mpirun", "--allow-run-as-root", "-np", "2", b.bin + "/dtrain-bench-allreduce",
                  "--iters", "5" if a.quick else "10", str(params(MODELS["large"]))],
                 what="dtrain-bench-allreduce")
        ar = last_json(out, "dtrain-bench-allreduce")["median_s"]
        row("grad sync", "large MLP, 2 processes: exposed gradient sync (s/step)", t["grad_wait_s"], ar,
            "s", t["grad_wait_s"] / t["step_s"], 0.10,
            "ratio = share of the step; peer = one blocking allreduce", target_is_max=True)
        q = res.get("scaling_quartets", {})
        if q.get("large_lockstep_wait_share"):
            # the same waits without dtrain: the split blocks' products in
            # lockstep, the scaling quartets' 2-process runs
            lw = statistics.median(q["large_lockstep_wait_share"])
            share = t["grad_wait_s"] / t["step_s"]
            row("grad sync", "  the same products in lockstep (sgemm): waiting", share, lw, "share",
                share / lw, None, "dtrain column: the row above's share of the step; peer: share "
                "of the time 2 dtrain-bench-sgemm --part k/2 --lockstep copies wait for each "
                "other (median of the scaling quartets' %d runs)" % len(q["large_lockstep_wait_share"]))
        res["grad"] = {"step_s": t["step_s"], "grad_wait_s": t["grad_wait_s"], "blocking_allreduce_s": ar}

    # --- the replicas' check (recovery.check_replicas_every): one check
    # costs a hash of the state and two tiny collectives; measured as the
    # step time with a check at every step less the one without, then as a
    # share of a step at the default interval (median of 3 pairs)
    if only & {"replicas"}:
        pairs = []
        for r in range(1 if a.quick else 3):
            progress("replicas' check, large MLP, 2 replicas (allreduce): every step / never, round %d" % (r + 1))
            t = {}
            for every in (1, 0):
                e = b.dtrain("large", data=2, threads=1, steps=steps["large"], window=win["large"],
                             extra=["parallel.grad_sync=allreduce",
                                    "recovery.check_replicas_every=%d" % every])
                t[every] = b.times(e)["step_s"]
            pairs.append((t[1], t[0]))
        one = statistics.median(max(0.0, c - n) for c, n in pairs)
        plain = statistics.median(n for _, n in pairs)
        default = 1000
        row("replicas", "large MLP, 2 replicas: the replicas' check, cost per step at its default interval "
            "(%d)" % default, one / default, plain, "s", one / default / plain, 0.01,
            "ratio = share of a step; one check (a check every step less none): %.3g s" % one,
            target_is_max=True)
        res["replicas"] = {"check_s": one, "step_s": plain, "every": default}

    # Sections 5-7 run separate programs (the last two their own scripts,
    # one its own Slurm cluster); one that fails is reported after the
    # table, which keeps every row measured before and after it.
    failed = []

    def section(title, fn):
        try:
            fn()
        except Failed as e:
            print("bench/run.py: " + str(e), file=sys.stderr)
            progress("%s: FAILED (above); going on with the other sections" % title)
            failed.append(title)

    # --- 4b. the GPT against PyTorch ---
    # Rounds alternate dtrain and the peer (torch_gpt.py) per config and
    # process count; each side at its best thread count; medians of the
    # rounds. Then the GPT-2-small step against sgemm on the step's own
    # products (dtrain-bench-sgemm gpt), measured right before and after.
    # One process also runs train.precision "bf16" (issue #33) right after
    # its fp32 pair, against PyTorch under bf16 autocast; the bf16 rows
    # compare it with dtrain's fp32 and with that peer, each at its best.
    GPT_BF16_TARGET = {"tiny": 1.4, "gpt2-small": 1.6}

    def gpt_rows():
        if "gpt" not in only:
            return
        rates, peer, sharded, bf16, peer_bf16, mem = {}, {}, {}, {}, {}, {}
        for r in range(rounds):
            for cfg, c in GPTS.items():
                st, win_ = (max(4, c["steps"] // 2), max(2, c["window"] // 2)) if a.quick else (c["steps"], c["window"])
                for procs in (1, 2):
                    for th in ([cores, 1] if procs == 1 and cores > 1 else [1]):
                        progress("gpt %s, %d process(es) x %d thread(s), round %d/%d" % (cfg, procs, th, r + 1, rounds))
                        e = b.dtrain_gpt(cfg, data=procs, threads=th, steps=st, window=win_)
                        rates.setdefault((cfg, procs, th), []).append(statistics.median(x["tokens_per_s"] for x in e))
                        if procs == 1:
                            mem[(cfg, "fp32")] = b.rank_acts()
                        peer.setdefault((cfg, procs, th), []).append(b.torch_gpt(cfg, procs, th, st))
                        if (cfg, procs, th) == ("gpt2-small", 1, 1):
                            res.setdefault("gpt_small_1x1_times", []).append(b.times(e))
                        if procs == 1:  # and in bf16, against PyTorch's autocast (issue #33)
                            progress("gpt %s, 1 process x %d thread(s), bf16, round %d/%d" % (cfg, th, r + 1, rounds))
                            e = b.dtrain_gpt(cfg, data=1, threads=th, steps=st, window=win_,
                                             extra=["train.precision=bf16"])
                            bf16.setdefault((cfg, 1, th), []).append(statistics.median(x["tokens_per_s"] for x in e))
                            mem[(cfg, "bf16")] = b.rank_acts()
                            peer_bf16.setdefault((cfg, 1, th), []).append(b.torch_gpt(cfg, 1, th, st, bf16=True))
                        if procs > 1:  # and with the optimizer sharded (issue #21)
                            progress("gpt %s, %d processes, optimizer sharded, round %d/%d" % (cfg, procs, r + 1, rounds))
                            e = b.dtrain_gpt(cfg, data=procs, threads=th, steps=st, window=win_,
                                             extra=["parallel.optimizer=sharded"])
                            sharded.setdefault((cfg, procs, th), []).append(
                                statistics.median(x["tokens_per_s"] for x in e))
        res["gpt_runs"] = [{"config": k[0], "procs": k[1], "threads": k[2], "dtrain": v, "pytorch": peer[k],
                            "dtrain_sharded": sharded.get(k), "dtrain_bf16": bf16.get(k),
                            "pytorch_autocast_bf16": peer_bf16.get(k)} for k, v in rates.items()]
        res["gpt_memory"] = [{"config": k[0], "precision": k[1], "activations_mib": v[0], "peak_rss_mib": v[1]}
                             for k, v in mem.items()]
        for cfg in GPTS:
            for procs in (1, 2):
                keys = [k for k in rates if k[0] == cfg and k[1] == procs]
                bo = max(keys, key=lambda k: statistics.median(rates[k]))
                bp = max(keys, key=lambda k: statistics.median(peer[k]))
                o, p = statistics.median(rates[bo]), statistics.median(peer[bp])
                opt = ""
                if bo in sharded:  # dtrain's best optimizer too
                    so = statistics.median(sharded[bo])
                    opt = ", optimizer %s (replicated %.0f, sharded %.0f)" % (
                        "sharded" if so > o else "replicated", o, so)
                    o = max(o, so)
                row("gpt", "GPT %s, %d process%s (tokens/s)" % (cfg, procs, "es" if procs > 1 else ""),
                    o, p, "tokens/s", o / p, 1.3,
                    "threads/process: dtrain %d, PyTorch %d (each its best)%s; vs %s" % (
                        bo[2], bp[2], opt, "DDP over gloo" if procs > 1 else "one process"))
                if procs == 1:
                    kb = [k for k in bf16 if k[0] == cfg]
                    bb = max(kb, key=lambda k: statistics.median(bf16[k]))
                    bpb = max(kb, key=lambda k: statistics.median(peer_bf16[k]))
                    ob, pb = statistics.median(bf16[bb]), statistics.median(peer_bf16[bpb])
                    row("gpt", "  bf16 against dtrain fp32 (tokens/s)", ob, o, "tokens/s", ob / o,
                        GPT_BF16_TARGET[cfg], "train.precision bf16 / fp32 (the row above); threads: "
                        "bf16 %d, fp32 %d (each its best)" % (bb[2], bo[2]))
                    row("gpt", "  bf16 against PyTorch bf16 autocast (tokens/s)", ob, pb, "tokens/s", ob / pb,
                        1.3, "peer: torch_gpt.py, each step under torch.autocast(\"cpu\", bfloat16); "
                        "threads: dtrain %d, PyTorch %d (each its best)" % (bb[2], bpb[2]))
                    (ab, rb), (af, rf) = mem[(cfg, "bf16")], mem[(cfg, "fp32")]
                    row("gpt", "  bf16 activations against fp32 (MiB a rank)", ab, af, "MiB", ab / af, None,
                        "activations_mib (what forward keeps for backward, and the scratch); "
                        "peak_rss_mib bf16 %.1f, fp32 %.1f" % (rb, rf))
        # compute efficiency: the step's products at sgemm's rate on their shapes
        c = GPTS["gpt2-small"]
        shapes = ["gpt"] + [str(c[k]) for k in ("batch", "context", "embd", "layers", "vocab", "heads")]
        ratios = []
        for k in range(1 if a.quick else 3):
            progress("gpt compute: sgemm on GPT-2 small's products / a short run / sgemm, %d" % (k + 1))
            out = sh([b.bin + "/dtrain-bench-sgemm", "--threads", "1", "--seconds", "3"] + shapes,
                     what="dtrain-bench-sgemm gpt")
            before = last_json(out, "dtrain-bench-sgemm")
            e = b.dtrain_gpt("gpt2-small", data=1, threads=1, steps=4, window=2)
            after = last_json(sh([b.bin + "/dtrain-bench-sgemm", "--threads", "1", "--seconds", "3"] + shapes,
                                 what="dtrain-bench-sgemm gpt"), "dtrain-bench-sgemm")
            flop = before["flop"] / before["rounds"]  # the products of one step
            step = flop / b.times(e)["step_s"] * 1e-9
            peak = (before["gflops"] + after["gflops"]) / 2
            ratios.append((step, peak, step / peak))
        res["gpt_compute"] = ratios
        row("gpt", "GPT-2 small step, 1 process (GFLOP/s)", statistics.median(x[0] for x in ratios),
            statistics.median(x[1] for x in ratios), "GFLOP/s", statistics.median(x[2] for x in ratios), 0.7,
            "peer: sgemm on the step's products (dtrain-bench-sgemm gpt), 1 thread; medians of triplets")
        # and in bf16 (issue #33): the step's linear products (the ones in
        # bf16) at oneDNN's bf16 matmul rate on their shapes, against the
        # step: the share of the step those products would take at that rate
        bf_ratios = []
        lin = [b.bin + "/dtrain-bench-sgemm", "--threads", "1", "--seconds", "3", "--lib", "onednn-bf16",
               "--linear"] + shapes
        for k in range(1 if a.quick else 3):
            progress("gpt compute, bf16: oneDNN bf16 on GPT-2 small's linear products / a short bf16 run / "
                     "the same, %d" % (k + 1))
            before = last_json(sh(lin, what="dtrain-bench-sgemm gpt --lib onednn-bf16"), "dtrain-bench-sgemm")
            e = b.dtrain_gpt("gpt2-small", data=1, threads=1, steps=4, window=2, extra=["train.precision=bf16"])
            after = last_json(sh(lin, what="dtrain-bench-sgemm gpt --lib onednn-bf16"), "dtrain-bench-sgemm")
            step = before["flop"] / before["rounds"] / b.times(e)["step_s"] * 1e-9
            peak = (before["gflops"] + after["gflops"]) / 2
            bf_ratios.append((step, peak, step / peak))
        res["gpt_compute_bf16"] = bf_ratios
        row("gpt", "GPT-2 small bf16 step, 1 process (GFLOP/s)", statistics.median(x[0] for x in bf_ratios),
            statistics.median(x[1] for x in bf_ratios), "GFLOP/s", statistics.median(x[2] for x in bf_ratios), 0.7,
            "the step's linear products' flop / the step's time; peer: oneDNN's bf16 matmul on those "
            "products (dtrain-bench-sgemm --lib onednn-bf16 --linear gpt), 1 thread; medians of triplets")

    section("gpt", gpt_rows)

    # --- 4d. the Llama against PyTorch (issue #47) ---
    # jobs/llama-tiny-2x2.json's model in one process, fp32 (the Llama's
    # bf16 is not built yet), against torch_llama.py's: rounds alternate
    # the two, each at its best thread count; medians of the rounds.
    def llama_rows():
        if "llama" not in only:
            return
        rates, peer = {}, {}
        st, win_ = (LLAMA["steps"] // 2, LLAMA["window"] // 2) if a.quick else (LLAMA["steps"], LLAMA["window"])
        for r in range(rounds):
            for th in ([cores, 1] if cores > 1 else [1]):
                progress("llama tiny, 1 process x %d thread(s), round %d/%d" % (th, r + 1, rounds))
                e = b.dtrain_llama(threads=th, steps=st, window=win_)
                rates.setdefault(th, []).append(statistics.median(x["tokens_per_s"] for x in e))
                peer.setdefault(th, []).append(b.torch_llama(th, st))
        res["llama_runs"] = [{"threads": k, "dtrain": v, "pytorch": peer[k]} for k, v in rates.items()]
        bo = max(rates, key=lambda k: statistics.median(rates[k]))
        bp = max(peer, key=lambda k: statistics.median(peer[k]))
        o, p = statistics.median(rates[bo]), statistics.median(peer[bp])
        row("llama", "Llama tiny, 1 process (tokens/s)", o, p, "tokens/s", o / p, 1.0,
            "jobs/llama-tiny-2x2.json's model, fp32; threads: dtrain %d, PyTorch %d (each its best); "
            "peer: bench/torch_llama.py" % (bo, bp))

    section("llama", llama_rows)

    # --- 4c. the sharded optimizer (issue #21) ---
    # GPT-2 small, one stage, D = 2 and 4 replicas (one sequence of 64
    # tokens each at D = 4), AdamW replicated against sharded: the most
    # optimizer state and peak RSS any rank reported, and the rate; rounds
    # alternate the modes; medians of the rounds.
    def shard_rows():
        if "shard" not in only:
            return
        got = {}
        for r in range(rounds):
            for d in (2, 4):
                for mode in ("replicated", "sharded"):
                    progress("shard: GPT-2 small, %d replicas, optimizer %s, round %d/%d" % (d, mode, r + 1, rounds))
                    e = b.dtrain_gpt("gpt2-small", data=d, threads=1, steps=2, window=2,
                                     extra=["parallel.optimizer=" + mode])
                    opt, rss = b.rank_memory()
                    got.setdefault((d, mode), []).append((statistics.median(x["tokens_per_s"] for x in e), opt, rss))
        res["shard_runs"] = [{"data": k[0], "optimizer": k[1], "runs": v} for k, v in got.items()]
        for d in (2, 4):
            med = {m: [statistics.median(x[i] for x in got[(d, m)]) for i in range(3)]
                   for m in ("replicated", "sharded")}
            sh_, rp = med["sharded"], med["replicated"]
            row("shard", "GPT-2 small, %d replicas: optimizer state per rank (MiB)" % d, sh_[1], rp[1], "MiB",
                sh_[1] / rp[1], 1.0 / d + 0.01, "sharded / replicated; target 1/%d" % d, target_is_max=True)
            # AdamW's two moments: the peak falls by them times (D - 1) / D
            want = (rp[2] - rp[1] * (d - 1) / d) / rp[2]
            row("shard", "  peak RSS per rank (MiB)", sh_[2], rp[2], "MiB", sh_[2] / rp[2], want + 0.02,
                "sharded / replicated; target: the replicated peak less the state's (D-1)/D", target_is_max=True)
            row("shard", "  step rate (tokens/s)", sh_[0], rp[0], "tokens/s", sh_[0] / rp[0], None,
                "sharded / replicated, %d processes on %d cores" % (d, cores))

        # issue #33 item 6: the collectives' scratch is bounded, so no rank
        # peaks above the others and each saves what its state shrank; an
        # MLP 784-2048-2048-2048-10 (10M parameters), AdamW, 4 replicas
        mem = {}
        for r in range(rounds):
            for mode in ("replicated", "sharded"):
                progress("shard: MLP 784-2048x3-10, 4 replicas, optimizer %s, round %d/%d" % (mode, r + 1, rounds))
                b.dtrain("large", data=4, hidden=[2048, 2048, 2048], steps=4, window=2,
                         extra=["parallel.optimizer=" + mode, "parallel.grad_sync=allreduce",
                                "train.optimizer.type=adamw", "train.optimizer.weight_decay=0.01"])
                mem.setdefault(mode, []).append((b.rank_memory()[0], b.rank_peaks()))
        res["shard_memory_runs"] = mem
        peak = {m: [statistics.median(x[1][k] for x in mem[m]) for k in range(4)] for m in mem}
        state = {m: statistics.median(x[0] for x in mem[m]) for m in mem}
        shrank = state["replicated"] - state["sharded"]
        sp = peak["sharded"]
        row("shard", "MLP 10M params, AdamW, 4 replicas: highest / lowest rank's peak RSS, sharded",
            max(sp), min(sp), "MiB", max(sp) / min(sp), 1.05,
            "target: no rank more than 5 % above the others", target_is_max=True)
        saved = min(rp - s_ for rp, s_ in zip(peak["replicated"], sp))
        row("shard", "  least peak RSS a rank saved / the state it shed (MiB)", saved, shrank, "MiB",
            saved / shrank, 0.9, "target: every rank saves what its state shrank, within 10 %")

    section("shard", shard_rows)

    # --- 5. pipeline bubble ---
    def pipeline_rows():
        if "pipeline" in only:
            # stages of about equal cost: 784x1024 + 1024x1024 and 2 x 1024x1024 + 1024x10
            hid = [1024] * 4
            for micro in (4, 8):
                for sched in ("gpipe", "1f1b"):
                    progress("pipeline 2 stages, %d micro-batches, %s" % (micro, sched))
                    e = b.dtrain("pipe", pipeline=2, threads=1, steps=20 if a.quick else 60, window=10,
                                 micro=micro, schedule=sched, hidden=hid, stage_layers=[2, 3])
                    t = b.times(e)
                    # the bubble as Narayanan et al. define it: idle time over
                    # the time the stage computes, (p-1)/m with equal stages
                    idle = t["pipe_wait_s"] / (t["step_s"] - t["pipe_wait_s"])
                    ideal = (2 - 1) / micro
                    row("pipeline", "%s, p=2, m=%d: idle / busy time" % (sched, micro), idle, ideal,
                        "fraction", idle / ideal, None, "peer: (p-1)/m (Narayanan et al. 2021)")
                    res.setdefault("pipeline", []).append({"schedule": sched, "micro": micro,
                                                           "times": t})

    section("pipeline", pipeline_rows)

    # --- 6. checkpoints ---
    def checkpoint_rows():
        if "checkpoint" in only:
            progress("checkpoints (bench/checkpoint.sh)")
            sh(["bash", os.path.join(SRC, "bench", "checkpoint.sh"), b.build], what="bench/checkpoint.sh")
            with open(os.path.join(b.build, "bench", "checkpoint.json")) as f:
                c = json.load(f)
            res["checkpoint"] = c
            row("checkpoint", "write bandwidth, sync save (MB/s)", c["write_mb_s"], c["dd_mb_s"], "MB/s",
                c["write_ratio"], 0.8, "peer: dd conv=fsync, same bytes, same disk; ratio: the median of "
                "%d runs' ratios, each run's saves against the dd before and after it" % len(c["run_ratios"]))
            row("checkpoint", "training stall of an async save (s)", c["async_stall_s"], c["sync_save_s"],
                "s", c["stall_ratio"], 0.05, "ratio = stall / sync save", target_is_max=True)
            row("checkpoint", "load on resume (s)", c["load_s"], None, "s", None, None, "")

    section("checkpoints", checkpoint_rows)

    # --- 7. start-up ---
    def startup_rows():
        if "startup" in only:
            progress("start-up on the local Slurm cluster (bench/startup.sh)")
            out_json = os.path.join(b.build, "bench", "startup.json")
            sh(["bash", os.path.join(SRC, "bench", "startup.sh"), b.build, out_json], what="bench/startup.sh")
            with open(out_json) as f:
                s = json.load(f)
            res["startup"] = s
            row("start-up", "srun --mpi=pmix to first step, 2x2 ranks (s)", s["dtrain_first_step_s"],
                s["srun_true_s"], "s", s["dtrain_first_step_s"] / s["srun_true_s"], None,
                "peer: srun --mpi=pmix of /bin/true, same tasks")
            if s.get("srun_mpi_s"):
                row("start-up", "  against the MPI floor (s)", s["dtrain_first_step_s"], s["srun_mpi_s"], "s",
                    s["dtrain_first_step_s"] / s["srun_mpi_s"], None,
                    "peer: srun of an MPI program: MPI_Init, one allreduce, MPI_Finalize")

    section("start-up", startup_rows)

    # --- 8. no site file ---
    def nosite_rows():
        if "nosite" in only:
            progress("the 2x2 example without a site file (bench/nosite.sh)")
            out_json = os.path.join(b.build, "bench", "nosite.json")
            sh(["bash", os.path.join(SRC, "bench", "nosite.sh"), b.build, out_json], what="bench/nosite.sh")
            with open(out_json) as f:
                n = json.load(f)
            res["nosite"] = n
            row("no site", "2x2 example, no site file (samples/s)", n["nosite_samples_s"], n["site_samples_s"],
                "samples/s", n["ratio"], 0.8, "peer: the same job with site/site.json; medians of %d rounds; "
                "mpi_wait %s without, %s with (%d cores)" % (n["runs"], n["nosite_mpi_wait"], n["site_mpi_wait"],
                                                             n["cpus"]))

    section("no site", nosite_rows)

    # --- 9. data: what checking each batch for NaN and infinities costs ---
    def data_rows():
        if "data" in only:
            progress("the finite check of a batch against reading it (dtrain-data bench)")
            got = []
            for _ in range(rounds):
                out = sh([b.bin + "/dtrain-data", "bench", b.data, "--batch", str(BATCH)], what="dtrain-data bench")
                read = float(re.search(r"file, random rows: +([0-9.]+) ms", out).group(1))
                check = float(re.search(r"finite check: +([0-9.]+) ms", out).group(1))
                got.append((check, read))
            check, read = sorted(got, key=lambda c: c[0] / c[1])[len(got) // 2]
            row("data", "finite check of a %d-row batch vs reading it (ms)" % BATCH, check, read, "ms",
                check / read, 0.10, "peer: the batch's random rows read from the file (rt_data_read); "
                "median of %d rounds" % rounds, target_is_max=True)

    section("data", data_rows)

    # --- the table ---
    print()
    print("CPU: %s (every row below; results.json: each row's cpu and cpu_bf16)" % cpu["text"])
    print("%-11s %-52s %12s %12s %8s %8s  %s" % ("section", "what", "dtrain", "peer", "ratio", "target", ""))
    def fmt(v):
        if v is None:
            return "-"
        return "%.0f" % v if abs(v) >= 100 else "%.3g" % v

    for r in res["rows"]:
        tgt = "-" if r["target"] is None else ("<" if r["target_is_max"] else ">=") + "%.2f" % r["target"]
        mark = "" if r["met"] is None else ("met" if r["met"] else "MISSED")
        bf16_row = "bf16" in r["what"]
        note = r["note"] + ("" if not bf16_row or r["cpu_bf16"] else
                            (" " if r["note"] else "") + "[bf16 emulated: this CPU has no bf16 instructions]")
        print("%-11s %-52s %12s %12s %8s %8s  %-6s %s" % (
            r["section"], r["what"], fmt(r["dtrain"]), fmt(r["peer"]),
            "-" if r["ratio"] is None else "%.2f" % r["ratio"], tgt, mark, note))
    res["loadavg_after"] = os.getloadavg()
    # the runs' own ranks (up to 4 on the cluster) raise the load after;
    # only the load found before says that other work was running
    busy = res["loadavg_before"][0] > 0.5 * cores
    print("\nload average before %.2f, after %.2f (1 min; %d cores; the runs' own ranks raise "
          "the second)%s" % (res["loadavg_before"][0], res["loadavg_after"][0], cores,
                             ": other work was running when it started; rerun alone" if busy else ""))
    res["failed_sections"] = failed
    path = os.path.join(b.build, "bench", "results.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print("\nbench: results written to %s" % path, file=sys.stderr)
    if failed:
        die("sections that failed (their rows are missing above): " + ", ".join(failed))


if __name__ == "__main__":
    try:
        main()
    except Failed as e:
        print("bench/run.py: " + str(e), file=sys.stderr)
        sys.exit(1)
