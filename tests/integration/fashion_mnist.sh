#!/usr/bin/env bash
# The Fashion-MNIST example as a new user runs it: convert the data with
# dtrain-data, submit jobs/fashion-mnist-2x2.json (2 data x 2 pipeline ranks
# on 2 nodes, 10 epochs) to the local cluster, and reach the accuracy of the
# data set's own MLP benchmarks (0.877-0.890): at least 0.89 on the test set.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)

"$DTRAIN_BIN/dtrain-data" fashion-mnist "$T/data" >"$T/convert.out" 2>&1 || { cat "$T/convert.out"; fail "conversion"; }
cd "$T" # the spec's data paths are relative: build/data/fashion-mnist/...
mkdir -p build/data && ln -s "$T/data" build/data/fashion-mnist
expect_rc 0 $SUBMIT "$DTRAIN_SOURCE_DIR/jobs/fashion-mnist-2x2.json" --site "$site"
id=$(cat "$T/out")
wait_state "$id" 900 COMPLETED FAILED CANCELLED TIMEOUT ENDED
out=$(run_dir_of fashion-mnist-2x2)/slurm-$id.out
grep -E "^dtrain-run: (epoch|done)" "$out" || { cat "$out"; fail "no evaluation lines"; }
acc=$(sed -n 's/^dtrain-run: epoch 10\/10 test loss [0-9.]* accuracy \([0-9.]*\)$/\1/p' "$out")
[ -n "$acc" ] || { cat "$out"; fail "no final test accuracy"; }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.89) }' || fail "test accuracy $acc < 0.89"
pass "Fashion-MNIST 2x2 reached test accuracy $acc"
