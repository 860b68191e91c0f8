#!/usr/bin/env bash
# A hyper-parameter sweep as a researcher runs one, and a job chained after
# it: `dtrain-submit sweep` of a tiny GPT over 2 learning rates x 2 widths
# with --max-parallel 2 is one job array; squeue, sampled while it runs,
# never shows more than 2 of its tasks running; a job submitted with
# --after the sweep waits (PENDING, Dependency) until all 4 completed, then
# runs. Its first two tasks are preempted while running by a high-priority
# job: task 0 resumes and ends bitwise equal to the same spec run alone.
# `status SWEEP` has a row per task, sorted by the best validation loss,
# each equal to its task's metrics.jsonl; logs and status take a task
# (SWEEP_TASK); `status` of all jobs gives the sweep's row its tasks'
# states; a task resumed by hand keeps its row's label SWEEP_k. A sweep with one invalid combination (a width the heads do
# not divide) submits nothing and names it.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)

"$DTRAIN_BIN/dtrain-data" text /usr/share/games/fortunes/fortunes "$T/text" >/dev/null || fail "dtrain-data text"
# 2000 steps, each at least 8 ms long in the sweep (DTRAIN_FAULT_STEP,
# base/fault.h): task 0 is preempted after step 500, and the 1500 steps
# left (12 s or more, in any build on any machine) leave the high-priority
# job time to arrive
total=2000
final_name=step-$(printf %08d $total)
cat >"$T/job.json" <<JSON
{ "name": "sweep", "model": { "type": "gpt", "vocab_size": 256, "context": 32, "layers": 2, "heads": 2, "embd": 32 },
  "data": { "train": "$T/text/train.h5", "test": "$T/text/val.h5" },
  "resources": { "nodes": 1, "tasks_per_node": 1, "partition": "low" },
  "train": { "epochs": 1000, "max_steps": $total, "global_batch": 8, "log_every": 50, "eval_every": 500,
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.1 }, "grad_clip": 1.0 },
  "checkpoint": { "every_steps": 250, "keep": 2 } }
JSON

# --- one bad combination refuses the whole sweep ---
expect_rc 3 $SUBMIT sweep "$T/job.json" --site "$site" --grid model.embd=32,33
must_contain "$T/err" "task 1 (embd=33)"
must_contain "$T/err" "model.heads: must divide model.embd"
must_contain "$T/err" "nothing was created or submitted"
[ ! -d "$T/runs" ] || [ -z "$(ls -A "$T/runs")" ] || { ls "$T/runs"; fail "a refused sweep left a directory"; }
expect_rc 3 $SUBMIT sweep "$T/job.json" --site "$site" --grid resources.nodes=1,2
must_contain "$T/err" "--grid resources.nodes: the tasks of a sweep are one job array"
pass "a sweep with an invalid combination submits nothing and names it"

# sbatch's --array on a submit: that many seeds as a sweep
expect_rc 0 $SUBMIT "$T/job.json" --site "$site" --array=0-2%1 --dry-run
grep -q "^#SBATCH --array=0-2%1$" "$T/out" || { cat "$T/out"; fail "--array=0-2%1 did not make a 3-task array, 1 at once"; }
must_contain "$T/err" "task 2: seed=2"
[ ! -d "$T/runs" ] || [ -z "$(ls -A "$T/runs")" ] || fail "a dry run left a directory"
pass "submit --array=0-2%1 is a sweep over seeds 0..2, one at a time"

# --- the reference: task 0's values (lr 0.003, embd 32) run alone ---
reference_run_1() {
	$SUBMIT validate "$T/job.json" --site "$site" --set run_dir="$T/ref" --set train.optimizer.lr=0.003 \
		--set model.embd=32 >"$T/ref.json" 2>"$T/ref.err" || { cat "$T/ref.err"; fail "spec ref"; }
	mkdir -p "$T/ref"
	mpirun --allow-run-as-root --oversubscribe -np 1 "$DTRAIN_BIN/dtrain-run" --quiet "$T/ref.json" \
		>"$T/ref.out" 2>&1 || { cat "$T/ref.out"; fail "reference run"; }
}
reference_run_1

# --- the sweep, and a job after it ---
expect_rc 0 $SUBMIT sweep "$T/job.json" --site "$site" --grid train.optimizer.lr=0.003,0.001 \
	--grid model.embd=32,48 --max-parallel 2 --set env.DTRAIN_FAULT_STEP=slow@8
id=$(cat "$T/out")
must_contain "$T/err" "submitted sweep $id (sweep): 4 tasks, at most 2 at once"
dir=$(run_dir_of sweep)
[ -f "$dir/sweep.json" ] && [ -f "$dir/task-3/spec.json" ] && [ -f "$dir/task-3/job.sh" ] ||
	{ ls -R "$dir"; fail "the sweep dir lacks its files"; }
grep -q "^#SBATCH --array=0-3%2$" "$dir/job.sh" || fail "the array's script has no --array=0-3%2"
[ "$(jq -r '.train.optimizer.lr, .model.embd' "$dir/task-2/spec.json" | tr '\n' ' ')" = "0.001 32 " ] ||
	fail "task 2's spec is not lr 0.001, embd 32"
expect_rc 0 $SUBMIT submit "$T/job.json" --site "$site" --set name=after-sweep --set train.max_steps=100 --after "$id"
after=$(cat "$T/out")
grep -q "^#SBATCH --dependency=afterok:$id$" "$(run_dir_of after-sweep)/job.sh" ||
	fail "the chained job's script does not wait for $id"

# squeue sampled while the sweep runs: at most 2 of its tasks RUNNING
(
	most=0
	while :; do
		n=$(squeue -h -r -j "$id" -t RUNNING 2>/dev/null | wc -l)
		[ "$n" -gt "$most" ] && most=$n && echo "$most" >"$T/most"
		squeue -h -j "$id" >/dev/null 2>&1 && [ -n "$(squeue -h -j "$id" 2>/dev/null)" ] || break
		sleep 0.2
	done
) &
sampler=$!

# preempt the running tasks (0 and 1) once they trained a while
for _ in $(seq 600); do
	s=$(jq -r 'select(.event == "step") | .step' "$dir/task-0/metrics.jsonl" 2>/dev/null | tail -n 1 || true)
	[ "${s:-0}" -ge 500 ] && break
	sleep 0.1
done
[ "${s:-0}" -ge 500 ] && [ "$s" -lt $total ] || fail "task 0 is at step ${s:-none}, not mid-run"
[ "$(job_state "$after")" = PENDING ] || fail "the chained job $after is $(job_state "$after") while the sweep runs"
expect_rc 0 $SUBMIT status "$after"
must_contain "$T/out" "PENDING (Dependency)"
expect_rc 0 $SUBMIT status
grep -Eq "^$id +sweep +[12] running" "$T/out" || { cat "$T/out"; fail "status: the sweep's row does not say its running tasks"; }
hi=$(sbatch --parsable -p high -N 2 --ntasks-per-node=4 -t 1 -o "$T/high.out" --wrap 'sleep 2') ||
	fail "sbatch of the high-priority job"
wait_state "$hi" 120 COMPLETED ENDED
# the array is done when squeue lists none of its tasks
for _ in $(seq 1200); do
	[ -z "$(squeue -h -j "$id" 2>/dev/null)" ] && break
	sleep 0.5
done
[ -z "$(squeue -h -j "$id" 2>/dev/null)" ] || { squeue; fail "sweep $id still queued after 600 s"; }
wait "$sampler"
most=$(cat "$T/most" 2>/dev/null || echo 0)
[ "$most" -ge 1 ] && [ "$most" -le 2 ] || fail "squeue showed $most of the sweep's tasks running at once (--max-parallel 2)"
echo "  at most $most tasks ran at once"

# every task completed; task 0 was preempted, resumed, and is bitwise the run alone
for k in 0 1 2 3; do
	grep -q '"event":"end"' "$dir/task-$k/metrics.jsonl" || { cat "$dir/task-$k"/slurm-*.out; fail "task $k did not end"; }
	[ -d "$dir/task-$k/checkpoints/$final_name" ] || fail "task $k has no final checkpoint"
done
grep -q '"event":"stop"' "$dir/task-0/metrics.jsonl" && grep -q '"event":"resume"' "$dir/task-0/metrics.jsonl" ||
	{ cat "$dir/task-0"/slurm-*.out; fail "task 0 was not preempted and resumed"; }
same_as_reference "$dir/task-0/checkpoints/$final_name"
pass "sweep $id: 4 tasks, at most 2 at once, all completed; task 0 preempted at step $s, resumed, bitwise the run alone"

# --- status SWEEP: a row per task, best first, each its metrics' best ---
expect_rc 0 $SUBMIT status sweep
must_contain "$T/out" "sweep $id (sweep): 4 tasks, at most 2 at once"
awk 'NR > 2 { print $1, $7 }' "$T/out" >"$T/rows"
[ "$(wc -l <"$T/rows")" -eq 4 ] || { cat "$T/out"; fail "status shows no 4 task rows"; }
sort -k2,2g -c "$T/rows" || { cat "$T/out"; fail "the rows are not sorted by the best validation loss"; }
while read -r task best; do
	k=${task#"${id}_"}
	want=$(jq -s '[.[] | select(.event == "eval") | .test_loss] | min' "$dir/task-$k/metrics.jsonl")
	[ "$(printf %.4f "$want")" = "$best" ] || { cat "$T/out"; fail "task $task: best $best, its metrics say $want"; }
done <"$T/rows"
pass "status of the sweep: a row per task, sorted by the best validation loss, equal to each task's metrics"

expect_rc 0 $SUBMIT status "sweep_2"
must_contain "$T/out" "run dir:       $dir/task-2"
expect_rc 0 $SUBMIT logs "${id}_1"
must_contain "$T/out" "dtrain-run: done:"
expect_rc 0 $SUBMIT logs "$id"
[ "$(grep -c '^==> task ' "$T/out")" -eq 4 ] || fail "logs of the sweep do not show its 4 tasks"
expect_rc 1 $SUBMIT cancel "$id"
must_contain "$T/err" "had already ended"
pass "status, logs and cancel take the sweep and its tasks"

# --- the chained job ran after the sweep ---
wait_state "$after" 120 COMPLETED ENDED
first=$(jq -s '[.[] | select(.event == "step") | .unix_time] | min' "$(run_dir_of after-sweep)/metrics.jsonl")
last=$(for k in 0 1 2 3; do jq -s '[.[] | select(.event == "step") | .unix_time] | max' "$dir/task-$k/metrics.jsonl"; done | sort -g | tail -n 1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > b) }' || fail "the chained job started at $first, before the sweep's end at $last"
pass "a job submitted --after the sweep waited for all its tasks, then ran"

# --- one task continued by hand in its run dir ---
expect_rc 0 $SUBMIT resume "$dir/task-1" --site "$site" --set train.max_steps=$((total + 100))
again=$(cat "$T/out")
[ -f "$dir/task-1/spec-${id}_1.json" ] || { ls "$dir/task-1"; fail "the task's first spec.json was not kept as spec-${id}_1.json"; }
wait_state "$again" 120 COMPLETED ENDED
[ -d "$dir/task-1/checkpoints/step-$(printf %08d $((total + 100)))" ] || fail "task 1 was not continued to step $((total + 100))"
expect_rc 0 $SUBMIT status "$id"
grep -q "^${id}_1 (job $again) " "$T/out" || { cat "$T/out"; fail "status SWEEP: the resumed task's row is not labelled ${id}_1 (job $again)"; }
! grep -q "^$again " "$T/out" || { cat "$T/out"; fail "status SWEEP: a row labelled with the resume's job id $again"; }
expect_rc 0 $SUBMIT status
grep -Eq "^$id +sweep +[1-4] (done|ended)(, [1-3] (done|ended))? " "$T/out" ||
	{ cat "$T/out"; fail "status: the sweep's row does not say its 4 tasks ended"; }
pass "resume of a sweep's task continues it in its run dir; its row keeps the label ${id}_1; status gives the sweep its tasks' states"

# --- cancelling the task whose own job id is the array's ---
# (Slurm gives the array's id to one task: its batch script must requeue and
# cancel "<array>_<task>", never that id, which is every task)
expect_rc 0 $SUBMIT sweep "$T/job.json" --site "$site" --set name=pair --grid train.optimizer.lr=0.003,0.002
pair=$(cat "$T/out")
pdir=$(run_dir_of pair)
owner=
for _ in $(seq 600); do
	owner=
	for k in 0 1; do
		[ "$(squeue -h -j "${pair}_$k" -o %A 2>/dev/null || true)" = "$pair" ] && owner=$k
	done
	[ -n "$owner" ] && [ "$(squeue -h -r -j "$pair" -t RUNNING 2>/dev/null | wc -l)" -eq 2 ] && break
	sleep 0.1
done
[ -n "$owner" ] || { squeue; fail "no task of sweep $pair runs as job $pair"; }
other=$((1 - owner))
for _ in $(seq 600); do
	grep -q "dtrain-run: training " "$pdir/task-$owner"/slurm-*.out 2>/dev/null && break
	sleep 0.1
done
expect_rc 0 $SUBMIT cancel "${pair}_$owner"
must_contain "$T/err" "saved at step"
for _ in $(seq 1200); do
	[ -z "$(squeue -h -j "$pair" 2>/dev/null)" ] && break
	sleep 0.5
done
grep -q '"event":"end"' "$pdir/task-$other/metrics.jsonl" ||
	{ cat "$pdir/task-$other"/slurm-*.out; fail "cancelling task $owner (job $pair) stopped task $other too"; }
grep -q '"event":"stop"' "$pdir/task-$owner/metrics.jsonl" || fail "task $owner did not save before its cancel"
pass "cancel of the task that has the array's job id saves it and leaves the other task running to its end"
