#!/usr/bin/env bash
# dtrain-ckpt on real checkpoints written by dtrain-run (data 2 x pipeline 2
# under mpirun, no cluster needed):
#  - list shows exactly the `keep` newest, each "ok", and marks the latest;
#  - verify passes an intact checkpoint and, after damage picked at random
#    (a flipped byte, a truncated or deleted file, a garbage manifest),
#    fails naming the damaged file;
#  - inspect shows the step and every tensor with its shape, and of a
#    damaged checkpoint (a flipped byte, a truncated, deleted or swapped
#    shard) still the summary, then a status line naming the file: exit 1;
#  - export writes one self-contained HDF5 file whose tensors equal the
#    checkpoint's (h5ls, h5diff), and refuses to overwrite without --force;
#  - verify and export of a checkpoint whose HDF5 metadata is damaged behind
#    forged manifest checksums: exit 1 naming the shard (verify reads every
#    tensor after the checksums; in the sanitizer build, no leak:
#    tests/checkpoint/lsan-hdf5.supp says which is HDF5's);
#  - not a checkpoint: exit 1 with a message; usage errors exit 2; --help 0.
# The damage is random: DTRAIN_TEST_SEED=N repeats a run's choices.
. "$(dirname "$0")/lib.sh"
CKPT=$DTRAIN_BIN/dtrain-ckpt

SEED=${DTRAIN_TEST_SEED:-$(( $(date +%s) % 100000 ))}
RANDOM=$SEED
echo "random choices: DTRAIN_TEST_SEED=$SEED"
for t in h5ls h5dump h5diff python3; do
	command -v $t >/dev/null || fail "$t is missing (site/install-deps.sh --for test installs hdf5-tools)"
done

# --- a run that saves every 4 steps and keeps 2 ---

"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 480 --features 12 --classes 3 >/dev/null ||
	fail "dtrain-data synthetic"
cat >"$T/base.json" <<JSON
{ "name": "ckpt", "model": { "inputs": 12, "hidden": [16, 8], "outputs": 3 },
  "data": { "train": "$T/syn.h5" },
  "train": { "epochs": 2, "global_batch": 40, "optimizer": { "type": "adamw", "lr": 0.01 } },
  "checkpoint": { "every_steps": 4, "keep": 2, "dir": "$T/ckpts" } }
JSON
RUN_DIR=$T/run
$SUBMIT validate "$T/base.json" --set run_dir="$RUN_DIR" --set resources.tasks_per_node=4 \
	--set parallel.data=2 --set parallel.pipeline=2 --set parallel.micro_batches=2 \
	>"$T/spec.json" 2>"$T/spec.err" || { cat "$T/spec.err"; fail "spec"; }
mkdir -p "$RUN_DIR"
cp "$T/spec.json" "$RUN_DIR/spec.json" # as dtrain-submit leaves it
timeout 300 mpirun --allow-run-as-root --oversubscribe -np 4 "$DTRAIN_BIN/dtrain-run" --quiet \
	"$RUN_DIR/spec.json" >"$T/run.out" 2>&1 || { cat "$T/run.out"; fail "dtrain-run"; }
# 480 rows / 40 = 12 steps an epoch, 24 in all: saves at 4, 8, ..., 24
LAST=$T/ckpts/step-00000024
[ -f "$LAST/MANIFEST.json" ] || { cat "$T/run.out"; ls -la "$T/ckpts" || true; fail "no checkpoint $LAST"; }
pass "dtrain-run wrote checkpoints"

# --- list ---

check_list() {
	expect_rc 0 "$CKPT" list "$@"
	[ "$(grep -cE '^[* ] [0-9]+ ' "$T/out")" -eq 2 ] || { cat "$T/out"; fail "list $*: expected 2 checkpoints (keep=2)"; }
	# 12 steps an epoch: steps 20 and 24 are in epoch 2, as the progress lines count
	grep -qE '^\* 24 +2 +[0-9.]+ (B|KiB|MiB) +[0-9T:-]+Z +2x2 +ok$' "$T/out" ||
		{ cat "$T/out"; fail "list $*: step 24 not ok, latest, epoch 2, 2x2"; }
	grep -qE '^  20 +2 .* 2x2 +ok$' "$T/out" || { cat "$T/out"; fail "list $*: step 20 not ok"; }
	must_contain "$T/out" "latest -> step-00000024"
}
check_list "$RUN_DIR"        # through spec.json's checkpoint.dir
check_list "$T/ckpts"        # the checkpoint dir itself
check_list "$RUN_DIR" --verify
pass "list: the 2 newest, ok, the latest marked (run dir, checkpoint dir, --verify)"

mkdir "$T/empty-run"
expect_rc 0 "$CKPT" list "$T/empty-run"
must_contain "$T/out" "no checkpoints in $T/empty-run/checkpoints"
expect_rc 1 "$CKPT" list "$T/nowhere"
must_contain "$T/err" "dtrain-ckpt: $T/nowhere"
pass "list: none is fine (exit 0), a missing directory is not (exit 1)"

# --- verify and inspect of a good one ---

expect_rc 0 "$CKPT" verify "$LAST"
must_contain "$T/out" "$LAST: ok ("
must_contain "$T/out" "step 24)"
expect_rc 0 "$CKPT" verify "$RUN_DIR"
must_contain "$T/out" "$LAST: ok ("
pass "verify: an intact checkpoint, also named by its run directory"

expect_rc 0 "$CKPT" inspect "$LAST"
grep -qE 'step.*24' "$T/out" || { cat "$T/out"; fail "inspect: no step 24"; }
grep -E 'model/0.weight' "$T/out" | grep -qE '16[^0-9]+12' ||
	{ cat "$T/out"; fail "inspect: model/0.weight without its shape 16 x 12"; }
for l in 2 4; do must_contain "$T/out" "model/$l.bias"; done
must_contain "$T/out" "mlp, 3 blocks"
must_contain "$T/out" "exp_avg"
must_contain "$T/out" "status        ok: every file matches the manifest"
must_not_contain "$T/out" "damaged"
[ ! -s "$T/err" ] || { cat "$T/err"; fail "inspect of an intact checkpoint wrote to stderr"; }
pass "inspect: step, tensors and shapes"

# --- damage, chosen at random ---

# pick WORD...: one of the words, at random, into $PICK (no subshell:
# bash reseeds RANDOM in one, and the seed would not repeat the run)
pick() { local a=("$@"); PICK=${a[RANDOM % ${#a[@]}]}; }

# damage KIND: a fresh copy of the newest checkpoint in $T/dmg-KIND with
# one random file of it damaged that way; its name into $PICK
damage() {
	local d=$T/dmg-$1 f size off
	rm -rf "$d"
	cp -a "$LAST" "$d"
	pick $(cd "$d" && ls shard-*.h5 model.h5)
	f=$PICK
	size=$(stat -c %s "$d/$f")
	case $1 in
	flip)
		off=$(( (RANDOM * 32768 + RANDOM) % size ))
		python3 - "$d/$f" "$off" "$(( RANDOM % 255 + 1 ))" <<'PY'
import sys
path, off, x = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "r+b") as fh:
    fh.seek(off); b = fh.read(1)[0]; fh.seek(off); fh.write(bytes([b ^ x]))
PY
		echo "  flipped a byte at offset $off of $f" >&2 ;;
	truncate)
		off=$(( (RANDOM * 32768 + RANDOM) % size ))
		truncate -s "$off" "$d/$f"
		echo "  truncated $f to $off of $size bytes" >&2 ;;
	delete)
		rm "$d/$f"
		echo "  deleted $f" >&2 ;;
	manifest)
		f=MANIFEST.json
		case $((RANDOM % 3)) in
		0) head -c $((RANDOM % 4096 + 1)) /dev/urandom >"$d/$f" ;;
		1) echo '{"format": "dtrain-checkpoint", "format_version": 1, "step": "twelve"' >"$d/$f" ;;
		2) sed -i 's/"shard-0.h5"/"..\/..\/etc\/passwd"/' "$d/$f" ;;
		esac
		echo "  overwrote $f" >&2 ;;
	esac
	PICK=$f
}

for kind in flip truncate delete manifest; do
	damage $kind
	f=$PICK
	expect_rc 1 "$CKPT" verify "$T/dmg-$kind"
	must_contain "$T/err" "dtrain-ckpt: $T/dmg-$kind/$f"
	must_not_contain "$T/out" "ok ("
	expect_rc 1 "$CKPT" export "$T/dmg-$kind" "$T/dmg-$kind.h5"
	[ ! -e "$T/dmg-$kind.h5" ] || fail "export of a damaged checkpoint left $T/dmg-$kind.h5"
	[ $kind = manifest ] && continue # nothing to summarise: inspect fails as verify does
	expect_rc 1 "$CKPT" inspect "$T/dmg-$kind"
	must_contain "$T/out" "model/0.weight" # the summary, from the manifest
	must_contain "$T/out" "status        damaged: $f ("
	must_contain "$T/err" "dtrain-ckpt: $T/dmg-$kind/$f"
done
pass "verify: a flipped byte, a truncated file, a deleted file, a garbage manifest: exit 1 naming the file"

# two shards swapped (each whole, in the other's place): inspect says so
rm -rf "$T/dmg-swap"
cp -a "$LAST" "$T/dmg-swap"
mv "$T/dmg-swap/shard-0.h5" "$T/dmg-swap/x" && mv "$T/dmg-swap/shard-1.h5" "$T/dmg-swap/shard-0.h5" &&
	mv "$T/dmg-swap/x" "$T/dmg-swap/shard-1.h5"
expect_rc 1 "$CKPT" inspect "$T/dmg-swap"
must_contain "$T/out" "status        damaged: shard-0.h5, shard-1.h5 (2 of 3 files do not match the manifest)"
must_contain "$T/err" "dtrain-ckpt: $T/dmg-swap/shard-0.h5"
must_contain "$T/err" "dtrain-ckpt: $T/dmg-swap/shard-1.h5"
pass "inspect: a flipped byte, a truncated, deleted or swapped shard: the summary, a status line, exit 1"

# HDF5's own metadata damaged (a byte of the first object header after the
# superblock), the manifest's size and CRC forged to match: the checksums
# pass, and verify (which then reads every tensor, as a reader does) and the
# reader refuse the shard when HDF5's metadata checksum fails.
# HDF5 1.10 leaks on that path; the sanitizer build is told which leak is
# the library's (lsan-hdf5.supp), so any other still fails this test.
rm -rf "$T/dmg-hdr"
cp -a "$LAST" "$T/dmg-hdr"
forge_header_damage "$T/dmg-hdr" shard-0.h5
hdf5_leak_ok() {
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0 \
		LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$DTRAIN_SOURCE_DIR/tests/checkpoint/lsan-hdf5.supp:print_suppressions=0 \
		"$@"
}
expect_rc 1 hdf5_leak_ok "$CKPT" verify "$T/dmg-hdr"
must_contain "$T/err" "dtrain-ckpt: $T/dmg-hdr/shard-0.h5: "
must_contain "$T/err" "incorrect metadata checksum"
must_not_contain "$T/err" "Sanitizer"
must_not_contain "$T/out" ": ok ("
expect_rc 1 hdf5_leak_ok "$CKPT" export "$T/dmg-hdr" "$T/dmg-hdr.h5"
must_contain "$T/err" "dtrain-ckpt: $T/dmg-hdr/shard-0.h5: "
must_contain "$T/err" "incorrect metadata checksum"
must_not_contain "$T/err" "Sanitizer"
[ ! -e "$T/dmg-hdr.h5" ] || fail "export of a damaged checkpoint left $T/dmg-hdr.h5"
pass "verify and export: HDF5 metadata damaged behind forged checksums: exit 1 naming the shard, no leak"

# Damage in a listed directory: list still exits 0 and says which one.
cp -a "$T/ckpts" "$T/ck2"
pick $(cd "$T/ck2/step-00000020" && ls shard-*.h5 model.h5)
f=$PICK
truncate -s 100 "$T/ck2/step-00000020/$f"
expect_rc 0 "$CKPT" list "$T/ck2"
grep -qE "^  20 .*damaged: .*$f" "$T/out" || { cat "$T/out"; fail "list: truncated $f not reported"; }
grep -qE '^\* 24 .* ok$' "$T/out" || { cat "$T/out"; fail "list: step 24 should stay ok"; }
python3 - "$T/ck2/step-00000024/model.h5" <<'PY'
import os, sys
path = sys.argv[1]
with open(path, "r+b") as fh:
    fh.seek(os.path.getsize(path) // 2); b = fh.read(1)[0]
    fh.seek(os.path.getsize(path) // 2); fh.write(bytes([b ^ 0x40]))
PY
expect_rc 0 "$CKPT" list "$T/ck2"
grep -qE '^\* 24 .* ok$' "$T/out" || { cat "$T/out"; fail "list without --verify reads sizes only"; }
expect_rc 0 "$CKPT" list "$T/ck2" --verify
grep -qE '^\* 24 .*damaged: .*model.h5' "$T/out" || { cat "$T/out"; fail "list --verify: flipped byte not found"; }
mkdir "$T/ck2/.step-00000028.tmp"
expect_rc 0 "$CKPT" list "$T/ck2"
must_contain "$T/out" "1 incomplete save"
pass "list: damaged checkpoints reported in STATUS (size quick, CRC with --verify), exit 0"

# --- export ---

# From a copy that is then deleted: the file must stand alone.
cp -a "$LAST" "$T/copy"
expect_rc 0 "$CKPT" export "$T/copy" "$T/model.h5"
rm -rf "$T/copy"
must_contain "$T/out" "wrote $T/model.h5 ("
must_contain "$T/out" "18 tensors)" # 3 layers x (weight, bias) x (params, exp_avg, exp_avg_sq)
[ -f "$T/model.h5" ] || fail "export wrote no file"
h5ls -r "$T/model.h5" >"$T/h5ls" || fail "h5ls -r on the export"
# layer l's tensors are PyTorch nn.Sequential's names: module 2l
for l in 0 2 4; do
	for w in weight bias; do
		grep -qE "^/model/$l\.$w +Dataset" "$T/h5ls" || { cat "$T/h5ls"; fail "export lacks /model/$l.$w"; }
		grep -qE "^/optimizer/exp_avg_sq/$l\.$w +Dataset" "$T/h5ls" ||
			{ cat "$T/h5ls"; fail "export lacks /optimizer/exp_avg_sq/$l.$w"; }
		h5diff "$T/model.h5" "$LAST/model.h5" "/model/$l.$w" "/model/$l.$w" >"$T/diff" 2>&1 ||
			{ cat "$T/diff"; fail "export: /model/$l.$w differs from the checkpoint's model.h5"; }
	done
done
h5dump -H -d /model/0.weight "$T/model.h5" >"$T/dump" || fail "h5dump of the export"
must_contain "$T/dump" "( 16, 12 )"
must_contain "$T/dump" "H5T_IEEE_F32LE"
h5dump -A "$T/model.h5" >"$T/attrs" 2>&1 || true
must_contain "$T/attrs" "dtrain-checkpoint"
pass "export: one self-contained file, every tensor equal to the checkpoint's"

expect_rc 1 "$CKPT" export "$LAST" "$T/model.h5"
must_contain "$T/err" "--force"
expect_rc 0 "$CKPT" export "$LAST" "$T/model.h5" --force
expect_rc 1 "$CKPT" export "$LAST" "$LAST/inside.h5"
[ ! -e "$LAST/inside.h5" ] || fail "export wrote into the checkpoint"
expect_rc 0 "$CKPT" verify "$LAST"
pass "export: refuses an existing file without --force, and the checkpoint itself"

# --- not a checkpoint, usage ---

mkdir "$T/plain"
for cmd in verify inspect; do
	expect_rc 1 "$CKPT" $cmd "$T/plain"
	must_contain "$T/err" "dtrain-ckpt: $T/plain"
	expect_rc 1 "$CKPT" $cmd "$T/syn.h5"
	must_contain "$T/err" "dtrain-ckpt: $T/syn.h5"
done
expect_rc 1 "$CKPT" export "$T/plain" "$T/x.h5"
must_contain "$T/err" "dtrain-ckpt: $T/plain"
pass "not a checkpoint: exit 1 naming it"

expect_rc 0 "$CKPT" --help
must_contain "$T/out" "usage: dtrain-ckpt"
expect_rc 0 "$CKPT" --version
must_contain "$T/out" "dtrain-ckpt "
for cmd in list verify inspect export; do
	expect_rc 0 "$CKPT" $cmd --help
	must_contain "$T/out" "usage: dtrain-ckpt $cmd"
	expect_rc 2 "$CKPT" $cmd
	must_contain "$T/err" "usage: dtrain-ckpt $cmd"
	expect_rc 2 "$CKPT" $cmd "$LAST" --bogus
	must_contain "$T/err" "unknown option"
done
expect_rc 2 "$CKPT"
expect_rc 2 "$CKPT" frobnicate
must_contain "$T/err" 'unknown command "frobnicate"'
must_not_contain "$T/err" "did you mean"
expect_rc 2 "$CKPT" lsit
must_contain "$T/err" 'dtrain-ckpt: unknown command "lsit"; did you mean "list"?'
expect_rc 2 "$CKPT" verify "$LAST" "$LAST"
expect_rc 2 "$CKPT" export "$LAST"
pass "usage: --help exits 0 for every command, errors exit 2"
