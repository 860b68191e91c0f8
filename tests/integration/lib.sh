# lib.sh - shared by the integration tests (sourced, not run).
#
# Each test gets a private HOME, state directory and runs root under a fresh
# temporary directory, so tests never see each other's jobs or the user's.
# The environment comes from ctest: DTRAIN_BIN (programs), DTRAIN_SOURCE_DIR,
# SLURM_CONF (the local cluster, for the tests that need one).
set -euo pipefail

: "${DTRAIN_BIN:?DTRAIN_BIN must point at build/bin}"
: "${DTRAIN_SOURCE_DIR:?DTRAIN_SOURCE_DIR must point at the source tree}"

SUBMIT=$DTRAIN_BIN/dtrain-submit
T=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-it-XXXXXX")
export HOME=$T/home XDG_STATE_HOME=$T/state
mkdir -p "$HOME"
unset DTRAIN_SITE
trap 'rc=$?; [ -n "${ref_pid:-}" ] && kill -- -"$ref_pid" 2>/dev/null; [ $rc -eq 0 ] && rm -rf "$T"
	[ $rc -ne 0 ] && echo "(test files kept in $T)"; exit $rc' EXIT

# sanitized: 1 when the programs are the AddressSanitizer + UBSan build,
# whose training steps run about 6 times slower (tests that train long only
# to outlast their signals may train less there)
sanitized=0
ldd "$DTRAIN_BIN/dtrain-run" 2>/dev/null | grep -q 'libasan' && sanitized=1

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# expect_rc WANT CMD...: run CMD, capture stdout/stderr in $T/out, $T/err.
expect_rc() {
	local want=$1 got=0
	shift
	"$@" >"$T/out" 2>"$T/err" || got=$?
	if [ "$got" -ne "$want" ]; then
		echo "--- stdout"; cat "$T/out"; echo "--- stderr"; cat "$T/err"
		fail "exit $got, expected $want: $*"
	fi
}

# must_contain FILE TEXT: fixed-string match.
must_contain() {
	grep -qF -- "$2" "$1" || { echo "--- $1"; cat "$1"; fail "$1 lacks: $2"; }
}

must_not_contain() {
	! grep -qF -- "$2" "$1" || { echo "--- $1"; cat "$1"; fail "$1 contains: $2"; }
}

# A site file for the local cluster, with runs under $T/runs.
write_site() {
	cat >"$T/site.json" <<JSON
{
  "runs_root": "$T/runs",
  "defaults": { "resources": { "partition": "low", "time": "00:10:00" } },
  "limits": { "max_nodes": 2, "max_tasks_per_node": 4, "max_gpus_per_node": 0,
              "max_time": "02:00:00", "partitions": ["low", "high"] },
  "locked": ["resources.qos"],
  "env": { "DTRAIN_SITE_MARK": "site-env", "OMPI_MCA_mpi_yield_when_idle": "1" },
  "env_allow": ["DTRAIN_FAULT_*"],
  "srun_extra": ["--kill-on-bad-exit=1"],
  "setup": ["echo site-setup-ran"]
}
JSON
	echo "$T/site.json"
}

# job_state ID: Slurm's state of a job, or ENDED once Slurm forgot it.
job_state() {
	local s
	s=$(squeue -h -j "$1" -o %T 2>/dev/null || true)
	[ -n "$s" ] || s=$(scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
	echo "${s:-ENDED}"
}

# wait_state ID TIMEOUT STATE...: wait until the job is in one of STATEs.
wait_state() {
	local id=$1 timeout=$2 s i
	shift 2
	for ((i = 0; i < timeout * 2; i++)); do
		s=$(job_state "$id")
		for want in "$@"; do
			[ "$s" = "$want" ] && return 0
		done
		sleep 0.5
	done
	scontrol show job "$id" || true
	fail "job $id is $s after ${timeout}s, expected one of: $*"
}

# The one run directory under $T/runs.
run_dir_of() {
	local d
	d=$(find "$T/runs" -mindepth 1 -maxdepth 1 -type d -name "$1-*" | head -n 1)
	[ -n "$d" ] || fail "no run directory for $1 under $T/runs"
	echo "$d"
}

# solo CMD...: run dtrain-run as one process without a launcher (Open MPI's
# singleton mode). In the sanitizer build LeakSanitizer's exit-time tracer
# crashes in that mode (signal 11 in the tracer, whatever the options); the
# same code is leak-checked in the runs under mpirun and srun.
solo() {
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 "$@"
}

# --- comparing runs (RUN: a run directory under $T) ---

# losses RUN: "step loss" for each step event of $T/RUN/metrics.jsonl.
losses() { jq -r 'select(.event == "step") | "\(.step) \(.loss)"' "$T/$1/metrics.jsonl"; }

# same_curve A B: every step both runs logged has losses within TOL
# relative (default 1e-5), over at least MIN steps (default 50).
same_curve() {
	local worst tol=${TOL:-1e-5}
	worst=$(awk -v min="${MIN:-50}" 'NR == FNR { a[$1] = $2; next }
		($1 in a) { d = (a[$1] - $2) / a[$1]; if (d < 0) d = -d; if (d > m) m = d; n++ }
		END { if (n < min) { print "only " n " steps"; exit } printf "%.3g\n", m }' <(losses "$1") <(losses "$2"))
	case $worst in only*) fail "$1 vs $2: $worst" ;; esac
	awk -v w="$worst" -v t="$tol" 'BEGIN { exit !(w <= t) }' ||
		fail "$1 vs $2: loss curves differ by $worst relative (> $tol)"
	echo "  $2 vs $1: loss within $worst relative"
}

# tied CKPT: a GPT checkpoint's lm_head.weight (last stage) equals its
# transformer.wte.weight (stage 0) bitwise.
tied() {
	local ck=$1
	h5diff "$ck/shard-0.h5" "$(ls "$ck"/shard-*.h5 | sort -V | tail -n 1)" \
		/model/transformer.wte.weight /model/lm_head.weight >"$T/tied.out" 2>&1 ||
		{ cat "$T/tied.out"; fail "$ck: lm_head.weight differs from transformer.wte.weight"; }
}

# fortunes_gpt SPEC: Debian's fortunes, literature and riddles as byte-level
# text in $T/text (train.h5, val.h5), and in $T/SPEC.json a GPT on it (4
# blocks of width 32, 2 heads, context 32; AdamW, 50 steps of 8 rows, an
# eval and a checkpoint every 25) for mpi_run.
fortunes_gpt() {
	local corpus=/usr/share/games/fortunes
	[ -f "$corpus/fortunes" ] || fail "$corpus/fortunes is missing (Debian package fortunes; make deps installs it)"
	"$DTRAIN_BIN/dtrain-data" text "$corpus/fortunes" "$corpus/literature" "$corpus/riddles" "$T/text" \
		>"$T/data.out" 2>&1 || { cat "$T/data.out"; fail "dtrain-data text"; }
	cat >"$T/$1.json" <<JSON
{ "name": "gpt", "model": { "type": "gpt", "vocab_size": 256, "context": 32, "layers": 4, "heads": 2, "embd": 32 },
  "data": { "train": "$T/text/train.h5", "test": "$T/text/val.h5" },
  "train": { "epochs": 1, "max_steps": 50, "global_batch": 8, "log_every": 1, "eval_every": 25,
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.1, "betas": [0.9, 0.95] },
             "lr_schedule": { "warmup_steps": 5 }, "grad_clip": 1.0 },
  "checkpoint": { "every_steps": 25, "keep": 5 } }
JSON
}

# mpi_run SPEC NAME DATA PIPE MICRO [--set KEY=VALUE...]: $T/SPEC.json
# resolved with that layout into $T/NAME.json and trained under mpirun
# (this host, no cluster) in $T/NAME; its output in $T/NAME.out, its final
# parameters in $T/NAME/params (--save-params). The caller's environment
# reaches the ranks.
mpi_run() {
	local spec=$1 name=$2 d=$3 p=$4 m=$5 np=$(($3 * $4))
	shift 5
	$SUBMIT validate "$T/$spec.json" --set run_dir="$T/$name" --set resources.tasks_per_node=$np \
		--set parallel.data=$d --set parallel.pipeline=$p --set parallel.micro_batches=$m \
		"$@" >"$T/$name.json" 2>"$T/$name.err" || { cat "$T/$name.err"; fail "spec $name"; }
	mkdir -p "$T/$name"
	mpirun --allow-run-as-root --oversubscribe -np $np "$DTRAIN_BIN/dtrain-run" \
		--save-params "$T/$name/params" "$T/$name.json" >"$T/$name.out" 2>&1 ||
		{ cat "$T/$name.out"; fail "run $name"; }
}

# reference_run SITE FINAL: $T/job.json (a 4-rank job) run without
# interruption by mpirun on this host in $T/ref, which must end with the
# checkpoint FINAL (step-<8 digits>). It runs in the background, in the
# gaps of the job the test submits next (requeue waits, start-ups), and
# same_as_reference waits for it; a failing test stops it.
reference_run() {
	$SUBMIT validate "$T/job.json" --site "$1" --set run_dir="$T/ref" >"$T/ref.json" 2>"$T/ref.err" ||
		{ cat "$T/ref.err"; fail "spec ref"; }
	mkdir -p "$T/ref"
	ref_final=$2
	OMPI_MCA_mpi_yield_when_idle=1 setsid mpirun --allow-run-as-root --oversubscribe -np 4 \
		"$DTRAIN_BIN/dtrain-run" --quiet "$T/ref.json" >"$T/ref.out" 2>&1 &
	ref_pid=$!
}

# reference_wait: the reference run of reference_run has ended well.
reference_wait() {
	[ -n "${ref_pid:-}" ] || return 0
	local rc=0
	wait "$ref_pid" || rc=$?
	ref_pid=
	[ $rc -eq 0 ] || { cat "$T/ref.out"; fail "reference run (exit $rc)"; }
	[ -d "$T/ref/checkpoints/$ref_final" ] || { ls "$T/ref/checkpoints"; fail "reference has no final checkpoint"; }
}

# same_as_reference CKPT: CKPT verifies, and its parameters and optimizer
# state are bitwise the reference run's checkpoint of the same name.
same_as_reference() {
	local obj
	reference_wait
	"$DTRAIN_BIN/dtrain-ckpt" verify "$1" >/dev/null || fail "final checkpoint does not verify"
	for obj in /model /optimizer; do
		h5diff "$T/ref/checkpoints/$(basename "$1")/model.h5" "$1/model.h5" "$obj" "$obj" >"$T/diff.out" 2>&1 ||
			{ cat "$T/diff.out"; fail "final $obj differ from the uninterrupted run's"; }
	done
}

# events_in RUN_DIR EVENT: how many EVENT events its metrics.jsonl holds
# so far (0 before it exists).
events_in() {
	local n=0
	[ -f "$1/metrics.jsonl" ] && n=$(grep -c "\"event\":\"$2\"" "$1/metrics.jsonl")
	echo "${n:-0}"
}

# saves_into RUN_DIR START: waits (up to 120 s) until start number START
# of the ranks has written two checkpoints.
saves_into() {
	local saves=-1 i
	for ((i = 0; i < 600; i++)); do
		if [ "$(events_in "$1" start)" -ge "$2" ]; then
			[ "$saves" -ge 0 ] || saves=$(events_in "$1" checkpoint)
			[ "$(events_in "$1" checkpoint)" -ge $((saves + 2)) ] && return 0
		fi
		sleep 0.2
	done
	return 1
}

# restarted LOG N: waits (up to 60 s) until the batch script's LOG says it
# restarted the step after crash N, else fails.
restarted() {
	local i
	for ((i = 0; i < 300; i++)); do
		grep -q "restarting from the newest checkpoint (crash $2 of at most 3)" "$1" && return 0
		sleep 0.2
	done
	must_contain "$1" "restarting from the newest checkpoint (crash $2 of at most 3)"
}

# rank_of_pid RUN_DIR PID: "rank R on node N" of the dtrain-run process
# PID, from its heartbeat file (base/heartbeat.h); "" when none names it.
rank_of_pid() {
	local hb
	hb=$(grep -l " pid $2 " "$1"/heartbeat/rank-* 2>/dev/null | head -n 1)
	[ -n "$hb" ] || return 0
	sed -n 's/^dtrain-heartbeat [0-9]* rank \([0-9]*\) world [0-9]* pid [0-9]* node \([^ ]*\) .*/rank \1 on node \2/p' "$hb"
}

# recovery_job NAME SITE [TOTAL]: the 2-node x 2-task MLP job that recover.sh,
# node_loss.sh and ctld_restart.sh hurt (TOTAL steps, default 2000, a
# checkpoint every 100, the watchdog's step bound 5 s, others 10 s) in
# $T/job.json, its data in $T/syn.h5, and its uninterrupted reference run
# (mpirun); sets total (its steps) and final_name (its last checkpoint's
# name). Submit it with "$slow_steps": each step then ends in a 15 ms sleep
# (base/fault.h, DTRAIN_FAULT_STEP), so the job trains at most 67 steps/s
# however fast the machine is (2000 steps: 30 s at least, as long as 9000
# steps ran unslowed on this 2-core machine), while it hardly uses a CPU: a
# round that waits for two checkpoints and then up to 3 s sees at most
# 200 + 200 steps.
slow_steps=env.DTRAIN_FAULT_STEP=slow@15
recovery_job() {
	total=${3:-2000}
	"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 12000 --features 784 --classes 10 --seed 11 >/dev/null ||
		fail "dtrain-data synthetic"
	cat >"$T/job.json" <<JSON
{ "name": "$1", "model": { "inputs": 784, "hidden": [256, 256], "outputs": 10 },
  "data": { "train": "$T/syn.h5" },
  "resources": { "nodes": 2, "tasks_per_node": 2, "partition": "low" },
  "parallel": { "data": 2, "pipeline": 2, "micro_batches": 2 },
  "train": { "epochs": 1000, "max_steps": $total, "global_batch": 120, "log_every": 50,
             "optimizer": { "type": "sgd", "lr": 0.05, "momentum": 0.9 } },
  "checkpoint": { "every_steps": 100, "keep": 2 },
  "recovery": { "step_timeout_seconds": 5, "timeout_seconds": 10 } }
JSON
	final_name=step-$(printf %08d $total)
	reference_run "$2" "$final_name"
}

# lose_node NODE RUN_DIR: NODE of the local cluster lost with a job's step
# on it: its slurmd, the slurmstepd and the dtrain-run ranks of RUN_DIR's
# job there, all SIGKILLed; prints what it killed. node_back (with the
# cluster's directory) brings it back: site/cluster.sh up starts its slurmd
# again (from clean files) into $T/cluster-up.out.
lose_node() {
	local p ranks='' stepds slurmd cdir
	cdir=$(dirname "$SLURM_CONF")
	for p in $(pgrep -f "^[^ ]*/dtrain-run $2/spec.json"); do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SLURMD_NODENAME=$1" && ranks="$ranks $p"
	done
	[ -n "$ranks" ] || fail "no rank of $2 on $1"
	stepds=$(for p in $ranks; do ps -o ppid= -p "$p"; done | sort -u)
	slurmd=$(cat "$cdir/run/slurmd-$1.pid")
	kill -KILL "$slurmd" $stepds $ranks
	echo "  $1 lost near step $(sed -n 's/.*"event":"step","step":\([0-9]*\),.*/\1/p' "$2/metrics.jsonl" | tail -n 1): slurmd $slurmd, slurmstepd$stepds, ranks$ranks"
}
node_back() { bash "$DTRAIN_SOURCE_DIR/site/cluster.sh" up --dir "$(dirname "$SLURM_CONF")" >"$T/cluster-up.out" 2>&1; }

# forge_header_damage CKPT FILE: one byte of FILE's first HDF5 object header
# flipped (HDF5's own checksum then fails), and the manifest's size and CRC
# forged to match, so that the damage reaches HDF5 past dtrain's checks.
forge_header_damage() {
	python3 - "$1" "$2" <<'PY' || fail "forging a damaged object header in $1/$2"
import json, os, sys, zlib
d, name = sys.argv[1], sys.argv[2]
path = os.path.join(d, name)
data = bytearray(open(path, "rb").read())
at = data.find(b"OHDR", 8) + 12  # past its prefix: covered by its checksum
data[at] ^= 0x5a
open(path, "wb").write(data)
m = json.load(open(os.path.join(d, "MANIFEST.json")))
for e in m["files"]:
    if e["name"] == name:
        e["size"], e["crc32"] = len(data), "%08x" % (zlib.crc32(bytes(data)) & 0xffffffff)
json.dump(m, open(os.path.join(d, "MANIFEST.json"), "w"), indent=2)
PY
}

# tricky_text DIR: DIR/tricky.txt, tricky2.txt and tricky3.txt, text that
# tokenizers split in many ways: spaces, digits, Unicode, emoji,
# contractions, CRLF, tabs, invalid UTF-8, special tokens' names
tricky_text() {
	{
		printf 'Hello world! I\x27m sure you\x27re fine, they\x27ve said; we\x27ll see. It\x27s \x27S \x27\x27s don\x27t\n'
		printf 'spaces:  two   three    four\t\ttabs \t mixed  \n\n\n  indented\n'
		printf 'crlf line\r\nanother\r\n\r\n'
		printf 'digits 12345 3.14159 1,000,000 0x1F 2024-05-20 \xd9\xa1\xd9\xa2\xd9\xa3 \xe2\x85\xab \xc2\xbd\n'
		printf 'caf\xc3\xa9 na\xc3\xafve \xc3\x9cber stra\xc3\x9fe \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xce\xb1\xce\xb2\xce\xb3\n'
		printf 'emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8b\xf0\x9f\x8f\xbd! \xf0\x9f\x87\xab\xf0\x9f\x87\xb7 \xe2\x9d\xa4\xef\xb8\x8f ok\n'
		printf 'nbsp\xc2\xa0here ideographic\xe3\x80\x80space \x1c\x1d file-separators\n'
		printf 'invalid \xff\xfe bytes \xc3 cut \xe2\x82 short \xc0\xaf overlong \xed\xa0\x80 surrogate\n'
		printf '<|endoftext|> punctuation!!! ??? ... --- (a) [b] {c} "quoted" `tick`\n'
		printf 'trailing spaces   \n\ttab start\n   '
	} >"$1/tricky.txt"
	# a second file that ends inside a run of spaces, and one without a newline
	printf 'end   ' >"$1/tricky2.txt"
	printf 'x\x27ll\xf0\x9f\x98\x80' >"$1/tricky3.txt"
}
