#!/usr/bin/env bash
# make demo: convert Fashion-MNIST (dtrain-data), submit the example job
# jobs/fashion-mnist-2x2.json with dtrain-submit, wait for it, and print its
# test accuracy and where its outputs are. It runs on the Slurm cluster that
# `sinfo` reaches; when none is reachable it starts the local cluster
# (site/cluster.sh) and uses the example site policy (site/site.json) that
# fits it. The spec's data paths are relative to the repository root.
# Usage: site/demo.sh [BUILD_DIR] [SPEC]
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ "$build" = /* ]] || build=$top/$build
spec=${2:-$top/jobs/fashion-mnist-2x2.json}
bin=$build/bin
site_args=()
cd "$top"

data=build/data/fashion-mnist
if [ ! -s "$data/train.h5" ] || [ ! -s "$data/test.h5" ]; then
	echo "demo: converting Fashion-MNIST into $data"
	"$bin/dtrain-data" fashion-mnist "$data"
fi

if sinfo -h >/dev/null 2>&1; then
	echo "demo: submitting to the Slurm cluster that sinfo reaches"
else
	echo "demo: no Slurm cluster reachable; starting the local one in $build/cluster"
	eval "$(bash "$top/site/cluster.sh" up --dir "$build/cluster")"
	echo "demo: (stop it with: make cluster-down)"
	site_args=(--site "$top/site/site.json")
fi

id=$("$bin/dtrain-submit" "$spec" "${site_args[@]}")
echo "demo: submitted job $id ($spec)"

echo "----- output of job $id (dtrain-submit logs -f $id) -----"
"$bin/dtrain-submit" logs -f "$id" | tee "$build/demo.out"
echo "-----------------------------"
# logs -f returns once the job stops running; wait out its clean-up
for _ in $(seq 60); do
	state=$(squeue -h -j "$id" -o %T 2>/dev/null || true)
	[ -n "$state" ] || state=$(scontrol show job "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
	case "$state" in COMPLETING | RUNNING | PENDING | CONFIGURING) sleep 0.5 ;; *) break ;; esac
done
echo "demo: job $id ended: ${state:-unknown}"
"$bin/dtrain-submit" status "$id" || true
acc=$(sed -n 's/^dtrain-run: epoch [0-9]*\/[0-9]* test loss [0-9.]* accuracy \([0-9.]*\)$/\1/p' "$build/demo.out" | tail -n 1)
echo "demo: test accuracy: ${acc:-none}"
[ "$state" = COMPLETED ]
