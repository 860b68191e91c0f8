#!/usr/bin/env bash
# train.precision "bf16" (runtime/README.md, "Precision") on real ranks
# (mpirun, no cluster):
#  - the MLP and the GPT in bf16 on 1x1, pipeline 2 and data 2 follow the
#    same loss curve within 1e-3 relative: other layouts sum their products
#    in other orders and shapes, which moves float32 results by about 1e-7
#    and flips a few roundings to bf16, each moving a term by 2^-8;
#  - bf16 trains as fp32 does: the final loss within 2 % of the fp32 run's;
#  - a bf16 run resumed from its checkpoint ends bitwise where the
#    uninterrupted run ends (one precision, one layout: the same products);
#  - a bf16 checkpoint resumes in fp32 and the reverse (the masters are
#    float32), and the start event names the precision;
#  - the GPT's activations take less memory in bf16 (the linear layers'
#    inputs kept as their bf16 copies): at most 0.9 of fp32's here, where
#    the float32 logits (V = 256) are a third of them.
. "$(dirname "$0")/lib.sh"

"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 800 --features 32 --classes 5 --seed 3 >/dev/null ||
	fail "dtrain-data synthetic"
cat >"$T/mlp.json" <<JSON
{ "name": "bf16", "model": { "inputs": 32, "hidden": [64, 48], "outputs": 5, "activation": "gelu" },
  "data": { "train": "$T/syn.h5" },
  "train": { "epochs": 3, "global_batch": 40, "log_every": 1, "precision": "bf16",
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.01 }, "grad_clip": 1.0 },
  "parallel": { "grad_sync": "allreduce", "threads": "blas" },
  "checkpoint": { "every_steps": 30, "keep": 5 } }
JSON
"$DTRAIN_BIN/dtrain-data" text /usr/share/games/fortunes/riddles "$T/text" >/dev/null || fail "dtrain-data text"
cat >"$T/gpt.json" <<JSON
{ "name": "bf16gpt", "model": { "type": "gpt", "vocab_size": 256, "context": 32, "layers": 2, "heads": 2, "embd": 32 },
  "data": { "train": "$T/text/train.h5" },
  "train": { "max_steps": 30, "global_batch": 8, "log_every": 1, "precision": "bf16",
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.1, "betas": [0.9, 0.95] },
             "grad_clip": 1.0 },
  "parallel": { "grad_sync": "allreduce" },
  "checkpoint": { "every_steps": 15 } }
JSON

for spec in mlp gpt; do
	mpi_run $spec $spec-11 1 1 1
	mpi_run $spec $spec-p2 1 2 2
	mpi_run $spec $spec-d2 2 1 1
	MIN=30 TOL=1e-3 same_curve $spec-11 $spec-p2
	MIN=30 TOL=1e-3 same_curve $spec-11 $spec-d2
	[ "$(jq -r 'select(.event == "start") | .precision' "$T/$spec-11/metrics.jsonl")" = bf16 ] ||
		fail "$spec: the start event does not say bf16"
done
pass "bf16 on 1x1, pipeline 2 and data 2: the same loss curves within 1e-3 (MLP and GPT)"

mpi_run mlp mlp32 1 1 1 --set train.precision=fp32
last() { losses "$1" | tail -n 1 | cut -d' ' -f2; }
awk -v a="$(last mlp-11)" -v b="$(last mlp32)" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(d <= 0.02) }' ||
	fail "bf16's final loss $(last mlp-11) is not within 2 % of fp32's $(last mlp32)"
pass "bf16 trains as fp32 does: final loss $(last mlp-11) against $(last mlp32)"

# resumed from the step-15 checkpoint of gpt-11: bf16 bitwise; fp32 and back
for p in bf16 fp32; do
	mpi_run gpt "gpt-resume-$p" 1 1 1 --set train.precision=$p --set checkpoint.resume="$T/gpt-11/checkpoints/step-00000015"
	[ "$(jq -r 'select(.event == "resume") | .step' "$T/gpt-resume-$p/metrics.jsonl")" = 15 ] ||
		fail "$p: not resumed from step 15"
done
for f in "$T"/gpt-11/params/*.f32; do
	cmp -s "$f" "$T/gpt-resume-bf16/params/$(basename "$f")" ||
		fail "the resumed bf16 run differs from the uninterrupted one in $(basename "$f")"
done
mpi_run gpt gpt32 1 1 1 --set train.precision=fp32 --set train.max_steps=15
mpi_run gpt gpt32-bf16 1 1 1 --set train.max_steps=30 --set checkpoint.resume="$T/gpt32/checkpoints/step-00000015"
[ "$(jq -r 'select(.event == "resume") | .step' "$T/gpt32-bf16/metrics.jsonl")" = 15 ] ||
	fail "an fp32 checkpoint did not resume in bf16"
pass "a bf16 run resumed ends bitwise as the uninterrupted one; checkpoints cross precisions both ways"

# activations_mib from each rank's closing line: 1.54 MiB in fp32 and 1.30 in
# bf16 by gpt.c's layout (a sample: 49856 floats, 42176)
acts() { sed -n 's/.* activations_mib \([0-9.]*\) .*/\1/p' "$T/$1.out" | head -n 1; }
awk -v b="$(acts gpt-11)" -v f="$(acts gpt32)" 'BEGIN { exit !(b > 0 && b <= 0.9 * f) }' ||
	fail "the bf16 GPT's activations ($(acts gpt-11) MiB) are not below 0.9 of fp32's ($(acts gpt32) MiB)"
pass "the GPT's activations: $(acts gpt-11) MiB in bf16 against $(acts gpt32) MiB in fp32"

# a CPU without bf16 instructions (DTRAIN_CPU_FLAGS stands for /proc/cpuinfo's
# flags: this machine may have them): validate warns, and dtrain-run's start
# says it once a node after the device lines; with them, neither says a word
noBF="fpu sse2 avx2 avx512f avx512bw avx512_vnni"
DTRAIN_CPU_FLAGS=$noBF DTRAIN_CPU_MODEL="Xeon without BF16" expect_rc 0 $SUBMIT validate "$T/gpt.json"
must_contain "$T/err" 'dtrain-submit: warning: train.precision "bf16": this machine'"'"'s CPU (Xeon without BF16) has no bf16 instructions'
DTRAIN_CPU_FLAGS="$noBF avx512_bf16" expect_rc 0 $SUBMIT validate "$T/gpt.json"
must_not_contain "$T/err" "warning"
DTRAIN_CPU_FLAGS=$noBF expect_rc 0 $SUBMIT validate "$T/gpt.json" --set train.precision=fp32
must_not_contain "$T/err" "warning"
DTRAIN_CPU_FLAGS=$noBF DTRAIN_CPU_MODEL="Xeon without BF16" mpi_run gpt emulated 1 2 2 --set train.max_steps=2
[ "$(grep -c 'warning: train.precision "bf16" on a CPU without bf16 instructions (Xeon without BF16: no avx512_bf16 or amx_bf16): oneDNN emulates them' "$T/emulated.out")" = 1 ] ||
	{ cat "$T/emulated.out"; fail "the start does not say once that this CPU emulates bf16"; }
DTRAIN_CPU_FLAGS="$noBF amx_bf16" mpi_run gpt native 1 1 1 --set train.max_steps=2
must_not_contain "$T/native.out" "without bf16 instructions"
pass "bf16 on a CPU without bf16 instructions: a warning at validate and one line a node at start"
