#!/usr/bin/env bash
# The GPT example as a new user runs it: tokenize the fortunes with
# dtrain-data text, submit jobs/gpt-tiny-2x2.json (2 data x 2 pipeline ranks
# on 2 nodes, 1000 steps) to the local cluster, reach the validation loss
# the README states (2.86 bits per byte here; at most 2.9), and sample text
# from its last checkpoint. The same spec in bf16 (train.precision, issue
# #33), submitted beside it, ends within 0.03 bits per byte of it.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)

mapfile -t texts < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' | sort)
[ "${#texts[@]}" -gt 10 ] || fail "the fortunes are missing (Debian package fortunes; make deps installs it)"
"$DTRAIN_BIN/dtrain-data" text "${texts[@]}" "$T/data" >"$T/convert.out" 2>&1 || { cat "$T/convert.out"; fail "dtrain-data text"; }
cd "$T" # the spec's data paths are relative: build/data/fortunes/...
mkdir -p build/data && ln -s "$T/data" build/data/fortunes
expect_rc 0 $SUBMIT "$DTRAIN_SOURCE_DIR/jobs/gpt-tiny-2x2.json" --site "$site"
id=$(cat "$T/out")
expect_rc 0 $SUBMIT "$DTRAIN_SOURCE_DIR/jobs/gpt-tiny-2x2.json" --site "$site" \
	--set name=bf16-gpt-tiny --set train.precision=bf16
id16=$(cat "$T/out")
# final_bpb NAME ID: the validation bits per byte at step 1000 of job ID
final_bpb() {
	local out b
	out=$(run_dir_of "$1")/slurm-$2.out
	grep -E "^dtrain-run: (step [0-9]* val|done)" "$out" >&2 || { cat "$out" >&2; fail "$1: no evaluation lines"; }
	b=$(sed -n 's/^dtrain-run: step 1000 val loss [0-9.]* bits\/byte \([0-9.]*\) .*/\1/p' "$out")
	[ -n "$b" ] || { cat "$out" >&2; fail "$1: no validation loss at step 1000"; }
	echo "$b"
}
wait_state "$id" 1200 COMPLETED FAILED CANCELLED TIMEOUT ENDED
dir=$(run_dir_of gpt-tiny-2x2)
bpb=$(final_bpb gpt-tiny-2x2 "$id")
awk -v b="$bpb" 'BEGIN { exit !(b <= 2.9) }' || fail "validation $bpb bits per byte > 2.9"
wait_state "$id16" 600 COMPLETED FAILED CANCELLED TIMEOUT ENDED
grep -q "device cpu (bf16 products" "$(run_dir_of bf16-gpt-tiny)/slurm-$id16.out" ||
	{ cat "$(run_dir_of bf16-gpt-tiny)/slurm-$id16.out"; fail "the bf16 job does not say it runs in bf16"; }
bpb16=$(final_bpb bf16-gpt-tiny "$id16")
awk -v a="$bpb" -v b="$bpb16" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.03) }' ||
	fail "bf16 ended at $bpb16 bits per byte, fp32 at $bpb: more than 0.03 apart"
echo "  bf16: $bpb16 bits per byte, fp32: $bpb"
"$DTRAIN_BIN/dtrain-ckpt" sample "$dir" --prompt "Q: " --tokens 200 --temperature 0.8 --top-k 40 >"$T/sample.txt" 2>/dev/null ||
	fail "dtrain-ckpt sample"
sed 's/^/  | /' "$T/sample.txt"
echo
pass "the GPT example reached $bpb bits per byte on the validation text ($bpb16 in bf16)"
