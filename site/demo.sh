#!/usr/bin/env bash
# make demo: submit the example job in jobs/ with dtrain-submit, wait for it,
# and say where its outputs are. It runs on the Slurm cluster that `sinfo`
# reaches; when none is reachable it starts the local cluster (site/cluster.sh)
# and uses the example site policy (site/site.json) that fits it.
# Usage: site/demo.sh [BUILD_DIR] [SPEC]
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ "$build" = /* ]] || build=$top/$build
spec=${2:-$top/jobs/mlp-2x2.json}
bin=$build/bin
site_args=()

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

state=
for ((i = 0; i < 1200; i++)); do
	state=$(squeue -h -j "$id" -o %T 2>/dev/null || true)
	[ -n "$state" ] || state=$(scontrol show job "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
	case "$state" in
	PENDING | RUNNING | CONFIGURING | COMPLETING | REQUEUED | "") ;;
	*) break ;;
	esac
	((i % 20 == 0)) && echo "demo: job $id is ${state:-starting}..."
	sleep 0.5
done

echo "demo: job $id ended: ${state:-unknown}"
echo "----- output of job $id -----"
"$bin/dtrain-submit" logs "$id" || true
echo "-----------------------------"
"$bin/dtrain-submit" status "$id" || true
[ "$state" = COMPLETED ]
