#!/usr/bin/env bash
# A job that recovers by itself, on the local cluster: a 2-node x 2-task
# training job (data 2 x pipeline 2) has a random rank hit at a random
# moment, three times:
#   recover.sh [kill]  SIGKILL: the batch script names the dead rank and its
#                      node (srun's message);
#   recover.sh stop    SIGSTOP for good (a hung rank): the watchdog of the
#                      ranks still alive ends the step within its bound
#                      (recovery.step_timeout_seconds 5 here) and names the
#                      stopped rank, silent, and its node.
# Each time the batch script starts the step again in the same allocation
# (recovery.max_crashes, default 3), and dtrain-run resumes from the newest
# checkpoint. The job must end COMPLETED, its final parameters and
# optimizer state bitwise those of the same spec run without interruption.
# (A crash beyond the limit, and the counting across requeues, are
# test_launch_render's.)
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
mode=${1:-kill}
case $mode in
kill) sig=KILL ;;
stop) sig=STOP ;;
*) fail "usage: recover.sh [kill|stop]" ;;
esac
site=$(write_site)

# the spec (each round waits for the restart and two more checkpoints, then
# up to 3 s: lib.sh's recovery_job says why 2000 steps outlast three), and
# its uninterrupted reference run (mpirun on this host)
recovery_job recover "$site"

# --- the job, a rank killed three times ---
expect_rc 0 $SUBMIT "$T/job.json" --site "$site" --set "$slow_steps"
id=$(cat "$T/out")
dir=$(run_dir_of recover)
log=$dir/slurm-$id.out
last_step() {
	local s=
	[ -f "$dir/metrics.jsonl" ] && s=$(sed -n 's/.*"event":"step","step":\([0-9]*\),.*/\1/p' "$dir/metrics.jsonl" | tail -n 1)
	echo "${s:-0}"
}
wait_state "$id" 120 RUNNING
for round in 1 2 3; do
	# this round's start, then two checkpoints after it; then a random moment
	saves_into "$dir" "$round" || { cat "$log"; fail "job $id ($(job_state "$id")): no two checkpoints of start $round"; }
	[ "$(last_step)" -lt $total ] || fail "the job finished before crash $round (make it longer)"
	sleep "$((RANDOM % 3)).$((RANDOM % 10))"
	victim=$(pgrep -f "^[^ ]*/dtrain-run $dir/spec.json" | shuf -n 1)
	[ -n "$victim" ] || { cat "$log"; fail "no dtrain-run process of job $id (round $round)"; }
	who=$(rank_of_pid "$dir" "$victim")
	[ -n "$who" ] || { cat "$dir"/heartbeat/rank-*; fail "no heartbeat names pid $victim"; }
	if [ $mode = stop ]; then
		# status while it runs: when the last step began, no flag
		$SUBMIT status "$id" >"$T/status" 2>&1 || { cat "$T/status"; fail "status $id"; }
		grep -q '^last step:     [0-9]*, began 20[0-9-]*T[0-9:]*Z ([0-9]* s ago)$' "$T/status" ||
			{ cat "$T/status"; fail "status does not say when the last step began"; }
		must_not_contain "$T/status" "NO PROGRESS"
	fi
	reports=$(grep -c '^dtrain: the job step stopped making progress' "$log" || true)
	t0=$SECONDS
	kill -$sig "$victim"
	if [ $mode = stop ]; then
		# status flags the job before the watchdog ends the step: one rank
		# silent, in the job's view and in the table
		one= table=
		for ((i = 0; i < 100; i++)); do
			$SUBMIT status "$id" >"$T/status" 2>&1 || true
			grep -q "^NO PROGRESS:   for [0-9]* s: $who silent for " "$T/status" && one=1
			$SUBMIT status >"$T/table" 2>&1 || true
			grep -q "^$id .* STALLED [0-9]* s " "$T/table" && table=1
			[ -n "$one" ] && [ -n "$table" ] && break
			grep -q "restarting from the newest checkpoint (crash $round" "$log" && break
			sleep 0.2
		done
		[ -n "$one" ] || { cat "$T/status"; fail "round $round: status $id never said NO PROGRESS naming $who"; }
		[ -n "$table" ] || { cat "$T/table"; fail "round $round: the status table never said STALLED"; }
	fi
	restarted "$log" "$round"
	echo "  crash $round: $who (pid $victim) got SIG$sig near step $(last_step); restarted $((SECONDS - t0)) s later"
	if [ $mode = stop ]; then
		# the bound (5 s), the heartbeats' staleness, srun's kill of the step
		# (KillWait 10 s for the stopped rank): well inside 30 s
		[ $((SECONDS - t0)) -le 30 ] || fail "the step ended $((SECONDS - t0)) s after the stop (> 30 s)"
		# this round's report: the one after the earlier rounds'
		grep '^dtrain: the job step stopped making progress' "$log" | sed -n "$((reports + 1))p" |
			grep -q "(exit [0-9]*); the watchdog: rank [0-9]* on node n[12] waited [0-9.]* s in step [0-9]* ([a-z]*; bound [0-9]* s); waiting for $who: silent for " ||
			{ cat "$log"; fail "round $round: the log does not name $who as silent"; }
	fi
done

wait_state "$id" 300 COMPLETED FAILED CANCELLED TIMEOUT ENDED
state=$(job_state "$id")
[ "$state" = COMPLETED ] || [ "$state" = ENDED ] || { cat "$log"; fail "job ended $state"; }
if [ $mode = kill ]; then
	[ "$(grep -c '^dtrain: the job step failed (exit [0-9]*); first to die: rank [0-9]* on node n[12]: ' "$log")" -eq 3 ] ||
		{ cat "$log"; fail "the log does not name the dead rank and its node three times"; }
	grep '^dtrain: the job step failed' "$log" | sed 's/^/  /'
else
	[ "$(grep -c '^dtrain: the job step stopped making progress' "$log")" -eq 3 ] ||
		{ cat "$log"; fail "the log does not report three steps that stopped making progress"; }
	grep '^dtrain: the job step stopped making progress' "$log" | sed 's/^/  /'
fi
[ "$(grep -c '^dtrain-run: resuming from ' "$log")" -ge 3 ] || { cat "$log"; fail "fewer than 3 resumes in the log"; }
# each restart in place times its first step from that start, not from the
# job's (which began before every earlier start)
[ "$(grep -c '^dtrain-run: first step after the resume done [0-9.]* s after this start ([0-9.]* s after the job started)$' "$log")" -ge 3 ] ||
	{ cat "$log"; fail "the first steps after the restarts are not timed from their start"; }
jq -e -s '[.[] | select(.event == "first_step" and .resumed and .since_step_start_s < .since_job_start_s - 0.5)] | length >= 3' \
	"$dir/metrics.jsonl" >/dev/null || fail "metrics: fewer than 3 first steps timed from their own start"
must_contain "$log" "dtrain-run: done:"
# the run's life in events.jsonl (for dtrain-submit report): 4 starts of the
# step in one allocation, three ended by the rank hit (a crash naming the
# rank and its node, or the watchdog naming the silent rank), the last done
ev=$dir/events.jsonl
jq -e -s '[.[] | select(.event == "job_start")] | length == 4 and ([.[] | .crashes] == [0, 1, 2, 3])' "$ev" >/dev/null ||
	{ cat "$ev"; fail "events.jsonl: not 4 starts counting 0..3 crashes"; }
if [ $mode = kill ]; then
	jq -e -s '[.[] | select(.event == "job_stop" and .cause == "crash" and (.rank | test("^[0-9]")) and (.node | test("^n[12]$")))] | length == 3' "$ev" >/dev/null ||
		{ cat "$ev"; fail "events.jsonl: not 3 crashes naming the rank and node"; }
else
	jq -e -s '[.[] | select(.event == "job_stop" and .cause == "watchdog" and (.detail | test("silent")))] | length == 3' "$ev" >/dev/null ||
		{ cat "$ev"; fail "events.jsonl: not 3 watchdog stops naming the silent rank"; }
fi
jq -e -s '[.[] | select(.event == "job_stop")] | last | .cause == "done"' "$ev" >/dev/null || { cat "$ev"; fail "events.jsonl: the last stop is not done"; }
final=$dir/checkpoints/$final_name
same_as_reference "$final"
pass "three ranks hit by SIG$sig: the job recovered by itself each time and ended bitwise equal to an uninterrupted run"
