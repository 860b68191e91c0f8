#!/usr/bin/env bash
# Determinism and equivalence of layouts (mpirun, no cluster needed):
#  - the same spec and seed give bitwise identical parameters run to run;
#  - gpipe and 1f1b give bitwise identical parameters (same accumulation order);
#  - another parallel.pipeline or parallel.micro_batches (same global batch)
#    gives the same parameters to float32 rounding;
#  - another parallel.data gives the same loss curve within 1e-5 relative;
#  - parallel.grad_sync "shared" (replicas of a stage on one node share the
#    parameters in memory, runtime/parallel/dp.h) against "allreduce": bitwise equal
#    with 2 replicas per stage (no clipping: the norm is summed in parts),
#    to float32 rounding with 3 and 4, and with clipping; "split" (the
#    node's replicas cut every layer, "auto" on pipeline 1): to float32
#    rounding;
#  - parallel.threads "split" (a rank's threads cut every layer, "auto"
#    with a CPU per thread): the 1-thread run's parameters to float32
#    rounding, alone and with 2 replicas; a thread late after every
#    barrier changes no bit;
#  - "allreduce" over several gradient buckets: bitwise "shared".
. "$(dirname "$0")/lib.sh"

"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 1000 --features 32 --classes 5 --seed 3 >/dev/null ||
	fail "dtrain-data synthetic"
cat >"$T/base.json" <<JSON
{ "name": "equiv", "model": { "inputs": 32, "hidden": [48, 40, 24], "outputs": 5, "activation": "gelu" },
  "data": { "train": "$T/syn.h5" },
  "train": { "epochs": 2, "global_batch": 60, "log_every": 1,
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.01 },
             "lr_schedule": { "warmup_steps": 5 }, "grad_clip": 1.0 } }
JSON

# run NAME DATA PIPE MICRO SCHEDULE [--set KEY=VALUE...]: train, keep params
# and metrics in $T/NAME; BIND=none lets a rank's threads use every core
# (mpirun binds 1 or 2 ranks to a core each by default)
run() {
	local name=$1 d=$2 p=$3 m=$4 sch=$5 np=$(($2 * $3))
	shift 5
	$SUBMIT validate "$T/base.json" --set run_dir="$T/$name" --set resources.tasks_per_node=$np \
		--set parallel.data=$d --set parallel.pipeline=$p --set parallel.micro_batches=$m \
		--set parallel.schedule=$sch "$@" >"$T/$name.json" 2>"$T/$name.err" || { cat "$T/$name.err"; fail "spec $name"; }
	mkdir -p "$T/$name"
	mpirun --allow-run-as-root --oversubscribe ${BIND:+--bind-to $BIND} -np $np "$DTRAIN_BIN/dtrain-run" --quiet \
		--save-params "$T/$name/params" "$T/$name.json" >"$T/$name.out" 2>&1 ||
		{ cat "$T/$name.out"; fail "run $name"; }
}

# max relative difference of two raw float32 files, scaled by the largest |value|
maxdiff() {
	paste <(od -An -v -f -w4 "$1") <(od -An -v -f -w4 "$2") |
		awk '{ d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1;
		       if (d > m) m = d; if (a > ma) ma = a } END { printf "%.3g\n", m / (ma ? ma : 1) }'
}

same_bits() {
	for f in "$T/$1"/params/layer-*.f32; do
		cmp -s "$f" "$T/$2/params/$(basename "$f")" || fail "$1 and $2 differ in $(basename "$f")"
	done
}

close_params() {
	local f diff
	for f in "$T/$1"/params/layer-*.f32; do
		diff=$(maxdiff "$f" "$T/$2/params/$(basename "$f")")
		awk -v d="$diff" 'BEGIN { exit !(d <= 1e-5) }' ||
			fail "$1 vs $2: $(basename "$f") differs by $diff relative"
		echo "  $1 vs $2 $(basename "$f"): max relative difference $diff"
	done
}

losses() { sed -n 's/.*"event":"step","step":\([0-9]*\),.*"loss":\([^,]*\),.*/\1 \2/p' "$T/$1/metrics.jsonl"; }

close_losses() {
	local worst
	worst=$(paste <(losses "$1") <(losses "$2") |
		awk '$1 != $3 { print "step-mismatch"; exit } { d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > m) m = d }
		     END { if (NR != 34) print "steps:" NR; else printf "%.3g\n", m }')
	[[ "$worst" =~ ^[0-9.e+-]+$ ]] || fail "$1 vs $2: loss curves do not line up ($worst)"
	awk -v d="$worst" 'BEGIN { exit !(d <= 1e-5) }' || fail "$1 vs $2: losses differ by $worst relative"
	echo "  $1 vs $2: 34 steps, max relative loss difference $worst"
}

run a 1 1 1 1f1b
run b 1 1 1 1f1b
same_bits a b
pass "same spec, same seed: bitwise identical parameters"

# The same spec as one process, with no launcher at all.
cp "$T/a.json" "$T/solo.json"
sed -i "s#\"run_dir\": \"$T/a\"#\"run_dir\": \"$T/solo\"#" "$T/solo.json"
solo "$DTRAIN_BIN/dtrain-run" --quiet --save-params "$T/solo/params" "$T/solo.json" >"$T/solo.out" 2>&1 ||
	{ cat "$T/solo.out"; fail "single process run"; }
grep -q "via singleton" "$T/solo.out" || { cat "$T/solo.out"; fail "not a singleton run"; }
same_bits a solo
pass "one process without mpirun: the same bits"

run g 1 2 3 gpipe
run f 1 2 3 1f1b
same_bits g f
pass "gpipe and 1f1b: bitwise identical parameters"

run p4 1 4 4 1f1b
run m5 1 1 5 1f1b
close_params a p4
close_params a m5
close_params a f
pass "pipeline 2 and 4, micro-batches 3, 4 and 5: same parameters to float32 rounding"

run d2 2 1 1 1f1b
run d3 3 1 2 gpipe
run d2p2 2 2 2 1f1b
close_losses a d2
close_losses a d3
close_losses a d2p2
pass "data 2, 3 and 2 x pipeline 2: same loss curve within 1e-5"

# the way gradients are summed (runtime/parallel/dp.h); the runs above used "auto":
# "split" on pipeline 1 (the node's replicas cut every layer between them),
# "shared" (a gradient slot per replica) with a pipeline
grad_sync() { sed -n 's/.*"event":"start".*"grad_sync":"\([a-z]*\)","replicas_per_node":\([0-9]*\).*/\1 \2/p' "$T/$1/metrics.jsonl"; }
[ "$(grad_sync d2)" = "split 2" ] || fail "d2: grad_sync is '$(grad_sync d2)', want split on 2 replicas per node"
[ "$(grad_sync d3)" = "split 3" ] || fail "d3: grad_sync is '$(grad_sync d3)', want split on 3 replicas per node"
[ "$(grad_sync d2p2)" = "shared 2" ] || fail "d2p2: grad_sync is '$(grad_sync d2p2)', want shared with a pipeline"
run d2a 2 1 1 1f1b --set parallel.grad_sync=allreduce
[ "$(grad_sync d2a)" = "allreduce 1" ] || fail "d2a: grad_sync is '$(grad_sync d2a)', want allreduce"
close_params d2 d2a
close_params d2 a
run s2 2 1 1 1f1b --set train.grad_clip=0 --set parallel.grad_sync=shared
run s2a 2 1 1 1f1b --set train.grad_clip=0 --set parallel.grad_sync=allreduce
run s2x 2 1 1 1f1b --set train.grad_clip=0
[ "$(grad_sync s2)" = "shared 2" ] || fail "s2: grad_sync is '$(grad_sync s2)', want shared"
same_bits s2 s2a
close_params s2x s2a
run s22 2 2 2 gpipe --set train.grad_clip=0
run s22a 2 2 2 gpipe --set train.grad_clip=0 --set parallel.grad_sync=allreduce
same_bits s22 s22a
pass "grad_sync shared and allreduce: bitwise equal on 2 replicas, without and with a pipeline"

# the split way has barriers only where its data flow needs them
# (runtime/parallel/dp.h): with one replica 4 ms late after every one of them, a
# missing barrier would let the other read or overwrite what the late one
# has not written or read yet; with and without clipping (the update
# before or after the step's sums), 2 micro-batches
DTRAIN_FAULT_SPLIT=slow@4:1 run d2slow 2 1 1 1f1b
must_contain "$T/d2slow.out" "dtrain: test fault DTRAIN_FAULT_SPLIT: rank 1 slow by 4 ms"
same_bits d2slow d2
run s2xm 2 1 2 gpipe --set train.grad_clip=0
DTRAIN_FAULT_SPLIT=slow@4:0 run s2xmslow 2 1 2 gpipe --set train.grad_clip=0
must_contain "$T/s2xmslow.out" "dtrain: test fault DTRAIN_FAULT_SPLIT: rank 0 slow by 4 ms"
same_bits s2xmslow s2xm
pass "grad_sync split with one replica late after every barrier: bitwise the same run on time"
pass "grad_sync split (auto on pipeline 1): allreduce's parameters to float32 rounding, with and without clipping, 2 and 3 replicas, 2 micro-batches"

# no shared-memory window to be had (Open MPI's sm window component off, as
# a container's small /dev/shm would): one warning, and the allreduce way
OMPI_MCA_osc='^sm' run nosm 2 1 1 1f1b
[ "$(grep -c 'no shared-memory window' "$T/nosm.out")" = 1 ] || { cat "$T/nosm.out"; fail "nosm: want one warning"; }
must_contain "$T/nosm.out" "gradients go by allreduce (hint: more room in /dev/shm, or parallel.grad_sync=allreduce)"
[ "$(grad_sync nosm)" = "allreduce 1" ] || fail "nosm: grad_sync is '$(grad_sync nosm)', want allreduce"
same_bits nosm d2a
pass "no shared-memory window: a warning, then the allreduce way (the same bits)"

run d4 4 1 1 1f1b
run d4a 4 1 1 1f1b --set parallel.grad_sync=allreduce
run d4s 4 1 1 1f1b --set parallel.grad_sync=shared
[ "$(grad_sync d4)" = "split 4" ] || fail "d4: grad_sync is '$(grad_sync d4)'"
[ "$(grad_sync d4s)" = "shared 4" ] || fail "d4s: grad_sync is '$(grad_sync d4s)'"
close_params d4 d4a
close_params d4s d4a
close_params d3 d2
close_losses a d4
pass "grad_sync split and shared on 3 and 4 replicas: the allreduce run's parameters to float32 rounding"

# a rank's threads (parallel.threads): "auto" is "split" with a CPU for
# each thread, each thread then computes a block of every layer
# (runtime/README.md); "blas" runs whole products on OpenBLAS's threads
threads() { sed -n 's/.*"event":"start".*"threads":"\([a-z]*\)".*/\1/p' "$T/$1/metrics.jsonl"; }
BIND=none run t2 1 1 1 1f1b --set resources.cpus_per_task=2
BIND=none run t2b 1 1 1 1f1b --set resources.cpus_per_task=2 --set parallel.threads=blas
run t2bound 1 1 1 1f1b --set resources.cpus_per_task=2
BIND=none run t3m 1 1 2 gpipe --set resources.cpus_per_task=3 --set parallel.threads=split
BIND=none run d2t2 2 1 1 1f1b --set resources.cpus_per_task=2 --set parallel.threads=split
[ "$(threads a)" = blas ] || fail "a: threads is '$(threads a)', want blas on 1 thread"
[ "$(threads t2)" = split ] || fail "t2: threads is '$(threads t2)', want split (auto, 2 threads, 2 CPUs)"
[ "$(threads t2b)" = blas ] || fail "t2b: threads is '$(threads t2b)', want blas"
[ "$(threads t2bound)" = blas ] || fail "t2bound: threads is '$(threads t2bound)', want blas (auto, 2 threads bound to 1 core)"
[ "$(threads t3m)" = split ] || fail "t3m: threads is '$(threads t3m)', want split"
[ "$(threads d2t2)" = split ] || fail "d2t2: threads is '$(threads d2t2)', want split"
close_params t2 a
close_params t2b a
close_params t3m a
close_params d2t2 d2
# a barrier missing where the data flow needs one shows as other bits when
# one thread is late after every barrier (DTRAIN_FAULT_SPLIT: rank 0's
# first thread; its other threads, and the other rank, run ahead)
DTRAIN_FAULT_SPLIT=slow@2:0 BIND=none run t2slow 1 1 1 1f1b --set resources.cpus_per_task=2
must_contain "$T/t2slow.out" "dtrain: test fault DTRAIN_FAULT_SPLIT: rank 0 slow by 2 ms"
same_bits t2slow t2
DTRAIN_FAULT_SPLIT=slow@2:1 BIND=none run d2t2slow 2 1 1 1f1b --set resources.cpus_per_task=2 --set parallel.threads=split
must_contain "$T/d2t2slow.out" "dtrain: test fault DTRAIN_FAULT_SPLIT: rank 1 slow by 2 ms"
same_bits d2t2slow d2t2
pass "threads split (1 and 2 replicas, 2 and 3 threads, 2 micro-batches): the 1-thread run's parameters to float32 rounding; a late thread changes no bit"

# grad_sync "allreduce" over several gradient buckets of 25 MiB (a stage of
# 34 MB): bitwise the "shared" way, which sums in a node window without
# buckets, and the replicas' check at every step finds them equal (the
# buckets but the first were once summed from the wrong place: pointer
# arithmetic on a void * counted bytes)
big() { run "$@" --set 'model.hidden=[2048, 2048, 2048]' --set train.max_steps=3 --set train.grad_clip=0 \
	--set recovery.check_replicas_every=1; }
big b2a 2 1 1 1f1b --set parallel.grad_sync=allreduce
big b2s 2 1 1 1f1b --set parallel.grad_sync=shared
[ "$(grad_sync b2a)" = "allreduce 1" ] || fail "b2a: grad_sync is '$(grad_sync b2a)', want allreduce"
same_bits b2s b2a
pass "grad_sync allreduce over 2 buckets (34 MB): bitwise the shared way; the replicas agree at every step"
