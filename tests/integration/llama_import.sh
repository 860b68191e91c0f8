#!/usr/bin/env bash
# Hugging Face models of the Llama family into dtrain (dtrain-ckpt import):
# files written as Hugging Face lays them out (tests/integration/
# llama_import.py: config.json, model.safetensors or shards with
# model.safetensors.index.json, float32, float16 or bfloat16), imported, and
# `dtrain-ckpt eval`'s logits against PyTorch's on the same weights (the
# Llama of llama_torch.py), within 1e-5 relative:
#  - Llama, grouped-query heads, an untied head, float32, one file;
#  - Qwen2 (q/k/v biases, one kv head, tied, rope_theta 1e6), bfloat16 in 3 shards;
#  - Llama 3.1's rope_scaling, tied, float16 in 2 shards, --context 32;
#  - Mistral (no sliding window), float32.
# `dtrain-ckpt export` writes them back (the same tensors, config.json), and
# the import starts a fine-tune (checkpoint.init_from). Refused, naming the
# file and the key or tensor: an activation, biases, a rope_scaling and a
# sliding window dtrain's Llama does not compute, another model_type, a
# tensor of another architecture, a missing one, another shape, a tokenizer
# of more tokens than the model (one dtrain does not read, a SentencePiece
# model's, is left out with a warning).
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3 # Debian's, with python3-torch and python3-h5py (site/deps.list)
$PY -c 'import torch, h5py' 2>"$T/py.err" || { cat "$T/py.err"; fail "$PY lacks torch or h5py (site/install-deps.sh --for test installs python3-torch and python3-h5py)"; }
HFPY=$DTRAIN_SOURCE_DIR/tests/integration/llama_import.py
CKPT=$DTRAIN_BIN/dtrain-ckpt

"$DTRAIN_BIN/dtrain-data" text /usr/share/games/fortunes/riddles "$T/text" >/dev/null || fail "dtrain-data text"

# config NAME TYPE JSON-KEYS: $T/NAME.config.json, a small model of the family
config() {
	cat >"$T/$1.config.json" <<JSON
{ "model_type": "$2", "architectures": ["X"], "vocab_size": 256, "hidden_size": 32,
  "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "max_position_embeddings": 64, "hidden_act": "silu", "torch_dtype": "float32" $3 }
JSON
}
# hf NAME DTYPE SHARDS: the Hugging Face files of $T/NAME.config.json in $T/NAME
hf() {
	$PY "$HFPY" write "$T/$1" "$T/$1.config.json" "$2" "$3" 7 >"$T/$1.py.out" 2>&1 ||
		{ cat "$T/$1.py.out"; fail "llama_import.py write ($1)"; }
}
# same NAME CONTEXT [IMPORT OPTIONS]: imported, its logits PyTorch's
same() {
	local name=$1 ctx=$2
	shift 2
	"$CKPT" import "$T/$name" "$T/$name-ck" "$@" >"$T/$name.import" 2>&1 || { cat "$T/$name.import"; fail "import ($name)"; }
	must_contain "$T/$name.import" "V 256, T $ctx, L 2, NH 4, C 32"
	"$CKPT" eval "$T/$name-ck" "$T/text/train.h5" --samples 4 --logits "$T/$name.f32" >"$T/$name.eval" 2>&1 ||
		{ cat "$T/$name.eval"; fail "eval ($name)"; }
	echo "$name: $(sed 's/^dtrain-ckpt: //' "$T/$name.import")"
	$PY "$HFPY" check "$T/$name" "$T/text/train.h5" "$T/$name.f32" 4 "$ctx" || fail "dtrain and PyTorch disagree ($name)"
}

config gqa llama ', "num_key_value_heads": 2, "rms_norm_eps": 1e-5, "tie_word_embeddings": false'
hf gqa F32 1
same gqa 64
must_contain "$T/gqa.import" "imported $T/gqa/model.safetensors (Hugging Face llama: "
config qwen qwen2 ', "num_key_value_heads": 1, "rope_theta": 1000000.0, "tie_word_embeddings": true, "use_sliding_window": false, "sliding_window": 16'
hf qwen BF16 3
same qwen 64
must_contain "$T/qwen.import" "model.safetensors.index.json (Hugging Face qwen2: "
config l3 llama ', "num_key_value_heads": 2, "tie_word_embeddings": true, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}'
hf l3 F16 2
same l3 32 --context 32
config mis mistral ', "num_key_value_heads": 2, "sliding_window": null'
hf mis F32 1
same mis 64
pass "Llama (untied, f32), Qwen2 (biases, tied, bf16, 3 shards), Llama 3.1 rope_scaling (f16, 2 shards), Mistral: logits equal PyTorch's within 1e-5"

# --- exported back: Hugging Face's names and config, the same model ---
for name in gqa qwen l3; do
	mkdir -p "$T/$name-out"
	"$CKPT" export "$T/$name-ck" "$T/$name-out/model.safetensors" >"$T/$name.export" 2>&1 ||
		{ cat "$T/$name.export"; fail "export ($name)"; }
	$PY "$HFPY" same "$T/$name" "$T/$name-out/model.safetensors" || fail "the export of $name is not its import"
	"$CKPT" import "$T/$name-out" "$T/$name-back" >"$T/$name-back.import" 2>&1 ||
		{ cat "$T/$name-back.import"; fail "import of the export ($name)"; }
	"$CKPT" eval "$T/$name-back" "$T/text/train.h5" --samples 4 --logits "$T/$name-back.f32" >/dev/null 2>&1 ||
		fail "eval of the export ($name)"
	cmp -s "$T/$name.f32" "$T/$name-back.f32" || fail "the export of $name imports back to other logits"
done
jq -e '.model_type == "llama" and .architectures == ["LlamaForCausalLM"] and .num_key_value_heads == 2
	and .tie_word_embeddings == false and .hidden_act == "silu" and .rms_norm_eps == 1e-5 and .rope_scaling == null' \
	"$T/gqa-out/config.json" >/dev/null || { cat "$T/gqa-out/config.json"; fail "the Llama's config.json"; }
jq -e '.model_type == "qwen2" and .num_key_value_heads == 1 and .tie_word_embeddings == true and .rope_theta == 1000000' \
	"$T/qwen-out/config.json" >/dev/null || { cat "$T/qwen-out/config.json"; fail "the Qwen2's config.json"; }
jq -e '.rope_scaling == {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 16}
	and .max_position_embeddings == 32' "$T/l3-out/config.json" >/dev/null || { cat "$T/l3-out/config.json"; fail "the Llama 3.1's config.json"; }
pass "exported to safetensors and config.json (Llama, Qwen2, Llama 3.1): the imported tensors bitwise, tied heads left out; imported again, the same logits"

# --- a fine-tune starts from the import ---
cat >"$T/ft.json" <<JSON
{ "name": "ft", "model": { "type": "llama", "vocab_size": 256, "context": 32, "layers": 2, "heads": 4, "kv_heads": 2,
             "embd": 32, "intermediate_size": 64, "rms_norm_eps": 1e-5 },
  "data": { "train": "$T/text/train.h5" },
  "train": { "max_steps": 2, "global_batch": 4, "log_every": 1, "optimizer": { "type": "adamw", "lr": 0.001 } },
  "checkpoint": { "init_from": "$T/gqa-ck" } }
JSON
$SUBMIT validate "$T/ft.json" --set run_dir="$T/ft" >"$T/ft.r.json" 2>"$T/ft.err" || { cat "$T/ft.err"; fail "spec ft"; }
mkdir -p "$T/ft"
mpirun --allow-run-as-root -np 1 "$DTRAIN_BIN/dtrain-run" "$T/ft.r.json" >"$T/ft.out" 2>&1 || { cat "$T/ft.out"; fail "fine-tune from the import"; }
must_contain "$T/ft.out" "dtrain-run: done: 2 steps"
pass "a run starts from the imported Llama (checkpoint.init_from)"

# --- refused ---
# refused NAME WANT: the import of $T/NAME fails naming WANT, writes nothing
refused() {
	expect_rc 1 "$CKPT" import "$T/$1" "$T/$1-ck"
	must_contain "$T/err" "$2"
	[ ! -e "$T/$1-ck" ] || fail "a refused import ($1) left $T/$1-ck"
}
config gelu llama ', "hidden_act": "gelu_pytorch_tanh"'
hf gelu F32 1
refused gelu "$T/gelu/config.json: hidden_act is \"gelu_pytorch_tanh\"; dtrain's Llama has \"silu\" (SwiGLU)"
config abias llama ', "attention_bias": true'
hf abias F32 1
refused abias "$T/abias/config.json: attention_bias is true; dtrain's Llama has biases on q, k and v only (Qwen2's)"
config yarn llama ', "rope_scaling": {"rope_type": "yarn", "factor": 4.0}'
hf yarn F32 1
refused yarn "$T/yarn/config.json: rope_scaling {"
must_contain "$T/err" "dtrain's Llama computes rope_type \"llama3\" or none"
config window mistral ', "sliding_window": 16'
hf window F32 1
refused window "$T/window/config.json: sliding_window is 16, shorter than max_position_embeddings (64)"
config other gemma ''
hf other F32 1
refused other "$T/other/config.json: model_type is \"gemma\": dtrain imports GPT-2 (\"gpt2\") and the Llama family"
# another intermediate_size than the weights': every MLP tensor's shape
cp -r "$T/gqa" "$T/shape"
jq '.intermediate_size = 48' "$T/gqa/config.json" >"$T/shape/config.json"
refused shape "$T/shape/model.safetensors: model.layers.0.mlp.gate_proj.weight: shape [64][32], where the model of its config.json has [48][32]"
# one layer fewer in the config: the second layer's tensors are another model's
cp -r "$T/gqa" "$T/extra"
jq '.num_hidden_layers = 1' "$T/gqa/config.json" >"$T/extra/config.json"
refused extra "$T/extra/model.safetensors: tensor \"model.layers.1."
must_contain "$T/err" "is not this Llama's (another architecture, or a config.json that does not match?)"
# an untied config of tied weights: no lm_head.weight
cp -r "$T/qwen" "$T/nohead"
jq '.tie_word_embeddings = false' "$T/qwen/config.json" >"$T/nohead/config.json"
refused nohead "no tensor \"lm_head.weight\" (tie_word_embeddings is false: the head is a tensor of its own)"
# a shard gone
cp -r "$T/qwen" "$T/lost"
rm "$T/lost/model-00002-of-00003.safetensors"
refused lost "$T/lost/model-00002-of-00003.safetensors: cannot open: No such file or directory"
# a Llama's tokenizer is its tokenizer.json: GPT-2's file names beside it
# (Qwen2 ships vocab.json and merges.txt too) are not read, one of more
# tokens than the model has is refused, one dtrain does not read (a
# SentencePiece model) is left out with a warning, refused with --tokenizer
cp -r "$T/qwen" "$T/tok"
printf '{"a": 0}' >"$T/tok/vocab.json"
printf '#version: 0.2\n' >"$T/tok/merges.txt"
expect_rc 0 "$CKPT" import "$T/tok" "$T/tok-ck"
must_not_contain "$T/out" "tokenizer"
$PY "$DTRAIN_SOURCE_DIR/tests/integration/hf_tokenizer_ref.py" train "$T/tok/tokenizer.json" qwen2 0 /dev/null ||
	fail "hf_tokenizer_ref.py train"
expect_rc 1 "$CKPT" import "$T/tok" "$T/tok-ck2"
must_contain "$T/err" "$T/tok: 260 tokens, more than the model's vocabulary of 256: not its tokenizer"
jq '.model.byte_fallback = true' "$T/tok/tokenizer.json" >"$T/sp.json" && mv "$T/sp.json" "$T/tok/tokenizer.json"
expect_rc 0 "$CKPT" import "$T/tok" "$T/tok-ck3"
must_contain "$T/err" "warning: $T/tok/tokenizer.json: model.byte_fallback: a SentencePiece-style tokenizer"
must_contain "$T/err" "the tokenizer is left out"
expect_rc 1 "$CKPT" import "$T/tok" "$T/tok-ck2" --tokenizer "$T/tok"
must_contain "$T/err" "$T/tok/tokenizer.json: model.byte_fallback: a SentencePiece-style tokenizer"
[ ! -e "$T/tok-ck2" ] || fail "a refused import left $T/tok-ck2"
pass "refused, naming the file and the key or tensor: gelu, attention_bias, rope_scaling yarn, a sliding window, gemma, a shape, an extra tensor, a missing head, a lost shard, a tokenizer too big or SentencePiece"
