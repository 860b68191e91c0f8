#!/usr/bin/env bash
# tests/gpu/profile.sh - where a GPT-2 small step's time goes on a lent GPU:
# one plain run for the step time, then Nsight Compute's duration of every
# kernel of a 1-step run, summed by kernel name.
#
#   tar xJf dtrain-gpu.tar.xz -C /tmp && bash tests/gpu/profile.sh /tmp/dtrain-gpu [OUT_DIR] [SETS...]
#
# SETS are --set arguments for the spec (for example train.tf32=true).
# Writes OUT_DIR/profile-step.log, OUT_DIR/ncu.csv and prints the table.
set -uo pipefail
b=${1:?usage: profile.sh BUNDLE [OUT_DIR] [--set K=V ...]}
out=${2:-${OUT:-/tmp/dtrain-profile}}
shift 2 || shift $#
# shellcheck source=/dev/null
. "$b/env.sh"
w=$(mktemp -d /tmp/dtrain-prof-XXXXXX)
mkdir -p "$out"
cat >"$w/g.json" <<JSON
{ "name": "prof", "model": { "type": "gpt", "vocab_size": 50257, "context": 1024, "layers": 12, "heads": 12, "embd": 768 },
  "data": { "train": "$b/data/fortunes/train.h5" },
  "resources": { "gpus_per_node": 1 },
  "train": { "device": "cuda", "max_steps": 6, "epochs": 100000, "global_batch": 8, "log_every": 1,
             "optimizer": { "type": "adamw", "lr": 0.0006, "betas": [0.9, 0.95], "weight_decay": 0.1 },
             "lr_schedule": { "warmup_steps": 0, "decay": "constant" }, "grad_clip": 1.0 },
  "checkpoint": { "every_steps": 0, "resume": "never" } }
JSON
"$b/bin/dtrain-submit" validate "$w/g.json" --set run_dir="$w/run" "$@" >"$w/r.json" || exit 1
mkdir -p "$w/run"
timeout 120 "$b/bin/dtrain-run" "$w/r.json" >"$out/profile-step.log" 2>&1
python3 - "$w/run/metrics.jsonl" <<'PY'
import json, sys, statistics
t = [json.loads(l)["time"]["step_s"] for l in open(sys.argv[1]) if '"event":"step"' in l]
print("step_s", " ".join("%.4f" % x for x in t), "median of 3..:", "%.4f" % statistics.median(t[2:]))
PY
rm -rf "$w/run" && mkdir -p "$w/run"
sed -i 's/"max_steps": 6/"max_steps": 1/' "$w/r.json"
timeout 240 ncu --launch-count 6000 --clock-control none --metrics gpu__time_duration.sum --csv --print-summary per-kernel \
	--log-file "$out/ncu.csv" "$b/bin/dtrain-run" "$w/r.json" >"$out/profile-ncu.log" 2>&1
echo "ncu exit $?"
python3 - "$out/ncu.csv" <<'PY'
import csv, sys, collections
rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
h = rows[0]
tot = collections.Counter(); cnt = collections.Counter()
for r in rows[1:]:
    d = dict(zip(h, r))
    name = d.get("Kernel Name", "?")[:90]
    try:
        n = int(d.get("Invocations", "1")); avg = float(d.get("Average", d.get("Metric Value", "0")).replace(",", ""))
    except ValueError:
        continue
    unit = d.get("Metric Unit", "ns")
    scale = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3}.get(unit, 1e-9)
    tot[name] += n * avg * scale; cnt[name] += n
print(h)
s = sum(tot.values())
print("kernels in all: %.4f s, %d launches" % (s, sum(cnt.values())))
for k, v in tot.most_common(40):
    print("%8.4f s %5.1f%% %6d  %s" % (v, 100 * v / s, cnt[k], k))
PY
