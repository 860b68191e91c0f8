#!/usr/bin/env bash
# dtrain's GPT against PyTorch (tests/integration/gpt_torch.py): a model
# trained 3 steps over 2 pipeline stages (the tied embedding across them),
# its checkpoints exported and loaded into a nanoGPT-style PyTorch GPT:
# the same logits and loss as `dtrain-ckpt eval`, and one AdamW step from
# checkpoint 1 gives checkpoint 2's parameters, each within 1e-5 relative;
# and with train.precision "bf16" the step equals PyTorch's with its linear
# layers' inputs rounded to bf16 alike, within the bound gpt_torch.py derives.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3 # Debian's, with python3-torch and python3-h5py (site/deps.list)
$PY -c 'import torch, h5py' 2>"$T/py.err" || { cat "$T/py.err"; fail "$PY lacks torch or h5py (site/install-deps.sh --for test installs python3-torch and python3-h5py)"; }

"$DTRAIN_BIN/dtrain-data" text /usr/share/games/fortunes/riddles "$T/text" >/dev/null || fail "dtrain-data text"
cat >"$T/job.json" <<JSON
{ "name": "gpt-torch", "model": { "type": "gpt", "vocab_size": 256, "context": 32, "layers": 2, "heads": 2, "embd": 48 },
  "data": { "train": "$T/text/train.h5", "shuffle": false },
  "resources": { "tasks_per_node": 2 },
  "parallel": { "pipeline": 2, "micro_batches": 2 },
  "train": { "max_steps": 3, "global_batch": 4, "log_every": 1,
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.1, "betas": [0.9, 0.95] },
             "grad_clip": 0.5 },
  "checkpoint": { "every_steps": 1, "keep": 5 } }
JSON
# compare PRECISION: the run, its checkpoints 1 and 2, and gpt_torch.py
compare() {
	local p=$1 run=$T/run-$1 ck
	$SUBMIT validate "$T/job.json" --set run_dir="$run" --set train.precision="$p" >"$run.json" 2>"$T/err" ||
		{ cat "$T/err"; fail "spec"; }
	mkdir -p "$run"
	mpirun --allow-run-as-root --oversubscribe -np 2 "$DTRAIN_BIN/dtrain-run" "$run.json" >"$run.out" 2>&1 ||
		{ cat "$run.out"; fail "dtrain-run ($p)"; }
	ck=$run/checkpoints
	for s in 1 2; do
		"$DTRAIN_BIN/dtrain-ckpt" export "$ck/step-0000000$s" "$T/$p-ck$s.h5" >/dev/null || fail "export step $s"
	done
	"$DTRAIN_BIN/dtrain-ckpt" eval "$ck/step-00000001" "$T/text/train.h5" --samples 6 --logits "$T/$p-logits.f32" \
		>"$T/eval.out" || fail "dtrain-ckpt eval"
	loss=$(sed -n 's/.* loss \([^ ]*\) .*/\1/p' "$T/eval.out")
	[ -n "$loss" ] || { cat "$T/eval.out"; fail "no loss in dtrain-ckpt eval's output"; }
	$PY "$DTRAIN_SOURCE_DIR/tests/integration/gpt_torch.py" "$T/$p-ck1.h5" "$T/$p-ck2.h5" "$T/text/train.h5" \
		"$T/$p-logits.f32" "$loss" 6 4 0.5 "$run.json" || fail "dtrain and PyTorch disagree ($p)"
}
compare fp32
pass "the GPT's logits, loss and an AdamW step equal PyTorch's within 1e-5"
# dtrain-run starts itself again with oneDNN's OpenMP threads waiting
# passive (runtime/cmd/main.c) when nobody set OMP_WAIT_POLICY
unset OMP_WAIT_POLICY
compare bf16
grep -q '^dtrain-run: rank 0 device cpu (bf16 products, oneDNN; its OpenMP threads wait passive) collectives mpi$' "$T/run-bf16.out" ||
	{ cat "$T/run-bf16.out"; fail "no bf16 device line, with its OpenMP threads waiting passive"; }
pass "train.precision bf16: an AdamW step equals PyTorch's with bf16 linear layers within lr x 2^-6"
