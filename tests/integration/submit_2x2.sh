#!/usr/bin/env bash
# The example 2-node x 2-task job on the local cluster: submitted with
# dtrain-submit, run with srun --mpi=pmix; every rank reports its place in the
# data x pipeline grid from both nodes, the job trains (a short run on a
# synthetic set), writes its metrics, and status shows its progress.
# Then the same job without a site file (so without the site's
# OMPI_MCA_mpi_yield_when_idle): the ranks count themselves on the machine
# (the two nodes are one), and Open MPI yields when they outnumber its CPUs.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)

"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 2000 --features 784 --classes 10 >/dev/null ||
	fail "dtrain-data synthetic"
submit() {
	expect_rc 0 $SUBMIT "$DTRAIN_SOURCE_DIR/jobs/fashion-mnist-2x2.json" --site "$site" \
		--set data.train="$T/syn.h5" --set data.test="$T/syn.h5" --set train.epochs=2 --set train.log_every=5 "$@"
	id=$(cat "$T/out")
	[[ "$id" =~ ^[0-9]+$ ]] || fail "submit printed '$id', not a job id"
}
submit
pass "submitted job $id"

dir=$(run_dir_of fashion-mnist-2x2)
for f in spec.json job.sh job_id; do
	[ -s "$dir/$f" ] || fail "run dir lacks $f"
done
[ "$(cat "$dir/job_id")" = "$id" ] || fail "job_id file does not match"
bash -n "$dir/job.sh" || fail "bash -n rejects job.sh"
must_contain "$dir/spec.json" '"run_dir": "'"$dir"'"'

wait_state "$id" 180 COMPLETED FAILED CANCELLED TIMEOUT ENDED
out=$dir/slurm-$id.out
[ -f "$out" ] || fail "no Slurm output $out"
state=$(job_state "$id")
# Known, rare (about 1 in 100 runs, sanitizer build only): a rank dies
# during MPI/PMIx start-up with a call through a null pointer and no stack
# ("SEGV ... pc 0x000000000000"), before any dtrain-run line. Not yet
# understood (see the closing notes); one resubmission, which must then
# pass every check below, keeps it from hiding anything else.
if [ "$state" = FAILED ] && grep -q 'SEGV on unknown address 0x000000000000 (pc 0x000000000000' "$out" &&
	! grep -q '^dtrain-run: ' "$out"; then
	echo "note: rank crashed in start-up under ASan (known issue); submitting once more"
	submit --set run_dir="$T/rerun"
	dir=$T/rerun
	wait_state "$id" 180 COMPLETED FAILED CANCELLED TIMEOUT ENDED
	out=$dir/slurm-$id.out
	state=$(job_state "$id")
fi
[ "$state" = COMPLETED ] || [ "$state" = ENDED ] || { cat "$out"; fail "job ended $state"; }

must_contain "$out" "site-setup-ran"
must_contain "$out" "dtrain-run: job fashion-mnist-2x2 world 4 = data 2 x pipeline 2"
for r in 0 1 2 3; do
	line=$(grep -E "^dtrain-run: rank $r/4 " "$out" || true)
	[ -n "$line" ] || { cat "$out"; fail "no line from rank $r"; }
	# Documented order: the data-parallel index varies fastest.
	d=$((r % 2)) p=$((r / 2))
	echo "$line" | grep -qE "data $d/2 pipe $p/2 via pmix" ||
		fail "rank $r line has wrong grid coordinates or bootstrap: $line"
	grep -qE "^dtrain-run: rank $r stage $p/2 " "$out" || { cat "$out"; fail "no summary from rank $r"; }
done
nodes=$(grep -E '^dtrain-run: rank [0-9]+/4 ' "$out" | sed -E 's/.* node ([^ ]+) .*/\1/' | sort -u | tr '\n' ' ')
[ "$nodes" = "n1 n2 " ] || fail "ranks ran on nodes '$nodes', expected n1 and n2"
pass "4 ranks reported from nodes $nodes with grid coordinates"

# 2000 samples / 64 = 32 steps per epoch, 2 epochs
must_contain "$out" "dtrain-run: step 64/64 epoch 2/2 loss"
must_contain "$out" "dtrain-run: epoch 2/2 test loss"
must_contain "$out" "dtrain-run: done: 64 steps"
[ "$(grep -c '"event":"step"' "$dir/metrics.jsonl")" -eq 13 ] || { cat "$dir/metrics.jsonl"; fail "metrics.jsonl: expected 13 step lines"; }
[ "$(grep -c '"event":"eval"' "$dir/metrics.jsonl")" -eq 2 ] || fail "metrics.jsonl: expected 2 eval lines"
pass "trained 64 steps, evaluated twice, metrics written"

expect_rc 0 $SUBMIT status "$id"
must_contain "$T/out" "$id"
must_contain "$T/out" "fashion-mnist-2x2"
must_contain "$T/out" "64/64"
expect_rc 0 $SUBMIT status
must_contain "$T/out" "$id"
must_contain "$T/out" "64/64"
expect_rc 0 $SUBMIT logs fashion-mnist-2x2
must_contain "$T/out" "dtrain-run: rank 3/4"
pass "status shows the progress; logs of a finished job"

# --- no site file: the ranks see they share one machine ---
cpus=$(getconf _NPROCESSORS_ONLN)
mode=spin
((4 > cpus)) && mode=yield
expect_rc 0 env -u OMPI_MCA_mpi_yield_when_idle $SUBMIT "$DTRAIN_SOURCE_DIR/jobs/fashion-mnist-2x2.json" \
	--set data.train="$T/syn.h5" --set data.test="$T/syn.h5" --set train.epochs=1 --set run_dir="$T/nosite"
id=$(cat "$T/out")
wait_state "$id" 180 COMPLETED FAILED CANCELLED TIMEOUT ENDED
out=$T/nosite/slurm-$id.out
must_not_contain "$out" "mpi_yield_when_idle" # the batch script sets nothing
state=$(job_state "$id")
[ "$state" = COMPLETED ] || [ "$state" = ENDED ] || { cat "$out"; fail "job without a site file ended $state"; }
for r in 0 1 2 3; do
	line=$(grep -E "^dtrain-run: rank $r/4 " "$out" || true)
	echo "$line" | grep -qE " machine 4 ranks $cpus cpus mpi_wait $mode\$" ||
		{ cat "$out"; fail "rank $r: expected 'machine 4 ranks $cpus cpus mpi_wait $mode': $line"; }
done
pass "without a site file: 4 ranks on one machine of $cpus CPUs, Open MPI told to $mode"
