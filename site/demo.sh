#!/usr/bin/env bash
# make demo: find a Slurm cluster, convert Fashion-MNIST (dtrain-data),
# submit the example job jobs/fashion-mnist-2x2.json with dtrain-submit, wait
# for it, and print its test accuracy and where its outputs are. It runs on
# the Slurm cluster that `sinfo` reaches; when none is reachable it starts the
# local cluster (site/cluster.sh) and uses the example site policy
# (site/site.json) that fits it. The spec's data paths are relative to the repository root.
# It stops at the first step that fails, with that step's own message (above
# it) and a hint; the exit code is the step's.
# With SPEC jobs/gpt-tiny-2x2.json (make demo-gpt) or jobs/llama-tiny-2x2.json
# (make demo-llama), a language model, it tokenizes the fortunes
# instead, and prints the validation bits per byte and a sample of text.
# It ends with the commands to go on from a shell (with the export
# SLURM_CONF=... line of the local cluster it started); Ctrl-C while it
# follows the job leaves the job running and says how to follow or cancel it.
# Usage: site/demo.sh [BUILD_DIR] [SPEC]
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ "$build" = /* ]] || build=$top/$build
spec=${2:-$top/jobs/fashion-mnist-2x2.json}
bin=$build/bin
site_args=()
export_line= # the local cluster's "export SLURM_CONF=...", when the demo started it
cd "$top"

# step_failed RC WHAT HINT: the demo's last line when a step failed.
step_failed() {
	echo "demo: failed: $2 (exit $1); hint: $3" >&2
	exit "$1"
}

if sinfo -h >/dev/null 2>&1; then
	echo "demo: submitting to the Slurm cluster that sinfo reaches"
else
	echo "demo: no Slurm cluster reachable; starting the local one in $build/cluster"
	conf=$(bash "$top/site/cluster.sh" up --dir "$build/cluster") ||
		step_failed $? "starting the local Slurm cluster (site/cluster.sh up --dir $build/cluster)" \
			"its message above says why; 'bash site/cluster.sh --help' lists its exit codes"
	eval "$conf"
	export_line=$conf
	echo "demo: to reach it from your shell: $export_line   (stop it with: make cluster-down)"
	site_args=(--site "$top/site/site.json")
fi

# a language model's spec (jobs/gpt-tiny-2x2.json, jobs/llama-tiny-2x2.json)
# trains on fortunes' text, byte-level
gpt=false
grep -Eq '"type": *"(gpt|llama)"' "$spec" && gpt=true
if $gpt; then
	data=build/data/fortunes
	if [ ! -s "$data/train.h5" ] || [ ! -s "$data/val.h5" ]; then
		echo "demo: tokenizing the fortunes (byte-level) into $data"
		# the text files: the .dat/.u8 indexes and the off/ directory left out
		mapfile -t texts < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' | sort)
		"$bin/dtrain-data" text "${texts[@]}" "$data" ||
			step_failed $? "tokenizing the fortunes (dtrain-data text ... $data)" \
				"the message above names the file; site/install-deps.sh installs fortunes"
	fi
else
	data=build/data/fashion-mnist
	if [ ! -s "$data/train.h5" ] || [ ! -s "$data/test.h5" ]; then
		echo "demo: converting Fashion-MNIST into $data"
		"$bin/dtrain-data" fashion-mnist "$data" ||
			step_failed $? "converting Fashion-MNIST (dtrain-data fashion-mnist $data)" \
				"the message above names the file; site/install-deps.sh installs dataset-fashion-mnist"
	fi
fi

id=$("$bin/dtrain-submit" "$spec" "${site_args[@]}") ||
	step_failed $? "submitting $spec (dtrain-submit)" \
		"the message above names the spec key or the Slurm error; 'dtrain-submit validate $spec' checks a spec alone"
echo "demo: submitted job $id ($spec)"

# job_state: Slurm's state of the job, empty once Slurm forgot it
job_state() {
	local s
	s=$(squeue -h -j "$id" -o %T 2>/dev/null || true)
	[ -n "$s" ] || s=$(scontrol show job "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
	echo "$s"
}

# Ctrl-C stops following, not the job: say so, and how to go on
interrupted=false
trap 'interrupted=true' INT
echo "----- output of job $id (dtrain-submit logs -f $id) -----"
"$bin/dtrain-submit" logs -f "$id" | tee "$build/demo.out" || {
	rc=$?
	$interrupted || step_failed $rc "following job $id's output (dtrain-submit logs -f $id)" \
		"the job may still run: 'dtrain-submit status $id' shows it and its run directory"
}
echo "-----------------------------"
if $interrupted; then
	echo "demo: interrupted; job $id goes on (${state:-$(job_state)}) without the demo:" >&2
	[ -z "$export_line" ] || echo "  $export_line" >&2
	echo "  $bin/dtrain-submit logs -f $id    # follow it" >&2
	echo "  $bin/dtrain-submit cancel $id     # stop it (it saves first)" >&2
	exit 130
fi
trap - INT
# logs -f returns once the job stops running; wait out its clean-up
for _ in $(seq 60); do
	state=$(job_state)
	case "$state" in COMPLETING | RUNNING | PENDING | CONFIGURING) sleep 0.5 ;; *) break ;; esac
done
echo "demo: job $id ended: ${state:-unknown}"
"$bin/dtrain-submit" status "$id" || true
if $gpt; then
	bpb=$(sed -n 's/^dtrain-run: step [0-9]* val loss [0-9.]* bits\/byte \([0-9.]*\) .*/\1/p' "$build/demo.out" | tail -n 1)
	echo "demo: validation bits per byte: ${bpb:-none}"
	run_dir=$("$bin/dtrain-submit" status "$id" 2>/dev/null | sed -n 's/^run dir: *//p')
	if [ "$state" = COMPLETED ] && [ -n "$run_dir" ]; then
		echo "demo: sampled from its last checkpoint (dtrain-ckpt sample $run_dir --prompt 'Q: ' ...):"
		"$bin/dtrain-ckpt" sample "$run_dir" --prompt "Q: " --tokens 300 --temperature 0.8 --top-k 40 \
			--seed 1 2>/dev/null || true
		echo
	fi
else
	acc=$(sed -n 's/^dtrain-run: epoch [0-9]*\/[0-9]* test loss [0-9.]* accuracy \([0-9.]*\)$/\1/p' "$build/demo.out" | tail -n 1)
	echo "demo: test accuracy: ${acc:-none}"
fi
[ "$state" = COMPLETED ] ||
	step_failed 1 "job $id ended ${state:-unknown}, not COMPLETED" \
		"its output is above and in $build/demo.out; 'dtrain-submit status $id' shows where its run directory is"
echo "demo: go on from your shell:"
[ -z "$export_line" ] || echo "  $export_line              # this cluster (make cluster-down stops it)"
echo "  $bin/dtrain-submit status            # your jobs"
echo "  $bin/dtrain-submit $spec ${site_args[*]} --set train.epochs=3"
echo "  $bin/dtrain-submit --help"
