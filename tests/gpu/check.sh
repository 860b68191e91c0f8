#!/usr/bin/env bash
# tests/gpu/check.sh - the device check, run from the GPU bundle on a lent
# machine (site/gpu-bundle.sh packs it as dtrain-gpu/check.sh):
#
#   tar xJf dtrain-gpu.tar.xz && bash dtrain-gpu/check.sh [OUT_DIR]
#
# Prints one table, a row per check: PASS, FAIL (with why), or NOT YET (a
# part of the GPU path this build does not have: runtime/gpu/README.md says
# what is built). Every check has its own time limit; the whole stays under
# 8 minutes. Logs go to OUT_DIR (default $OUT when the device tool sets it,
# else /tmp/dtrain-gpu-check), one file per check.
# Exit code: 0 when no row FAILs (NOT YET rows do not fail it), 1 otherwise.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$here/bin
# shellcheck source=/dev/null
. "$here/env.sh"
logs=${1:-${OUT:-/tmp/dtrain-gpu-check}}
mkdir -p "$logs"
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-gpu-XXXXXX")
trap 'rm -rf "$work"' EXIT
rows=()
failed=0

# row NAME RESULT DETAIL
row() {
	rows+=("$(printf '%-46s %-8s %s' "$1" "$2" "$3")")
	[ "$2" = FAIL ] && failed=$((failed + 1))
	printf '%-46s %-8s %s\n' "$1" "$2" "$3" >&2
}

# run NAME SECONDS CMD...: the command's output in $logs/NAME.log; its exit code
run() {
	local name=$1 s=$2
	shift 2
	timeout -k 5 "$s" "$@" >"$logs/$name.log" 2>&1
}

# what a log says went wrong: dtrain's own first error line, else its last
# line that is not mpirun's frame
last() {
	local l
	l=$(grep -m1 -E '^dtrain-[a-z]+: .*(error|cannot|failed|not |no )' "$logs/$1.log")
	[ -n "$l" ] || l=$(grep -vE '^\s*$|^-+$' "$logs/$1.log" | tail -n 1)
	echo "$l" | cut -c1-110
}

# --- the machine ---
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
[ -n "$gpu" ] && row "GPU" PASS "$gpu" || row "GPU" FAIL "nvidia-smi sees no GPU"
nccl_at=$(IFS=:; for d in $LD_LIBRARY_PATH; do [ -e "$d/libnccl.so.2" ] && { echo "$d"; break; }; done)
[ -n "$nccl_at" ] || nccl_at=$(ldconfig -p 2>/dev/null | awk '/libnccl.so.2/ { print $NF; exit }')
[ -n "$nccl_at" ] && row "NCCL library" PASS "$nccl_at" ||
	row "NCCL library" FAIL "libnccl.so.2 in no directory of LD_LIBRARY_PATH, nor ldconfig's"

if run version 30 "$bin/dtrain-run" --version; then
	row "dtrain-run from the bundle" PASS "$(grep 'GPU path' "$logs/version.log")"
else
	row "dtrain-run from the bundle" FAIL "$(last version)"
fi

# --- the GPU unit tests, and memcheck on them ---
for t in test_gpu_device test_gpu_kernels; do
	rc=0
	run "$t" 180 "$here/tests/$t" || rc=$?
	if [ "$rc" -eq 0 ]; then
		row "$t" PASS "$(grep -c '\[       OK \]' "$logs/$t.log") cases"
	elif [ "$rc" -eq 77 ]; then
		row "$t" FAIL "skipped on a GPU machine: $(grep -m1 -i skip "$logs/$t.log" | cut -c1-90)"
	else
		row "$t" FAIL "exit $rc: $(grep -m1 -E 'ERROR|FAILED|error' "$logs/$t.log" | cut -c1-100)"
	fi
done
if command -v compute-sanitizer >/dev/null; then
	for t in test_gpu_device test_gpu_kernels; do
		if run "memcheck-$t" 240 compute-sanitizer --tool memcheck --error-exitcode 9 "$here/tests/$t"; then
			row "memcheck $t" PASS "$(grep -m1 'ERROR SUMMARY' "$logs/memcheck-$t.log")"
		else
			row "memcheck $t" FAIL "$(grep -m1 -E 'ERROR SUMMARY|Invalid|error' "$logs/memcheck-$t.log" | cut -c1-100)"
		fi
	done
else
	row "memcheck" FAIL "compute-sanitizer not on PATH"
fi

# --- the bundle's MPI: two CPU ranks under its mpirun ---
"$bin/dtrain-data" synthetic "$work/syn.h5" --samples 2000 --features 32 --classes 5 --seed 3 >/dev/null 2>&1
cat >"$work/mlp.json" <<JSON
{ "name": "gpucheck", "model": { "inputs": 32, "hidden": [64, 64], "outputs": 5 },
  "data": { "train": "$work/syn.h5" },
  "train": { "max_steps": 20, "epochs": 1, "global_batch": 40, "log_every": 1,
             "optimizer": { "type": "adamw", "lr": 0.003 } } }
JSON
spec() { "$bin/dtrain-submit" validate "$work/mlp.json" --set run_dir="$work/$1" "${@:2}" >"$work/$1.json" 2>"$logs/spec-$1.log" && mkdir -p "$work/$1"; }
if spec cpu2 --set resources.tasks_per_node=2 --set parallel.data=2 &&
	run mpi-cpu2 120 mpirun --oversubscribe --bind-to none -np 2 "$bin/dtrain-run" "$work/cpu2.json"; then
	row "2 CPU ranks under the bundle's mpirun" PASS "$(grep -c '"event":"step"' "$work/cpu2/metrics.jsonl") steps"
else
	row "2 CPU ranks under the bundle's mpirun" FAIL "$(last mpi-cpu2)"
fi

# --- training on the GPU ---
# train.device "cuda" before the GPU trainer exists stops at start-up with
# "the GPU training loop is not in this build yet": NOT YET, not a FAIL
gpu_rows() {
	local what=$1 name=$2 np=$3
	shift 3
	if ! spec "$name" --set train.device=cuda --set resources.gpus_per_node=1 "$@"; then
		row "$what" FAIL "spec: $(tail -n 1 "$logs/spec-$name.log")"
	elif run "$name" 240 mpirun --oversubscribe --bind-to none -np "$np" "$bin/dtrain-run" "$work/$name.json"; then
		row "$what" PASS "$(grep -c '"event":"step"' "$work/$name/metrics.jsonl") steps"
	elif grep -q "not in this build yet" "$logs/$name.log"; then
		row "$what" "NOT YET" "the GPU training loop (#32 item 1)"
	else
		row "$what" FAIL "$(last "$name")"
	fi
}
gpu_rows "MLP, 1 GPU, 20 steps" gpu1 1
gpu_rows "MLP, 2 ranks sharing the GPU (data 2)" gpu2 2 --set resources.tasks_per_node=2 --set parallel.data=2

echo
printf '%-46s %-8s %s\n' "check" "result" "detail"
printf '%s\n' "${rows[@]}"
echo "logs: $logs"
[ "$failed" -eq 0 ]
