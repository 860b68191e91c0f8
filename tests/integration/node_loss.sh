#!/usr/bin/env bash
# A lost node, on the local cluster: node n2 of a 2-node x 2-task training job
# (data 2 x pipeline 2) loses its slurmd, its slurmstepd and its ranks to
# SIGKILL at a random moment. The ranks on n1 wait for the silent ranks of n2;
# their watchdog ends the step within its bound (recovery.step_timeout_seconds
# 5 here) and names them; srun gives up on n2 (by itself when the broken
# connection to n2's slurmstepd aborts it, else the batch script ends it
# KillWait + 5 s after the first rank ended); the batch script finds that no
# step can start on every node and requeues the job. The job must stop
# running within a minute. Then the node comes back (site/cluster.sh up starts
# its slurmd again, from clean files: the killed step's sockets would fail the
# requeued job's steps there), the job starts again, counts a node failure,
# resumes from its newest checkpoint and ends COMPLETED, bitwise equal to the
# same spec run without interruption.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
[ "$(id -u)" -eq 0 ] || { echo "skipped: killing a node's slurmd needs root"; exit 77; }
# whatever happens, the node comes back for the tests after this one
trap 'rc=$?; [ -n "${ref_pid:-}" ] && kill -- -"$ref_pid" 2>/dev/null; node_back || true; [ $rc -eq 0 ] && rm -rf "$T"; [ $rc -ne 0 ] && echo "(test files kept in $T)"; exit $rc' EXIT
site=$(write_site)

recovery_job nodeloss "$site"

expect_rc 0 $SUBMIT "$T/job.json" --site "$site" --set "$slow_steps"
id=$(cat "$T/out")
dir=$(run_dir_of nodeloss)
log=$dir/slurm-$id.out
checkpoints() { local n=0; [ -f "$dir/metrics.jsonl" ] && n=$(grep -c '"event":"checkpoint"' "$dir/metrics.jsonl"); echo "${n:-0}"; }
wait_state "$id" 120 RUNNING
for ((i = 0; i < 600; i++)); do
	[ "$(checkpoints)" -ge 2 ] && break
	[ "$(job_state "$id")" = RUNNING ] || { cat "$log"; fail "job $id is $(job_state "$id") before the node was lost"; }
	sleep 0.2
done
sleep "$((RANDOM % 3)).$((RANDOM % 10))"

# --- node n2 lost: its ranks, their slurmstepd, its slurmd ---
t0=$SECONDS
lose_node n2 "$dir"
for ((i = 0; i < 600; i++)); do
	[ "$(job_state "$id")" = RUNNING ] || break
	sleep 0.2
done
ended=$((SECONDS - t0))
[ "$(job_state "$id")" != RUNNING ] || { cat "$log"; fail "job $id still RUNNING $ended s after losing n2"; }
[ "$ended" -le 60 ] || { cat "$log"; fail "job $id ran on for $ended s after losing n2 (> 60 s)"; }
echo "  job $id stopped running $ended s after losing n2: $(job_state "$id")"
grep -q "^dtrain: the job step stopped making progress (exit [0-9]*); the watchdog: rank [01] on node n1 waited [0-9.]* s in step [0-9]* ([a-z]*; bound [0-9]* s); waiting for rank [23] on node n2: silent" "$log" ||
	{ cat "$log"; fail "the log does not name the silent ranks of n2"; }
must_contain "$log" "dtrain: a node of the allocation does not answer: no job step could start on n2 within 20 s"
# a fixed 2-node job on a 2-node partition: n2 is bad, but the job would
# wait for ever without it
must_contain "$log" "dtrain: node n2 is bad (it did not answer after a crash: no job step could start there within 20 s), but stays: partition low has 2 nodes the job can use, and without it and the 0 left out before fewer than the 2 it needs would remain"
# the node failure, counted once: by the batch script before its requeue
must_contain "$log" "requeueing job $id to start again where every node answers (node failure 1 of at most 3, recovery.max_node_failures)"

# --- n2 back: the job runs again and resumes ---
node_back || { cat "$T/cluster-up.out"; fail "site/cluster.sh up did not bring n2 back"; }
must_contain "$T/cluster-up.out" "slurmd n2 is not running: starting it again (a node back)"
must_contain "$T/cluster-up.out" "n2: removed the stale socket stepd.slurm.pmix.$id.0 of a killed step"
wait_state "$id" 300 COMPLETED FAILED CANCELLED TIMEOUT ENDED
state=$(job_state "$id")
[ "$state" = COMPLETED ] || [ "$state" = ENDED ] || { cat "$log"; fail "job ended $state"; }
must_not_contain "$log" "dtrain: started again after losing a node"
[ "$(grep -c '"event":"node_failure"' "$dir/events.jsonl")" -eq 1 ] || { cat "$dir/events.jsonl"; fail "events.jsonl does not hold one node_failure"; }
[ "$(cat "$dir/recovery/node_failures")" = 1 ] || fail "recovery/node_failures: $(cat "$dir/recovery/node_failures"), expected 1"
[ "$(grep -c '^dtrain-run: resuming from ' "$log")" -ge 1 ] || { cat "$log"; fail "no resume in the log"; }
must_contain "$log" "dtrain-run: done:"
same_as_reference "$dir/checkpoints/$final_name"
pass "node n2 lost: the job stopped within $ended s, ran again once n2 was back, and ended bitwise equal to an uninterrupted run"
