#!/usr/bin/env bash
# site/cluster.sh - a throwaway but real Slurm cluster on this host: dtrain's test bed
# and the default target of `make demo`.
#
# What runs, as root, every file under DIR (default <repo>/build/cluster):
#   munged        our own: own key, socket, seed, log and pid file; never the system one
#   slurmctld     cluster "dtrain-local", state in DIR/ctld: started clean (-c) when `up`
#                 makes the cluster, with its state kept when `up` restarts it
#   slurmd n1,n2  two "nodes" of CPUs=4 each on this host (config_overrides), own ports
# Partitions `low` (default, PriorityTier=1) and `high` (PriorityTier=10) share both
# nodes; a `high` job requeues the `low` jobs holding the CPUs it needs.
# Nothing under /etc/slurm or /etc/munge is read or written.
#
# Two "nodes" on one host share /tmp and /dev/shm, where files named by host + job +
# local rank collide. Both fixes were checked with 2-node MPI steps; neither needs a
# mount namespace, so the cluster also runs where `unshare` is refused (containers):
# - /tmp: the pmix plugin's <TmpFS>/spmix_appdir_<uid>_<job>.<step> ("File exists" on
#   the second node with TmpFS=/tmp). Slurm expands %n in TmpFS (slurm_get_tmp_fs), so
#   TmpFS=DIR/tmp/%n is per node. /tmp stays shared: jobs see the host's files and DIR
#   may live under /tmp.
# - /dev/shm: Open MPI's shared-memory files, vader_segment.<host>.<job>.<local rank>
#   (SIGSEGV with 2 ranks on each node) and osc_sm.<host>.<job>.<cid>... (dtrain's
#   shared gradients, MPI_Win_allocate_shared). Slurm's TaskProlog (DIR/task-prolog)
#   tells every task Open MPI's place for them on its node: a directory of its own,
#   SHM/<node>, where SHM is /dev/shm/dtrain-<hash of DIR> (memory, as /dev/shm is),
#   or DIR/shm where /dev/shm is not writable.
#
# Layout: helpers on our daemons, then one function per command, then argument parsing.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly REPO
readonly NODES=(n1 n2)
readonly CTLD_PORT=${DTRAIN_CLUSTER_PORT:-16817} # slurmd n1, n2 listen on +1, +2
readonly WAIT_S=60                               # bound on each wait in `up`
readonly MAX_DIR_LEN=64 # DIR/spool/n1/stepd.slurm.pmix.<job>.<step> is a socket: 108 bytes
export PATH="$PATH:/usr/sbin:/sbin"

usage() {
  cat <<EOF
usage: site/cluster.sh up|down|status [--dir DIR]

  up      start munged, slurmctld, slurmd n1 and n2 from DIR (a no-op when they already
          run and are healthy), wait until both nodes are idle, then print one line on
          stdout: export SLURM_CONF=DIR/slurm.conf   (use: eval "\$(site/cluster.sh up)")
          When some daemons are gone (munged, slurmctld, a slurmd), it starts only
          those again and keeps every state: slurmctld recovers its queue and the
          jobs still running; a node starts from clean files, and a job requeued
          after losing it runs again. Only when that fails is the cluster made anew.
  down    cancel the cluster's jobs, stop the daemons named by DIR's pid files (TERM,
          then KILL after 10 s), remove stale pid files; succeeds when nothing runs
  status  list our daemons and the nodes' states
  --dir DIR   where all the cluster's files live (default: <repo>/build/cluster)

Ports: slurmctld $CTLD_PORT, slurmd n1/n2 $((CTLD_PORT + 1))/$((CTLD_PORT + 2)) (DTRAIN_CLUSTER_PORT moves them).
Exit codes:
  0  success; for status: all daemons run and both nodes respond
  1  failure: up could not start the cluster within ${WAIT_S} s (logs are shown),
     down could not stop a daemon, status found the cluster not (fully) up
  2  usage error
  3  up: a port we need is held by another process
  4  missing prerequisite: not root, a command missing, DIR path too long
EOF
}

log() { echo "cluster.sh: $*" >&2; }
die() { local rc=$1; shift; log "$*"; exit "$rc"; }

# --- our daemons, known only by their pid files --------------------------------

daemons() { printf '%s\n' munged slurmctld "${NODES[@]/#/slurmd-}"; }

# Print the pid of daemon $1 if its pid file names a live process started from DIR.
pid_of() {
  local f="$DIR/run/$1.pid" pid=""
  [[ -s $f ]] && { read -r pid <"$f" || true; }
  [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" || return 1
  # A reused pid would not carry our DIR on its command line.
  [[ $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) == *"$DIR/"* ]] || return 1
  echo "$pid"
}

# Daemons are reparented to pid 1, which may reap them late: a zombie counts as dead.
alive() { local st; st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [[ $st != Z ]]; }

# wait_gone PID TENTHS: true once PID is gone, false if it still runs after TENTHS/10 s.
wait_gone() { local i; for ((i = 0; i < $2; i++)); do alive "$1" || return 0; sleep 0.1; done; ! alive "$1"; }

stop_daemon() {
  local name=$1 pid
  if pid=$(pid_of "$name"); then
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone "$pid" 100; then
      log "$name (pid $pid) still runs 10 s after TERM; sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
      wait_gone "$pid" 50 || { log "$name (pid $pid) did not die"; return 1; }
    fi
    log "stopped $name (pid $pid)"
  fi
  rm -f "$DIR/run/$name.pid"
}

munge_ok() {
  munge -n --socket="$DIR/munge/munge.socket" 2>/dev/null |
    unmunge --socket="$DIR/munge/munge.socket" >/dev/null 2>&1
}
ctld_ok() { scontrol ping 2>/dev/null | grep -q 'is UP'; }

# "node state" lines, one per node (sinfo lists a node once per partition).
node_states() { sinfo -h -N -o '%N %T' 2>/dev/null | sort -u; }

# nodes_in REGEX: every node's state matches REGEX.
nodes_in() {
  local n states; states=$(node_states)
  for n in "${NODES[@]}"; do grep -qE "^$n ($1)\$" <<<"$states" || return 1; done
}

healthy() {
  local d
  for d in $(daemons); do pid_of "$d" >/dev/null || return 1; done
  [[ -x $DIR/task-prolog ]] || return 1
  for d in "${NODES[@]}"; do [[ -d $SHM/$d ]] || return 1; done
  munge_ok && ctld_ok && nodes_in 'idle|mixed|allocated|completing|planned'
}

show_logs() {
  local f
  for f in "$DIR"/log/*; do [[ -s $f ]] && { echo "---- tail $f"; tail -n 15 "$f"; } >&2; done
  return 0
}

# --- a node back --------------------------------------------------------------------
# A node whose slurmd was killed with its slurmstepds and tasks (a lost node) leaves
# files behind that fail the next step of the same id there, and a requeued job keeps
# its id and counts its steps from 0 again: the steps' sockets in the node's spool
# (the pmix plugin's stepd.slurm.pmix.<job>.<step>: "Cannot bind() UNIX socket ...
# Address already in use"), their pmix.<job>.<step>, hwloc_topo_<job>.<step>.xml and
# TmpFS spmix_appdir_<uid>_<job>.<step>, and Open MPI's shared-memory files of the
# tasks. A socket no process has bound (none in /proc/net/unix) is stale, and so are
# its step's files; a shared-memory file no process maps or holds open is stale.
# A slurmstepd that outlived its slurmd keeps its socket bound, and its files.

# in_use FILE: some process maps FILE or holds it open.
in_use() {
  grep -qsF " $1" /proc/[0-9]*/maps && return 0
  # not `find | grep -q`: find fails on fds that vanish, and pipefail with it
  [[ -n $(find /proc/[0-9]*/fd -lname "$1" -print -quit 2>/dev/null) ]]
}

clean_node() {
  local n=$1 f name step bound
  bound=$(awk 'NR > 1 && NF >= 8 { print $8 }' /proc/net/unix)
  for f in "$DIR/spool/$n"/*; do
    [[ -S $f ]] || continue
    grep -qxF "$f" <<<"$bound" && continue
    name=${f##*/}
    case $name in
      stepd.slurm.pmix.*) step=${name#stepd.slurm.pmix.} ;;
      "${n}_"*) step=${name#"${n}_"} ;;
      *) step="" ;;
    esac
    rm -f "$f"
    if [[ $step =~ ^[0-9]+\.[0-9a-z_]+$ ]]; then
      rm -rf "$DIR/spool/$n/pmix.$step" "$DIR/spool/$n/hwloc_topo_$step.xml" "$DIR/tmp/$n"/spmix_appdir_*_"$step"
    fi
    log "$n: removed the stale socket $name of a killed step"
  done
  for f in "$SHM/$n"/*; do
    [[ -f $f ]] || continue
    in_use "$f" && continue
    rm -f "$f" && log "$n: removed the stale shared-memory file ${f##*/}"
  done
}

any_daemon_runs() {
  local d
  for d in $(daemons); do pid_of "$d" >/dev/null && return 0; done
  return 1
}

all_slurmds_run() {
  local n
  for n in "${NODES[@]}"; do pid_of "slurmd-$n" >/dev/null || return 1; done
}

# The daemons but the nodes' answer: start each node whose slurmd is gone again,
# from clean files; the jobs in the queue stay (a job requeued after losing the node
# starts again once it is back).
repair_nodes() {
  local n
  for n in "${NODES[@]}"; do
    pid_of "slurmd-$n" >/dev/null && continue
    log "slurmd $n is not running: starting it again (a node back)"
    clean_node "$n"
    mkdir -p "$DIR/spool/$n" "$DIR/tmp/$n" "$SHM/$n" && chmod 1777 "$SHM/$n"
    launch_slurmd "$n"
  done
  [[ -x $DIR/task-prolog ]] || write_task_prolog
}

# --- up ---------------------------------------------------------------------------

check_prereqs() {
  local c
  [[ $(id -u) -eq 0 ]] || die 4 "must run as root (slurmd and our munged run as root)"
  for c in munged munge unmunge mungekey slurmctld slurmd sinfo scontrol squeue scancel ss tini setsid; do
    command -v "$c" >/dev/null || die 4 "'$c' not found; hint: run site/install-deps.sh"
  done
  ((${#DIR} <= MAX_DIR_LEN)) || die 4 "--dir '$DIR': longer than $MAX_DIR_LEN characters, socket paths under it would not fit; hint: pass a shorter --dir"
}

check_ports() {
  local p line
  for p in $(seq "$CTLD_PORT" $((CTLD_PORT + ${#NODES[@]}))); do
    line=$(ss -Hltnp "sport = :$p" 2>/dev/null || true)
    [[ -z $line ]] || die 3 "port $p is already in use by another process: $line; hint: stop it, or set DTRAIN_CLUSTER_PORT to another base port"
  done
}

write_conf() {
  local host; host=$(hostname)
  cat >"$DIR/slurm.conf" <<EOF
# Generated by site/cluster.sh up; rewritten on every start.
ClusterName=dtrain-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job may start again only this many seconds later (default 120).
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=5
StateSaveLocation=$DIR/ctld
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdSpoolDir=$DIR/spool/%n
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmdParameters=config_overrides
# Per-node TmpFS keeps the pmix plugin's spmix_appdir of the two nodes apart.
TmpFS=$DIR/tmp/%n
# Per-node Open MPI shared-memory files (the top of this script says why).
TaskProlog=$DIR/task-prolog
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmix
JobRequeue=1
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
KillWait=10
# Scheduler passes every second, not every 30/60 s: a requeued job restarts promptly.
SchedulerParameters=sched_interval=1,bf_interval=1
MinJobAge=300
ReturnToService=2
AccountingStorageType=accounting_storage/none
# No accounting daemon, but a line per job's end (and per requeue) with its
# times and nodes: what tests check a run's allocated time against.
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/jobcomp.txt
MailProg=/bin/true
NodeName=n[1-2] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$((CTLD_PORT + 1))-$((CTLD_PORT + 2))] CPUs=4 State=UNKNOWN
PartitionName=low Nodes=n[1-2] Default=YES PriorityTier=1 MaxTime=INFINITE State=UP
PartitionName=high Nodes=n[1-2] PriorityTier=10 MaxTime=INFINITE State=UP
EOF
}

# Runs before every task of every job step (slurmstepd, as the job's user); what
# it prints as "export NAME=VALUE" is in the task's environment. It overrides
# whatever the task inherited: srun passes the batch step's environment, set
# by this prolog on the batch script's node, to the tasks on every node.
write_task_prolog() {
  cat >"$DIR/task-prolog" <<EOF
#!/bin/sh
# Generated by site/cluster.sh up: Open MPI's shared-memory files per node.
d="$SHM/\$SLURMD_NODENAME"
echo "export OMPI_MCA_btl_vader_backing_directory=\$d"
echo "export OMPI_MCA_osc_sm_backing_directory=\$d"
EOF
  chmod 0755 "$DIR/task-prolog"
}

fail_up() {
  log "up failed: $*"; show_logs
  log "stopping what was started"; cmd_down >/dev/null 2>&1 || true
  exit 1
}

# wait_nodes S: true once every slurmd runs and both nodes answer, within S seconds.
wait_nodes() {
  local i
  for ((i = 0; i < $1 * 5; i++)); do healthy && return 0; sleep 0.2; done
  return 1
}

# wait_for WHAT CMD...: run CMD until it succeeds, for at most WAIT_S seconds.
wait_for() {
  local what=$1 i; shift
  for ((i = 0; i < WAIT_S * 5; i++)); do "$@" && return 0; sleep 0.2; done
  fail_up "$what not reached within $WAIT_S s"
}

# Daemons get none of our stdio (`$(cluster.sh up)` must not wait for them to close it)
# and not our lock.
launch() {
  local name=$1; shift
  "$@" </dev/null >>"$DIR/log/$name.out" 2>&1 9>&- || fail_up "$name did not start: $*"
}

# A node's slurmd, in the foreground under tini -s (a subreaper) in a session of
# its own. A job's orphans (srun leaves a child behind when it exits) go to the
# nearest subreaper above them, else to PID 1, and Slurm ends a job only once
# every process of its batch script's group is gone, zombies too: where PID 1
# does not reap them (a container's or a VM's own init), each job held its nodes
# about 3 s past its script's end. tini reaps them at once, as a real init does.
launch_slurmd() {
  local n=$1
  setsid tini -s -- slurmd -D -N "$n" -f "$DIR/slurm.conf" </dev/null >>"$DIR/log/slurmd-$n.out" 2>&1 9>&- &
  poll "$WAIT_S" pid_of "slurmd-$n" >/dev/null || fail_up "slurmd $n did not start (log: $DIR/log/slurmd-$n.log)"
}

# poll S CMD...: true once CMD succeeds, within S seconds (no clean-up on failure).
poll() {
  local s=$1 i; shift
  for ((i = 0; i < s * 5; i++)); do "$@" && return 0; sleep 0.2; done
  return 1
}

# A cluster that ran in DIR before, some of its daemons down: start again only
# those, keeping every state there is. munged with its key; slurmctld without -c,
# so that it recovers its queue and the jobs that still run from DIR/ctld
# (starting it clean would forget them: their steps killed, their logs silent);
# the nodes as repair_nodes does. True once all answer and both nodes respond.
restart_down() {
  local wait_s=10
  if ! pid_of munged >/dev/null || ! munge_ok; then
    stop_daemon munged || return 1
    log "munged is not answering: starting it again"
    munged --force --socket="$DIR/munge/munge.socket" --key-file="$DIR/munge/munge.key" \
      --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
      --seed-file="$DIR/munge/munged.seed" </dev/null >>"$DIR/log/munged.out" 2>&1 9>&- || return 1
    poll "$WAIT_S" munge_ok || return 1
  fi
  if ! pid_of slurmctld >/dev/null || ! ctld_ok; then
    stop_daemon slurmctld || return 1
    log "slurmctld is not answering: starting it again with its state (queue and running jobs kept)"
    slurmctld -f "$DIR/slurm.conf" </dev/null >>"$DIR/log/slurmctld.out" 2>&1 9>&- || return 1
    poll "$WAIT_S" ctld_ok || return 1
    wait_s=$WAIT_S
  fi
  all_slurmds_run || { repair_nodes; wait_s=$WAIT_S; }
  wait_nodes "$wait_s"
}

cmd_up() {
  local n t0=$SECONDS
  check_prereqs
  if healthy; then
    log "already up in $DIR"
    echo "export SLURM_CONF=$DIR/slurm.conf"
    return 0
  fi
  # a cluster some of whose daemons still run (after `down`, or a reboot,
  # none does: it is made anew, from a fresh slurm.conf)
  if [[ -s $DIR/slurm.conf && -s $DIR/munge/munge.key && -d $DIR/ctld ]] && any_daemon_runs; then
    if restart_down; then
      log "up again in $((SECONDS - t0)) s: $(node_states | tr '\n' ' ')"
      echo "export SLURM_CONF=$DIR/slurm.conf"
      return 0
    fi
    log "the cluster did not come back within its waits: restarting the whole cluster"
  fi
  log "(re)starting the cluster in $DIR"
  cmd_down || die 1 "could not stop the remains of an earlier cluster in $DIR"
  check_ports
  mkdir -p "$DIR"/{munge,ctld,run,log} "${NODES[@]/#/$DIR/spool/}" "${NODES[@]/#/$DIR/tmp/}"
  rm -rf "$SHM" && mkdir -p "${NODES[@]/#/$SHM/}" && chmod 1777 "$SHM" "${NODES[@]/#/$SHM/}" ||
    die 1 "'$SHM': cannot create the nodes' shared-memory directories"
  chmod 0755 "$DIR/munge" # the key file is 0400; the socket is for every local user
  [[ -s $DIR/munge/munge.key ]] || mungekey --create --keyfile="$DIR/munge/munge.key"
  chmod 0400 "$DIR/munge/munge.key"
  write_conf
  write_task_prolog

  log "starting munged"
  launch munged munged --force --socket="$DIR/munge/munge.socket" \
    --key-file="$DIR/munge/munge.key" --pid-file="$DIR/run/munged.pid" \
    --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
  wait_for "munge round trip" munge_ok
  log "starting slurmctld"
  launch slurmctld slurmctld -c -f "$DIR/slurm.conf"
  wait_for "slurmctld answering ping" ctld_ok
  for n in "${NODES[@]}"; do
    log "starting slurmd $n"
    launch_slurmd "$n"
  done
  wait_for "both nodes idle" nodes_in idle
  log "up in $((SECONDS - t0)) s: $(node_states | tr '\n' ' ')"
  echo "export SLURM_CONF=$DIR/slurm.conf"
}

# --- down -------------------------------------------------------------------------

cmd_down() {
  local d i rc=0
  # Jobs first, so that no slurmstepd or job process outlives its slurmd.
  if pid_of slurmctld >/dev/null && [[ -n $(squeue -h -o %i 2>/dev/null) ]]; then
    log "cancelling jobs"
    scancel --user=root 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break; sleep 0.2; done
  fi
  for d in $(daemons | tac); do stop_daemon "$d" || rc=1; done
  ((rc)) || rm -rf "$SHM"
  return "$rc"
}

# --- status -----------------------------------------------------------------------

cmd_status() {
  local d pid
  echo "cluster in $DIR"
  for d in $(daemons); do
    if pid=$(pid_of "$d"); then echo "  $d: running (pid $pid)"; else echo "  $d: stopped"; fi
  done
  if pid_of slurmctld >/dev/null; then echo "  nodes: $(node_states | tr '\n' ' ')"; fi
  if healthy; then echo "  healthy: export SLURM_CONF=$DIR/slurm.conf"; else echo "  not (fully) up"; return 1; fi
}

# --- arguments --------------------------------------------------------------------

cmd=""
DIR="$REPO/build/cluster"
while (($#)); do
  case $1 in
    up | down | status) [[ -z $cmd ]] || die 2 "one command only (got '$cmd' and '$1')"; cmd=$1 ;;
    --dir) (($# >= 2)) || die 2 "--dir: missing value"; DIR=$2; shift ;;
    --dir=*) DIR=${1#--dir=} ;;
    -h | --help) usage; exit 0 ;;
    *) log "unknown argument '$1'"; usage >&2; exit 2 ;;
  esac
  shift
done
[[ -n $cmd ]] || { usage >&2; exit 2; }
DIR=$(realpath -m -- "$DIR")
# Socket paths under DIR must fit in 108 bytes. A checkout deep in the file
# system gets a short alias: the files stay under DIR, every daemon and
# config names them through /tmp/dtrain-cluster-<hash of DIR> -> DIR.
if ((${#DIR} > MAX_DIR_LEN)); then
  mkdir -p "$DIR"
  alias_dir=/tmp/dtrain-cluster-$(printf '%s' "$DIR" | md5sum | cut -c1-12)
  [[ -L $alias_dir && $(readlink "$alias_dir") == "$DIR" ]] || ln -sfn "$DIR" "$alias_dir"
  DIR=$alias_dir
fi
readonly DIR
# the nodes' shared-memory directories: in memory where /dev/shm takes files
if [[ -d /dev/shm && -w /dev/shm ]]; then
  SHM=/dev/shm/dtrain-$(printf '%s' "$DIR" | md5sum | cut -c1-12)
else
  SHM=$DIR/shm
fi
readonly SHM
export SLURM_CONF="$DIR/slurm.conf"
if [[ $cmd != status ]]; then # tests may run `up` concurrently: one at a time per DIR
  mkdir -p "$DIR" && exec 9>"$DIR/lock"
  flock -w 120 9 || die 1 "'$DIR/lock': still held by another cluster.sh after 120 s"
fi

"cmd_$cmd"
