#!/usr/bin/env bash
# Runs every test of both builds: unit and integration tests (the latter on
# the local Slurm cluster that the ctest fixture starts and stops), first in
# the normal build, then in the AddressSanitizer + UBSan build (all but the
# 10-epoch accuracy run, which the normal build already did).
# Usage: tests/run-tests.sh BUILD_DIR ASAN_BUILD_DIR
set -uo pipefail

build=${1:?usage: run-tests.sh BUILD_DIR ASAN_BUILD_DIR}
asan=${2:?usage: run-tests.sh BUILD_DIR ASAN_BUILD_DIR}
rc=0

echo "== dtrain tests: $build"
(cd "$build" && ctest --output-on-failure --timeout 600) || rc=1
echo "== dtrain tests under AddressSanitizer + UBSan: $asan"
(cd "$asan" && ctest --output-on-failure --timeout 900 --label-exclude accuracy) || rc=1
[ $rc -eq 0 ] && echo "== all dtrain tests passed" || echo "== some dtrain tests FAILED"
exit $rc
