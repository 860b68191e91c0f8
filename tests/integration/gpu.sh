#!/usr/bin/env bash
# train.device "cuda" is never ignored: on a machine without a GPU every rank
# ends with exit 1 and one message from the first rank, naming its host and
# CUDA's reason (no hang, no MPI_Abort, no training on the CPU); in a build
# without the GPU path the message says so. `dtrain-run --version` tells which
# build this is. On a machine with a GPU (the device check, tests/gpu/
# check.sh, compares its runs with the CPU's) the same jobs train there and
# each rank says which device it drives.
. "$(dirname "$0")/lib.sh"
RUN=$DTRAIN_BIN/dtrain-run
MPI="mpirun --allow-run-as-root --oversubscribe -np"

expect_rc 0 "$RUN" --version
if grep -q '^GPU path: built (CUDA [0-9.]*, NCCL [0-9.]*)$' "$T/out"; then
	built=1
elif grep -qx 'GPU path: not built' "$T/out"; then
	built=0
else
	cat "$T/out"; fail "dtrain-run --version names no GPU path"
fi
# the GPU path of a build with one is a module the programs load on first
# use (runtime/gpu/module.h): a dtrain-run without it beside it says so,
# in --version and when a run asks for "cuda"
if [ "$built" = 1 ]; then
	mkdir -p "$T/alone"
	cp "$DTRAIN_BIN/dtrain-run" "$T/alone/"
	expect_rc 0 "$T/alone/dtrain-run" --version
	must_contain "$T/out" "GPU path: built, but the GPU path (train.device \"cuda\") cannot be loaded: "
	must_contain "$T/out" "libdtrain-cuda.so"
fi
gpu=0
[ "$built" = 1 ] && nvidia-smi -L >/dev/null 2>&1 && gpu=1

"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 200 --features 8 --classes 3 >/dev/null ||
	fail "dtrain-data synthetic"
cat >"$T/base.json" <<JSON
{ "name": "gpu", "model": { "inputs": 8, "hidden": [8], "outputs": 3 },
  "data": { "train": "$T/syn.h5" }, "train": { "epochs": 1, "global_batch": 20, "device": "cuda" },
  "resources": { "tasks_per_node": 2, "gpus_per_node": 1 }, "parallel": { "data": 2 } }
JSON
$SUBMIT validate "$T/base.json" >"$T/s.json" 2>"$T/s.err" || { cat "$T/s.err"; fail "spec"; }

# check_refusal WHO: exit 1 came with one message, from rank 0, and no training
check_refusal() {
	if [ "$built" = 0 ]; then
		must_contain "$T/err" 'dtrain-run: train.device is "cuda" but this dtrain-run was built without the GPU path (DTRAIN_CUDA=OFF or no CUDA at build time)'
		[ "$(grep -c 'built without the GPU path' "$T/err")" -eq 1 ] || { cat "$T/err"; fail "$1: expected one report"; }
	elif [ "$gpu" = 0 ]; then
		must_contain "$T/err" "dtrain-run: rank 0 on host $(hostname): train.device is \"cuda\" but no GPU is visible (cudaGetDeviceCount: "
		must_contain "$T/err" 'hint: request GPUs with resources.gpus_per_node, or set train.device to "cpu"'
		[ "$(grep -c 'no GPU is visible' "$T/err")" -eq 1 ] || { cat "$T/err"; fail "$1: expected one report"; }
	fi
	must_not_contain "$T/err" "MPI_ABORT"
	must_not_contain "$T/out" "step "
}

$SUBMIT validate "$T/base.json" --set parallel.data=1 --set resources.tasks_per_node=1 >"$T/s1.json" ||
	fail "spec"
if [ "$gpu" = 1 ]; then
	expect_rc 0 timeout 120 $MPI 2 "$RUN" "$T/s.json"
	must_contain "$T/out" "dtrain-run: rank 1 device cuda "
	expect_rc 0 solo timeout 120 "$RUN" "$T/s1.json"
	must_contain "$T/out" "dtrain-run: rank 0 device cuda "
	pass "train.device cuda trains on this machine's GPU, under mpirun -np 2 and as one process"
else
	expect_rc 1 timeout 60 $MPI 2 "$RUN" "$T/s.json"
	check_refusal "mpirun -np 2"
	pass "train.device cuda under mpirun -np 2: exit 1, one clear message (built=$built gpu=$gpu)"
	expect_rc 1 solo timeout 60 "$RUN" "$T/s1.json"
	check_refusal "one process"
	pass "train.device cuda as one process: exit 1, one clear message"
fi

# the CPU is still the CPU
$SUBMIT validate "$T/base.json" --set train.device=cpu --set resources.gpus_per_node=0 >"$T/c.json" ||
	fail "spec"
expect_rc 0 timeout 60 $MPI 2 "$RUN" --quiet "$T/c.json"
pass "train.device cpu trains"
