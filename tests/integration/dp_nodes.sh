#!/usr/bin/env bash
# Data parallelism over 2 nodes x 2 tasks on the local cluster (data 4,
# pipeline 1), with parallel.grad_sync "auto" (= "split" here): on each node
# the 2 replicas share the parameters in memory, cut every layer between
# them over the node's rows and each updates its blocks; each block is
# allreduced with the other node's (runtime/parallel/dp.h); and with "shared" (a
# gradient slot per replica, each updates half). Both must train like the
# same job with "allreduce" (float32 rounding apart: the sums run in
# another order; GELU, so that no ReLU kink turns rounding into a jump), and
# a resume of its middle checkpoint on the same layout (the broadcast of a
# checkpoint between the nodes' shared copies) must end bit for bit where it
# ended.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)

"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 2400 --features 64 --classes 10 --seed 5 >/dev/null ||
	fail "dtrain-data synthetic"
cat >"$T/job.json" <<JSON
{ "name": "dpn", "model": { "inputs": 64, "hidden": [96, 80], "outputs": 10, "activation": "gelu" },
  "data": { "train": "$T/syn.h5" },
  "resources": { "nodes": 2, "tasks_per_node": 2, "partition": "low" },
  "parallel": { "data": 4, "pipeline": 1 },
  "train": { "epochs": 1, "global_batch": 40, "log_every": 5,
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.01 }, "grad_clip": 1.0 },
  "checkpoint": { "every_steps": 30, "keep": 5 } }
JSON

# job NAME [--set KEY=VALUE...]: submit, wait, require COMPLETED
job() {
	local name=$1 id state
	shift
	expect_rc 0 $SUBMIT "$T/job.json" --site "$site" --set run_dir="$T/$name" "$@"
	id=$(cat "$T/out")
	wait_state "$id" 240 COMPLETED FAILED CANCELLED TIMEOUT ENDED
	state=$(job_state "$id")
	[ "$state" = COMPLETED ] || [ "$state" = ENDED ] || { cat "$T/$name/slurm-$id.out"; fail "job $name ended $state"; }
	cp "$T/$name/slurm-$id.out" "$T/$name.log"
}

job auto
job ar --set parallel.grad_sync=allreduce
job sh --set parallel.grad_sync=shared
must_contain "$T/auto.log" "gradients: the 2 replicas on each node share parameters in memory and split every layer over the node's batch, each its 1/2, blocks allreduced between nodes"
must_contain "$T/sh.log" "gradients: the 2 replicas of a stage on each node share parameters in memory, each updates 1/2, parts allreduced between nodes"
must_contain "$T/ar.log" "gradients: allreduce between the 4 replicas"
final=step-00000060
for way in auto sh; do
	for obj in /model /optimizer; do
		h5diff --delta=1e-5 "$T/ar/checkpoints/$final/model.h5" "$T/$way/checkpoints/$final/model.h5" "$obj" "$obj" \
			>"$T/diff.out" 2>&1 || { head -n 30 "$T/diff.out"; fail "$way and allreduce differ in $obj by more than 1e-5"; }
	done
done
pass "2 nodes x 2 replicas, split blocks and shared halves allreduced between nodes: the allreduce job's parameters within 1e-5"

mkdir -p "$T/from"
cp -r "$T/auto/checkpoints/step-00000030" "$T/from/"
job again --set checkpoint.resume="$T/from"
must_contain "$T/again.log" "resuming from $T/from/step-00000030"
for obj in /model /optimizer; do
	h5diff "$T/auto/checkpoints/$final/model.h5" "$T/again/checkpoints/$final/model.h5" "$obj" "$obj" \
		>"$T/diff.out" 2>&1 || { head -n 30 "$T/diff.out"; fail "the resumed job's $obj differs from the uninterrupted one's"; }
done
pass "resumed from step 30 on 2 nodes x 2 split replicas: bitwise the uninterrupted run"
