#!/usr/bin/env bash
# rt_pmix_share hands each group root's blob to exactly its group's members:
# data 2 x pipeline 2 under mpirun (PMIx: puts, one fence, gets), the same
# with the MPI_Bcast fallback forced, and a singleton (no PMIx: MPI_Bcast).
# Also: with PMIx, no rank leaves rt_mpi_init while another is still in
# MPI_Init (runtime/world/bootstrap.c, fence_after_mpi_init).
. "$(dirname "$0")/lib.sh"
: "${DTRAIN_BUILD_DIR:?needs the build directory}"
SHARE=$DTRAIN_BUILD_DIR/tests/pmix_share_main
MPI="mpirun --allow-run-as-root --oversubscribe -np"

# check_ranks N VIA: one ok line per rank, each via VIA, with its grid roots
# (rank = stage * 2 + replica: the data group of stage s has root 2s, the
# pipeline group of replica r has root r).
check_ranks() {
	local n=$1 via=$2 r
	[ "$(grep -c ': ok$' "$T/out")" -eq "$n" ] || { cat "$T/out" "$T/err"; fail "expected $n ok lines"; }
	for ((r = 0; r < n; r++)); do
		if [ "$n" -eq 4 ]; then
			must_contain "$T/out" "rank $r via $via: world root 0, data group $((r / 2)) root $((r / 2 * 2)), pipe group $((r % 2)) root $((r % 2)): ok"
		else
			must_contain "$T/out" "rank $r via $via: world root 0, data group 0 root 0, pipe group 0 root 0: ok"
		fi
	done
}

expect_rc 0 timeout 120 $MPI 4 "$SHARE" 2 2
check_ranks 4 pmix
pass "data 2 x pipeline 2 under mpirun: every rank got its roots' blobs over PMIx (one fence)"

# No rank leaves rt_mpi_init before every rank is out of MPI_Init (the
# PMIx fence after it): rank 3 made 1.5 s late there, the others wait for it.
expect_rc 0 timeout 120 env DTRAIN_FAULT_MPI_INIT=slow@1500:3 $MPI 4 "$SHARE" 2 2
check_ranks 4 pmix
must_contain "$T/err" "dtrain: test fault DTRAIN_FAULT_MPI_INIT: rank 3 slow by 1500 ms"
[ "$(grep -c 'test fault' "$T/err")" -eq 1 ] || { cat "$T/err"; fail "the fault should make rank 3 alone late"; }
[ "$(grep -c 'rt_mpi_init returned at' "$T/err")" -eq 4 ] || { cat "$T/err"; fail "expected 4 'rt_mpi_init returned' lines"; }
spread=$(sed -n 's/^rank [0-9]*: rt_mpi_init returned at //p' "$T/err" | sort -g | sed -n '1p;$p' | paste -sd' ' | awk '{ print $2 - $1 }')
awk -v s="$spread" 'BEGIN { exit !(s < 0.75) }' || { cat "$T/err"; fail "ranks left rt_mpi_init ${spread} s apart; rank 3 was 1.5 s late: the fence after MPI_Init did not hold them"; }
pass "a rank late out of MPI_Init: the others leave rt_mpi_init with it (${spread} s apart)"

expect_rc 0 timeout 120 $MPI 4 "$SHARE" 2 2 --mpi
check_ranks 4 mpi
pass "data 2 x pipeline 2 under mpirun, MPI_Bcast fallback forced"

expect_rc 0 solo timeout 60 env -u PMIX_NAMESPACE "$SHARE" 1 1
check_ranks 1 mpi
pass "singleton: the MPI_Bcast fallback"

# a grid that does not fit the world fails on every rank, without a hang
expect_rc 1 timeout 60 $MPI 2 "$SHARE" 2 2
must_contain "$T/err" "world size 2 does not match"
pass "a wrong grid fails, no hang"
