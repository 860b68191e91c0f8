#!/usr/bin/env bash
# The GPT (model.type "gpt") on real ranks (mpirun, no cluster needed), on a
# byte-level text corpus from Debian's fortunes:
#  - layouts 1x1, pipeline 2 and 4, data 2, and 2x2 (data x pipeline) give
#    the same loss curve within 1e-5 relative over 50 steps;
#  - the tied embedding's two copies (transformer.wte.weight on the first
#    stage, lm_head.weight on the last) are bitwise equal in every final
#    checkpoint, on one stage or across stages;
#  - a 2x2 checkpoint resumed on 2x2 ends bitwise equal to the uninterrupted
#    run; resumed on 1x4 its loss curve follows the run within 1e-5;
#  - a second start in a run's own directory counts its own steps (the
#    closing line, the eta) and keeps the peak its first start measured;
#  - paths in metrics.jsonl are JSON strings, whatever they hold;
#  - validation loss and bits per byte reach metrics.jsonl, and dtrain-ckpt
#    eval of the final checkpoint gives the same loss; dtrain-ckpt sample
#    writes the prompt and N bytes, the same for the same seed, and with
#    --num-samples M the texts of M seeds in a row;
#  - sample's tokens are draws from the model's own distribution (eval
#    --logits of the sampled windows; sample_check.py) at temperatures 0.5,
#    1 and 2, with top-k and top-p;
#  - what does not fit is refused, naming the file or key: a feature table
#    for a GPT, a vocabulary larger than model.vocab_size, a context longer
#    than the text, parallel.grad_sync "shared" (the tied copies need whole
#    sums).
. "$(dirname "$0")/lib.sh"

fortunes_gpt base

# run NAME DATA PIPE MICRO [--set KEY=VALUE...]: train $T/base.json in $T/NAME
run() { mpi_run base "$@"; }

run l11 1 1 1
run p2 1 2 2
run p4 1 4 4
run d2 2 1 1
run l22 2 2 2
for l in p2 p4 d2 l22; do same_curve l11 $l; done
for l in l11 p2 p4 d2 l22; do tied "$T/$l/checkpoints/step-00000050"; done
echo "  tied copies bitwise equal in all 5 layouts"
must_contain "$T/l11.out" "tokens/s"
jq -s -e 'map(select(.event == "eval" and .step == 50)) | length == 1 and .[0].bits_per_byte > 0 and .[0].test_loss > 0' \
	"$T/l22/metrics.jsonl" >/dev/null || fail "no validation loss and bits per byte at step 50"
bpb=$(jq -r 'select(.event == "eval" and .step == 50) | .bits_per_byte' "$T/l11/metrics.jsonl")
echo "  validation bits per byte after 50 steps: $bpb"
# step and eval events carry when they were written; train.eval_samples
# caps an evaluation to the validation set's first windows: with all of
# them the same figures as without, with 16 others (and the same training)
jq -s -e 'map(select(.event == "step" or .event == "eval")) | all(.unix_time > 1.7e9)' \
	"$T/l11/metrics.jsonl" >/dev/null || fail "step and eval events without unix_time"
windows=$(jq -r 'select(.event == "eval") | .samples' "$T/l11/metrics.jsonl" | tail -n 1)
run e11 1 1 1 --set train.eval_samples=16
run a11 1 1 1 --set train.eval_samples="$windows"
evals() { jq -r 'select(.event == "eval") | "\(.step) \(.samples) \(.test_loss)"' "$T/$1/metrics.jsonl"; }
[ "$(evals e11 | cut -d' ' -f1,2 | tr '\n' ' ')" = "25 16 50 16 " ] || fail "eval_samples 16: $(evals e11)"
[ "$(evals a11)" = "$(evals l11)" ] || fail "eval_samples = all ($windows): $(evals a11) against $(evals l11)"
[ "$(evals e11 | cut -d' ' -f3)" != "$(evals a11 | cut -d' ' -f3)" ] || fail "the first 16 windows gave the whole set's loss"
echo "  events carry unix_time; train.eval_samples 16 evaluates 16 of $windows windows"

# --- resume a 2x2 checkpoint: on 2x2 bitwise, on 1x4 the same curve ---
run r22 2 2 2 --set checkpoint.resume="$T/l22/checkpoints/step-00000025"
must_contain "$T/r22.out" "resuming from"
for obj in /model /optimizer; do
	h5diff "$T/l22/checkpoints/step-00000050/model.h5" "$T/r22/checkpoints/step-00000050/model.h5" $obj $obj \
		>"$T/diff.out" 2>&1 || { cat "$T/diff.out"; fail "2x2 resumed at step 25: final $obj differ"; }
done
run r14 1 4 4 --set checkpoint.resume="$T/l22/checkpoints/step-00000025"
MIN=25 same_curve l22 r14
tied "$T/r14/checkpoints/step-00000050"

# --- a second start of one run: its own steps and time, the run's peak ---
cp -r "$T/l22" "$T/a22"
rm -rf "$T/a22/checkpoints/step-00000050"
jq --arg d "$T/a22" '.run_dir = $d' "$T/l22.json" >"$T/a22.json"
mpirun --allow-run-as-root --oversubscribe -np 4 "$DTRAIN_BIN/dtrain-run" "$T/a22.json" >"$T/a22.out" 2>&1 ||
	{ cat "$T/a22.out"; fail "run a22"; }
must_contain "$T/a22.out" "dtrain-run: done: 25 steps in "
must_contain "$T/a22.out" " s (steps 26-50, resumed at step 25)"
# this start's events: its start and after
jq -s 'to_entries | (map(select(.value.event == "start")) | last.key) as $k | map(select(.key >= $k) | .value)' \
	"$T/a22/metrics.jsonl" >"$T/a22.second.json"
jq -s -e 'map(select(.event == "start")) | length == 2 and .[0].peak == "measured" and .[1].peak == "recorded"
	and .[0].peak_flops_per_node == .[1].peak_flops_per_node and .[0].peak_flops_per_node > 0' \
	"$T/a22/metrics.jsonl" >/dev/null || { grep '"start"' "$T/a22/metrics.jsonl"; fail "the second start did not keep the run's peak"; }
must_contain "$T/a22.out" "measured at this run's first start on such nodes"
# the eta of the first steps after the resume: the steps left times this
# start's time per step (the mean step_s so far, log_every 1), not the run's
# (which gives 1/26 to 1/6 of it here); loose bounds: the eta also counts
# the logging between the windows
jq -e '[.[] | select(.event == "step")] | [range(0; 5) as $i | .[$i] as $s
	| ([.[0:$i + 1][] | .time.step_s] | add / length) as $per
	| $s.eta_s / ((50 - $s.step) * $per)] | all(. > 0.25 and . < 20)' "$T/a22.second.json" >/dev/null ||
	{ jq -c '.[] | select(.event == "step") | [.step, .eta_s, .time.step_s]' "$T/a22.second.json" | head -5
	  fail "the eta after a resume is not this start's time per step times the steps left"; }
echo "  a second start in the run dir: 25 steps counted, the eta its own, the first start's peak kept"

# --- a checkpoint in use: eval gives the run's validation loss; sample ---
"$DTRAIN_BIN/dtrain-ckpt" eval "$T/l22" "$T/text/val.h5" >"$T/eval.out" 2>"$T/eval.err" ||
	{ cat "$T/eval.err"; fail "dtrain-ckpt eval"; }
mine=$(sed -n 's/.* loss \([^ ]*\) .*/\1/p' "$T/eval.out")
theirs=$(jq -r 'select(.event == "eval" and .step == 50) | .test_loss' "$T/l22/metrics.jsonl")
awk -v a="$mine" -v b="$theirs" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(d <= 1e-5) }' ||
	fail "dtrain-ckpt eval gives loss $mine, the run's validation loss was $theirs"
must_contain "$T/eval.out" "bits_per_byte"
for i in 1 2; do
	"$DTRAIN_BIN/dtrain-ckpt" sample "$T/l22" --prompt "Q: " --tokens 40 --seed 7 --top-k 20 >"$T/sample$i.txt" 2>/dev/null ||
		fail "dtrain-ckpt sample"
done
cmp -s "$T/sample1.txt" "$T/sample2.txt" || fail "the same seed sampled two texts"
[ "$(head -c 3 "$T/sample1.txt")" = "Q: " ] && [ "$(wc -c <"$T/sample1.txt")" -eq 43 ] ||
	{ cat "$T/sample1.txt"; fail "sample: not the prompt and 40 bytes"; }
"$DTRAIN_BIN/dtrain-ckpt" sample "$T/l22" --tokens 40 --seed 8 >"$T/sample3.txt" 2>/dev/null || fail "sample, seed 8"
cmp -s "$T/sample1.txt" "$T/sample3.txt" && fail "another seed and prompt sampled the same text"
# --num-samples 3 --seed 7: seeds 7, 8 and 9, as three runs would draw them
for s in 7 8 9; do
	[ $s = 7 ] || printf '\n---------------\n'
	"$DTRAIN_BIN/dtrain-ckpt" sample "$T/l22" --prompt "Q: " --tokens 40 --seed $s --top-k 20 2>/dev/null
done >"$T/three.txt" || fail "sample, seeds 7 to 9"
"$DTRAIN_BIN/dtrain-ckpt" sample "$T/l22" --prompt "Q: " --tokens 40 --seed 7 --top-k 20 --num-samples 3 \
	>"$T/three-at-once.txt" 2>/dev/null || fail "sample --num-samples 3"
cmp -s "$T/three.txt" "$T/three-at-once.txt" ||
	{ od -c "$T/three-at-once.txt" | head; fail "--num-samples 3 --seed 7: not the texts of seeds 7, 8 and 9"; }
expect_rc 2 "$DTRAIN_BIN/dtrain-ckpt" sample "$T/l22" --num-samples 0
must_contain "$T/err" "--num-samples: expected a number in [1, 1000000]"
# an empty prompt starts a line; no tokens asked, the prompt alone
"$DTRAIN_BIN/dtrain-ckpt" sample "$T/l22" --prompt "" --tokens 0 >"$T/sample4.txt" 2>/dev/null || fail "sample, empty prompt"
[ "$(od -An -c "$T/sample4.txt" | tr -d ' ')" = '\n' ] || { od -c "$T/sample4.txt"; fail "sample --prompt '' --tokens 0: not one newline"; }
expect_rc 1 "$DTRAIN_BIN/dtrain-ckpt" sample ""
must_contain "$T/err" "an empty path names no checkpoint"
expect_rc 2 "$DTRAIN_BIN/dtrain-ckpt" sample "$T/l22" --temperature -1
must_contain "$T/err" "--temperature: expected a number >= 0"
echo "  eval: loss $mine (the run's $theirs); sample: $(tr '\n' ' ' <"$T/sample1.txt")"

# --- sample draws from the model's distribution ---
# dist NAME T K P: 40 samples (seeds 1 to 40, one process: --num-samples)
# of "Q: " and 29 drawn bytes, each a window of the context (32) in one
# token stream, the model's logits over them from eval, the draws checked
# against the distribution T, top-k K and top-p P make
dist() {
	local name=$1 temp=$2 k=$3 p=$4
	"$DTRAIN_BIN/dtrain-ckpt" sample "$T/l22" --prompt "Q: " --tokens 29 --seed 1 --num-samples 40 \
		--temperature "$temp" --top-k "$k" --top-p "$p" >"$T/$name.out" 2>"$T/$name.err" ||
		{ cat "$T/$name.err"; fail "sample $name"; }
	# the 40 windows of 32 bytes without the 17 bytes between them,
	# then the last window's last target
	python3 -c 'import sys; b = open(sys.argv[1], "rb").read(); w = [b[i * 49:i * 49 + 32] for i in range(40)]
assert len(b) == 40 * 32 + 39 * 17 and all(b[i * 49 + 32:i * 49 + 49] == b"\n---------------\n" for i in range(39)), "not 40 samples"
open(sys.argv[2], "wb").write(b"".join(w) + b"Q")' "$T/$name.out" "$T/$name.txt" || fail "sample $name: not 40 samples of 32 bytes"
	python3 -c 'import sys; b = open(sys.argv[1], "rb").read(); open(sys.argv[2], "wb").write(b"".join(bytes([c, 0]) for c in b))' \
		"$T/$name.txt" "$T/$name.bin"
	"$DTRAIN_BIN/dtrain-data" tokens "$T/$name.bin" "$T/$name" --vocab 256 --val "$T/$name.bin" >/dev/null 2>&1 ||
		fail "dtrain-data tokens $name"
	"$DTRAIN_BIN/dtrain-ckpt" eval "$T/l22" "$T/$name/train.h5" --logits "$T/$name.f32" >/dev/null 2>&1 || fail "eval $name"
	python3 "$DTRAIN_SOURCE_DIR/tests/integration/sample_check.py" "$T/$name.bin" "$T/$name.f32" 256 32 3 \
		"$temp" "$k" "$p" >"$T/$name.check" || { cat "$T/$name.check"; fail "sample $name: not the model's distribution"; }
	echo "  sample $(cat "$T/$name.check")"
}
dist t1 1 0 1
dist t05 0.5 0 1
dist t2 2 0 1
dist k20 1 20 1
dist p09 1 0 0.9
expect_rc 2 "$DTRAIN_BIN/dtrain-ckpt" sample "$T/l22" --top-p 0
must_contain "$T/err" "--top-p: expected a number in (0, 1]"
expect_rc 2 "$DTRAIN_BIN/dtrain-ckpt" sample "$T/l22" --temprature 0.5
must_contain "$T/err" 'unknown option "--temprature"; did you mean "--temperature"?'

# --- refused ---
"$DTRAIN_BIN/dtrain-data" synthetic "$T/table.h5" --samples 100 --features 32 --classes 5 >/dev/null
# refused NAME WANT --set...: by validation, and by dtrain-run itself (given
# the spec validated without its data check)
refused() {
	local name=$1 want=$2
	shift 2
	expect_rc 3 $SUBMIT validate "$T/base.json" --set run_dir="$T/$name" "$@"
	must_contain "$T/err" "$want"
	$SUBMIT validate "$T/base.json" --no-data-check --set run_dir="$T/$name" "$@" >"$T/$name.json" \
		2>"$T/$name.err" || { cat "$T/$name.err"; fail "spec $name"; }
	mkdir -p "$T/$name"
	expect_rc 3 mpirun --allow-run-as-root -np 1 "$DTRAIN_BIN/dtrain-run" "$T/$name.json"
	must_contain "$T/err" "$want"
}
refused table "$T/table.h5: " --set data.train="$T/table.h5"
refused vocab "$T/text/train.h5: a vocabulary of 256 tokens but model.vocab_size is only 128" --set model.vocab_size=128
head -c 300 /usr/share/games/fortunes/fortunes >"$T/short.txt"
"$DTRAIN_BIN/dtrain-data" text "$T/short.txt" "$T/short" >/dev/null || fail "dtrain-data text (short)"
refused context "$T/short/train.h5: 270 tokens make no window of model.context + 1 = 301 tokens" \
	--set model.context=300 --set data.train="$T/short/train.h5" --set data.test=null
$SUBMIT validate "$T/base.json" --set run_dir="$T/shared" --set resources.tasks_per_node=2 --set parallel.data=2 \
	--set parallel.grad_sync=shared >"$T/shared.json" 2>/dev/null || fail "spec shared"
mkdir -p "$T/shared"
expect_rc 3 mpirun --allow-run-as-root --oversubscribe -np 2 "$DTRAIN_BIN/dtrain-run" "$T/shared.json"
must_contain "$T/err" 'parallel.grad_sync: "shared" is not available for model.type "gpt"'
# an MLP's checkpoint is no language model
cat >"$T/mlp.json" <<JSON
{ "name": "mlp", "model": { "inputs": 32, "hidden": [8], "outputs": 5 }, "data": { "train": "$T/table.h5" },
  "train": { "max_steps": 2, "global_batch": 10 } }
JSON
$SUBMIT validate "$T/mlp.json" --set run_dir="$T/mlp" >"$T/mlp.r.json" 2>/dev/null && mkdir -p "$T/mlp" &&
	mpirun --allow-run-as-root -np 1 "$DTRAIN_BIN/dtrain-run" "$T/mlp.r.json" >"$T/mlp.out" 2>&1 || fail "mlp run"
# train.max_steps alone bounds it (train.epochs 0): the lines say so
must_contain "$T/mlp.out" "2 steps (10 per epoch; train.max_steps ends it)"
must_contain "$T/mlp.out" "dtrain-run: step 2/2 epoch 1 loss"
must_contain "$T/l11.out" "; train.max_steps ends it)"
expect_rc 1 "$DTRAIN_BIN/dtrain-ckpt" sample "$T/mlp"
must_contain "$T/err" 'holds model.type "mlp", which is not a language model'
# a checkpoint directory whose name reads as JSON stays a string in the
# metrics: its checkpoint and resume events, no forged stop event
cat >"$T/forge.json" <<JSON
{ "name": "forge", "model": { "inputs": 32, "hidden": [8], "outputs": 5 }, "data": { "train": "$T/table.h5" },
  "train": { "max_steps": 2, "global_batch": 10 },
  "checkpoint": { "dir": "$T/c\",\"step\":999999,\"event\":\"stop", "every_steps": 1 } }
JSON
$SUBMIT validate "$T/forge.json" --set run_dir="$T/forge" >"$T/forge.r.json" 2>"$T/forge.err" || { cat "$T/forge.err"; fail "spec forge"; }
mkdir -p "$T/forge"
for i in 1 2; do
	mpirun --allow-run-as-root -np 1 "$DTRAIN_BIN/dtrain-run" --quiet "$T/forge.r.json" >"$T/forge.out" 2>&1 ||
		{ cat "$T/forge.out"; fail "forge run $i"; }
done
want="$T/c\",\"step\":999999,\"event\":\"stop/step-00000002"
jq -s -e --arg want "$want" 'all(.event != "stop") and (map(select(.event == "checkpoint")) | last.path == $want)
	and (map(select(.event == "resume")) | length == 1 and .[0].path == $want)' "$T/forge/metrics.jsonl" >/dev/null ||
	{ cat "$T/forge/metrics.jsonl"; fail "a path in metrics.jsonl is not one JSON string"; }
pass "GPT: 5 layouts, one loss curve; tied copies bitwise equal; 2x2 resumes bitwise on 2x2 and on 1x4; eval; sample draws from the model's distribution; misfits refused"
