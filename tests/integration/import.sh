#!/usr/bin/env bash
# Starting from weights (#37): GPT-2 files written by PyTorch (1.13,
# Debian's) through tests/integration/import_torch.py's own writers,
#  - `dtrain-ckpt import` of a Hugging Face directory (GPT2Model's names,
#    float32, with the attn.bias buffers old files carry), of a
#    GPT2LMHeadModel file in float16, and of an llm.c file (padded
#    vocabulary): `dtrain-ckpt eval`'s logits equal PyTorch's within 1e-5;
#  - `dtrain-ckpt export --format safetensors` loads back into the
#    PyTorch model with strict=True and gives its logits;
#  - hostile files refused with a message naming the file, nothing written;
#  - the tokenizer beside the Hugging Face model (vocab.json, merges.txt)
#    goes into the checkpoint: `sample` encodes the prompt and decodes the
#    same greedy text as PyTorch;
#  - checkpoint.init_from: a fine-tune of the import on 2 pipeline stages,
#    on text tokenized with that BPE (dtrain-data text --bpe),
#    starts from its weights (the first step's loss is the import's eval
#    loss on that batch), trains (the loss falls), and a preempted
#    fine-tune (SIGTERM, exit 75) resumes from its own checkpoint and ends
#    bitwise equal to the uninterrupted one; its checkpoints carry the
#    data's tokenizer, and sample writes text; a tensor the source lacks or
#    shapes otherwise is refused by name unless checkpoint.init_fresh.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3 # Debian's, with python3-torch and python3-h5py (site/deps.list)
TP=$DTRAIN_SOURCE_DIR/tests/integration/import_torch.py
CKPT=$DTRAIN_BIN/dtrain-ckpt
$PY -c 'import torch, h5py' 2>"$T/py.err" || { cat "$T/py.err"; fail "$PY lacks torch or h5py (site/install-deps.sh --for test installs python3-torch and python3-h5py)"; }

$PY "$TP" write "$T" || fail "import_torch.py write"
"$DTRAIN_BIN/dtrain-data" text /usr/share/games/fortunes/riddles "$T/text" >/dev/null || fail "dtrain-data text"

# --- import, then eval against PyTorch ---
for src in hf hf-lm gpt2.bin gpt2-bf16.bin; do
	expect_rc 0 "$CKPT" import "$T/$src" "$T/ck-$src"
	must_contain "$T/out" "into $T/ck-$src/step-00000000"
	expect_rc 0 "$CKPT" verify "$T/ck-$src"
	expect_rc 0 "$CKPT" eval "$T/ck-$src" "$T/text/train.h5" --samples 6 --logits "$T/logits-$src.f32"
	half=
	[ "$src" = hf-lm ] && half=--half
	[ "$src" = gpt2-bf16.bin ] && half=--bf16
	$PY "$TP" logits "$T" "$T/text/train.h5" "$T/logits-$src.f32" 6 $half || fail "the import of $src disagrees with PyTorch"
done
must_contain "$T/out" "loss "
cmp "$T/logits-hf.f32" "$T/logits-gpt2.bin.f32" || fail "the Hugging Face and llm.c imports of one model give different logits"
pass "imports of a Hugging Face directory (float32 and float16) and llm.c files (float32 and bfloat16) give PyTorch's logits"

# --- the tokenizer beside the model goes into the checkpoint: sample reads and writes text ---
expect_rc 0 "$CKPT" inspect "$T/ck-hf"
for f in encoder.json vocab.bpe; do [ -f "$T/ck-hf/step-00000000/$f" ] || fail "the import of hf lacks its $f"; done
[ ! -e "$T/ck-gpt2.bin/step-00000000/encoder.json" ] || fail "the llm.c import got a tokenizer from nowhere"
cmp "$T/ck-hf/step-00000000/encoder.json" "$T/hf/vocab.json" && cmp "$T/ck-hf/step-00000000/vocab.bpe" "$T/hf/merges.txt" ||
	fail "the import's tokenizer files are not the ones beside the model"
expect_rc 0 "$CKPT" sample "$T/ck-hf" --prompt "Riddle me" --temperature 0 --tokens 20
cp "$T/out" "$T/sample.out"
$PY "$TP" greedy "$T" "Riddle me" 20 "$T/greedy.ref" || fail "import_torch.py greedy"
cmp "$T/sample.out" "$T/greedy.ref" || fail "sample's greedy text differs from PyTorch's through the tokenizer"
printf 'x' >>"$T/ck-hf/step-00000000/vocab.bpe"
expect_rc 1 "$CKPT" sample "$T/ck-hf" --prompt "Riddle me"
must_contain "$T/err" "vocab.bpe: size"
truncate -s -1 "$T/ck-hf/step-00000000/vocab.bpe"
expect_rc 0 "$CKPT" verify "$T/ck-hf"
mkdir -p "$T/llmc-tok" && cp "$T/hf/vocab.json" "$T/hf/merges.txt" "$T/llmc-tok/"
expect_rc 1 "$CKPT" import "$T/gpt2.bin" "$T/ck-typo" --tokenizer "$T/llmc-tk"
must_contain "$T/err" "--tokenizer: $T/llmc-tk: not a directory"
expect_rc 0 "$CKPT" import "$T/gpt2.bin" "$T/ck-llmc-tok" --tokenizer "$T/llmc-tok"
must_contain "$T/out" "its BPE tokenizer"
head -c 200 "$T/hf/vocab.json" >"$T/llmc-tok/vocab.json"
expect_rc 1 "$CKPT" import "$T/gpt2.bin" "$T/ck-llmc-bad" --tokenizer "$T/llmc-tok"
must_contain "$T/err" "llmc-tok/vocab.json"
[ ! -e "$T/ck-llmc-bad" ] || fail "a refused import left its directory"
pass "a tokenizer beside the model (or --tokenizer) is imported with it; sample encodes the prompt and decodes PyTorch's greedy text; a damaged one is refused"

# --- export back ---
mkdir -p "$T/exp"
expect_rc 0 "$CKPT" export "$T/ck-gpt2.bin" "$T/exp/model.safetensors" --format safetensors
[ -f "$T/exp/config.json" ] || fail "no config.json beside the export"
$PY "$TP" load "$T" "$T/exp/model.safetensors" "$T/text/train.h5" 6 || fail "the export does not load back into PyTorch"
expect_rc 1 "$CKPT" export "$T/ck-gpt2.bin" "$T/exp/model.safetensors"
must_contain "$T/err" "exp/model.safetensors: exists (hint: --force overwrites it)"
expect_rc 0 "$CKPT" import "$T/exp" "$T/ck-again"
expect_rc 0 "$CKPT" eval "$T/ck-again" "$T/text/train.h5" --samples 6 --logits "$T/logits-again.f32"
cmp "$T/logits-again.f32" "$T/logits-gpt2.bin.f32" || fail "export then import changed the model"
expect_rc 1 "$CKPT" export "$T/ck-gpt2.bin" "$T/ck-gpt2.bin/step-00000000/model.safetensors"
must_contain "$T/err" "ck-gpt2.bin/step-00000000 is a checkpoint, which is never written into"
mkdir -p "$T/exp2" && echo '{"model_type": "llama"}' >"$T/exp2/config.json"
expect_rc 1 "$CKPT" export "$T/ck-gpt2.bin" "$T/exp2/model.safetensors"
must_contain "$T/err" "exp2/config.json: exists and says another model"
[ ! -e "$T/exp2/model.safetensors" ] || fail "a refused export left its weights"
pass "export --format safetensors loads into PyTorch with strict=True, and imports back bitwise; never into a checkpoint, nor beside another model's config"

# --- hostile files ---
$PY "$TP" hostile "$T" || fail "import_torch.py hostile"
refused() { # refused SRC TEXT: import fails naming it, writes nothing
	expect_rc 1 "$CKPT" import "$T/$1" "$T/out-$1"
	must_contain "$T/err" "$2"
	[ ! -e "$T/out-$1" ] || fail "a refused import of $1 left $T/out-$1"
}
refused bad-long "bad-long/model.safetensors: the header is"
refused bad-past "tensor \"wpe.weight\": its data ends at byte"
refused bad-overlap "tensors \"wte.weight\" and \"wpe.weight\" overlap"
refused bad-dtype "tensor \"wpe.weight\": dtype I64 is not handled"
refused bad-truncated "bad-truncated/model.safetensors: tensor \"wte.weight\": its data ends at byte"
refused bad-arch "tensor \"h.0.crossattention.c_attn.weight\" is not GPT-2's"
refused bad-gemma "bad-gemma/config.json: model_type is \"gemma\": dtrain imports GPT-2 (\"gpt2\") and the Llama family"
refused bad-magic.bin "bad-magic.bin: magic 20240327, not llm.c's 20240326"
refused bad-short.bin "bad-short.bin: 295164 bytes, where its header"
expect_rc 1 "$CKPT" import "$T/hf" "$T/ck-hf"
must_contain "$T/err" "ck-hf: not empty"
pass "hostile files and a used directory refused, naming the file, nothing written"

# --- non-finite weights: refused by name, or imported with --allow-nonfinite and then
# reported by verify (what every reader refuses) ---
refused bad-nan "bad-nan/model.safetensors: tensor \"transformer.h.1.attn.c_attn.weight\": 1 non-finite value, the first [5][7] is NaN"
must_contain "$T/err" "hint: --allow-nonfinite imports them"
refused bad-inf.bin "bad-inf.bin: tensor \"transformer.wpe.weight\": 1 non-finite value, the first [3][4] is infinite"
expect_rc 0 "$CKPT" import "$T/bad-nan" "$T/ck-nan" --allow-nonfinite
must_contain "$T/err" "warning: $T/bad-nan/model.safetensors: tensor \"transformer.h.1.attn.c_attn.weight\": 1 non-finite value, the first [5][7] is NaN (imported: --allow-nonfinite)"
expect_rc 1 "$CKPT" verify "$T/ck-nan"
must_contain "$T/err" "is NaN; a checkpoint holds finite values only"
must_not_contain "$T/out" ": ok ("
expect_rc 1 "$CKPT" eval "$T/ck-nan" "$T/text/train.h5" --samples 2
must_contain "$T/err" "is NaN; a checkpoint holds finite values only"
pass "NaN and infinite weights refused at import naming the tensor and its first bad element; --allow-nonfinite imports them, and verify then says so"

# --- fine-tuning: checkpoint.init_from on 2 pipeline stages, text in the model's BPE ---
"$DTRAIN_BIN/dtrain-data" text /usr/share/games/fortunes/riddles "$T/bpe" --bpe "$T/hf/vocab.json" "$T/hf/merges.txt" \
	>/dev/null || fail "dtrain-data text --bpe"
cat >"$T/ft.json" <<JSON
{ "name": "ft", "model": { "type": "gpt", "vocab_size": 300, "context": 32, "layers": 2, "heads": 2, "embd": 48 },
  "data": { "train": "$T/bpe/train.h5", "shuffle": false },
  "resources": { "tasks_per_node": 2 },
  "parallel": { "pipeline": 2, "micro_batches": 2 },
  "train": { "epochs": 8, "max_steps": 1000, "global_batch": 4, "log_every": 1,
             "optimizer": { "type": "adamw", "lr": 0.001, "weight_decay": 0.1 }, "grad_clip": 1.0 },
  "checkpoint": { "every_steps": 20, "keep": 2, "init_from": "$T/ck-hf" } }
JSON
spec() { # spec NAME [--set k=v...]: $T/NAME.json, run dir $T/NAME (what dtrain-run itself refuses: no data check)
	local name=$1
	shift
	$SUBMIT validate "$T/ft.json" --no-data-check --set run_dir="$T/$name" "$@" >"$T/$name.json" 2>"$T/$name.err" ||
		{ cat "$T/$name.err"; fail "spec $name"; }
	mkdir -p "$T/$name"
}
ft() { # ft NAME: dtrain-run on 2 ranks, output appended to $T/NAME.out; its exit code
	mpirun --allow-run-as-root --oversubscribe -np 2 "$DTRAIN_BIN/dtrain-run" --save-params "$T/$1/params" \
		"$T/$1.json" >>"$T/$1.out" 2>&1
}
expect_rc 0 $SUBMIT validate "$T/ft.json" # the data check takes init_from's tensors too
spec whole
ft whole || { cat "$T/whole.out"; fail "the fine-tune"; }
must_contain "$T/whole.out" "starting from the model of $T/ck-hf/step-00000000 (step 0 of its run, written on data 1 x pipeline 1): 29 tensors taken, 0 kept fresh"
expect_rc 0 "$CKPT" eval "$T/ck-hf" "$T/bpe/train.h5" --samples 4
want=$(sed -n 's/.* loss \([^ ]*\) .*/\1/p' "$T/out")
$PY - "$T/whole/metrics.jsonl" "$want" <<'PYEOF' || fail "the fine-tune did not start from the import, or did not learn"
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"event":"step"' in l]
loss = [s["loss"] for s in steps]
first, want = loss[0], float(sys.argv[2])
print(f"  step 1 loss {first:.7f}, the import's eval loss on that batch {want:.7f}; "
      f"mean of the first 10 steps {sum(loss[:10]) / 10:.4f}, of the last 10 {sum(loss[-10:]) / 10:.4f}")
assert steps[0]["step"] == 1 and abs(first - want) <= 1e-5 * want, "step 1 is not the import's model"
assert sum(loss[-10:]) < 0.8 * sum(loss[:10]), "the loss did not fall"
PYEOF
latest=$T/whole/checkpoints/$(readlink "$T/whole/checkpoints/latest")
cmp "$latest/encoder.json" "$T/hf/vocab.json" && cmp "$latest/vocab.bpe" "$T/hf/merges.txt" ||
	fail "the fine-tune's checkpoint does not carry the data's tokenizer"
jq -e '[.files[].name] | index("encoder.json") and index("vocab.bpe")' "$latest/MANIFEST.json" >/dev/null ||
	fail "the fine-tune's manifest does not list the tokenizer's files"
expect_rc 0 "$CKPT" sample "$T/whole" --prompt "Q: " --tokens 40 --seed 3
[ "$(head -c 3 "$T/out")" = "Q: " ] && [ "$(wc -c <"$T/out")" -gt 43 ] || fail "sample of the fine-tune did not write text through its tokenizer"
pass "a fine-tune from the import on 2 stages starts from its weights and learns; its checkpoints carry the data's tokenizer"

spec stopped
ft stopped &
pid=$!
for _ in $(seq 600); do
	n=$(grep -c '"event":"step"' "$T/stopped/metrics.jsonl" 2>/dev/null || true)
	[ "${n:-0}" -ge 25 ] && break
	sleep 0.05
done
pkill -TERM -f "dtrain-run --save-params $T/stopped/params" || fail "no fine-tune to stop"
rc=0
wait "$pid" || rc=$?
[ "$rc" -ne 0 ] || { cat "$T/stopped.out"; fail "the stopped fine-tune exited 0"; }
must_contain "$T/stopped/metrics.jsonl" '"event":"stop"'
ft stopped || { cat "$T/stopped.out"; fail "the resumed fine-tune"; }
must_contain "$T/stopped.out" "resuming from $T/stopped/checkpoints/step-"
diff -r "$T/whole/params" "$T/stopped/params" >/dev/null || fail "the preempted fine-tune does not end bitwise equal to the whole one"
pass "a preempted fine-tune resumes from its own checkpoint and ends bitwise equal"

# --- what does not fit, and a shorter context ---
spec ctx --set model.context=16 --set train.max_steps=1 --set train.optimizer.lr=1e-12
ft ctx || { cat "$T/ctx.out"; fail "a fine-tune with a shorter context"; }
must_contain "$T/ctx.out" "29 tensors taken (the position table cropped to model.context), 0 kept fresh"
$PY - "$T/ctx/params/block-0.f32" "$T/ref.pt" <<'PYEOF' || fail "the cropped position table is not the source's first rows"
import sys, numpy as np, torch
got = np.fromfile(sys.argv[1], dtype=np.float32)[300 * 48:].reshape(16, 48)  # after wte: wpe
want = torch.load(sys.argv[2])["transformer.wpe.weight"][:16].numpy()
assert np.array_equal(got, want), abs(got - want).max()
PYEOF
expect_rc 3 $SUBMIT validate "$T/ft.json" --set model.vocab_size=320
must_contain "$T/err" "checkpoint.init_from: $T/ck-hf/step-00000000: tensor transformer.wte.weight is [300][48] there, [320][48] in this model (hint: list it in checkpoint.init_fresh"
must_contain "$T/err" "tensor lm_head.weight is [300][48] there"
spec vocab --set model.vocab_size=320 --set train.max_steps=2
! ft vocab || fail "a model of another vocabulary started from the import"
must_contain "$T/vocab.out" "tensor transformer.wte.weight is [300][48] there, [320][48] in this model"
spec fresh --set model.vocab_size=320 --set train.max_steps=2 \
	--set 'checkpoint.init_fresh=["transformer.wte.weight","lm_head.weight"]'
ft fresh || { cat "$T/fresh.out"; fail "init_fresh"; }
must_contain "$T/fresh.out" "27 tensors taken, 2 kept fresh"
expect_rc 3 $SUBMIT validate "$T/ft.json" --set 'checkpoint.init_fresh=["head.weight"]'
must_contain "$T/err" 'checkpoint.init_fresh: this model has no tensor "head.weight"'
expect_rc 3 $SUBMIT validate "$T/ft.json" --set model.heads=4
must_contain "$T/err" "checkpoint.init_from: $T/ck-hf/step-00000000: its model has model.heads 2, this one 4"
# another width: said once, as the key, not for each of its 29 tensors; labelled by the key, not "data:"
expect_rc 3 $SUBMIT validate "$T/ft.json" --set model.embd=64
must_contain "$T/err" "$T/ft.json: checkpoint.init_from: $T/ck-hf/step-00000000: model.embd differs: checkpoint 48, spec 64"
[ "$(grep -c . "$T/err")" -eq 1 ] || { cat "$T/err"; fail "another model.embd is not said in one line"; }
must_not_contain "$T/err" "data:"
# a Hugging Face directory (or an llm.c file) where a checkpoint should be: import it first
expect_rc 3 $SUBMIT validate "$T/ft.json" --set checkpoint.init_from="$T/hf"
must_contain "$T/err" "$T/ft.json: checkpoint.init_from: $T/hf: another program's weights (Hugging Face or llm.c), not a dtrain checkpoint (hint: make one with \`dtrain-ckpt import $T/hf DIR\`"
must_not_contain "$T/err" "data:"
expect_rc 3 $SUBMIT validate "$T/ft.json" --set checkpoint.init_from="$T/gpt2.bin"
must_contain "$T/err" "dtrain-ckpt import $T/gpt2.bin DIR"
spec hfdir --set train.max_steps=2 --set checkpoint.init_from="$T/hf"
! ft hfdir || fail "init_from a Hugging Face directory started"
must_contain "$T/hfdir.out" "checkpoint.init_from: $T/hf: another program's weights"
# said first and alone: no search for a checkpoint there before it
must_not_contain "$T/hfdir.out" "no MANIFEST.json"
must_not_contain "$T/hfdir.out" "no valid checkpoint there"
spec fresh2 --set train.max_steps=1 --set 'checkpoint.init_fresh=["transformer.ln_f.bias"]'
ft fresh2 || { cat "$T/fresh2.out"; fail "init_fresh of a tensor the source has"; }
must_contain "$T/fresh2.out" "28 tensors taken, 1 kept fresh"
spec resumed --set train.max_steps=1 --set checkpoint.init_from=null --set checkpoint.resume="$T/ck-hf"
! ft resumed || fail "checkpoint.resume of an import started"
must_contain "$T/resumed.out" "holds a model's parameters only (an import, or another program's weights), no training state to resume (hint: start a new run from it with checkpoint.init_from)"
spec nosuch --set train.max_steps=2 --set 'checkpoint.init_fresh=["head.weight"]'
! ft nosuch || fail "init_fresh naming no tensor of the model"
must_contain "$T/nosuch.out" 'checkpoint.init_fresh: this model has no tensor "head.weight"'
expect_rc 3 $SUBMIT validate "$T/ft.json" --set checkpoint.init_from="$T/ck-nothere"
must_contain "$T/err" "checkpoint.init_from: $T/ck-nothere: not a checkpoint dtrain can start from"
spec missing --set train.max_steps=2 --set checkpoint.init_from="$T/ck-nothere"
! ft missing || fail "init_from a missing path"
must_contain "$T/missing.out" "checkpoint.init_from: $T/ck-nothere: no valid checkpoint there"
expect_rc 3 $SUBMIT validate "$T/ft.json" --set checkpoint.resume="$T/ck-hf"
must_contain "$T/err" "checkpoint.init_from: a run starts either from checkpoint.resume's checkpoint"
pass "a shorter context crops the position table; another vocabulary, width or number of heads, a Hugging Face directory, an unknown init_fresh name, a missing source, init_from with resume and resume of an import refused by name, at submit and at start; init_fresh keeps tensors fresh"
