#!/usr/bin/env bash
# The fence after MPI_Init (runtime/world/bootstrap.c) under srun --mpi=pmix on 2
# nodes of the local cluster, where Slurm's PMIx server runs it: with rank 3
# (node n2) 1.5 s late out of MPI_Init, the ranks of n1 must not leave
# rt_mpi_init before it. (Under mpirun, pmix_share.sh checks the same.)
. "$(dirname "$0")/lib.sh"
: "${DTRAIN_BUILD_DIR:?needs the build directory}"
: "${SLURM_CONF:?needs the local cluster (the cluster fixture)}"
SHARE=$DTRAIN_BUILD_DIR/tests/pmix_share_main
unset SLURM_JOB_ID SLURM_JOBID

expect_rc 0 timeout 120 srun --mpi=pmix -p low -t 2 -N 2 --ntasks-per-node=2 -n 4 \
	--export=ALL,DTRAIN_FAULT_MPI_INIT=slow@1500:3 "$SHARE" 2 2
[ "$(grep -c ': ok$' "$T/out")" -eq 4 ] || { cat "$T/out" "$T/err"; fail "expected 4 ok lines"; }
must_contain "$T/err" "dtrain: test fault DTRAIN_FAULT_MPI_INIT: rank 3 slow by 1500 ms"
must_contain "$T/out" "rank 3 via pmix: world root 0, data group 1 root 2, pipe group 1 root 1: ok"
[ "$(grep -c 'rt_mpi_init returned at' "$T/err")" -eq 4 ] || { cat "$T/err"; fail "expected 4 'rt_mpi_init returned' lines"; }
spread=$(sed -n 's/^rank [0-9]*: rt_mpi_init returned at //p' "$T/err" | sort -g | sed -n '1p;$p' | paste -sd' ' | awk '{ print $2 - $1 }')
awk -v s="$spread" 'BEGIN { exit !(s < 0.75) }' || { cat "$T/err"; fail "ranks left rt_mpi_init ${spread} s apart under srun; rank 3 was 1.5 s late: the fence after MPI_Init did not hold the other node"; }
pass "srun --mpi=pmix, 2 nodes, a rank late out of MPI_Init: all leave rt_mpi_init with it (${spread} s apart)"
