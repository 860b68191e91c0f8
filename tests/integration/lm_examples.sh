#!/usr/bin/env bash
# The language-model examples as a new user runs them: tokenize the
# fortunes with dtrain-data text, submit jobs/gpt-tiny-2x2.json and
# jobs/llama-tiny-2x2.json (each 2 data x 2 pipeline ranks on 2 nodes, 1000
# steps) to the local cluster side by side, reach the validation bits per
# byte jobs/README.md states for each (at most 2.9 for the GPT, 2.7 for the
# Llama), and sample text from each one's last checkpoint. (bf16 against
# fp32: it_precision; the examples' figures in both: docs/performance.md.)
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)

mapfile -t texts < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' | sort)
[ "${#texts[@]}" -gt 10 ] || fail "the fortunes are missing (Debian package fortunes; make deps installs it)"
"$DTRAIN_BIN/dtrain-data" text "${texts[@]}" "$T/data" >"$T/convert.out" 2>&1 || { cat "$T/convert.out"; fail "dtrain-data text"; }
cd "$T" # the specs' data paths are relative: build/data/fortunes/...
mkdir -p build/data && ln -s "$T/data" build/data/fortunes
declare -A id bound=([gpt-tiny-2x2]=2.9 [llama-tiny-2x2]=2.7)
for ex in gpt-tiny-2x2 llama-tiny-2x2; do
	expect_rc 0 $SUBMIT "$DTRAIN_SOURCE_DIR/jobs/$ex.json" --site "$site"
	id[$ex]=$(cat "$T/out")
done
# final_bpb NAME ID: the validation bits per byte at step 1000 of job ID
final_bpb() {
	local out b
	out=$(run_dir_of "$1")/slurm-$2.out
	grep -E "^dtrain-run: (step [0-9]* val|done)" "$out" >&2 || { cat "$out" >&2; fail "$1: no evaluation lines"; }
	b=$(sed -n 's/^dtrain-run: step 1000 val loss [0-9.]* bits\/byte \([0-9.]*\) .*/\1/p' "$out")
	[ -n "$b" ] || { cat "$out" >&2; fail "$1: no validation loss at step 1000"; }
	echo "$b"
}
for ex in gpt-tiny-2x2 llama-tiny-2x2; do
	wait_state "${id[$ex]}" 1200 COMPLETED FAILED CANCELLED TIMEOUT ENDED
	bpb=$(final_bpb $ex "${id[$ex]}")
	awk -v b="$bpb" -v m="${bound[$ex]}" 'BEGIN { exit !(b <= m) }' ||
		fail "$ex: validation $bpb bits per byte > ${bound[$ex]}"
	"$DTRAIN_BIN/dtrain-ckpt" sample "$(run_dir_of $ex)" --prompt "Q: " --tokens 200 --temperature 0.8 --top-k 40 \
		>"$T/sample.txt" 2>/dev/null || fail "$ex: dtrain-ckpt sample"
	sed 's/^/  | /' "$T/sample.txt"
	echo
	pass "$ex reached $bpb bits per byte on the validation text (at most ${bound[$ex]})"
done
