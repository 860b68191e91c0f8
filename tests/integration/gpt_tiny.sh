#!/usr/bin/env bash
# The GPT example as a new user runs it: tokenize the fortunes with
# dtrain-data text, submit jobs/gpt-tiny-2x2.json (2 data x 2 pipeline ranks
# on 2 nodes, 1000 steps) to the local cluster, reach the validation loss
# the README states (2.86 bits per byte here; at most 2.9), and sample text
# from its last checkpoint.
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
wait_state "$id" 600 COMPLETED FAILED CANCELLED TIMEOUT ENDED
dir=$(run_dir_of gpt-tiny-2x2)
out=$dir/slurm-$id.out
grep -E "^dtrain-run: (step [0-9]* val|done)" "$out" || { cat "$out"; fail "no evaluation lines"; }
bpb=$(sed -n 's/^dtrain-run: step 1000 val loss [0-9.]* bits\/byte \([0-9.]*\) .*/\1/p' "$out")
[ -n "$bpb" ] || { cat "$out"; fail "no validation loss at step 1000"; }
awk -v b="$bpb" 'BEGIN { exit !(b <= 2.9) }' || fail "validation $bpb bits per byte > 2.9"
"$DTRAIN_BIN/dtrain-ckpt" sample "$dir" --prompt "Q: " --tokens 200 --temperature 0.8 --top-k 40 >"$T/sample.txt" 2>/dev/null ||
	fail "dtrain-ckpt sample"
sed 's/^/  | /' "$T/sample.txt"
echo
pass "the GPT example reached $bpb bits per byte on the validation text"
