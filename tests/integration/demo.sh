#!/usr/bin/env bash
# make demo's script stops at the first step that fails, with that step's
# own message and a hint, and submits nothing after it: here the local
# cluster cannot start (its port is taken), as on a machine where something
# else listens there. And a Ctrl-C while it follows its job leaves the job
# running and says how to reach, follow and cancel it.
. "$(dirname "$0")/lib.sh"

# a listener on a free port, which the cluster's slurmctld would need (it
# ends by itself after 60 s, should the test fail before it kills it). The
# port is below the kernel's range for outgoing connections: one there may
# be some connection's own port when the cluster binds it later.
python3 -c 'import random, socket, time
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
s = socket.socket()
for _ in range(500):
    try:
        s.bind(("127.0.0.1", random.randrange(10000, low - 200))); break
    except OSError:
        pass
s.listen()
print(s.getsockname()[1], flush=True); time.sleep(60)' >"$T/port" 2>/dev/null &
holder=$!
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
port=$(cat "$T/port")
[[ $port =~ ^[0-9]+$ ]] || fail "no port from the listener: '$port'"

# No Slurm reachable: the demo starts its own cluster, on the taken port.
# Without SLURM_CONF, Slurm's commands read /etc/slurm/slurm.conf, else fail
# at once (a SLURM_CONF naming a missing file has them retry for 60 s).
if [ -e /etc/slurm/slurm.conf ]; then
	echo "skipped: /etc/slurm/slurm.conf exists, so the demo would use that cluster"
	kill $holder
	exit 77
fi
mkdir -p "$T/build"
ln -s "$DTRAIN_BIN" "$T/build/bin"
expect_rc 3 env -u SLURM_CONF DTRAIN_CLUSTER_PORT="$port" \
	bash "$DTRAIN_SOURCE_DIR/site/demo.sh" "$T/build"
must_contain "$T/out" "demo: no Slurm cluster reachable; starting the local one"
must_contain "$T/err" "cluster.sh: port $port is already in use"
must_contain "$T/err" "demo: failed: starting the local Slurm cluster (site/cluster.sh up --dir $T/build/cluster) (exit 3); hint:"
must_not_contain "$T/out" "submitted job"
must_not_contain "$T/out" "converting Fashion-MNIST" # the cluster comes first
must_not_contain "$T/err" "sbatch"
kill $holder
pass "the cluster's own message, the failed step and a hint; exit 3 and nothing submitted"

# Ctrl-C while the demo follows its job: the job goes on, and the demo says
# so, with the export line of the cluster it started and how to follow or
# cancel the job (exit 130); then the job is cancelled and the cluster
# stopped. A base port of three free ones: the listener's, freed again.
port=$((port + 100))
cleanup() {
	env SLURM_CONF="$T/build/cluster/slurm.conf" "$DTRAIN_BIN/dtrain-submit" cancel --now "$id" >/dev/null 2>&1 || true
	bash "$DTRAIN_SOURCE_DIR/site/cluster.sh" down --dir "$T/build/cluster" >/dev/null 2>&1 || true
}
id=none
trap cleanup EXIT
# in a process group of its own, with SIGINT as at a terminal (a background
# job of a script starts with it ignored, which bash cannot trap)
python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL); os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' \
	env -u SLURM_CONF DTRAIN_CLUSTER_PORT="$port" bash "$DTRAIN_SOURCE_DIR/site/demo.sh" "$T/build" \
	>"$T/demo.out" 2>"$T/demo.err" &
demo=$!
for _ in $(seq 1200); do grep -q "^demo: submitted job" "$T/demo.out" && break; sleep 0.1; done
must_contain "$T/demo.out" "demo: to reach it from your shell: export SLURM_CONF=$T/build/cluster/slurm.conf"
id=$(sed -n 's/^demo: submitted job \([0-9]*\) .*/\1/p' "$T/demo.out")
[ -n "$id" ] || { cat "$T/demo.out" "$T/demo.err"; fail "the demo submitted no job"; }
sleep 1
kill -INT -- -"$demo"
rc=0
wait "$demo" || rc=$?
[ "$rc" -eq 130 ] || { cat "$T/demo.out" "$T/demo.err"; fail "the interrupted demo exited $rc, not 130"; }
must_contain "$T/demo.err" "demo: interrupted; job $id goes on"
must_contain "$T/demo.err" "export SLURM_CONF=$T/build/cluster/slurm.conf"
must_contain "$T/demo.err" "dtrain-submit cancel $id"
must_not_contain "$T/demo.out" "ended: RUNNING"
state=$(SLURM_CONF="$T/build/cluster/slurm.conf" squeue -h -j "$id" -o %T)
case "$state" in RUNNING | PENDING | CONFIGURING | COMPLETING) ;; *) fail "job $id is $state after the Ctrl-C, not running on" ;; esac
pass "Ctrl-C: the demo leaves job $id $state, says so with the export line and the cancel command (exit 130)"
