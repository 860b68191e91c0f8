#!/usr/bin/env bash
# The example 2-node x 2-task job on the local cluster: submitted with
# dtrain-submit, run with srun --mpi=pmix, every rank reports its place in the
# data x pipeline grid from both nodes.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)

expect_rc 0 $SUBMIT "$DTRAIN_SOURCE_DIR/jobs/mlp-2x2.json" --site "$site"
id=$(cat "$T/out")
[[ "$id" =~ ^[0-9]+$ ]] || fail "submit printed '$id', not a job id"
pass "submitted job $id"

dir=$(run_dir_of mlp-2x2)
for f in spec.json job.sh job_id; do
	[ -s "$dir/$f" ] || fail "run dir lacks $f"
done
[ "$(cat "$dir/job_id")" = "$id" ] || fail "job_id file does not match"
bash -n "$dir/job.sh" || fail "bash -n rejects job.sh"
must_contain "$dir/spec.json" '"run_dir": "'"$dir"'"'

wait_state "$id" 120 COMPLETED FAILED CANCELLED TIMEOUT ENDED
out=$dir/slurm-$id.out
[ -f "$out" ] || fail "no Slurm output $out"
state=$(job_state "$id")
[ "$state" = COMPLETED ] || [ "$state" = ENDED ] || { cat "$out"; fail "job ended $state"; }

must_contain "$out" "site-setup-ran"
must_contain "$out" "dtrain-run: job mlp-2x2 world 4 = data 2 x pipeline 2"
for r in 0 1 2 3; do
	line=$(grep -E "^dtrain-run: rank $r/4 " "$out" || true)
	[ -n "$line" ] || { cat "$out"; fail "no line from rank $r"; }
	# Documented order: the data-parallel index varies fastest.
	d=$((r % 2)) p=$((r / 2))
	echo "$line" | grep -qE "data $d/2 pipe $p/2 via pmix" ||
		fail "rank $r line has wrong grid coordinates or bootstrap: $line"
done
nodes=$(grep -E '^dtrain-run: rank ' "$out" | sed -E 's/.* node ([^ ]+) .*/\1/' | sort -u | tr '\n' ' ')
[ "$nodes" = "n1 n2 " ] || fail "ranks ran on nodes '$nodes', expected n1 and n2"
pass "4 ranks reported from nodes $nodes with grid coordinates"

expect_rc 0 $SUBMIT status "$id"
must_contain "$T/out" "$id"
must_contain "$T/out" "mlp-2x2"
expect_rc 0 $SUBMIT status
must_contain "$T/out" "$id"
expect_rc 0 $SUBMIT logs mlp-2x2
must_contain "$T/out" "dtrain-run: rank 3/4"
pass "status and logs of a finished job"
