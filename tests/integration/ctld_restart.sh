#!/usr/bin/env bash
# slurmctld dies under a running job, on the local cluster: its ranks train
# on (slurmstepd needs no controller), and `site/cluster.sh up` starts only
# slurmctld again, keeping its state: the job is still RUNNING under its id,
# and ends COMPLETED, never restarted, bitwise equal to an uninterrupted run.
# Meanwhile `dtrain-submit status` answers within seconds, the job's state
# "unknown (Slurm unreachable)" and its last step from the heartbeats.
# (Before, `up` restarted every daemon with an empty controller state: the
# job's step was killed, its log said nothing, and status called it ENDED.)
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
cluster_dir=$(dirname "$SLURM_CONF")
[ "$(id -u)" -eq 0 ] || { echo "skipped: killing slurmctld needs root"; exit 77; }
# whatever happens, the controller comes back for the tests after this one
ctld_back() { bash "$DTRAIN_SOURCE_DIR/site/cluster.sh" up --dir "$cluster_dir" >"$T/${1:-cluster-up-at-exit}.out" 2>&1; }
trap 'rc=$?; ctld_back || true; [ $rc -eq 0 ] && rm -rf "$T"; [ $rc -ne 0 ] && echo "(test files kept in $T)"; exit $rc' EXIT
site=$(write_site)

# 4000 steps, 40 s at least: the job runs on through a controller state save,
# 3 s and two status calls while slurmctld is down
recovery_job ctldrestart "$site" 4000

expect_rc 0 $SUBMIT "$T/job.json" --site "$site" --set "$slow_steps"
id=$(cat "$T/out")
dir=$(run_dir_of ctldrestart)
log=$dir/slurm-$id.out
wait_state "$id" 120 RUNNING
running_at=$(date +%s)
for ((i = 0; i < 600; i++)); do
	[ -f "$dir/metrics.jsonl" ] && grep -q '"event":"checkpoint"' "$dir/metrics.jsonl" && break
	sleep 0.2
done
# slurmctld saves its state every few seconds; one killed before it saved
# the job as running has nothing to recover (as after a crash of any
# daemon): wait for a save that knows the job runs
for ((i = 0; i < 300; i++)); do
	[ "$(stat -c %Y "$cluster_dir/ctld/job_state" 2>/dev/null || echo 0)" -gt "$running_at" ] && break
	sleep 0.2
done

# --- slurmctld killed: the ranks go on without it ---
pid=$(cat "$cluster_dir/run/slurmctld.pid")
kill -KILL "$pid"
step() { sed -n 's/.*"event":"step","step":\([0-9]*\),.*/\1/p' "$dir/metrics.jsonl" | tail -n 1; }
before=$(step)
sleep 3
after=$(step)
[ "$after" -gt "$before" ] || fail "the job stopped training without slurmctld (step $before, then $after)"
echo "  slurmctld (pid $pid) killed; the job trained on from step $before to $after"

# --- status without Slurm: an answer within seconds, the state unknown ---
for args in "" "$id"; do
	t0=$(date +%s%N)
	$SUBMIT status $args >"$T/status.out" 2>&1 || true
	took=$((($(date +%s%N) - t0) / 1000000))
	[ "$took" -lt 10000 ] || { cat "$T/status.out"; fail "status $args took $took ms with slurmctld down"; }
	must_contain "$T/status.out" "unknown (Slurm unreachable)"
	must_contain "$T/status.out" "dtrain-submit: Slurm did not answer"
	grep -q "ENDED" "$T/status.out" && { cat "$T/status.out"; fail "status called a running job ENDED"; }
	echo "  status $args answered in $took ms: $(grep -o 'unknown (Slurm unreachable)' "$T/status.out" | head -n 1)"
done
grep -qE "last step: +[0-9]+, began" "$T/status.out" || { cat "$T/status.out"; fail "status JOB shows no last step from the heartbeats"; }

# --- up: only slurmctld again, with its state ---
ctld_back cluster-up || { cat "$T/cluster-up.out"; fail "site/cluster.sh up did not bring slurmctld back"; }
must_contain "$T/cluster-up.out" "slurmctld is not answering: starting it again with its state"
grep -q "restarting the whole cluster\|(re)starting the cluster" "$T/cluster-up.out" &&
	{ cat "$T/cluster-up.out"; fail "cluster.sh up made the cluster anew"; }
[ "$(job_state "$id")" = RUNNING ] || { cat "$log"; fail "job $id is $(job_state "$id") after slurmctld came back"; }
wait_state "$id" 300 COMPLETED FAILED CANCELLED TIMEOUT ENDED
state=$(job_state "$id")
[ "$state" = COMPLETED ] || [ "$state" = ENDED ] || { cat "$log"; fail "job ended $state"; }
must_contain "$log" "dtrain-run: done:"
grep -q "^dtrain: started again\|^dtrain-run: resuming from" "$log" &&
	{ cat "$log"; fail "the job was restarted; it should have run on"; }
same_as_reference "$dir/checkpoints/$final_name"
pass "slurmctld killed under a running job: cluster.sh up brought it back with its state, and the job ran on to the end, bitwise equal"
