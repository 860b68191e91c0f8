#!/usr/bin/env bash
# Stopping a run by hand and continuing it, as a researcher does: a 2-node x
# 2-task training job is cancelled mid-run (dtrain-submit cancel); it saves
# first, at a step that is no checkpoint.every_steps multiple, and Slurm
# records it CANCELLED. `dtrain-submit resume RUN_DIR` continues it in the
# same run dir: refused while its job is active, it keeps the previous
# job's spec.json and job.sh beside the new, appends to the one
# metrics.jsonl (two starts, a resume from the cancel's step), and ends
# with parameters and optimizer state bitwise those of the same spec run
# without interruption. checkpoint.resume also takes the run dir. Its
# report names the cancel as the user's, and the resumed job's end as done;
# a resume of the completed run with nothing left to do is refused before
# sbatch, with the key to raise.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)

"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 6000 --features 64 --classes 10 --seed 7 >/dev/null ||
	fail "dtrain-data synthetic"
total=3000
final_name=step-$(printf %08d $total)
cat >"$T/job.json" <<JSON
{ "name": "byhand", "model": { "inputs": 64, "hidden": [128, 128], "outputs": 10 },
  "data": { "train": "$T/syn.h5" },
  "resources": { "nodes": 2, "tasks_per_node": 2, "partition": "low" },
  "parallel": { "data": 2, "pipeline": 2, "micro_batches": 2 },
  "train": { "epochs": 100, "max_steps": $total, "global_batch": 60, "log_every": 25,
             "optimizer": { "type": "sgd", "lr": 0.05, "momentum": 0.9 } },
  "checkpoint": { "every_steps": 1000, "keep": 3 } }
JSON
reference_run "$site" "$final_name"

# --- cancelled mid-run: it saves first ---
expect_rc 0 $SUBMIT "$T/job.json" --site "$site"
id=$(cat "$T/out")
dir=$(run_dir_of byhand)
wait_state "$id" 120 RUNNING
for _ in $(seq 600); do
	step=$(jq -r 'select(.event == "step") | .step' "$dir/metrics.jsonl" 2>/dev/null | tail -n 1 || true)
	[ "${step:-0}" -ge 100 ] && break
	sleep 0.1
done
[ "${step:-0}" -ge 100 ] || fail "the job logged no step past 100"
expect_rc 0 $SUBMIT cancel byhand
must_contain "$T/err" "asked to save and stop"
must_contain "$T/err" "saved at step"
must_contain "$T/err" "dtrain-submit resume $dir"
wait_state "$id" 60 CANCELLED
saved=$(jq -r 'select(.event == "stop") | .step' "$dir/metrics.jsonl" | tail -n 1)
[ -n "$saved" ] && [ "$saved" -lt $total ] || fail "no stop event before the end (got '$saved')"
[ $((saved % 1000)) -ne 0 ] || fail "the cancel's save fell on a periodic one (step $saved): it proves nothing"
ckpt=$dir/checkpoints/step-$(printf %08d "$saved")
"$DTRAIN_BIN/dtrain-ckpt" verify "$ckpt" >/dev/null || fail "the cancel's checkpoint $ckpt does not verify"
expect_rc 0 $SUBMIT report "$dir" -o "$T/cancelled.html"
must_contain "$T/cancelled.html" "cancelled by the user at step $saved of $total"
must_contain "$T/cancelled.html" "cancelled by the user (dtrain-submit cancel) at step $saved: saved, then stopped"
! grep -q "exited for a requeue" "$T/cancelled.html" || fail "the report calls the user's cancel a stop for a requeue"
pass "cancel saved at step $saved first, then the job was CANCELLED; the report names the user's cancel"

# --- checkpoint.resume takes the run dir (its checkpoints/) ---
$SUBMIT validate "$T/job.json" --site "$site" --set run_dir="$T/from-dir" --set checkpoint.resume="$dir" \
	--set train.max_steps=$((saved + 10)) >"$T/from-dir.json" 2>"$T/from-dir.err" || { cat "$T/from-dir.err"; fail "spec from-dir"; }
mkdir -p "$T/from-dir"
mpirun --allow-run-as-root --oversubscribe -np 4 "$DTRAIN_BIN/dtrain-run" --quiet "$T/from-dir.json" \
	>"$T/from-dir.out" 2>&1 || { cat "$T/from-dir.out"; fail "a run with checkpoint.resume = the run dir"; }
[ "$(jq -r 'select(.event == "resume") | .step' "$T/from-dir/metrics.jsonl")" = "$saved" ] ||
	fail "checkpoint.resume=$dir did not resume from step $saved"
pass "checkpoint.resume takes a run dir"

# --- resume RUN_DIR: the same run dir, one history, bitwise the uninterrupted run ---
# (the site's rules hold for a resume's --set as for a submit's)
expect_rc 3 $SUBMIT resume "$dir" --site "$site" --set env.LD_PRELOAD=/tmp/x.so
must_contain "$T/err" "env.LD_PRELOAD: changes how the job starts"
expect_rc 3 $SUBMIT resume "$dir" --site "$site" --set resources.qos=urgent
must_contain "$T/err" "resources.qos: locked by the site"
[ -f "$dir/spec.json" ] && [ ! -e "$dir/spec-$id.json" ] || fail "a refused resume touched the run dir"
expect_rc 0 $SUBMIT resume "$dir" --site "$site"
id2=$(cat "$T/out")
[ "$id2" != "$id" ] || fail "resume reused job id $id"
must_contain "$T/err" "continuing its run"
[ -f "$dir/spec-$id.json" ] && [ -f "$dir/job-$id.sh" ] || fail "the previous job's spec.json and job.sh were not kept"
expect_rc 1 $SUBMIT resume "$dir" --site "$site"
must_contain "$T/err" "its job $id2 is"
wait_state "$id2" 300 COMPLETED ENDED
[ -d "$dir/checkpoints/$final_name" ] || { ls "$dir/checkpoints"; fail "the resumed job did not reach $final_name"; }
same_as_reference "$dir/checkpoints/$final_name"
[ "$(jq -r 'select(.event == "start") | .event' "$dir/metrics.jsonl" | wc -l)" -eq 2 ] ||
	fail "metrics.jsonl does not hold the two starts"
[ "$(jq -r 'select(.event == "resume") | .step' "$dir/metrics.jsonl")" = "$saved" ] ||
	fail "the resumed job did not start from the cancel's step $saved"
expect_rc 0 $SUBMIT status "$id2"
must_contain "$T/out" "$dir"
expect_rc 0 $SUBMIT report "$dir" -o "$T/resumed.html"
must_contain "$T/resumed.html" '<tr class="ev ev-cancel">'
must_contain "$T/resumed.html" '<tr class="ev ev-job_done">'
pass "resume $dir: one run dir and metrics.jsonl, ends bitwise equal to the uninterrupted run; the report draws its end as done"

# --- a resume of the completed run with nothing left to do: refused before sbatch ---
expect_rc 3 $SUBMIT resume "$dir" --site "$site"
must_contain "$T/err" "the run completed at step $total and train.max_steps is $total: nothing left to do; hint: raise it, e.g. --set train.max_steps="
[ ! -e "$dir/spec-$id2.json" ] || fail "the refused resume moved the job's spec.json aside"
[ "$(cat "$dir/job_id")" = "$id2" ] || fail "the refused resume submitted a job ($(cat "$dir/job_id"))"
pass "resume of a completed run with nothing left to do is refused before sbatch, naming train.max_steps"
