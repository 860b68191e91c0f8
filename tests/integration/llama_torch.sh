#!/usr/bin/env bash
# dtrain's Llama against PyTorch (tests/integration/llama_torch.py): a
# model trained 3 steps over 2 pipeline stages, its checkpoints exported
# and loaded into a Llama written from the published formulas: the same
# logits and loss as `dtrain-ckpt eval`, and one AdamW step from
# checkpoint 1 gives checkpoint 2's parameters, each within 1e-5 relative.
# Three models: grouped-query heads (4 heads, 2 kv heads) with an untied
# head; Qwen2's q/k/v biases with one kv head (multi-query), a tied head
# across the stages and rope_theta 1e6; and Llama 3.1's rope_scaling, whose
# head size 8 puts one frequency in each of its bands.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3 # Debian's, with python3-torch and python3-h5py (site/deps.list)
$PY -c 'import torch, h5py' 2>"$T/py.err" || { cat "$T/py.err"; fail "$PY lacks torch or h5py (site/install-deps.sh --for test installs python3-torch and python3-h5py)"; }

"$DTRAIN_BIN/dtrain-data" text /usr/share/games/fortunes/riddles "$T/text" >/dev/null || fail "dtrain-data text"
cat >"$T/job.json" <<JSON
{ "name": "llama-torch",
  "model": { "type": "llama", "vocab_size": 256, "context": 32, "layers": 2, "heads": 4, "kv_heads": 2,
             "embd": 32, "intermediate_size": 64, "rms_norm_eps": 1e-5 },
  "data": { "train": "$T/text/train.h5", "shuffle": false },
  "resources": { "tasks_per_node": 2 },
  "parallel": { "pipeline": 2, "micro_batches": 2 },
  "train": { "max_steps": 3, "global_batch": 4, "log_every": 1,
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.1, "betas": [0.9, 0.95] },
             "grad_clip": 0.5 },
  "checkpoint": { "every_steps": 1, "keep": 5 } }
JSON
# compare NAME SET...: the run with those --set, its checkpoints 1 and 2, and llama_torch.py
compare() {
	local name=$1 run=$T/run-$1 ck sets=() kv
	shift
	for kv in "$@"; do sets+=(--set "$kv"); done
	$SUBMIT validate "$T/job.json" --set run_dir="$run" "${sets[@]}" >"$run.json" 2>"$T/err" ||
		{ cat "$T/err"; fail "spec ($name)"; }
	mkdir -p "$run"
	mpirun --allow-run-as-root --oversubscribe -np 2 "$DTRAIN_BIN/dtrain-run" "$run.json" >"$run.out" 2>&1 ||
		{ cat "$run.out"; fail "dtrain-run ($name)"; }
	ck=$run/checkpoints
	for s in 1 2; do
		"$DTRAIN_BIN/dtrain-ckpt" export "$ck/step-0000000$s" "$T/$name-ck$s.h5" >/dev/null || fail "export step $s ($name)"
	done
	"$DTRAIN_BIN/dtrain-ckpt" eval "$ck/step-00000001" "$T/text/train.h5" --samples 6 --logits "$T/$name-logits.f32" \
		>"$T/eval.out" || fail "dtrain-ckpt eval ($name)"
	loss=$(sed -n 's/.* loss \([^ ]*\) .*/\1/p' "$T/eval.out")
	[ -n "$loss" ] || { cat "$T/eval.out"; fail "no loss in dtrain-ckpt eval's output"; }
	echo "$name:"
	$PY "$DTRAIN_SOURCE_DIR/tests/integration/llama_torch.py" "$T/$name-ck1.h5" "$T/$name-ck2.h5" "$T/text/train.h5" \
		"$T/$name-logits.f32" "$loss" 6 4 0.5 "$run.json" || fail "dtrain and PyTorch disagree ($name)"
}
compare gqa
pass "a Llama with grouped-query heads and an untied head: logits, loss and an AdamW step equal PyTorch's within 1e-5"
compare qwen model.qkv_bias=true model.kv_heads=1 model.tie_word_embeddings=true model.rope_theta=1000000
pass "Qwen2's q/k/v biases, one kv head, a tied head across 2 stages: equal PyTorch's within 1e-5"
compare llama3 model.rope_scaling.rope_type=llama3 model.rope_scaling.factor=8 \
	model.rope_scaling.low_freq_factor=1 model.rope_scaling.high_freq_factor=4 \
	model.rope_scaling.original_max_position_embeddings=64
pass "Llama 3.1's rope_scaling: equal PyTorch's within 1e-5"
