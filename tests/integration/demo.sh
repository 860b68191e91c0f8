#!/usr/bin/env bash
# make demo's script stops at the first step that fails, with that step's
# own message and a hint, and submits nothing after it: here the local
# cluster cannot start (its port is taken), as on a machine where something
# else listens there.
. "$(dirname "$0")/lib.sh"

# a listener on a free port, which the cluster's slurmctld would need (it
# ends by itself after 60 s, should the test fail before it kills it)
python3 -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
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
