#!/usr/bin/env bash
# checkpoint.every_steps "auto" on the local cluster (#35, item 3): the site
# declares the partition's mean time between interruptions (defaults,
# locked), a 2-rank job saves at step 10 to measure a save's cost, then at
# Young/Daly's interval sqrt(2 C M) with C the saves' measured stall: the
# run prints the interval it chose and as it changes, each "cadence" event of metrics.jsonl holds an
# interval that is the formula's or its bound (at least a save's cost and
# a step, at most M), and the next checkpoint comes exactly that many
# steps later; a user's spec cannot change the site's M.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)
jq '.defaults.checkpoint = { "mtbi_seconds": 60 } | .locked += ["checkpoint.mtbi_seconds"]' "$site" >"$T/site2.json" ||
	fail "site with a declared M"
site=$T/site2.json

# steps of a few ms, so that the interval (about a second at M = 60 s and a
# stall of ~10 ms) holds hundreds of them and 1500 steps several saves
"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 4000 --features 256 --classes 10 --seed 7 >/dev/null ||
	fail "dtrain-data synthetic"
cat >"$T/job.json" <<JSON
{ "name": "cadence", "model": { "inputs": 256, "hidden": [1024, 1024], "outputs": 10 },
  "data": { "train": "$T/syn.h5" },
  "resources": { "nodes": 1, "tasks_per_node": 2, "partition": "low" },
  "parallel": { "data": 2 },
  "train": { "epochs": 100, "max_steps": 1500, "global_batch": 64, "log_every": 100,
             "optimizer": { "type": "sgd", "lr": 0.05 } },
  "checkpoint": { "every_steps": "auto", "keep": 2 } }
JSON
expect_rc 3 $SUBMIT "$T/job.json" --site "$site" --set checkpoint.mtbi_seconds=100000
must_contain "$T/err" "checkpoint.mtbi_seconds: locked by the site"
expect_rc 0 $SUBMIT "$T/job.json" --site "$site"
id=$(cat "$T/out")
dir=$(run_dir_of cadence)
wait_state "$id" 300 COMPLETED FAILED CANCELLED TIMEOUT ENDED
log=$dir/slurm-$id.out
[ "$(job_state "$id")" = COMPLETED ] || [ "$(job_state "$id")" = ENDED ] || { cat "$log"; fail "job $id ended $(job_state "$id")"; }
must_contain "$log" 'dtrain-run: checkpoint cadence: every_steps "auto": a save now, at step 10, measures what one costs'
grep -E '^dtrain-run: checkpoint cadence: every [0-9]+ steps \([0-9.e+-]+ s, [a-z '"'"']+\): sqrt\(2 C M\) with C [0-9.e+-]+ s \(the saves'"'"' stall, the most of any rank\), M [0-9.e+-]+ s \(checkpoint.mtbi_seconds 60; this run interrupted 0 times so far\)' "$log" >/dev/null ||
	{ cat "$log"; fail "no cadence line naming C, M and the site's mtbi_seconds"; }
jq -s -e '[.[] | select(.event == "checkpoint")] | first | .step == 10' "$dir/metrics.jsonl" >/dev/null ||
	fail "the first save is not at step 10"
grep '^dtrain-run: checkpoint cadence' "$log" | head -n 3 | sed 's/^/  /'
# every decision: the formula or its bounds; the next save that many steps on
jq -s -e '
  [.[] | select(.event == "cadence" or .event == "checkpoint")] as $e |
  [range(0; $e | length) | . as $i | $e[$i] | select(.event == "cadence") |
    (if .bound == "formula" then ((.interval_s - ((2 * .cost_s * .mtbi_s) | sqrt)) | fabs) < 1e-3 * .interval_s
     elif .bound == "at most M" then ((.interval_s - .mtbi_s) | fabs) < 1e-6 * .mtbi_s
     else true end) and .interval_s >= .cost_s * 0.999 and .interval_s <= .mtbi_s * 1.001 and
    .mtbi_s >= 60 and .every_steps >= 1 and
    .step as $at | (.step + .every_steps) as $next |
    ($next >= 1500 or ([$e[$i + 1:][] | select(.event == "checkpoint" and .step > $at)] | first | .step) == $next)
  ] | length > 0 and all' "$dir/metrics.jsonl" >/dev/null ||
	{ jq -c 'select(.event == "cadence" or .event == "checkpoint") | {event, step, every_steps, interval_s, bound, cost_s, mtbi_s}' "$dir/metrics.jsonl"; fail "a cadence decision off its formula or bounds, or a save not where it said"; }
n=$(grep -c '"event":"checkpoint"' "$dir/metrics.jsonl")
[ "$n" -ge 3 ] || fail "only $n checkpoints in 1500 steps at M = 60 s"
pass "checkpoint.every_steps auto: $n saves at Young/Daly's interval from the measured stall and the site's M, each where the run said"
