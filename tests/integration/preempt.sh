#!/usr/bin/env bash
# Preemption on the local cluster, as an unlucky user meets it: a 2-node x
# 2-task training job (an MLP, or with argument gpt or llama a GPT or a Llama
# whose optimizer is sharded over its 2 replicas) in the low partition is
# preempted twice by a job in
# the high partition that needs every CPU, at moments picked at random; each
# time Slurm sends SIGTERM, dtrain-run saves at the next step boundary and
# exits 75, Slurm requeues the job, and it resumes from its checkpoint. Then
# the time-limit warning signal (USR1, as sbatch --signal sends it): the same
# save, and the batch script requeues the job itself. The job must finish, and its final parameters and optimizer state must be
# bitwise those of the same spec run without interruption.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)

# MODEL (the first argument): mlp, gpt (a byte-level GPT on fortunes, its
# tied embedding across the two stages) or llama (a byte-level Llama,
# grouped-query heads, its head untied); the language models with
# parallel.optimizer "sharded": each replica saves and resumes its own
# optimizer piece
model=${1:-mlp}
optimizer=replicated
if [ "$model" = gpt ] || [ "$model" = llama ]; then
	optimizer=sharded
	"$DTRAIN_BIN/dtrain-data" text /usr/share/games/fortunes/fortunes "$T/text" >/dev/null ||
		fail "dtrain-data text"
	total=1500
	model_json='"model": { "type": "gpt", "vocab_size": 256, "context": 32, "layers": 2, "heads": 2, "embd": 32 },
  "data": { "train": "'"$T"'/text/train.h5" },'
	[ "$model" = llama ] && model_json='"model": { "type": "llama", "vocab_size": 256, "context": 32, "layers": 2,
    "heads": 4, "kv_heads": 2, "embd": 32, "intermediate_size": 64 },
  "data": { "train": "'"$T"'/text/train.h5" },'
	train_json='"train": { "epochs": 200, "max_steps": '"$total"', "global_batch": 8, "log_every": 50,
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.1 }, "grad_clip": 1.0 },'
else
	"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 12000 --features 784 --classes 10 --seed 5 >/dev/null ||
		fail "dtrain-data synthetic"
	total=1500
	model_json='"model": { "inputs": 784, "hidden": [512, 512], "outputs": 10 },
  "data": { "train": "'"$T"'/syn.h5" },'
	train_json='"train": { "epochs": 100, "max_steps": '"$total"', "global_batch": 120, "log_every": 50,
             "optimizer": { "type": "sgd", "lr": 0.05, "momentum": 0.9 } },'
fi
# 1500 steps: each round waits for the resume and 100 steps, then up to 3 s
# more (a random moment) and Slurm's preemption; the job ends each step in
# a 20 ms sleep (base/fault.h, DTRAIN_FAULT_STEP), so it trains at most 50
# steps/s however fast the machine is: at least 30 s in all, longer than
# the 6000 unslowed steps it took on a quiet 2-core machine, while the
# ranks hardly use a CPU
final_name=step-$(printf %08d $total)
cat >"$T/job.json" <<JSON
{ "name": "preempt", $model_json
  "resources": { "nodes": 2, "tasks_per_node": 2, "partition": "low" },
  "parallel": { "data": 2, "pipeline": 2, "micro_batches": 2, "optimizer": "$optimizer" },
  $train_json
  "checkpoint": { "every_steps": 100, "keep": 2 } }
JSON

# --- the reference: the same spec, uninterrupted (mpirun on this host) ---
reference_run "$site" "$final_name"

# --- the job, preempted twice ---
expect_rc 0 $SUBMIT "$T/job.json" --site "$site" --set env.DTRAIN_FAULT_STEP=slow@20
id=$(cat "$T/out")
dir=$(run_dir_of preempt)
log=$dir/slurm-$id.out

restarts() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p'; }
# the newest training step the job reported, 0 before the first
last_step() {
	local s=
	[ -f "$dir/metrics.jsonl" ] && s=$(sed -n 's/.*"event":"step","step":\([0-9]*\),.*/\1/p' "$dir/metrics.jsonl" | tail -n 1)
	echo "${s:-0}"
}
starts() {
	local n=0
	[ -f "$dir/metrics.jsonl" ] && n=$(grep -c '"event":"start"' "$dir/metrics.jsonl")
	echo "${n:-0}"
}

for round in 1 2 3; do
	wait_state "$id" 120 RUNNING
	# let it train (and, this round, resume) first; then a random moment
	for ((i = 0; i < 240; i++)); do
		[ "$(starts)" -ge "$round" ] && [ "$(last_step)" -ge $((round * 100)) ] && break
		sleep 0.5
	done
	[ "$(last_step)" -lt $total ] || fail "the job finished before preemption $round (make it longer)"
	sleep "$((RANDOM % 3)).$((RANDOM % 10))"
	if [ "$round" -lt 3 ]; then
		hi=$(sbatch --parsable -p high -N 2 --ntasks-per-node=4 -t 1 -o "$T/high-$round.out" --wrap 'sleep 2') ||
			fail "sbatch of the high-priority job"
	else
		# the time-limit warning, as sbatch --signal=USR1@lead sends it: to the
		# step only; the batch script requeues the job itself
		scancel --signal=USR1 "$id" || fail "scancel --signal=USR1"
	fi
	for ((i = 0; i < 120; i++)); do
		[ "$(restarts "$id")" = "$round" ] && break
		sleep 0.5
	done
	[ "$(restarts "$id")" = "$round" ] || { scontrol show job "$id"; cat "$log"; fail "job $id was not requeued (round $round)"; }
	if [ "$round" -lt 3 ]; then
		wait_state "$hi" 120 COMPLETED ENDED
		echo "  preemption $round at step $(last_step) (high-priority job $hi)"
	else
		echo "  time-limit signal (USR1) at step $(last_step)"
	fi
done

wait_state "$id" 300 COMPLETED FAILED CANCELLED TIMEOUT ENDED
state=$(job_state "$id")
[ "$state" = COMPLETED ] || [ "$state" = ENDED ] || { cat "$log"; fail "job ended $state"; }
must_contain "$log" "dtrain: test fault DTRAIN_FAULT_STEP: rank 0 slow by 20 ms"
[ "$(grep -c 'received: saving at step' "$log")" -ge 3 ] || { cat "$log"; fail "fewer than 3 stop saves in the log"; }
[ "$(grep -c '^dtrain-run: resuming from ' "$log")" -ge 3 ] || { cat "$log"; fail "fewer than 3 resumes in the log"; }
# the USR1 round's save: the ranks agree on the signal itself, so rank 0
# names it even when another rank got it first
must_contain "$log" "User defined signal 1 received: saving at step"
grep -q '"event":"stop","step":[0-9]*,"signal":"USR1"' "$dir/metrics.jsonl" ||
	fail "metrics lack the stop event of the time-limit signal (USR1)"
must_contain "$log" "dtrain: state saved; requeueing job $id (restart 3, its own requeue 1 of"
must_contain "$log" "dtrain-run: done:"
[ "$(grep -c '"event":"stop"' "$dir/metrics.jsonl")" -ge 3 ] || fail "metrics lack the stop events"
grep -q '"event":"first_step"' "$dir/metrics.jsonl" || fail "metrics lack the first step after a resume"
final=$dir/checkpoints/$final_name
if [ "$optimizer" = sharded ]; then
	for f in optim-0-0 optim-0-1 optim-1-0 optim-1-1; do
		[ -f "$final/$f.h5" ] || { ls "$final"; fail "sharded: no optimizer piece $f.h5"; }
	done
fi
same_as_reference "$final"
# the run's life in events.jsonl (for dtrain-submit report): 4 starts, the
# first two ended by a SIGTERM (the preemption; Slurm may kill the shell
# before it writes the step's end), the third a saved stop before the time
# limit, the last done, each start on both nodes with the spec's layout
ev=$dir/events.jsonl
jq -e -s '[.[] | select(.event == "job_start" and .num_nodes == 2 and .nodes != "" and (.layout | test("^[0-9]+x[0-9]+$")))] | length == 4' "$ev" >/dev/null ||
	{ cat "$ev"; fail "events.jsonl: not 4 starts on 2 nodes"; }
jq -e -s '[.[] | select(.event == "term" or (.event == "job_stop" and .cause != "preempted")) | .event + ":" + (.cause // "")] == ["term:", "term:", "job_stop:time_limit", "job_stop:done"]' "$ev" >/dev/null ||
	{ cat "$ev"; fail "events.jsonl: not two SIGTERMs, then a stop before the time limit, then the end"; }
jq -e -s '[.[] | select(.event == "job_start") | .restart] == [0, 1, 2, 3] and ([.[] | .time] | . == sort)' "$ev" >/dev/null ||
	{ cat "$ev"; fail "events.jsonl: restarts or times out of order"; }
grep 'first step after the resume' "$log" | sed 's/^/  /'
pass "$model: preempted twice and warned of the time limit once, at random moments; requeued and resumed each time: final state bitwise equal to the uninterrupted run"
