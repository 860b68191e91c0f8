#!/usr/bin/env bash
# Runs every test of both builds: unit and integration tests (the latter on
# the local Slurm cluster that the ctest fixture starts and stops), first in
# the normal build, then in the AddressSanitizer + UBSan build (all but the
# accuracy runs and the recovery runs, which the normal build already did:
# tests/integration/CMakeLists.txt says why).
# Tests run side by side, one more at once than the machine has cores
# (DTRAIN_TEST_JOBS overrides): the cluster tests in two chains, one on each
# of two local clusters (RESOURCE_LOCK), the others beside them, which fills
# the time a cluster test spends waiting on Slurm and its jobs' sleeps;
# tests/integration/CMakeLists.txt says which tests take two cores and which
# run alone.
# A test that cannot run here (the GPU tests on a machine without a GPU)
# exits 77: ctest counts it as skipped, which does not fail the run, and the
# summary names it.
# Usage: tests/run-tests.sh BUILD_DIR ASAN_BUILD_DIR
set -uo pipefail

build=${1:?usage: run-tests.sh BUILD_DIR ASAN_BUILD_DIR}
asan=${2:?usage: run-tests.sh BUILD_DIR ASAN_BUILD_DIR}
jobs=${DTRAIN_TEST_JOBS:-$(($(nproc) + 1))}
rc=0
log=$(mktemp "${TMPDIR:-/tmp}/dtrain-tests-XXXXXX")
trap 'rm -f "$log"' EXIT

echo "== dtrain tests: $build"
(cd "$build" && ctest --output-on-failure --timeout 600 -j "$jobs") 2>&1 | tee "$log" || rc=1
echo "== dtrain tests under AddressSanitizer + UBSan: $asan"
(cd "$asan" && ctest --output-on-failure --timeout 900 -j "$jobs" --label-exclude 'accuracy|recovery') 2>&1 | tee -a "$log" || rc=1

# ctest's summary lines: "	 16 - test_gpu_device (Skipped)"
skipped=$(sed -n 's/^[[:space:]]*[0-9][0-9]* - \(.*\) (Skipped)$/\1/p' "$log" | sort | uniq -c |
	  awk '{ printf "%s%s", sep, $2; sep = ", " }')
[ -n "$skipped" ] && echo "== skipped (cannot run here, e.g. no GPU): $skipped"
[ $rc -eq 0 ] && echo "== all dtrain tests passed${skipped:+, but for the skipped ones above}" ||
	echo "== some dtrain tests FAILED"
exit $rc
