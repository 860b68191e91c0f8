#!/usr/bin/env bash
# The sharded optimizer (parallel.optimizer "sharded") on real ranks
# (mpirun, no cluster needed), against the replicated one on the same
# layout:
#  - a GPT on 4 replicas x 1 stage and on 2 x 2 (its tied embedding across
#    the stages), and an MLP with SGD on 4 replicas without clipping,
#    whose last step leaves two replicas without rows, and whose output
#    layer of 3 rows has none for one replica:
#    the loss curves agree within 1e-6 relative over 50 steps, and so do
#    the final parameters and optimizer states (h5py reads model.h5,
#    whose optimizer state maps the replicas' pieces);
#  - each rank's optimizer state is a quarter of the replicated run's on
#    4 replicas (what dtrain-run reports), and each replica wrote its
#    own piece, optim-<stage>-<replica>.h5;
#  - the tied copies stay bitwise equal;
#  - a sharded 2x2 checkpoint resumes on 2x2 sharded bitwise, and on
#    4 x 1 sharded, 1 x 1 and 2 x 2 replicated within 1e-6 of the
#    uninterrupted run; a replicated checkpoint resumes sharded;
#  - an MLP on 3 replicas whose first layer is reduce-scattered in two
#    chunks (one cut inside a replica's rows) agrees with the replicated
#    run as above;
#  - "sharded" with grad_sync "shared" is refused, naming both keys.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3 # Debian's, with python3-h5py
TOL=1e-6            # same_curve's (lib.sh)

fortunes_gpt gpt
# 2002 rows in steps of 40: the last step's 2 rows leave 2 of 4 replicas
# without any, which still take part in every collective, in order; 3
# classes: the output layer's 3 rows leave a replica none of its rows
"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 2002 --features 64 --classes 3 >/dev/null ||
	fail "dtrain-data synthetic"
cat >"$T/mlp.json" <<JSON
{ "name": "mlp", "model": { "inputs": 64, "hidden": [128, 64], "outputs": 3 },
  "data": { "train": "$T/syn.h5" },
  "train": { "epochs": 1, "global_batch": 40, "log_every": 1,
             "optimizer": { "type": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 1e-4 } },
  "checkpoint": { "every_steps": 25, "keep": 5 } }
JSON

# run SPEC NAME DATA PIPE [--set KEY=VALUE...]: train $T/SPEC.json in
# $T/NAME, a micro-batch per stage
run() {
	local spec=$1 name=$2 d=$3 p=$4
	shift 4
	mpi_run "$spec" "$name" "$d" "$p" "$p" "$@"
}
sharded() { echo --set parallel.optimizer=sharded; }

# same_state A B STEP: every dataset of the two checkpoints' model.h5 (read
# through its virtual datasets by h5py) within 1e-6 of the largest value
same_state() {
	$PY - "$T/$1/checkpoints/step-$(printf %08d "$3")/model.h5" "$T/$2/checkpoints/step-$(printf %08d "$3")/model.h5" <<'PY' || fail "$1 vs $2: final state differs"
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
b.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
assert len(names) > 0 and any(n.startswith("optimizer/") for n in names), names
worst = 0.0
for n in names:
    x, y = a[n][()], b[n][()]
    assert x.shape == y.shape, (n, x.shape, y.shape)
    worst = max(worst, float(np.abs(x - y).max()) / max(float(np.abs(x).max()), 1e-30))
if worst > 1e-6:
    sys.exit("%d datasets, worst %.3g relative (> 1e-6)" % (len(names), worst))
print("  %d datasets within %.3g relative" % (len(names), worst))
PY
}

# optimizer_mib RUN: the largest optimizer state a rank of RUN reported
optimizer_mib() { sed -n 's/.* optimizer_mib \([0-9.]*\).*/\1/p' "$T/$1.out" | sort -g | tail -n 1; }

# --- 4 replicas x 1 stage: the same training, a quarter of the state ---
run gpt r41 4 1
run gpt s41 4 1 $(sharded)
same_curve r41 s41
same_state r41 s41 50
must_contain "$T/s41.out" "optimizer: sharded over the 4 replicas"
rep=$(optimizer_mib r41) shd=$(optimizer_mib s41)
awk -v r="$rep" -v s="$shd" 'BEGIN { q = s / r; exit !(q >= 0.24 && q <= 0.27) }' ||
	fail "optimizer state per rank: $shd MiB sharded, $rep MiB replicated: not a quarter"
echo "  optimizer state per rank: $shd MiB sharded, $rep MiB replicated"
for r in 0 1 2 3; do
	[ -f "$T/s41/checkpoints/step-00000050/optim-0-$r.h5" ] || fail "no optimizer piece of replica $r"
done
tied "$T/s41/checkpoints/step-00000050"
"$DTRAIN_BIN/dtrain-ckpt" verify "$T/s41/checkpoints/step-00000050" >/dev/null || fail "sharded checkpoint does not verify"
"$DTRAIN_BIN/dtrain-ckpt" inspect "$T/s41/checkpoints/step-00000050" >"$T/inspect.out" || fail "inspect"
must_contain "$T/inspect.out" "sharded: each stage's state in 4 pieces"
"$DTRAIN_BIN/dtrain-ckpt" export "$T/s41/checkpoints/step-00000050" "$T/export.h5" >/dev/null || fail "export"
h5diff "$T/export.h5" "$T/s41/checkpoints/step-00000050/model.h5" /optimizer /optimizer >"$T/diff.out" 2>&1 ||
	{ cat "$T/diff.out"; fail "export's optimizer state differs from model.h5's"; }

# --- 2 x 2: a sharded optimizer on each stage, the tie across them ---
run gpt r22 2 2
run gpt s22 2 2 $(sharded)
same_curve r22 s22
same_state r22 s22 50
tied "$T/s22/checkpoints/step-00000050"

# --- resume a sharded 2x2 checkpoint anywhere ---
ck="$T/s22/checkpoints/step-00000025"
run gpt b22 2 2 $(sharded) --set checkpoint.resume="$ck"
for obj in /model /optimizer; do
	h5diff "$T/s22/checkpoints/step-00000050/model.h5" "$T/b22/checkpoints/step-00000050/model.h5" $obj $obj \
		>"$T/diff.out" 2>&1 || { cat "$T/diff.out"; fail "sharded 2x2 resumed at step 25: final $obj differ"; }
done
echo "  resumed on 2x2 sharded: bitwise the uninterrupted run"
run gpt b41 4 1 $(sharded) --set checkpoint.resume="$ck"
must_contain "$T/b41.out" "was sharded over 2 replicas, now sharded over 4 replicas"
run gpt b11 1 1 --set checkpoint.resume="$ck"
run gpt b22r 2 2 --set checkpoint.resume="$ck"
must_contain "$T/b22r.out" "was sharded over 2 replicas, now replicated"
for r in b41 b11 b22r; do MIN=25 same_curve s22 $r; done
same_state s22 b22r 50
# and a replicated checkpoint resumed sharded
run gpt c22 2 2 $(sharded) --set checkpoint.resume="$T/r22/checkpoints/step-00000025"
MIN=25 same_curve r22 c22

# --- an MLP with SGD, no clipping (the norm after the update); its last
# step leaves two replicas without rows ---
run mlp m41 4 1 --set parallel.grad_sync=allreduce
run mlp n41 4 1 $(sharded)
same_curve m41 n41
same_state m41 n41 51

# --- a tensor larger than a chunk of the reduce-scatter (RT_SHARD_CHUNK_FLOATS,
# 262144 floats): the first layer's 256 x 1100 is cut in two, and 3
# replicas' rows (86, 85, 85) put the cut inside the last one's ---
"$DTRAIN_BIN/dtrain-data" synthetic "$T/wide.h5" --samples 300 --features 1100 --classes 3 >/dev/null ||
	fail "dtrain-data synthetic (wide)"
sed -e "s#$T/syn.h5#$T/wide.h5#" -e 's/"inputs": 64, "hidden": \[128, 64\]/"inputs": 1100, "hidden": [256]/' \
	-e 's/"global_batch": 40/"global_batch": 30/' "$T/mlp.json" >"$T/wide.json"
grep -q '"inputs": 1100' "$T/wide.json" || fail "wide.json: not rewritten"
run wide w31 3 1 --set train.epochs=5 --set parallel.grad_sync=allreduce --set train.optimizer.type=adamw --set train.grad_clip=1.0
run wide v31 3 1 --set train.epochs=5 $(sharded) --set train.optimizer.type=adamw --set train.grad_clip=1.0
same_curve w31 v31
same_state w31 v31 50

# --- refused ---
expect_rc 3 $SUBMIT validate "$T/gpt.json" --set parallel.data=2 --set resources.tasks_per_node=2 \
	--set parallel.optimizer=sharded --set parallel.grad_sync=shared
must_contain "$T/err" 'parallel.optimizer: "sharded" reduce-scatters gradients between the replicas and cannot be combined with parallel.grad_sync "shared"'
echo "ok: sharded optimizer"
