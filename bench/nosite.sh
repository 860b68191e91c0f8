#!/usr/bin/env bash
# bench/nosite.sh - the example 2 x 2 job (jobs/fashion-mnist-2x2.json: 2 nodes
# x 2 tasks, data 2 x pipeline 2, on Fashion-MNIST) on the local Slurm cluster,
# submitted with dtrain-submit and no site file, against the same job with the
# example site file site/site.json, measured in the same run. The cluster's two
# nodes are one machine: without the site's env (OMPI_MCA_mpi_yield_when_idle)
# dtrain-run must see by itself that its 4 ranks share the machine's CPUs.
# Rounds alternate the two; each figure is the median of its rounds' samples/s
# over the whole training (steps x global batch / the metrics' end seconds).
#
# Starts its own cluster (site/cluster.sh, in a private directory, on ports
# PORT..PORT+2) and stops it again, whatever happens. Prints one line per run
# on stderr and writes one JSON object to OUT_JSON. See --help.
set -euo pipefail

readonly ME=bench/nosite.sh
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly src
readonly JOB_TIMEOUT_S=600 # bound on each job, from submission to its end

usage() {
	cat <<EOF
usage: $ME [--runs N] [--epochs E] [--port PORT] BUILD_DIR OUT_JSON

Trains jobs/fashion-mnist-2x2.json for E epochs on a local Slurm cluster that
this script starts and stops, N times without a site file and N times with
site/site.json, alternating, and writes the median samples/s of each and their
ratio (without / with) to OUT_JSON.

  BUILD_DIR     a dtrain build: BUILD_DIR/bin/dtrain-run, dtrain-submit, dtrain-data
  OUT_JSON      where to write the results (one JSON object)
  --runs N      rounds (default 3; 1..20)
  --epochs E    epochs per job (default 3; 1..10)
  --port PORT   the cluster's slurmctld port; slurmd n1, n2 use PORT+1, PORT+2
                (default 7500, or \$DTRAIN_BENCH_NOSITE_PORT)
  -h, --help    this text

Needs root (the cluster's daemons run as root), Slurm with PMIx and the
Fashion-MNIST package (site/install-deps.sh). About 30 s a round.
Exit codes: 0 ok, 1 failure (the message names what failed), 2 usage error.
EOF
}

say() { echo "$ME: $*" >&2; }
die() { say "$*"; exit 1; }
usage_err() { say "$*"; echo "usage: $ME [--runs N] [--epochs E] [--port PORT] BUILD_DIR OUT_JSON  (--help for more)" >&2; exit 2; }

# --- arguments --------------------------------------------------------------------

runs=3 epochs=3
port=${DTRAIN_BENCH_NOSITE_PORT:-7500}
args=()
while (($#)); do
	case $1 in
	-h | --help) usage; exit 0 ;;
	--runs | --epochs | --port)
		(($# >= 2)) || usage_err "$1: missing value"
		declare "${1#--}=$2"
		shift ;;
	--runs=* | --epochs=* | --port=*) v=${1#--}; declare "${v%%=*}=${v#*=}" ;;
	--) shift; args+=("$@"); break ;;
	-*) usage_err "unknown option '$1'" ;;
	*) args+=("$1") ;;
	esac
	shift
done
((${#args[@]} == 2)) || usage_err "expected BUILD_DIR and OUT_JSON, got ${#args[@]} argument(s)"
{ [[ $runs =~ ^[0-9]+$ ]] && ((10#$runs >= 1 && 10#$runs <= 20)); } || usage_err "--runs: '$runs' is not a whole number from 1 to 20"
{ [[ $epochs =~ ^[0-9]+$ ]] && ((10#$epochs >= 1 && 10#$epochs <= 10)); } || usage_err "--epochs: '$epochs' is not a whole number from 1 to 10"
{ [[ $port =~ ^[0-9]+$ ]] && ((10#$port >= 1024 && 10#$port <= 65533)); } || usage_err "--port: '$port' is not a port from 1024 to 65533"
runs=$((10#$runs)) epochs=$((10#$epochs)) port=$((10#$port))

[[ -d ${args[0]} ]] || die "BUILD_DIR '${args[0]}' is not a directory"
build=$(cd "${args[0]}" && pwd)
bin=$build/bin
for p in dtrain-run dtrain-submit dtrain-data; do
	[[ -x $bin/$p ]] || die "'$bin/$p' is missing or not executable; build first (make build)"
done
out=${args[1]}
[[ -d $(dirname -- "$out") ]] || die "OUT_JSON '$out': its directory does not exist"
[[ $(id -u) -eq 0 ]] || die "must run as root: the local cluster's daemons run as root"

# --- the cluster and the files: all under one private directory, gone at exit -----

# Neither a Slurm job's environment (srun would use its job) nor a user's
# choice of how Open MPI waits may leak into the jobs.
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM_|OMPI_MCA_)' || true)
unset OMP_NUM_THREADS DTRAIN_SITE
work=$(mktemp -d /tmp/dtrain-nosite-XXXXXX) || die "mktemp -d under /tmp failed"
export HOME=$work/home XDG_STATE_HOME=$work/state SLURM_CONF=$work/cluster/slurm.conf
mkdir -p "$HOME"
cluster_started=0

cluster() { DTRAIN_CLUSTER_PORT=$port bash "$src/site/cluster.sh" "$1" --dir "$work/cluster"; }

cleanup() {
	local rc=$?
	set +e
	if ((cluster_started)) && ! cluster down >>"$work/cluster.log" 2>&1; then
		say "could not stop the cluster in $work/cluster (see $work/cluster.log)"
		((rc)) || rc=1
	fi
	if ((rc == 0)); then rm -rf "$work"; else say "files kept in $work"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "starting a local Slurm cluster in $work/cluster (ports $port-$((port + 2)))"
cluster_started=1
cluster up >>"$work/cluster.log" 2>&1 || { cat "$work/cluster.log" >&2; die "the cluster did not start"; }

"$bin/dtrain-data" fashion-mnist "$work/data" 2>>"$work/data.log" ||
	{ cat "$work/data.log" >&2; die "dtrain-data fashion-mnist failed"; }
# the example site file, with its runs under $work
sed "s|\"runs_root\": *\"[^\"]*\"|\"runs_root\": \"$work/runs\"|" "$src/site/site.json" >"$work/site.json"
grep -q "\"runs_root\": \"$work/runs\"" "$work/site.json" || die "site/site.json: no runs_root to replace"

# run KIND ROUND [ARGS...]: submit, wait for the end, print samples/s and
# how rank 0's Open MPI waited (its line's mpi_wait).
run() {
	local kind=$1 i=$2 id dir=$work/$1-$2 end steps secs t mode
	shift 2
	id=$("$bin/dtrain-submit" "$src/jobs/fashion-mnist-2x2.json" --set run_dir="$dir" \
		--set data.train="$work/data/train.h5" --set data.test="$work/data/test.h5" \
		--set train.epochs="$epochs" "$@" 2>"$work/submit.err") ||
		{ cat "$work/submit.err" >&2; die "$kind round $i: dtrain-submit failed"; }
	for ((t = 0; t < JOB_TIMEOUT_S * 5; t++)); do
		[[ -z $(squeue -h -j "$id" -o %i 2>/dev/null) ]] && break
		sleep 0.2
	done
	[[ -z $(squeue -h -j "$id" -o %i 2>/dev/null) ]] || die "$kind round $i: job $id still runs after $JOB_TIMEOUT_S s"
	end=$(grep '"event":"end"' "$dir/metrics.jsonl" 2>/dev/null | tail -n 1) ||
		{ cat "$dir/slurm-$id.out" >&2; die "$kind round $i: job $id wrote no end event to $dir/metrics.jsonl"; }
	steps=$(sed -n 's/.*"step":\([0-9]*\).*/\1/p' <<<"$end")
	secs=$(sed -n 's/.*"seconds":\([0-9.]*\).*/\1/p' <<<"$end")
	mode=$(sed -n 's/^dtrain-run: rank 0\/4 .* mpi_wait \([a-z]*\)$/\1/p' "$dir/slurm-$id.out")
	awk -v n="$steps" -v s="$secs" -v m="${mode:-?}" 'BEGIN { printf "%.1f %s\n", n * 64 / s, m }' # global_batch 64
}

nosite=() site=()
for ((i = 1; i <= runs; i++)); do
	read -r v mode_nosite < <(run nosite "$i")
	[[ -n $v ]] || exit 1 # run said why
	nosite+=("$v")
	read -r v mode_site < <(run site "$i" --site "$work/site.json")
	[[ -n $v ]] || exit 1
	site+=("$v")
	say "round $i/$runs: samples/s without a site file ${nosite[-1]} (mpi_wait $mode_nosite), with site/site.json ${site[-1]} (mpi_wait $mode_site)"
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
m_nosite=$(median "${nosite[@]}")
m_site=$(median "${site[@]}")
ratio=$(awk -v a="$m_nosite" -v b="$m_site" 'BEGIN { printf "%.4f", a / b }')
say "median samples/s: without a site file $m_nosite, with site/site.json $m_site, ratio $ratio"
list() { local IFS=,; echo "$*"; }
printf '{"epochs": %d, "runs": %d, "cpus": %d, "nosite_samples_s": %s, "site_samples_s": %s, "ratio": %s, "nosite_mpi_wait": "%s", "site_mpi_wait": "%s", "nosite_rounds": [%s], "site_rounds": [%s]}\n' \
	"$epochs" "$runs" "$(getconf _NPROCESSORS_ONLN)" "$m_nosite" "$m_site" "$ratio" "$mode_nosite" "$mode_site" \
	"$(list "${nosite[@]}")" "$(list "${site[@]}")" >"$out"
