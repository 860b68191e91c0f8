#!/usr/bin/env bash
# status, logs -f and cancel (by name) on a real running job.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)

printf '{"name": "sleeper", "resources": {"time": 5}, "setup": ["echo sleeper-started", "sleep 300"]}\n' >"$T/sleeper.json"
expect_rc 0 $SUBMIT "$T/sleeper.json" --site "$site" --no-data-check
id=$(cat "$T/out")
wait_state "$id" 60 RUNNING
expect_rc 0 $SUBMIT status sleeper
must_contain "$T/out" "RUNNING"
must_contain "$T/out" "$id"
pass "status shows the running job by name"

# logs -f follows the job until it ends.
$SUBMIT logs -f sleeper >"$T/follow.out" 2>"$T/follow.err" &
follower=$!
for _ in $(seq 60); do grep -q sleeper-started "$T/follow.out" && break; sleep 0.5; done
must_contain "$T/follow.out" "sleeper-started"
pass "logs -f shows output while the job runs"

expect_rc 0 $SUBMIT cancel sleeper
must_contain "$T/out" "$id"
wait_state "$id" 60 CANCELLED ENDED
for _ in $(seq 40); do kill -0 $follower 2>/dev/null || break; sleep 0.5; done
if kill -0 $follower 2>/dev/null; then kill $follower; fail "logs -f did not stop after the job ended"; fi
wait $follower || fail "logs -f exited non-zero"
expect_rc 0 $SUBMIT status "$id"
must_contain "$T/out" "$id"
pass "cancel by name; logs -f ends with the job"

expect_rc 1 $SUBMIT cancel sleeper
must_contain "$T/err" "job $id (sleeper) had already ended"
pass "cancel of an ended job says so and exits 1"

# a job that fails: status says why, as the failing rank printed it
"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 500 --features 20 --classes 4 >/dev/null ||
	fail "dtrain-data synthetic"
cat >"$T/diverges.json" <<JSON
{ "name": "diverges", "model": { "inputs": 20, "hidden": [16], "outputs": 4 }, "data": { "train": "$T/syn.h5" },
  "resources": { "time": 5 },
  "train": { "epochs": 20, "global_batch": 50, "optimizer": { "lr": 100, "momentum": 0.99 } } }
JSON
expect_rc 0 $SUBMIT "$T/diverges.json" --site "$site"
bad=$(cat "$T/out")
wait_state "$bad" 120 FAILED
expect_rc 0 $SUBMIT status "$bad"
must_contain "$T/out" "state:         FAILED"
grep -qE "^failure: +step [0-9]+: the (loss|gradient norm) is (NaN|infinite); training diverged" "$T/out" ||
	{ cat "$T/out"; fail "status does not say why job $bad failed"; }
pass "status of a failed job shows why, as the rank printed it"

expect_rc 1 $SUBMIT cancel no-such-job
must_contain "$T/err" "no-such-job"
expect_rc 1 $SUBMIT status sleepr
must_contain "$T/err" '(did you mean "sleeper"?)'
pass "a mistyped job name gets the closest name"
expect_rc 1 $SUBMIT logs 999999
pass "unknown jobs are named in the error"
