#!/usr/bin/env bash
# Checkpoints and resume with real ranks (mpirun, no cluster needed):
#  - a job killed with SIGKILL while a checkpoint is being written resumes
#    from the previous one, and ends bitwise equal to an uninterrupted run;
#  - a damaged newest checkpoint (damage picked at random) is skipped with a
#    warning naming the file, and the run still ends bitwise equal; when
#    every checkpoint is damaged the run stops (exit 3) instead of starting
#    afresh over them, unless checkpoint.resume is "never";
#  - a checkpoint resumes on other data x pipeline layouts, ending equal to
#    the uninterrupted run to float32 rounding;
#  - a failed save where its step's directory stands already (a fallback,
#    checkpoint.resume "never") is reported not saved, never taken for one;
#  - links planted in the checkpoint directory are never written through;
#  - the checkpoint directory replaced by a link mid-run: the saves and
#    retention stay in the directory opened; the restart refuses the link;
#  - a link to a checkpoint is resumed from; a file named step-N stops the
#    run, named;
#  - unusable checkpoints (another model, damaged, not a checkpoint,
#    missing, HDF5 metadata damaged behind forged checksums) are refused
#    with an error naming the path;
#  - a full disk (a small tmpfs) and a read-only one during saves: an error
#    naming the path, the previous checkpoint intact, no leftovers.
. "$(dirname "$0")/lib.sh"

CKPT=$DTRAIN_BIN/dtrain-ckpt
"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 1000 --features 32 --classes 5 --seed 3 >/dev/null ||
	fail "dtrain-data synthetic"
cat >"$T/base.json" <<JSON
{ "name": "resume", "model": { "inputs": 32, "hidden": [48, 40, 24], "outputs": 5, "activation": "gelu" },
  "data": { "train": "$T/syn.h5" },
  "train": { "epochs": 2, "global_batch": 60, "log_every": 1,
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.01 },
             "lr_schedule": { "warmup_steps": 5 }, "grad_clip": 1.0 },
  "checkpoint": { "every_steps": 5, "keep": 100 } }
JSON

# spec NAME DATA PIPE [--set k=v...]: resolved spec $T/NAME.json, run dir $T/NAME
spec() {
	local name=$1 d=$2 p=$3
	shift 3
	$SUBMIT validate "$T/base.json" --set run_dir="$T/$name" --set resources.tasks_per_node=$((d * p)) \
		--set parallel.data=$d --set parallel.pipeline=$p "$@" >"$T/$name.json" 2>"$T/$name.err" ||
		{ cat "$T/$name.err"; fail "spec $name"; }
	mkdir -p "$T/$name"
}

# launch NAME: mpirun the spec in the background (pid in $launched), output
# in $T/NAME.out; BIND=none lets a rank's threads use every core
launch() {
	local np
	np=$(($(sed -n 's/.*"data": \([0-9]*\),.*/\1/p' "$T/$1.json" | head -n1) *
		$(sed -n 's/.*"pipeline": \([0-9]*\),.*/\1/p' "$T/$1.json" | head -n1)))
	mpirun --allow-run-as-root --oversubscribe ${BIND:+--bind-to $BIND} -np "$np" "$DTRAIN_BIN/dtrain-run" \
		--save-params "$T/$1/params" "$T/$1.json" >>"$T/$1.out" 2>&1 &
	launched=$!
}

# run NAME WANT_RC: run to the end, check the exit code
run() {
	local rc=0
	launch "$1"
	wait "$launched" || rc=$?
	[ "$rc" -eq "$2" ] || { cat "$T/$1.out"; fail "run $1: exit $rc, expected $2"; }
}

same_bits() {
	local f n=0
	for f in "$T/$1"/params/layer-*.f32; do
		cmp -s "$f" "$T/$2/params/$(basename "$f")" || fail "$1 and $2 differ in $(basename "$f")"
		n=$((n + 1))
	done
	[ "$n" -eq 4 ] || fail "$1: $n parameter files, expected 4"
}

maxdiff() {
	paste <(od -An -v -f -w4 "$1") <(od -An -v -f -w4 "$2") |
		awk '{ d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1;
		       if (d > m) m = d; if (a > ma) ma = a } END { printf "%.3g\n", m / (ma ? ma : 1) }'
}

close_params() {
	local f diff worst=0
	for f in "$T/$1"/params/layer-*.f32; do
		diff=$(maxdiff "$f" "$T/$2/params/$(basename "$f")")
		awk -v d="$diff" 'BEGIN { exit !(d <= 1e-5) }' ||
			fail "$1 vs $2: $(basename "$f") differs by $diff relative"
		worst=$(awk -v a="$worst" -v b="$diff" 'BEGIN { print (b > a ? b : a) }')
	done
	echo "  $1 vs $2: max relative difference $worst"
}

# damage FILE: one of several kinds of damage, picked at random
damage() {
	local f=$1 size off
	size=$(stat -c %s "$f")
	case $((RANDOM % 3)) in
	0) off=$((RANDOM * 32768 % size + RANDOM % 32768 % size))
	   off=$((off % size))
	   printf '\xa5' | dd of="$f" bs=1 seek="$off" conv=notrunc status=none
	   cmp -s "$f" "$f.orig" && printf '\x5a' | dd of="$f" bs=1 seek="$off" conv=notrunc status=none
	   echo "byte $off flipped" ;;
	1) truncate -s $((size / 2)) "$f"; echo "truncated to $((size / 2)) bytes" ;;
	2) rm -f "$f"; echo "deleted" ;;
	esac
}

# --- the reference: 2 x 2, uninterrupted ---
spec ref 2 2
run ref 0
ls "$T/ref/checkpoints" | grep -qx step-00000034 || fail "no final checkpoint step-00000034"
[ "$(ls "$T/ref/checkpoints" | grep -c '^step-')" -eq 7 ] || { ls "$T/ref/checkpoints"; fail "expected 7 checkpoints (5..30 and 34)"; }
must_contain "$T/ref.out" "checkpoint $T/ref/checkpoints/step-00000034 saved"
[ "$(readlink "$T/ref/checkpoints/latest")" = step-00000034 ] || fail "latest does not name step-00000034"
pass "an uninterrupted run saves every 5 steps and at the end"

# --- SIGKILL in the middle of a checkpoint write ---
# Each write call sleeps 300 ms (DTRAIN_FAULT_WRITE), so a save takes
# seconds; the ranks are killed at a random moment inside the second save.
spec killed 2 2
export DTRAIN_FAULT_WRITE=slow@300
launch killed
pid=$launched
unset DTRAIN_FAULT_WRITE
for ((i = 0; i < 600; i++)); do
	[ -d "$T/killed/checkpoints/step-00000005" ] && [ -d "$T/killed/checkpoints/.step-00000010.tmp" ] && break
	kill -0 "$pid" 2>/dev/null || { cat "$T/killed.out"; fail "the run ended before its second save"; }
	sleep 0.05
done
[ -d "$T/killed/checkpoints/.step-00000010.tmp" ] || fail "the second save never started"
sleep "0.$((RANDOM % 9))"
pkill -KILL -f "dtrain-run --save-params $T/killed/params" || true
wait "$pid" 2>/dev/null || true
[ -d "$T/killed/checkpoints/.step-00000010.tmp" ] || fail "the kill came after the second save: test timing"
[ ! -d "$T/killed/checkpoints/step-00000010" ] || fail "step 10 committed although its writers were killed"
"$CKPT" verify "$T/killed/checkpoints/step-00000005" >/dev/null || fail "the previous checkpoint does not verify"
run killed 0
must_contain "$T/killed.out" "resuming from $T/killed/checkpoints/step-00000005"
[ ! -e "$T/killed/checkpoints/.step-00000010.tmp" ] || fail "the torn save was not cleaned up"
same_bits ref killed
pass "SIGKILL during a write: resumed from the previous checkpoint, bitwise equal to the uninterrupted run"

# --- a damaged newest checkpoint: fall back to the one before ---
spec fallback 2 2
cp -a "$T/ref/checkpoints" "$T/fallback/checkpoints"
rm -rf "$T/fallback/checkpoints/step-00000034"
victim=$(ls "$T/fallback/checkpoints/step-00000030"/*.h5 | shuf -n 1)
cp "$victim" "$victim.orig"
how=$(damage "$victim")
rm -f "$victim.orig"
run fallback 0
must_contain "$T/fallback.out" "$victim"
must_contain "$T/fallback.out" "resuming from $T/fallback/checkpoints/step-00000025"
same_bits ref fallback
pass "damaged newest checkpoint ($(basename "$victim") $how): warned, fell back to step 25, bitwise equal"

# --- every checkpoint damaged: no silent fresh start over them ---
spec alldamaged 2 2
mkdir -p "$T/alldamaged/checkpoints"
cp -a "$T/ref/checkpoints/step-00000025" "$T/ref/checkpoints/step-00000030" "$T/alldamaged/checkpoints/"
for s in 25 30; do truncate -s 100 "$T/alldamaged/checkpoints/step-000000$s/shard-1.h5"; done
run alldamaged 3
must_contain "$T/alldamaged.out" "$T/alldamaged/checkpoints: every checkpoint here is damaged (2 skipped"
must_contain "$T/alldamaged.out" 'checkpoint.resume "never" starts from step 0 anyway'
[ "$(ls "$T/alldamaged/checkpoints" | grep -c '^step-')" -eq 2 ] || { ls "$T/alldamaged/checkpoints"; fail "a run over damaged checkpoints wrote new ones"; }
grep -q '"event":"step"' "$T/alldamaged/metrics.jsonl" 2>/dev/null && fail "a run over damaged checkpoints trained"
jq '.checkpoint.resume = "never"' "$T/alldamaged.json" >"$T/never.json" && mv "$T/never.json" "$T/alldamaged.json"
run alldamaged 0
same_bits ref alldamaged
pass "every checkpoint damaged: stopped naming the directory (exit 3); checkpoint.resume never then trains from step 0"

# --- a failed save where the step's directory stands already ---
# The fallback after a damaged newest checkpoint trains to that step again,
# and its final save fails before the commit's rename (the disk fills as
# the manifest is written: DTRAIN_FAULT_WRITE counts this process's bytes,
# and the shard's tensor bytes are all it writes before the manifest). The
# step-20 that stands there is the earlier run's, damaged: never taken for
# this save, which is reported not saved, and the run fails (exit 1).
spec stale 1 1 --set train.max_steps=20 --set checkpoint.every_steps=10
run stale 0
truncate -s 100 "$T/stale/checkpoints/step-00000020/shard-0.h5"
tensor_bytes=$(jq '(.optimizer.states | length) as $s | [.tensors[] | reduce .shape[] as $d (1; . * $d)] | add * 4 * (1 + $s)' \
	"$T/stale/checkpoints/step-00000010/MANIFEST.json")
# without run's --save-params: the full disk would fail that write too
stale_run() {
	local rc=0
	DTRAIN_FAULT_WRITE=enospc@$tensor_bytes mpirun --allow-run-as-root --oversubscribe -np 1 \
		"$DTRAIN_BIN/dtrain-run" "$T/stale.json" >"$T/stale.out" 2>&1 || rc=$?
	[ "$rc" -eq 1 ] || { cat "$T/stale.out"; fail "stale: exit $rc, expected 1 (its final save failed)"; }
}
stale_run
must_contain "$T/stale.out" "resuming from $T/stale/checkpoints/step-00000010"
must_contain "$T/stale.out" "checkpoint at step 20 not saved: $T/stale/checkpoints/.step-00000020.tmp/MANIFEST.json: cannot write: No space left on device"
must_contain "$T/stale.out" "training finished, but its final checkpoint (step 20) could not be saved"
must_not_contain "$T/stale.out" "step-00000020 saved"
[ -z "$(sed -n '/"event":"resume"/,$p' "$T/stale/metrics.jsonl" | grep '"event":"checkpoint"')" ] ||
	fail "stale: metrics.jsonl has a checkpoint event after the resume"
"$CKPT" verify "$T/stale/checkpoints/step-00000020" >/dev/null 2>&1 && fail "stale: step 20 verifies, but no save wrote it"
expect_rc 0 "$CKPT" list "$T/stale/checkpoints"
grep -qE '^. 20 .*damaged: shard-0.h5' "$T/out" || { cat "$T/out"; fail "stale: list should show the earlier step 20, damaged"; }
grep -qE '^. 10 .* ok$' "$T/out" || { cat "$T/out"; fail "stale: list should show step 10 ok"; }
ls -a "$T/stale/checkpoints" | grep -q '\.tmp$' && fail "stale: a failed save left $(ls -a "$T/stale/checkpoints" | grep '\.tmp$')"
# checkpoint.resume "never" over them: the save at 10 (step-10 stands)
# and the final one fail; neither is taken for saved
jq '.checkpoint.resume = "never"' "$T/stale.json" >"$T/never.json" && mv "$T/never.json" "$T/stale.json"
stale_run
must_contain "$T/stale.out" "checkpoint at step 10 not saved: "
must_contain "$T/stale.out" "checkpoint at step 20 not saved: "
grep -E 'step-[0-9]{8} saved' "$T/stale.out" && fail "stale: a failed save reported saved"
pass "a failed save where its step stands already (a fallback; resume \"never\"): reported not saved, exit 1, nothing taken for it"

# --- links planted in the checkpoint directory (a shared file system) ---
# At a save's tmp name, at the name an earlier commit of a step goes aside
# under, at a step's own name and at latest, all pointing at files that are
# not the run's: the saves (two writers, pipeline 2) neither write nor
# remove anything through them, and commit real directories; the link at
# step-00000020 is the user's (a checkpoint linked in): the final save of
# step 20 is refused naming it (exit 1), the link left as it was.
# checkpoint.resume "never": a link at step-N planted before the start is
# read as a checkpoint (damaged: it would stop the run, as below)
spec planted 1 2 --set train.max_steps=20 --set checkpoint.every_steps=10
jq '.checkpoint.resume = "never"' "$T/planted.json" >"$T/never.json" && mv "$T/never.json" "$T/planted.json"
victim=$T/victim
mkdir -p "$victim" "$T/planted/checkpoints"
for f in shard-0.h5 shard-1.h5 model.h5 MANIFEST.json other; do echo "precious $f" >"$victim/$f"; done
(cd "$victim" && md5sum *) >"$T/victim.md5"
ln -s "$victim" "$T/planted/checkpoints/.step-00000010.tmp"
ln -s "$victim" "$T/planted/checkpoints/.step-00000020.old.tmp"
ln -s "$victim" "$T/planted/checkpoints/step-00000020"
ln -s "$victim/other" "$T/planted/checkpoints/latest"
run planted 1
must_contain "$T/planted.out" "checkpoint at step 20 not saved: $T/planted/checkpoints/step-00000020: cannot commit: a symbolic link stands under this step's name (a checkpoint linked here?), which this save leaves alone (hint: move it out of $T/planted/checkpoints)"
(cd "$victim" && md5sum -c --quiet "$T/victim.md5") || fail "planted links: a file of their target changed"
[ "$(ls "$victim" | wc -l)" -eq 5 ] || { ls -la "$victim"; fail "planted links: files added to or removed from their target"; }
[ -d "$T/planted/checkpoints/step-00000010" ] && [ ! -L "$T/planted/checkpoints/step-00000010" ] ||
	{ ls -la "$T/planted/checkpoints"; fail "planted links: step 10 is not a directory of its own"; }
"$CKPT" verify "$T/planted/checkpoints/step-00000010" >/dev/null || fail "planted links: step 10 does not verify"
[ "$(readlink "$T/planted/checkpoints/step-00000020")" = "$victim" ] || { ls -la "$T/planted/checkpoints"; fail "planted links: the link at step-00000020 was not left as it was"; }
[ "$(readlink "$T/planted/checkpoints/latest")" = step-00000010 ] || fail "planted links: latest does not name step-00000010"
ls -a "$T/planted/checkpoints" | grep -q '\.tmp$' && { ls -la "$T/planted/checkpoints"; fail "planted links: left behind"; }
pass "links planted at a save's names: their target untouched, real checkpoints committed, latest replaced, a link at step-N refused and left alone"

# --- the checkpoint directory itself replaced by a link mid-run, and at a restart ---
# A foreign tree holding step-* entries (a checkpoint-like directory, a
# link, a save's tmp name) takes the name checkpoints/ after the first
# save, while the run goes on (each write slowed, DTRAIN_FAULT_WRITE): the
# later saves, their commits and retention (keep 1) stay in the directory
# the run opened, now moved; the restart refuses the link, naming it. Not a
# byte, name or time stamp of the foreign tree changes.
spec dirlink 1 2 --set train.max_steps=20 --set checkpoint.every_steps=5 --set checkpoint.keep=1
foreign=$T/foreign
mkdir -p "$foreign/step-00000005" "$foreign/.step-00000015.tmp"
echo precious >"$foreign/step-00000005/MANIFEST.json"
echo precious >"$foreign/other"
ln -s step-00000005 "$foreign/step-00000010"
foreign_sig() { (cd "$foreign" && find . -printf '%p %y %s %T@\n' | sort && find . -type f -exec md5sum {} + | sort); }
foreign_sig >"$T/foreign.sig"
export DTRAIN_FAULT_WRITE=slow@100
launch dirlink
pid=$launched
unset DTRAIN_FAULT_WRITE
for ((i = 0; i < 1200; i++)); do
	[ -d "$T/dirlink/checkpoints/step-00000005" ] && break
	kill -0 "$pid" 2>/dev/null || { cat "$T/dirlink.out"; fail "dirlink: the run ended before its first save"; }
	sleep 0.05
done
mv "$T/dirlink/checkpoints" "$T/dirlink/moved"
ln -s "$foreign" "$T/dirlink/checkpoints"
# the swap came while saves were still ahead, or the test would prove nothing
[ ! -e "$T/dirlink/moved/step-00000020" ] && kill -0 "$pid" 2>/dev/null ||
	{ ls -la "$T/dirlink/moved"; fail "dirlink: the run had saved its last checkpoint before the swap"; }
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 0 ] || { cat "$T/dirlink.out"; fail "dirlink: exit $rc, expected 0"; }
foreign_sig | diff "$T/foreign.sig" - || fail "dirlink: the foreign tree changed through the link"
[ "$(ls "$T/dirlink/moved" | grep '^step-')" = step-00000020 ] ||
	{ ls -la "$T/dirlink/moved"; fail "dirlink: the saves and retention did not stay in the directory opened"; }
"$CKPT" verify "$T/dirlink/moved/step-00000020" >/dev/null || fail "dirlink: step 20 does not verify"
run dirlink 3
must_contain "$T/dirlink.out" "$T/dirlink/checkpoints: cannot create the checkpoint directory: Too many levels of symbolic links (a symbolic link that dtrain did not make: remove it)"
foreign_sig | diff "$T/foreign.sig" - || fail "dirlink: the foreign tree changed at the restart"
pass "checkpoints/ replaced by a link mid-run: later saves and retention stay in the directory opened, the restart refuses the link; the foreign tree untouched"

# --- what stands under a checkpoint's name: a link to a checkpoint, a file ---
# A link to a valid checkpoint (a data-versioning tree) is resumed from
# (read through the link, its target untouched); a regular file named
# step-N stops the run (exit 3) naming it, instead of a fresh start that
# would save over it.
# A hand-made step-12 beside them is no checkpoint name dtrain writes: the
# run starts afresh, saying so, and leaves it alone.
spec seed 1 2 --set train.max_steps=20 --set checkpoint.every_steps=20
mkdir -p "$T/seed/checkpoints/step-12"
run seed 0
must_contain "$T/seed.out" "dtrain-run: note: $T/seed/checkpoints/step-12 is not a checkpoint name dtrain writes (step-<8 digits>): left alone"
[ -d "$T/seed/checkpoints/step-12" ] || fail "seed: step-12 was not left alone"
spec linked 1 2 --set train.max_steps=25 --set checkpoint.every_steps=5
mkdir -p "$T/linked/checkpoints" "$T/store"
cp -r "$T/seed/checkpoints/step-00000020" "$T/store/"
(cd "$T/store" && find . -type f -exec md5sum {} + | sort) >"$T/store.md5"
ln -s "$T/store/step-00000020" "$T/linked/checkpoints/step-00000020"
"$CKPT" list "$T/linked/checkpoints" >"$T/linked.list" || { cat "$T/linked.list"; fail "linked: dtrain-ckpt list"; }
grep -qE '^ +20 .* ok$' "$T/linked.list" || { cat "$T/linked.list"; fail "linked: dtrain-ckpt list does not show step 20 ok"; }
run linked 0
must_contain "$T/linked.out" "resuming from $T/linked/checkpoints/step-00000020: step 20 of 25"
[ -d "$T/linked/checkpoints/step-00000025" ] || fail "linked: no step 25 saved"
(cd "$T/store" && find . -type f -exec md5sum {} + | sort) | diff "$T/store.md5" - || fail "linked: the link's target changed"
spec filed 1 2 --set train.max_steps=10 --set checkpoint.every_steps=5
mkdir -p "$T/filed/checkpoints"
echo precious >"$T/filed/checkpoints/step-00000009"
run filed 3
must_contain "$T/filed.out" "$T/filed/checkpoints/step-00000009: a regular file, under a checkpoint's name: not a checkpoint (a checkpoint is a directory step-<8 digits>, or a symbolic link to one; hint: move it out of $T/filed/checkpoints)"
must_contain "$T/filed.out" "$T/filed/checkpoints: not starting afresh over it"
[ "$(cat "$T/filed/checkpoints/step-00000009")" = precious ] || fail "filed: step-00000009 changed"
[ "$(ls "$T/filed/checkpoints")" = step-00000009 ] || { ls -la "$T/filed/checkpoints"; fail "filed: the run saved over it"; }
pass "a link to a valid checkpoint is listed and resumed from, its target untouched; a regular file step-N stops the run, named"

# --- a late snapshot copy: nothing changes the state before it is made ---
# An async save's copy runs on the writer thread while the next step's
# forward and backward passes run; here each copy first sleeps 500 ms
# (DTRAIN_FAULT_SNAPSHOT), far longer than a step. Had an optimizer update
# (this replica's, or on 2 x 2 another replica's of the same node, which
# share the parameters) not waited for the copy, the checkpoint of step 10
# would hold a later step's state: a resume from it would not end bitwise
# equal. The wait counts as the save's stall.
spec late 2 2
export DTRAIN_FAULT_SNAPSHOT=slow@500
run late 0
unset DTRAIN_FAULT_SNAPSHOT
same_bits ref late
stalls=$(sed -n 's/.*"event":"checkpoint".*"stall_s":\([0-9.]*\).*"async":true.*/\1/p' "$T/late/metrics.jsonl")
[ "$(echo "$stalls" | grep -c .)" -eq 6 ] || fail "late: expected 6 async saves in metrics.jsonl, got: $stalls"
echo "$stalls" | awk '$1 < 0.45 { exit 1 }' || fail "late: an async save's stall_s is below the copy's 0.5 s delay: $stalls"
spec fromlate 2 2 --set checkpoint.resume="$T/late/checkpoints/step-00000010"
run fromlate 0
must_contain "$T/fromlate.out" "resuming from $T/late/checkpoints/step-00000010"
same_bits ref fromlate
pass "a snapshot copy 0.5 s late: the update waited for it (stall $(echo $stalls | tr ' ' ,) s), the resume from its step 10 is bitwise equal"

# The same on 2 x 1, the "split" way, without clipping: there the update
# has no barrier or sum before it (runtime/parallel/dp.h), so while a save is in
# flight the replica that does not write must still wait for the writer's
# copy of its blocks.
spec ref21 2 1 --set train.grad_clip=0
run ref21 0
spec late21 2 1 --set train.grad_clip=0
export DTRAIN_FAULT_SNAPSHOT=slow@500
run late21 0
unset DTRAIN_FAULT_SNAPSHOT
must_contain "$T/late21.out" "split every layer"
spec fromlate21 2 1 --set train.grad_clip=0 --set checkpoint.resume="$T/late21/checkpoints/step-00000010"
run fromlate21 0
must_contain "$T/fromlate21.out" "resuming from $T/late21/checkpoints/step-00000010"
same_bits ref21 late21
same_bits ref21 fromlate21
pass "split way, a snapshot copy 0.5 s late: the resume from its step 10 is bitwise equal"

# The same on 1 process x 2 threads, parallel.threads "split" (the threads
# cut every layer, runtime/README.md): the update waits for the copy too
spec ref1t 1 1 --set resources.cpus_per_task=2 --set parallel.threads=split
BIND=none run ref1t 0
must_contain "$T/ref1t.out" "threads: each of the 2 threads of a rank computes a block"
spec late1t 1 1 --set resources.cpus_per_task=2 --set parallel.threads=split
DTRAIN_FAULT_SNAPSHOT=slow@500 BIND=none run late1t 0
spec fromlate1t 1 1 --set resources.cpus_per_task=2 --set parallel.threads=split \
	--set checkpoint.resume="$T/late1t/checkpoints/step-00000010"
BIND=none run fromlate1t 0
must_contain "$T/fromlate1t.out" "resuming from $T/late1t/checkpoints/step-00000010"
same_bits ref1t late1t
same_bits ref1t fromlate1t
pass "threads split, a snapshot copy 0.5 s late: the resume from its step 10 is bitwise equal"

# --- resume on other layouts, from the reference's step 10 ---
for layout in "1 1" "1 4" "4 1" "1 2"; do
	set -- $layout
	name=layout$1x$2
	spec "$name" "$1" "$2" --set checkpoint.resume="$T/ref/checkpoints/step-00000010"
	run "$name" 0
	must_contain "$T/$name.out" "written on data 2 x pipeline 2, now data $1 x pipeline $2"
	close_params ref "$name"
done
pass "resumed on data x pipeline 1x1, 1x4, 4x1, 1x2 from a 2x2 checkpoint: equal to float32 rounding"

# --- checkpoints that cannot be used ---
spec bad 1 1 --set checkpoint.resume="$T/nowhere"
run bad 3
must_contain "$T/bad.out" "$T/nowhere"
mkdir -p "$T/notckpt" && echo hello >"$T/notckpt/MANIFEST.json"
spec bad2 1 1 --set checkpoint.resume="$T/notckpt"
run bad2 3
must_contain "$T/bad2.out" "$T/notckpt/MANIFEST.json"
spec other 1 1 --set model.hidden='[48, 40]' --set train.max_steps=5
run other 0
spec bad3 1 1 --set checkpoint.resume="$T/other/checkpoints/step-00000005"
run bad3 3
must_contain "$T/bad3.out" "a checkpoint of another model"
must_contain "$T/bad3.out" "$T/other/checkpoints/step-00000005"
must_contain "$T/bad3.out" '(mlp {"inputs":32,"hidden":[48,40],"outputs":5,"activation":"gelu"}; this job has mlp {"inputs":32,"hidden":[48,40,24]'
cp -a "$T/ref/checkpoints/step-00000020" "$T/broken"
victim=$(ls "$T/broken"/*.h5 | shuf -n 1)
cp "$victim" "$victim.orig"
damage "$victim" >/dev/null
rm -f "$victim.orig"
spec bad4 1 1 --set checkpoint.resume="$T/broken"
run bad4 3
must_contain "$T/bad4.out" "$victim"
# the optimizer's states by name and order: an edited manifest (its files
# still verify) whose states are swapped would load m into v
cp -a "$T/ref/checkpoints/step-00000010" "$T/swapped"
jq '.optimizer.states = ["exp_avg_sq", "exp_avg"]' "$T/swapped/MANIFEST.json" >"$T/m.json" &&
	mv "$T/m.json" "$T/swapped/MANIFEST.json" || fail "jq"
spec bad5 1 1 --set checkpoint.resume="$T/swapped"
run bad5 3
must_contain "$T/bad5.out" "optimizer \"adamw\" with states other than \"exp_avg\", \"exp_avg_sq\": a damaged or edited manifest"
# an infinity written into a tensor, its file's size and checksum put into
# the manifest (so every file verifies): refused at the read, naming the
# file, the dataset and the element, before it trains
cp -a "$T/ref/checkpoints/step-00000020" "$T/inf"
HDF5_USE_FILE_LOCKING=FALSE /usr/bin/python3 - "$T/inf" <<'PY' || fail "writing an infinity into a checkpoint (/usr/bin/python3 with h5py)"
import json, os, sys, zlib
import h5py
d = sys.argv[1]
with h5py.File(os.path.join(d, "shard-0.h5"), "r+") as f:
    w = f["model/0.weight"]
    v = w[()]
    v.flat[5] = float("inf")
    w[...] = v
m = json.load(open(os.path.join(d, "MANIFEST.json")))
for e in m["files"]:
    if e["name"] == "shard-0.h5":
        data = open(os.path.join(d, e["name"]), "rb").read()
        e["size"], e["crc32"] = len(data), "%08x" % (zlib.crc32(data) & 0xffffffff)
json.dump(m, open(os.path.join(d, "MANIFEST.json"), "w"), indent=2)
PY
# its checksums were forged, but verify reads every tensor too
"$DTRAIN_BIN/dtrain-ckpt" verify "$T/inf" >"$T/inf.verify" 2>&1 && fail "the edited checkpoint verifies"
grep -qF "$T/inf/shard-0.h5: model/0.weight: element 5 is infinite" "$T/inf.verify" ||
	{ cat "$T/inf.verify"; fail "verify does not name the infinity"; }
spec bad6 1 1 --set checkpoint.resume="$T/inf"
run bad6 3
must_contain "$T/bad6.out" "$T/inf/shard-0.h5: model/0.weight: element 5 is infinite; a checkpoint holds finite values only"
# HDF5's own metadata damaged (a byte of the first object header after the
# superblock), size and checksum forged: refused at the read, naming the
# shard. HDF5 1.10 leaks on that path; the sanitizer build is told which
# leak is the library's (tests/checkpoint/lsan-hdf5.supp, which needs the
# full unwinder to name its frame), so that any other still fails here.
cp -a "$T/ref/checkpoints/step-00000020" "$T/hdr"
forge_header_damage "$T/hdr" shard-0.h5
# verify reads every tensor after the checksums: it finds the damage the
# forged checksums hide, naming the shard
if ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0 \
	LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$DTRAIN_SOURCE_DIR/tests/checkpoint/lsan-hdf5.supp:print_suppressions=0 \
	"$CKPT" verify "$T/hdr" >"$T/hdr.verify" 2>&1; then
	cat "$T/hdr.verify"
	fail "verify passed a checkpoint whose HDF5 metadata is damaged behind forged checksums"
fi
must_contain "$T/hdr.verify" "$T/hdr/shard-0.h5"
must_not_contain "$T/hdr.verify" "Sanitizer"
spec bad7 1 1 --set checkpoint.resume="$T/hdr"
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0 \
	LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$DTRAIN_SOURCE_DIR/tests/checkpoint/lsan-hdf5.supp:print_suppressions=0 \
	run bad7 3
must_contain "$T/bad7.out" "$T/hdr/shard-0.h5: "
must_contain "$T/bad7.out" "incorrect metadata checksum"
must_not_contain "$T/bad7.out" "Sanitizer"
pass "refused: a missing path, not a checkpoint, another model, a damaged explicit checkpoint, an infinity or HDF5 metadata damaged behind forged checksums"

# --- a checkpoint of format 1, written before models had an interface ---
# tests/checkpoint/fixtures/format1-step7: step 7 of 20 of a 2 x 2 run of
# this model on 600 rows, saved by f6cec4c's dtrain-run. It resumes on its
# own layout and on 1 x 1 equal to an uninterrupted run of this build to
# float32 rounding (its first 7 steps ran f6cec4c's GELU, through tanhf;
# this build's rounds differently, runtime/kernels/kernels.c: a wrong step count,
# moment or sampler position would differ by far more), and the saves that
# follow are of the current format.
"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn600.h5" --samples 600 --features 32 --classes 5 --seed 3 >/dev/null ||
	fail "dtrain-data synthetic"
cp -r "$DTRAIN_SOURCE_DIR/tests/checkpoint/fixtures/format1-step7" "$T/format1"
f1=(--set data.train="$T/syn600.h5" --set parallel.micro_batches=2 --set parallel.grad_sync=allreduce)
spec f1ref 2 2 "${f1[@]}"
run f1ref 0
spec f1 2 2 "${f1[@]}" --set checkpoint.resume="$T/format1"
run f1 0
must_contain "$T/f1.out" "resuming from $T/format1: step 7 of 20"
close_params f1ref f1
grep -q '"format_version": 2' "$T/f1/checkpoints/latest/MANIFEST.json" || fail "the saves after a format-1 resume are not of format 2"
spec f1one 1 1 "${f1[@]}" --set checkpoint.resume="$T/format1"
run f1one 0
must_contain "$T/f1one.out" "resuming from $T/format1: step 7 of 20"
close_params f1ref f1one
pass "a format-1 checkpoint resumes, on its layout and on 1 x 1, to float32 rounding; new saves are format 2"

# --- a full disk and a read-only one (needs root for mount) ---
if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: the full-disk checks need root (mount -t tmpfs); the test counts as skipped"
	exit 77
fi
cat >"$T/big.json" <<JSON
{ "name": "full", "model": { "inputs": 32, "hidden": [512, 512], "outputs": 5 },
  "data": { "train": "$T/syn.h5" },
  "train": { "epochs": 1, "global_batch": 50, "log_every": 5, "optimizer": { "type": "adamw", "lr": 0.001 } },
  "checkpoint": { "every_steps": 5, "keep": 1, "dir": "$T/disk/ckpt" } }
JSON
mkdir -p "$T/disk"
# 286 k parameters x 3 (weights, exp_avg, exp_avg_sq) x 4 bytes: 3.3 MiB a checkpoint
mount -t tmpfs -o size=5m dtrain-test-full "$T/disk" || fail "mount tmpfs"
cleanup_mount() { umount "$T/disk" 2>/dev/null || true; }
$SUBMIT validate "$T/big.json" --set run_dir="$T/full" >"$T/full.json" || { cleanup_mount; fail "spec full"; }
mkdir -p "$T/full"
rc=0
mpirun --allow-run-as-root --oversubscribe -np 1 "$DTRAIN_BIN/dtrain-run" "$T/full.json" >"$T/full.out" 2>&1 || rc=$?
ls -la "$T/disk/ckpt" >>"$T/full.out"
if [ "$rc" -ne 1 ] || ! grep -q "No space left on device" "$T/full.out" || ! grep -q "$T/disk/ckpt/" "$T/full.out" ||
	! "$CKPT" verify "$T/disk/ckpt/step-00000005" >/dev/null || ls -a "$T/disk/ckpt" | grep -q '\.tmp'; then
	cat "$T/full.out"; cleanup_mount; fail "full disk: expected exit 1, ENOSPC naming the path, step 5 intact, no leftovers"
fi
pass "full disk during saves: error naming the path, exit 1, the previous checkpoint verifies, no leftovers"

mount -o remount,ro "$T/disk" || { cleanup_mount; fail "remount ro"; }
rc=0
mpirun --allow-run-as-root --oversubscribe -np 1 "$DTRAIN_BIN/dtrain-run" "$T/full.json" >"$T/ro.out" 2>&1 || rc=$?
if [ "$rc" -ne 1 ] || ! grep -q "Read-only file system" "$T/ro.out" ||
	! grep -q "resuming from $T/disk/ckpt/step-00000005" "$T/ro.out" ||
	! "$CKPT" verify "$T/disk/ckpt/step-00000005" >/dev/null; then
	cat "$T/ro.out"; cleanup_mount; fail "read-only disk: expected a resume from step 5, then exit 1 naming EROFS"
fi
cleanup_mount
pass "read-only checkpoint directory: resumed from it, saves refused with an error, exit 1"
