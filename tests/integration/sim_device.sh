#!/usr/bin/env bash
# The device seam (runtime/model/device.h) without a GPU: DTRAIN_SIM_DEVICE=1
# runs the CPU's kernels on memory the host may not touch (a tagged address
# that faults on any host load or store), so every copy a GPU needs is
# taken, and a host access to device memory crashes the run. On real ranks
# (mpirun, no cluster):
#  - the MLP on 1x1, data 2, pipeline 2 (1f1b) and 2x2, with AdamW and
#    clipping, and the GPT (its tied embedding on one stage and across
#    two, evaluation, data 2): the simulated device ends bitwise where the
#    CPU does, with the same loss curve (the CPU summing its replicas'
#    gradients as the seam does, parallel.grad_sync "allreduce");
#  - the same with the sharded optimizer (parallel.optimizer "sharded"):
#    the MLP on data 2 and 2x2, the GPT on 2x2 (a tied embedding across
#    stages, each replica's rows);
#  - a checkpoint saved on the simulated device resumes on the CPU, and the
#    reverse, bitwise equal to the uninterrupted run (replicated and
#    sharded optimizer);
#  - dtrain-ckpt eval and sample --device sim give the CPU's bits;
#  - what the seam does not carry yet is refused, naming the key.
. "$(dirname "$0")/lib.sh"

"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 600 --features 24 --classes 5 --seed 7 >/dev/null ||
	fail "dtrain-data synthetic"
cat >"$T/mlp.json" <<JSON
{ "name": "sim", "model": { "inputs": 24, "hidden": [40, 32, 16], "outputs": 5, "activation": "gelu" },
  "data": { "train": "$T/syn.h5", "test": "$T/syn.h5" },
  "train": { "epochs": 2, "global_batch": 60, "log_every": 1,
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.01 },
             "lr_schedule": { "warmup_steps": 3 }, "grad_clip": 1.0 },
  "parallel": { "grad_sync": "allreduce", "threads": "blas" },
  "checkpoint": { "every_steps": 5, "keep": 10 } }
JSON
corpus=/usr/share/games/fortunes
[ -f "$corpus/fortunes" ] || fail "$corpus/fortunes is missing (Debian package fortunes; make deps installs it)"
"$DTRAIN_BIN/dtrain-data" text "$corpus/fortunes" "$T/text" >"$T/data.out" 2>&1 ||
	{ cat "$T/data.out"; fail "dtrain-data text"; }
cat >"$T/gpt.json" <<JSON
{ "name": "simgpt", "model": { "type": "gpt", "vocab_size": 256, "context": 16, "layers": 2, "heads": 2, "embd": 16 },
  "data": { "train": "$T/text/train.h5", "test": "$T/text/val.h5" },
  "train": { "epochs": 1, "max_steps": 12, "global_batch": 4, "log_every": 1, "eval_every": 6,
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.1, "betas": [0.9, 0.95] },
             "grad_clip": 1.0 },
  "checkpoint": { "every_steps": 6 } }
JSON

# same NAME: the simulated run sim-NAME ended bitwise where cpu-NAME did,
# along the same loss curve, and said which device it ran on
same() {
	local f
	for f in "$T/cpu-$1"/params/*.f32; do
		cmp -s "$f" "$T/sim-$1/params/$(basename "$f")" ||
			fail "$1: the simulated device and the CPU differ in $(basename "$f")"
	done
	[ "$(losses "cpu-$1")" = "$(losses "sim-$1")" ] || fail "$1: the loss curves differ"
	[ -n "$(losses "cpu-$1")" ] || fail "$1: no loss curve"
	grep -q "^dtrain-run: rank 0 device sim .* collectives mpi (through host memory)$" "$T/sim-$1.out" ||
		{ cat "$T/sim-$1.out"; fail "$1: no device line"; }
	! grep -q "device sim" "$T/cpu-$1.out" || fail "$1: a device line on the CPU"
}

# both SPEC NAME DATA PIPE MICRO [...]: the run on the CPU and simulated
both() {
	local spec=$1 name=$2
	shift 2
	mpi_run "$spec" "cpu-$name" "$@"
	DTRAIN_SIM_DEVICE=1 mpi_run "$spec" "sim-$name" "$@"
	same "$name"
}

both mlp l11 1 1 1
both mlp d2 2 1 1
both mlp p2 1 2 2 --set parallel.schedule=1f1b
both mlp l22 2 2 3
pass "MLP on the simulated device: bitwise the CPU's on 1x1, data 2, pipeline 2 (1f1b), 2x2"
both gpt g11 1 1 1
both gpt gp2 1 2 2
both gpt gd2 2 1 1
for r in cpu-g11 sim-g11 cpu-gp2 sim-gp2; do
	[ "$(jq -c 'select(.event == "eval")' "$T/$r/metrics.jsonl" | wc -l)" -eq 2 ] ||
		fail "$r: expected 2 evaluations in metrics.jsonl"
done
[ "$(jq -c 'select(.event == "eval") | del(.unix_time)' "$T/cpu-gp2/metrics.jsonl")" = \
  "$(jq -c 'select(.event == "eval") | del(.unix_time)' "$T/sim-gp2/metrics.jsonl")" ] || fail "gp2: the evaluations differ"
tied "$T/sim-gp2/checkpoints/step-00000012"
pass "GPT on the simulated device: bitwise the CPU's (tied embedding on one stage and across two, data 2)"
both mlp s2 2 1 1 --set parallel.optimizer=sharded
both mlp s22 2 2 3 --set parallel.optimizer=sharded
both gpt gs22 2 2 2 --set parallel.optimizer=sharded
grep -q "(sharded)" "$T/sim-s22.out" || { cat "$T/sim-s22.out"; fail "s22: not sharded"; }
tied "$T/sim-gs22/checkpoints/step-00000012"
pass "the sharded optimizer on the simulated device: bitwise the CPU's (MLP data 2 and 2x2, GPT 2x2)"

# a checkpoint crosses devices: step 5 of run NAME on one resumed on the other
cross() {
	local from=$1 to=$2 name=$3 ck
	shift 3
	ck="$T/$from-$name/checkpoints/step-00000005"
	[ -d "$ck" ] || fail "no checkpoint $ck"
	if [ "$to" = sim ]; then
		DTRAIN_SIM_DEVICE=1 mpi_run mlp "x-$from-$name" 2 2 3 --set checkpoint.resume="$ck" "$@"
	else
		mpi_run mlp "x-$from-$name" 2 2 3 --set checkpoint.resume="$ck" "$@"
	fi
	[ "$(jq -r 'select(.event == "resume") | .step' "$T/x-$from-$name/metrics.jsonl")" = 5 ] ||
		{ cat "$T/x-$from-$name.out"; fail "$from -> $to: not resumed from step 5"; }
	for f in "$T/cpu-$name"/params/*.f32; do
		cmp -s "$f" "$T/x-$from-$name/params/$(basename "$f")" ||
			fail "$name: $from checkpoint resumed on $to: differs from the uninterrupted run in $(basename "$f")"
	done
}
cross sim cpu l22
cross cpu sim l22
cross sim cpu s22 --set parallel.optimizer=sharded
cross cpu sim s22 --set parallel.optimizer=sharded
pass "a checkpoint of the simulated device resumes on the CPU and the reverse, bitwise"

# dtrain-ckpt eval and sample on a device (--device): the CPU's results
ck=$T/sim-gp2/checkpoints/step-00000012
for d in cpu sim; do
	"$DTRAIN_BIN/dtrain-ckpt" eval "$ck" "$T/text/val.h5" --samples 9 --batch 4 --device $d \
		--logits "$T/logits-$d.f32" >"$T/eval-$d.out" || fail "dtrain-ckpt eval --device $d"
	"$DTRAIN_BIN/dtrain-ckpt" sample "$ck" --tokens 40 --seed 3 --device $d >"$T/sample-$d.out" ||
		fail "dtrain-ckpt sample --device $d"
done
grep -q "^samples 9 targets 144 loss [0-9.]* accuracy" "$T/eval-cpu.out" || { cat "$T/eval-cpu.out"; fail "no eval line"; }
cmp -s "$T/eval-cpu.out" "$T/eval-sim.out" || fail "eval on the simulated device differs from the CPU's"
cmp -s "$T/logits-cpu.f32" "$T/logits-sim.f32" || fail "eval's logits on the simulated device differ"
cmp -s "$T/sample-cpu.out" "$T/sample-sim.out" || fail "sample on the simulated device differs"
[ "$(wc -c <"$T/sample-cpu.out")" -ge 40 ] || fail "sample wrote fewer than 40 bytes"
expect_rc 2 "$DTRAIN_BIN/dtrain-ckpt" eval "$ck" "$T/text/val.h5" --device gpu
must_contain "$T/err" 'dtrain-ckpt: --device: expected cpu or cuda (got "gpu")'
pass "dtrain-ckpt eval and sample --device: the simulated device gives the CPU's loss, logits and text"

$SUBMIT validate "$T/mlp.json" --set resources.tasks_per_node=2 --set parallel.data=2 \
	--set parallel.grad_sync=shared --set run_dir="$T/refused" >"$T/refused.json" || fail "spec refused"
mkdir -p "$T/refused"
expect_rc 3 env DTRAIN_SIM_DEVICE=1 timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 \
	"$DTRAIN_BIN/dtrain-run" "$T/refused.json"
must_contain "$T/err" 'parallel.grad_sync: "shared" shares the node'"'"'s host memory: not available on the sim device'
pass "what the seam does not carry yet is refused, naming the key"
