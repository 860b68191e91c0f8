#!/usr/bin/env bash
# bench/startup.sh - startup time of a 2 x 2 job (parallel.data 2 x
# parallel.pipeline 2: 2 nodes x 2 tasks, 4 ranks) on the local Slurm cluster:
# the time from `srun --mpi=pmix` to the end of the first training step, against
# its peers measured in the same run: the floor of the launcher itself (`srun
# --mpi=pmix` of the same 4 tasks running /bin/true) and, where the build has
# dtrain-bench-allreduce, the floor of MPI (an MPI program's whole life, MPI_Init
# to MPI_Finalize, under the same srun). The main figures come
# from steps launched inside one allocation (as the batch script of
# dtrain-submit does); srun outside any allocation (a new job each time) is
# measured too. Rounds alternate dtrain and its peers, one warm-up round first.
#
# Starts its own cluster (site/cluster.sh, in a private directory, on ports
# PORT..PORT+2) and stops it again, whatever happens. Prints a table and writes
# one JSON object to OUT_JSON. See --help.
set -euo pipefail

readonly ME=bench/startup.sh
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly src
readonly STEP_TIMEOUT_S=120 # bound on every srun / salloc we run

usage() {
	cat <<EOF
usage: $ME [--runs N] [--port PORT] BUILD_DIR OUT_JSON

Measures the time from \`srun --mpi=pmix\` to the first completed training step
of a 2 x 2 dtrain job (2 nodes x 2 tasks, data 2 x pipeline 2, MLP 784-512-512-10,
synthetic data, max_steps 2) on a local Slurm cluster that this script starts
and stops, against floors measured in the same run:
  srun /bin/true   srun --mpi=pmix of the same 4 tasks running /bin/true
  srun date        the same, running \`date +%s.%N\`: when each task started
  srun MPI         the same, running BUILD_DIR/bin/dtrain-bench-allreduce --iters 1 1
                   (MPI_Init, one allreduce of 1 float, MPI_Finalize), if built
Every srun runs in one allocation (like the batch script of dtrain-submit);
dtrain and /bin/true are also run as standalone sruns (a new job each).
dtrain's first step is read from rank 0's metrics.jsonl (event first_step).

  BUILD_DIR    a dtrain build: BUILD_DIR/bin/dtrain-run, dtrain-submit, dtrain-data
  OUT_JSON     where to write the results (one JSON object)
  --runs N     timed rounds (default 5; 1..100), after one warm-up round
  --port PORT  the cluster's slurmctld port; slurmd n1, n2 use PORT+1, PORT+2
               (default 7400, or \$DTRAIN_BENCH_STARTUP_PORT)
  -h, --help   this text

Needs root (the cluster's daemons run as root) and Slurm with PMIx
(site/install-deps.sh). Takes about 20 s with 5 runs.
Exit codes: 0 ok, 1 failure (the message names what failed), 2 usage error.
EOF
}

say() { echo "$ME: $*" >&2; }
die() { say "$*"; exit 1; }
usage_err() { say "$*"; echo "usage: $ME [--runs N] [--port PORT] BUILD_DIR OUT_JSON  (--help for more)" >&2; exit 2; }

# --- arguments --------------------------------------------------------------------

runs=5
port=${DTRAIN_BENCH_STARTUP_PORT:-7400}
args=()
while (($#)); do
	case $1 in
	-h | --help) usage; exit 0 ;;
	--runs) (($# >= 2)) || usage_err "--runs: missing value"; runs=$2; shift ;;
	--runs=*) runs=${1#--runs=} ;;
	--port) (($# >= 2)) || usage_err "--port: missing value"; port=$2; shift ;;
	--port=*) port=${1#--port=} ;;
	--) shift; args+=("$@"); break ;;
	-*) usage_err "unknown option '$1'" ;;
	*) args+=("$1") ;;
	esac
	shift
done
((${#args[@]} == 2)) || usage_err "expected BUILD_DIR and OUT_JSON, got ${#args[@]} argument(s)"
{ [[ $runs =~ ^[0-9]+$ ]] && ((10#$runs >= 1 && 10#$runs <= 100)); } || usage_err "--runs: '$runs' is not a whole number from 1 to 100"
runs=$((10#$runs))
{ [[ $port =~ ^[0-9]+$ ]] && ((10#$port >= 1024 && 10#$port <= 65533)); } || usage_err "--port: '$port' is not a port from 1024 to 65533"
port=$((10#$port))

[[ -d ${args[0]} ]] || die "BUILD_DIR '${args[0]}' is not a directory"
build=$(cd "${args[0]}" && pwd)
bin=$build/bin
for p in dtrain-run dtrain-submit dtrain-data; do
	[[ -x $bin/$p ]] || die "'$bin/$p' is missing or not executable; build first (make build)"
done
out=${args[1]}
out_dir=$(dirname -- "$out")
[[ -d $out_dir && -w $out_dir ]] || die "OUT_JSON '$out': directory '$out_dir' does not exist or is not writable"
[[ ! -d $out ]] || die "OUT_JSON '$out' is a directory"
for c in srun salloc scancel squeue awk timeout; do
	command -v "$c" >/dev/null || die "'$c' not found; hint: run site/install-deps.sh"
done
[[ -f $src/site/cluster.sh ]] || die "'$src/site/cluster.sh' not found"
[[ $(id -u) -eq 0 ]] || die "must run as root: the local cluster's daemons run as root"

# --- the cluster and the files: all under one private directory, gone at exit -----

# A Slurm job's environment must not leak into ours: srun would use its job.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^SLURM_' || true)
# Short (socket paths under the cluster directory must fit in 108 bytes).
work=$(mktemp -d /tmp/dtrain-startup-XXXXXX) || die "mktemp -d under /tmp failed"
cdir=$work/cluster
clog=$work/cluster.log
cluster_started=0
job=""

cluster() { DTRAIN_CLUSTER_PORT=$port bash "$src/site/cluster.sh" "$1" --dir "$cdir"; }

cleanup() {
	local rc=$? keep=0
	set +e
	trap - INT TERM
	((rc == 130 || rc == 143)) && say "interrupted; stopping the cluster"
	[[ -n $job ]] && scancel "$job" >/dev/null 2>&1
	if ((cluster_started)); then
		if ! cluster down >>"$clog" 2>&1; then
			say "could not stop the cluster in $cdir (see $clog); stop it with: DTRAIN_CLUSTER_PORT=$port bash site/cluster.sh down --dir $cdir"
			keep=1
			((rc)) || rc=1
		fi
	fi
	if ((keep == 0 && (rc == 0 || rc == 130 || rc == 143))); then
		rm -rf "$work"
	else
		say "files kept in $work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

export SLURM_CONF=$cdir/slurm.conf
export OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1 # as site/site.json sets for jobs

say "starting a local Slurm cluster in $cdir (ports $port-$((port + 2)))"
cluster_started=1
crc=0
cluster up >>"$clog" 2>&1 || crc=$?
if ((crc)); then
	sed 's/^/  /' "$clog" >&2
	case $crc in
	3) die "site/cluster.sh up: a port in $port-$((port + 2)) is in use (exit 3); hint: --port PORT" ;;
	4) die "site/cluster.sh up: a prerequisite is missing (exit 4), see above" ;;
	*) die "site/cluster.sh up failed (exit $crc), see above" ;;
	esac
fi

data=$work/syn.h5
"$bin/dtrain-data" synthetic "$data" --samples 4096 --features 784 --classes 10 --seed 1 >"$work/data.out" 2>&1 ||
	{ cat "$work/data.out" >&2; die "dtrain-data synthetic '$data' failed"; }
cat >"$work/job.json" <<JSON
{ "name": "startup-bench",
  "model": { "inputs": 784, "hidden": [512, 512], "outputs": 10 },
  "data": { "train": "$data" },
  "resources": { "nodes": 2, "tasks_per_node": 2, "cpus_per_task": 1 },
  "parallel": { "data": 2, "pipeline": 2, "micro_batches": 2 },
  "train": { "max_steps": 2, "global_batch": 64, "log_every": 1 },
  "checkpoint": { "every_steps": 1000, "resume": "never" } }
JSON

# One allocation for the in-allocation steps, as sbatch gives the batch script.
readonly GEOM=(-N 2 --ntasks-per-node=2 -n 4 --cpus-per-task=1)
timeout --foreground -k 5 "$STEP_TIMEOUT_S" salloc --no-shell "${GEOM[@]}" -p low -t 30 -J dtrain-startup-bench \
	>"$work/salloc.out" 2>&1 || { cat "$work/salloc.out" >&2; die "salloc --no-shell ${GEOM[*]} failed"; }
job=$(sed -n 's/.*Granted job allocation \([0-9][0-9]*\).*/\1/p' "$work/salloc.out" | head -n 1)
[[ -n $job ]] || { cat "$work/salloc.out" >&2; die "salloc: no 'Granted job allocation' in its output"; }
state=$(squeue -h -j "$job" -o %T 2>/dev/null || true)
[[ $state == RUNNING ]] || die "allocation $job is '${state:-gone}', not RUNNING"

# --- measurements -------------------------------------------------------------------

now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", a - b }'; }

# step WHERE NAME CMD...: one srun of CMD on the 4 tasks, in our allocation
# (WHERE=alloc) or as a job of its own (WHERE=solo); sets T0 (just before
# srun) and WALL (srun's start to its exit); its output goes to $work/NAME.out
step() {
	local where=$1 name=$2 rc=0 t1 how=()
	shift 2
	[[ $where == alloc ]] && how=(--jobid="$job") || how=(-p low -t 5 -J dtrain-startup-solo)
	T0=$(now)
	timeout --foreground -k 5 "$STEP_TIMEOUT_S" srun "${how[@]}" --mpi=pmix "${GEOM[@]}" --kill-on-bad-exit=1 "$@" \
		>"$work/$name.out" 2>&1 || rc=$?
	t1=$(now)
	if ((rc)); then
		sed 's/^/  /' "$work/$name.out" >&2
		((rc == 124)) && die "srun ($where) of '$*' timed out after $STEP_TIMEOUT_S s"
		die "srun ($where) of '$*' failed (exit $rc), output above"
	fi
	WALL=$(sub "$t1" "$T0")
}

# dtrain WHERE NAME: one dtrain-run of the 2 x 2 spec in a fresh run dir; sets
# FIRST (srun -> first step done), SINCE (rt_train start -> first step done),
# STEP1 (step 1's time.step_s) and WALL
dtrain() {
	local where=$1 name=$2 rd=$work/runs/$2 m line unix
	"$bin/dtrain-submit" validate "$work/job.json" --set run_dir="$rd" >"$work/$name.json" 2>"$work/$name.err" ||
		{ cat "$work/$name.err" >&2; die "dtrain-submit validate of the 2 x 2 spec failed"; }
	mkdir -p "$rd"
	step "$where" "$name" "$bin/dtrain-run" --quiet "$work/$name.json"
	m=$rd/metrics.jsonl
	line=$(grep '"event":"first_step"' "$m" 2>/dev/null | head -n 1) ||
		die "run $name: no first_step event in '$m' (a dtrain-run older than this script? rebuild $build)"
	unix=$(sed -n 's/.*"unix_time":\([0-9.e+-]*\).*/\1/p' <<<"$line")
	SINCE=$(sed -n 's/.*"since_process_start_s":\([0-9.e+-]*\).*/\1/p' <<<"$line")
	STEP1=$(sed -n 's/.*"event":"step","step":1,.*"step_s":\([0-9.e+-]*\).*/\1/p' "$m" | head -n 1)
	[[ -n $unix && -n $SINCE && -n $STEP1 ]] || die "run $name: cannot read unix_time, since_process_start_s or step 1's step_s from '$m'"
	FIRST=$(sub "$unix" "$T0")
	awk -v f="$FIRST" 'BEGIN { exit !(f > 0 && f < 600) }' ||
		die "run $name: first step ${FIRST} s after srun: not plausible (clocks?)"
	rm -rf "$rd/checkpoints"
}

# task_exec NAME: from the output of `srun date +%s.%N`, the time from T0 to
# the last task's start
task_exec() {
	local n
	n=$(grep -c '^[0-9][0-9]*\.[0-9]*$' "$work/$1.out" || true)
	((n == 4)) || { cat "$work/$1.out" >&2; die "srun date: expected 4 times, got $n"; }
	sort -g "$work/$1.out" | tail -n 1 | awk -v t0="$T0" '{ printf "%.6f", $1 - t0 }'
}

# The MPI floor, where the build has it: an MPI program's whole life (MPI_Init,
# one allreduce of 1 float, MPI_Finalize), the same 4 tasks.
mpi_peer=""
[[ -x $bin/dtrain-bench-allreduce ]] && mpi_peer=$bin/dtrain-bench-allreduce
a_mpi=() a_first=() a_to_train=() a_setup=() a_step1=() a_wall=() a_true=() a_date=() a_exec=()
s_first=() s_true=()
load0=$(cut -d' ' -f1-3 /proc/loadavg)
say "warm-up round, then $runs timed rounds of: dtrain, srun /bin/true, srun date${mpi_peer:+, srun dtrain-bench-allreduce} (in one allocation); dtrain, srun /bin/true (standalone)"
[[ -n $mpi_peer ]] || say "note: no $bin/dtrain-bench-allreduce: the MPI floor is not measured"
for ((r = 0; r <= runs; r++)); do
	dtrain alloc "a$r"
	f=$FIRST since=$SINCE s1=$STEP1 w=$WALL
	step alloc "true$r" /bin/true
	tw=$WALL
	step alloc "date$r" date +%s.%N
	dw=$WALL
	ex=$(task_exec "date$r")
	mw=""
	if [[ -n $mpi_peer ]]; then
		step alloc "mpi$r" "$mpi_peer" --iters 1 1
		mw=$WALL
	fi
	dtrain solo "s$r"
	sf=$FIRST
	step solo "strue$r" /bin/true
	stw=$WALL
	((r > 0)) || continue # the warm-up round
	a_first+=("$f")
	a_to_train+=("$(awk -v f="$f" -v s="$since" 'BEGIN { printf "%.6f", f - s }')")
	a_setup+=("$(awk -v s="$since" -v s1="$s1" 'BEGIN { printf "%.6f", s - s1 }')")
	a_step1+=("$s1")
	a_wall+=("$w")
	a_true+=("$tw")
	a_date+=("$dw")
	a_exec+=("$ex")
	[[ -z $mw ]] || a_mpi+=("$mw")
	s_first+=("$sf")
	s_true+=("$stw")
	printf '%s: round %d/%d: dtrain first step %.3f s, srun /bin/true %.3f s; standalone %.3f s, %.3f s\n' \
		"$ME" "$r" "$runs" "$f" "$tw" "$sf" "$stw" >&2
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

# --- results ------------------------------------------------------------------------

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.6f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
jarr() { printf '%s\n' "$@" | awk 'BEGIN { printf "[" } { printf "%s%.6f", (NR > 1 ? "," : ""), $1 } END { printf "]" }'; }

m_first=$(median "${a_first[@]}")
m_true=$(median "${a_true[@]}")
m_to_train=$(median "${a_to_train[@]}")
m_exec=$(median "${a_exec[@]}")
m_setup=$(median "${a_setup[@]}")
m_step1=$(median "${a_step1[@]}")
m_date=$(median "${a_date[@]}")
m_wall=$(median "${a_wall[@]}")
ms_first=$(median "${s_first[@]}")
ms_true=$(median "${s_true[@]}")
m_mpi=null j_mpi=null ratio_mpi=null
if ((${#a_mpi[@]})); then
	m_mpi=$(median "${a_mpi[@]}") j_mpi=$(jarr "${a_mpi[@]}")
	ratio_mpi=$(awk -v f="$m_first" -v t="$m_mpi" 'BEGIN { printf "%.4f", f / t }')
fi
j_first=$(jarr "${a_first[@]}") j_true=$(jarr "${a_true[@]}") j_date=$(jarr "${a_date[@]}")
j_exec=$(jarr "${a_exec[@]}") j_to_train=$(jarr "${a_to_train[@]}") j_setup=$(jarr "${a_setup[@]}")
j_step1=$(jarr "${a_step1[@]}") js_first=$(jarr "${s_first[@]}") js_true=$(jarr "${s_true[@]}")
ncpu=$(getconf _NPROCESSORS_ONLN) # not nproc: it obeys OMP_NUM_THREADS
ratio=$(awk -v f="$m_first" -v t="$m_true" 'BEGIN { printf "%.4f", f / t }')
exec_to_train=$(awk -v a="$m_to_train" -v b="$m_exec" 'BEGIN { printf "%.6f", a - b }')

awk -v n="$runs" -v f="$m_first" -v t="$m_true" -v tt="$m_to_train" -v ex="$m_exec" -v su="$m_setup" \
	-v s1="$m_step1" -v dw="$m_date" -v w="$m_wall" -v sf="$ms_first" -v st="$ms_true" -v l0="$load0" -v l1="$load1" -v mpi="$m_mpi" 'BEGIN {
	printf "%-58s %9s %9s %7s\n", "startup, 2 x 2 job (4 ranks, 2 nodes), median of " n " runs", "dtrain", "peer", "ratio"
	printf "%-58s %8.3fs %8.3fs %7.2f   (peer: srun /bin/true, same 4 tasks, start to exit)\n", "srun --mpi=pmix -> first step done, in an allocation", f, t, f / t
	if (mpi != "null")
		printf "%-58s %8.3fs %8.3fs %7.2f   (peer: srun of an MPI program, start to exit: MPI_Init, 1-float allreduce, MPI_Finalize)\n", "  the same, against the MPI floor", f, mpi, f / mpi
	printf "%-58s %8.3fs %8.3fs %7.2f   (each srun allocates a job of its own; peer: srun /bin/true)\n", "  standalone srun (no allocation)", sf, st, sf / st
	printf "where dtrain'"'"'s time goes (in an allocation; medians, so the parts need not add up):\n"
	printf "  %-56s %8.3fs\n", "srun -> last of the 4 tasks exec'"'"'d (peer: srun date)", ex
	printf "  %-56s %8.3fs\n", "srun -> rt_train starts (launch, PMIx, MPI_Init, spec)", tt
	printf "  %-56s %8.3fs\n", "  of which after the tasks exec'"'"'d (difference, estimate)", tt - ex
	printf "  %-56s %8.3fs\n", "rt_train start -> training loop (data, model, ckpt init)", su
	printf "  %-56s %8.3fs\n", "step 1 (time.step_s of the step event)", s1
	printf "for reference: srun date %.3f s, whole dtrain srun (2 steps, final save, exit) %.3f s;\n", dw, w
	printf "load average %s before, %s after\n", l0, l1
}'

tmp=$out.tmp.$$
{
	printf '{"bench":"startup","runs":%d,"ranks":4,"layout":"2 nodes x 2 tasks, parallel.data 2 x parallel.pipeline 2",' "$runs"
	printf '"model":"mlp 784-512-512-10, 2 micro-batches, global_batch 64",'
	printf '"dtrain_first_step_s":%s,"dtrain_first_step_all":%s,' "$m_first" "$j_first"
	printf '"srun_true_s":%s,"srun_true_all":%s,' "$m_true" "$j_true"
	printf '"ratio":%s,' "$ratio"
	printf '"srun_date_s":%s,"srun_date_all":%s,' "$m_date" "$j_date"
	printf '"srun_mpi_s":%s,"srun_mpi_all":%s,"ratio_mpi":%s,' "$m_mpi" "$j_mpi" "$ratio_mpi"
	printf '"breakdown":{"srun_to_tasks_exec_s":%s,"srun_to_tasks_exec_all":%s,' "$m_exec" "$j_exec"
	printf '"srun_to_rt_train_s":%s,"srun_to_rt_train_all":%s,' "$m_to_train" "$j_to_train"
	printf '"tasks_exec_to_rt_train_s_estimate":%s,' "$exec_to_train"
	printf '"rt_train_setup_s":%s,"rt_train_setup_all":%s,' "$m_setup" "$j_setup"
	printf '"first_step_s":%s,"first_step_all":%s},' "$m_step1" "$j_step1"
	printf '"dtrain_srun_wall_s":%s,' "$m_wall"
	printf '"standalone":{"dtrain_first_step_s":%s,"dtrain_first_step_all":%s,' "$ms_first" "$js_first"
	printf '"srun_true_s":%s,"srun_true_all":%s},' "$ms_true" "$js_true"
	printf '"definitions":{'
	printf '"dtrain_first_step_s":"from just before srun --mpi=pmix (inside one salloc allocation) to the end of training step 1 on rank 0 (metrics first_step unix_time)",'
	printf '"srun_true_s":"srun --mpi=pmix of the same 4 tasks running /bin/true, start to exit, same allocation",'
	printf '"srun_mpi_s":"srun --mpi=pmix of dtrain-bench-allreduce --iters 1 1 (MPI_Init, allreduce of 1 float, MPI_Finalize), start to exit, same allocation; null without that program",'
	printf '"srun_to_tasks_exec_s":"peer run srun date +%%s.%%N: srun start to the latest task start time",'
	printf '"srun_to_rt_train_s":"first_step unix_time - since_process_start_s - srun start: launch, exec, PMIx bootstrap, MPI_Init, spec load, communicators, barriers",'
	printf '"tasks_exec_to_rt_train_s_estimate":"srun_to_rt_train_s - srun_to_tasks_exec_s (medians of different runs)",'
	printf '"rt_train_setup_s":"since_process_start_s - step 1 time.step_s: data open, model and optimizer init, checkpoint init",'
	printf '"first_step_s":"time.step_s of the step-1 event",'
	printf '"standalone":"srun outside any allocation: each creates a job of its own"},'
	printf '"host":{"nproc":%d,"loadavg_before":"%s","loadavg_after":"%s"}}\n' "$ncpu" "$load0" "$load1"
} >"$tmp" || { rm -f "$tmp"; die "cannot write '$tmp'"; }
if command -v jq >/dev/null && ! jq -e . "$tmp" >/dev/null 2>&1; then
	mv -f "$tmp" "$work/bad.json"
	die "internal error: the JSON written is not valid (kept as $work/bad.json)"
fi
mv -f "$tmp" "$out" || { rm -f "$tmp"; die "cannot write '$out'"; }
say "wrote $out"
