#!/usr/bin/env bash
# The Fashion-MNIST example as a new user runs it: convert the data with
# dtrain-data, submit jobs/fashion-mnist-2x2.json (2 data x 2 pipeline ranks
# on 2 nodes, 10 epochs) to the local cluster, and reach the accuracy of the
# data set's own MLP benchmarks (0.877-0.890): at least 0.89 on the test set;
# so does the same spec in bf16 (train.precision, issue #33), submitted
# beside it.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)

"$DTRAIN_BIN/dtrain-data" fashion-mnist "$T/data" >"$T/convert.out" 2>&1 || { cat "$T/convert.out"; fail "conversion"; }
cd "$T" # the spec's data paths are relative: build/data/fashion-mnist/...
mkdir -p build/data && ln -s "$T/data" build/data/fashion-mnist
expect_rc 0 $SUBMIT "$DTRAIN_SOURCE_DIR/jobs/fashion-mnist-2x2.json" --site "$site"
id=$(cat "$T/out")
expect_rc 0 $SUBMIT "$DTRAIN_SOURCE_DIR/jobs/fashion-mnist-2x2.json" --site "$site" \
	--set name=bf16-fashion-mnist --set train.precision=bf16
id16=$(cat "$T/out")
# accuracy NAME ID: job ID's test accuracy after its 10th epoch, at least 0.89
accuracy() {
	local out a
	wait_state "$2" 900 COMPLETED FAILED CANCELLED TIMEOUT ENDED
	out=$(run_dir_of "$1")/slurm-$2.out
	grep -E "^dtrain-run: (epoch|done)" "$out" >&2 || { cat "$out" >&2; fail "$1: no evaluation lines"; }
	a=$(sed -n 's/^dtrain-run: epoch 10\/10 test loss [0-9.]* accuracy \([0-9.]*\)$/\1/p' "$out")
	[ -n "$a" ] || { cat "$out" >&2; fail "$1: no final test accuracy"; }
	awk -v a="$a" 'BEGIN { exit !(a >= 0.89) }' || fail "$1: test accuracy $a < 0.89"
	echo "$a"
}
acc=$(accuracy fashion-mnist-2x2 "$id")
acc16=$(accuracy bf16-fashion-mnist "$id16")
grep -q "device cpu (bf16 products" "$(run_dir_of bf16-fashion-mnist)/slurm-$id16.out" || fail "the bf16 job does not say it runs in bf16"
pass "Fashion-MNIST 2x2 reached test accuracy $acc ($acc16 in bf16)"
