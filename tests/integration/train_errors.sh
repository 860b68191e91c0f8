#!/usr/bin/env bash
# dtrain-run's failures are clear and agreed by every rank (no hang): a loss
# that diverges names its step (exit 4); data that does not fit the spec, a
# missing data file, or a world that does not match the layout exit 3 with
# one message naming the file or the sizes; a rank out of memory in set-up
# exits 1 with one message naming what it was allocating, every rank
# ending normally (no MPI_Abort).
. "$(dirname "$0")/lib.sh"
RUN=$DTRAIN_BIN/dtrain-run

"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 500 --features 20 --classes 4 >/dev/null ||
	fail "dtrain-data synthetic"
cat >"$T/base.json" <<JSON
{ "name": "errs", "model": { "inputs": 20, "hidden": [16], "outputs": 4 },
  "data": { "train": "$T/syn.h5" }, "train": { "epochs": 1, "global_batch": 50 } }
JSON
# spec: what dtrain-run is given (its own checks are the subject here:
# dtrain-submit's check of the data, which runs the same, is left out)
spec() { $SUBMIT validate "$T/base.json" --no-data-check "$@" >"$T/s.json" 2>"$T/s.err" || { cat "$T/s.err"; fail "spec"; }; }
MPI="mpirun --allow-run-as-root --oversubscribe -np"

spec --set train.optimizer.lr=100 --set train.optimizer.momentum=0.99 --set train.epochs=20 --set resources.tasks_per_node=2 --set parallel.pipeline=2
expect_rc 4 timeout 120 $MPI 2 "$RUN" "$T/s.json"
grep -qE "dtrain-run: step [0-9]+: the (loss|gradient norm) is (NaN|infinite); training diverged" "$T/err" ||
	{ cat "$T/err"; fail "no divergence message naming the step"; }
[ "$(grep -c 'training diverged' "$T/err")" -eq 1 ] || { cat "$T/err"; fail "expected one divergence message"; }
grep -q ' loss [0-9.]*e+[0-9]* ' "$T/out" || { cat "$T/out"; fail "no large loss on the way to the divergence (test spec)"; }
grep -qE ' loss -?[0-9]{7,}' "$T/out" && { cat "$T/out"; fail "a large loss printed digit by digit"; }
pass "divergence: exit 4, one message naming the step; large losses in 4 significant digits"

spec --set model.inputs=21
expect_rc 3 solo timeout 60 "$RUN" "$T/s.json"
must_contain "$T/err" "$T/syn.h5: 20 features per sample but model.inputs is 21"
spec --set data.train="$T/none.h5" --set resources.tasks_per_node=2 --set parallel.data=2
expect_rc 3 timeout 60 $MPI 2 "$RUN" "$T/s.json"
must_contain "$T/err" "$T/none.h5"
[ "$(grep -c "$T/none.h5" "$T/err")" -eq 1 ] || { cat "$T/err"; fail "expected one report from one rank"; }
echo "not hdf5" >"$T/junk.h5"
spec --set data.train="$T/junk.h5"
expect_rc 3 solo timeout 60 "$RUN" "$T/s.json"
must_contain "$T/err" "$T/junk.h5"
# a global batch larger than the data set: refused by validation when the
# data is readable there (dtrain-run --check-data), else by dtrain-run at start
expect_rc 3 $SUBMIT validate "$T/base.json" --set train.global_batch=550
must_contain "$T/err" "base.json: data: train.global_batch: 550 is more than the 500 samples of $T/syn.h5"
spec --set train.global_batch=502 --set resources.tasks_per_node=2 --set parallel.data=2 --set data.train="$T/later.h5"
cp "$T/syn.h5" "$T/later.h5" # there for the ranks, not for the validation
expect_rc 3 timeout 60 $MPI 2 "$RUN" "$T/s.json"
must_contain "$T/err" "train.global_batch: 502 is more than the 500 samples of $T/later.h5"
[ "$(grep -c "global_batch: 502" "$T/err")" -eq 1 ] || { cat "$T/err"; fail "expected one report from one rank"; }
pass "bad data: exit 3 naming the file; a global batch larger than the data set refused"

# stage 1 holds a 30000 x 30000 layer: 6.7 GiB with its gradient, beyond
# the 3 GB every rank may allocate here (an address-space limit; under ASan,
# which reserves terabytes of address space, its allocator's own limit);
# stage 0 needs little
if grep -q '^DTRAIN_SANITIZE:BOOL=ON' "${DTRAIN_BUILD_DIR:?}/CMakeCache.txt"; then
	limit="export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1:max_allocation_size_mb=3000"
else
	limit="ulimit -v 3000000"
fi
spec --set 'model.hidden=[30000,30000]' --set resources.tasks_per_node=2 --set parallel.pipeline=2
expect_rc 1 timeout 120 bash -c "$limit && exec $MPI 2 $RUN $T/s.json"
must_contain "$T/err" "rank 1: stage 1: cannot allocate"
must_contain "$T/err" "parameters and their gradients"
[ "$(grep -c 'cannot allocate' "$T/err")" -eq 1 ] || { cat "$T/err"; fail "expected one report from one rank"; }
must_not_contain "$T/err" "out of memory while setting up" # the rank that did not fail says nothing
! grep -q "MPI_ABORT" "$T/out" "$T/err" || { cat "$T/err"; fail "out of memory in set-up aborted the job"; }
pass "out of memory in set-up: exit 1 naming the allocation, no abort"

spec --set resources.tasks_per_node=4 --set parallel.data=2 --set parallel.pipeline=2
expect_rc 3 timeout 60 $MPI 3 "$RUN" "$T/s.json"
must_contain "$T/err" "world size 3 does not match parallel.data x parallel.pipeline = 2 x 2 = 4"
pass "world size mismatch: exit 3"

# The batch script's deadline (DTRAIN_STOP_AT: the job's end less
# preemption.lead_seconds), for a step started again after the time-limit
# warning went by: dtrain-run saves and asks for a requeue as if warned.
spec --set train.epochs=100000 --set resources.tasks_per_node=2 --set parallel.data=2 --set run_dir="$T/deadline"
mkdir -p "$T/deadline"
expect_rc 75 env DTRAIN_STOP_AT=$(($(date +%s) + 2)) timeout 120 $MPI 2 "$RUN" "$T/s.json"
grep -q "^dtrain-run: the job's time limit is near (DTRAIN_STOP_AT): saving at step [0-9]*, then exiting for a requeue$" "$T/out" ||
	{ cat "$T/out" "$T/err"; fail "no deadline message"; }
step=$(sed -n "s/^dtrain-run: the job's time limit is near (DTRAIN_STOP_AT): saving at step \([0-9]*\),.*/\1/p" "$T/out")
"$DTRAIN_BIN/dtrain-ckpt" verify "$T/deadline/checkpoints/step-$(printf %08d "$step")" >/dev/null ||
	fail "no valid checkpoint of step $step"
pass "DTRAIN_STOP_AT passed: saved at step $step, exit 75"

# A rank alive but stuck outside MPI (DTRAIN_FAULT_SPLIT: rank 1 sleeps
# 10 minutes inside its part of a split step) while rank 0 waits for it in
# the node's barrier: both heartbeats are fresh and at the same step, and
# the wait counts tell (runtime/world/waits.h): rank 0's watchdog names
# rank 1 as the one that never reached the collective, and rank 1's says
# that it is the one late. Both watchdogs run out at about the same time
# and the first to fire ends the job, so either report may be the one.
spec --set train.epochs=3 --set resources.tasks_per_node=2 --set parallel.data=2 \
	--set parallel.grad_sync=split --set recovery.step_timeout_seconds=5 \
	--set recovery.timeout_seconds=10 --set run_dir="$T/deadlock"
mkdir -p "$T/deadlock"
expect_rc 5 env DTRAIN_FAULT_SPLIT=slow@600000:1 timeout 120 $MPI 2 "$RUN" "$T/s.json"
grep -qE "^dtrain-run: watchdog: (rank 0 on node [^ ]+ waited [0-9.]+ s in step [0-9]+ \(step; bound [0-9]+ s\); waiting for rank 1 on node [^ ]+: alive in step [0-9]+ \(step\) but in no wait on the others \([0-9]+ waits done; this rank is in its wait [0-9]+\): it never reached the collective the others wait in|rank 1 on node [^ ]+ waited [0-9.]+ s in step [0-9]+ \(step; bound [0-9]+ s\); this rank is in no wait while 1 rank at its step waits in one: it is the one late \(busy outside MPI\))" "$T/err" ||
	{ cat "$T/err"; fail "neither rank 0's watchdog names rank 1 nor rank 1's says it is the one late"; }
grep -q "watchdog: .*waiting for rank 0\|watchdog: rank 0 .*the one late" "$T/err" && { cat "$T/err"; fail "the watchdog blames rank 0"; }
pass "a rank stuck outside MPI while its peer waits in a collective: named by the watchdog (exit 5)"

# A NaN or an infinity in the features (a file written by another tool:
# dtrain-data refuses them) is named at its row and column, not taken for a
# diverging run: when the set is loaded whole at the start, and when rows
# are read at each step (DTRAIN_DATA_LOAD_ALL_BYTES=0 forces that).
HDF5_USE_FILE_LOCKING=FALSE /usr/bin/python3 - "$T/syn.h5" "$T/nan.h5" "$T/inf.h5" <<'PY' || fail "writing a NaN into a data set (/usr/bin/python3 with h5py)"
import shutil, sys, h5py
for out, row, val in ((sys.argv[2], 123, float("nan")), (sys.argv[3], 321, float("-inf"))):
    shutil.copy(sys.argv[1], out)
    with h5py.File(out, "r+") as f:
        f["features"][row, 4] = val
PY
spec --set data.train="$T/nan.h5"
expect_rc 3 solo timeout 60 "$RUN" "$T/s.json"
must_contain "$T/err" "$T/nan.h5: /features: row 123, column 4 is NaN: a data set holds finite values only"
must_contain "$T/err" "hint: dtrain-data info $T/nan.h5 checks every value"
must_not_contain "$T/err" "diverged"
spec --set data.train="$T/inf.h5" --set resources.tasks_per_node=2 --set parallel.pipeline=2
expect_rc 3 env DTRAIN_DATA_LOAD_ALL_BYTES=0 timeout 60 $MPI 2 "$RUN" "$T/s.json"
must_contain "$T/err" "$T/inf.h5: /features: row 321, column 4 is infinite"
[ "$(grep -c "row 321" "$T/err")" -eq 1 ] || { cat "$T/err"; fail "expected one report from one rank"; }
pass "NaN and infinite features named at their row and column (loaded whole, and read per step), not blamed on the learning rate"

# Links planted in a run dir (a shared file system) are not written through:
# metrics.jsonl (a warning, the run goes on) and checkpoints/ (refused: the
# saves and retention's deletes would go elsewhere).
spec --set run_dir="$T/planted" --set checkpoint.every_steps=2 --set train.max_steps=4
mkdir -p "$T/planted" "$T/victim-dir"
echo precious >"$T/victim"
echo keep >"$T/victim-dir/file"
ln -s "$T/victim" "$T/planted/metrics.jsonl"
ln -s "$T/victim-dir" "$T/planted/checkpoints"
expect_rc 3 solo timeout 60 "$RUN" "$T/s.json"
must_contain "$T/err" "$T/planted/metrics.jsonl: Too many levels of symbolic links (a symbolic link that dtrain did not make: remove it)"
must_contain "$T/err" "$T/planted/checkpoints: cannot create the checkpoint directory: Too many levels of symbolic links (a symbolic link that dtrain did not make: remove it)"
[ "$(cat "$T/victim")" = precious ] || fail "metrics written through a planted link"
[ "$(ls "$T/victim-dir")" = file ] || { ls -la "$T/victim-dir"; fail "the checkpoint dir's link was followed"; }
pass "links planted in the run dir (metrics.jsonl, checkpoints/): not written through, named"
