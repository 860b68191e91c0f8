#!/usr/bin/env bash
# Silent corruption caught (#35, item 4), on the local cluster: a 2-node x
# 2-task job of 4 data-parallel replicas (each its own copy of the state:
# parallel.grad_sync "allreduce") has one bit of one replica's parameters
# flipped at a random step (base/fault.h: DTRAIN_FAULT_FLIP). The replicas'
# check (recovery.check_replicas_every 50, and before every save) names
# that rank and its node; the step exits 6, no checkpoint is taken from the
# disagreeing replicas, the batch script starts the step again from the
# newest checkpoint (saved before the flip), and the job ends bitwise
# equal to the same spec run without the fault.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)

"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 4000 --features 64 --classes 10 --seed 17 >/dev/null ||
	fail "dtrain-data synthetic"
total=2000
final_name=step-$(printf %08d $total)
flip_at=$((300 + RANDOM % 1200)) victim=$((RANDOM % 4))
cat >"$T/job.json" <<JSON
{ "name": "replicas", "model": { "inputs": 64, "hidden": [128, 128], "outputs": 10 },
  "data": { "train": "$T/syn.h5" },
  "resources": { "nodes": 2, "tasks_per_node": 2, "partition": "low" },
  "parallel": { "data": 4, "grad_sync": "allreduce" },
  "train": { "epochs": 100, "max_steps": $total, "global_batch": 40, "log_every": 50,
             "optimizer": { "type": "adamw", "lr": 0.003 } },
  "checkpoint": { "every_steps": 100, "keep": 2 },
  "recovery": { "check_replicas_every": 50 } }
JSON
reference_run "$site" "$final_name"
expect_rc 0 $SUBMIT "$T/job.json" --site "$site" --set "env.DTRAIN_FAULT_FLIP=bit@$flip_at:$victim"
id=$(cat "$T/out")
dir=$(run_dir_of replicas)
log=$dir/slurm-$id.out
wait_state "$id" 300 COMPLETED FAILED CANCELLED TIMEOUT ENDED
state=$(job_state "$id")
[ "$state" = COMPLETED ] || [ "$state" = ENDED ] || { cat "$log"; fail "job $id ended $state"; }
must_contain "$log" "dtrain: test fault DTRAIN_FAULT_FLIP: rank $victim flipped a bit of parameter"
# caught at the first check at or after the flip (every 50 steps)
caught=$(( (flip_at + 49) / 50 * 50 ))
grep -q "^dtrain: the replicas of a stage disagree (exit 6): after step $caught: rank $victim on node n[12] holds other parameters than the other replicas of stage 0" "$log" ||
	{ cat "$log"; fail "the log does not name rank $victim as the replica that differs at step $caught"; }
grep '^dtrain: the replicas of a stage disagree' "$log" | sed 's/^/  /'
node=$(sed -n "s/^dtrain: the replicas of a stage disagree (exit 6): after step [0-9]*: rank $victim on node \(n[12]\) .*/\1/p" "$log")
jq -e -s --arg r "$victim" --arg n "$node" '[.[] | select(.event == "job_stop" and .cause == "replicas")] | length == 1 and .[0].rank == $r and .[0].node == $n' "$dir/events.jsonl" >/dev/null ||
	{ cat "$dir/events.jsonl"; fail "events.jsonl: no stop for the replicas naming rank $victim on $node"; }
from=$(jq -r 'select(.event == "resume") | .step' "$dir/metrics.jsonl" | tail -n 1)
[ -n "$from" ] && [ "$from" -lt "$flip_at" ] || { cat "$log"; fail "resumed from step ${from:-none}, not from a checkpoint before the flip at $flip_at"; }
# before the restart, no save at or after the flip
awk -v f="$flip_at" '/"event":"resume"/ { exit } /"event":"checkpoint"/ { if (match($0, /"step":[0-9]+/) && substr($0, RSTART + 7, RLENGTH - 7) + 0 >= f) bad = 1 } END { exit bad }' "$dir/metrics.jsonl" ||
	fail "a checkpoint was saved at or after the flip (step $flip_at) from replicas that disagreed"
same_as_reference "$dir/checkpoints/$final_name"
pass "a bit flipped in rank $victim at step $flip_at: named at step $caught ($node), restarted from step $from, ended bitwise equal to the run without it"
