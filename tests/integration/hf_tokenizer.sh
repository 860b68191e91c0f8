#!/usr/bin/env bash
# Hugging Face's tokenizer.json (runtime/data/hf_tokenizer.c) against a
# reference written from the `tokenizers` library's published behaviour
# (hf_tokenizer_ref.py, each family's pattern run by Python's `regex` as
# tokenizer.json spells it): for each family's layout (Llama 3's, Qwen2's,
# SmolLM's, GPT-2's), a tokenizer.json is trained here on Debian's fortunes
# and tricky strings (the real files are not available offline), then the
# fortunes and the tricky strings are tokenized by `dtrain-data text
# --tokenizer` and by the reference: the ids must be equal and `dtrain-data
# decode` must give back every byte (with the template's begin-of-text).
# Llama 3's vocabulary is padded past 65535: a Llama with 70004 tokens
# trains on its stream, its checkpoint carries the tokenizer.json and
# `dtrain-ckpt sample` takes and writes text. Then the refusals.
. "$(dirname "$0")/lib.sh"
DATA=$DTRAIN_BIN/dtrain-data
PY=/usr/bin/python3 # Debian's, with python3-regex (site/deps.list)
$PY -c 'import regex' 2>"$T/py.err" || { cat "$T/py.err"; fail "$PY lacks regex (site/install-deps.sh --for test installs python3-regex)"; }
REF="$PY $DTRAIN_SOURCE_DIR/tests/integration/hf_tokenizer_ref.py"

mapfile -t texts < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' | sort | head -n 16)
[ "${#texts[@]}" -gt 10 ] || fail "the fortunes are missing (Debian package fortunes; make deps installs it)"
tricky_text "$T"
# what splits Llama 3's pattern from GPT-2's: contractions in capitals and
# with a long s, digits in threes, runs of newlines after spaces, a letter
# run after a tab, added tokens (one a prefix of none, one cut short), and
# a padding token, a whole pre-token, that only ignore_merges gives
{
	printf 'IT\x27S THEY\x27RE We\x27Ll it\x27\xc5\xbf 1234567 12 1\n'
	printf 'a  \n \n\n  b\tword\r\n\r\n  \r\nend\n'
	printf '<|begin_of_text|>x<|end_of_text|><|eot_id|><|end_of_te <tool>y<|im_start|>z<|im_end|>\n'
	printf '~dtaa\n~zzzz\n'
} >"$T/tricky4.txt"
tricky=("$T/tricky.txt" "$T/tricky2.txt" "$T/tricky3.txt" "$T/tricky4.txt")

# bos KIND: what the template puts before every text
bos() { [ "$1" = llama3 ] && printf '<|begin_of_text|>' || true; }

for kind in llama3 qwen2 smollm gpt2; do
	$REF train "$T/$kind.json" $kind 600 "${texts[@]:0:8}" "$T/tricky.txt" || fail "hf_tokenizer_ref.py train $kind"
	expect_rc 0 "$DATA" text "${texts[@]}" "$T/$kind" --tokenizer "$T/$kind.json" \
		--val "${tricky[0]}" --val "${tricky[1]}" --val "${tricky[2]}" --val "${tricky[3]}"
	expect_rc 0 "$DATA" info "$T/$kind/train.h5"
	must_contain "$T/out" "tokenizer: hf-tokenizer"
	must_contain "$T/out" "source: tokenizer.json tokens of ${#texts[@]} files"
	for split in train val; do
		if [ $split = train ]; then files=("${texts[@]}"); else files=("${tricky[@]}"); fi
		$REF encode "$T/$kind.json" "${files[@]}" >"$T/$kind.$split.ref" || fail "hf_tokenizer_ref.py encode"
		"$DATA" decode "$T/$kind/$split.h5" --ids >"$T/$kind.$split.ids" || fail "dtrain-data decode --ids"
		cmp -s "$T/$kind.$split.ref" "$T/$kind.$split.ids" ||
			{ diff "$T/$kind.$split.ref" "$T/$kind.$split.ids" | head; fail "$kind $split.h5: ids differ from the reference's"; }
		"$DATA" decode "$T/$kind/$split.h5" >"$T/$kind.$split.back" || fail "dtrain-data decode"
		for f in "${files[@]}"; do bos $kind; cat "$f"; done | cmp -s - "$T/$kind.$split.back" ||
			fail "$kind $split.h5: decoding does not give the text back"
	done
	pass "$kind: $(cat "$T/$kind".*.ids | wc -l) ids equal to the reference's, every byte back"
done
# the ids past 65535: the added tokens and the padding token of tricky4
vocab=$(jq '.model.vocab | length' "$T/llama3.json")
[ "$vocab" = 70000 ] || fail "the llama3 tokenizer has $vocab tokens, expected 70000"
grep -qx 70003 "$T/llama3.val.ids" || fail "the non-special added token <tool> (70003) is not in the ids"
pad=$(jq '.model.vocab["~dtaa"]' "$T/llama3.json")
[ "$pad" -gt 65535 ] && grep -qx "$pad" "$T/llama3.val.ids" ||
	fail "the padding token ~dtaa ($pad) is not in the ids: ignore_merges"
pass "ids above 65535 (added tokens, ignore_merges) in the stream"

# --- a Llama of 70004 tokens trains on it, its checkpoint carries the tokenizer ---
cat >"$T/llama.json" <<JSON
{ "name": "llama-hf-tok",
  "model": { "type": "llama", "vocab_size": 70004, "context": 32, "layers": 1, "heads": 2, "kv_heads": 1,
             "embd": 16, "intermediate_size": 32 },
  "data": { "train": "$T/llama3/train.h5" },
  "train": { "epochs": 1, "max_steps": 4, "global_batch": 4, "log_every": 1,
             "optimizer": { "type": "adamw", "lr": 0.01 } },
  "checkpoint": { "every_steps": 4, "keep": 1 } }
JSON
mpi_run llama l11 1 1 1
expect_rc 0 "$DTRAIN_BIN/dtrain-ckpt" verify "$T/l11"
ls "$T/l11/checkpoints/step-00000004/tokenizer.json" >/dev/null 2>&1 || fail "the checkpoint carries no tokenizer.json"
cmp -s "$T/llama3.json" "$T/l11/checkpoints/step-00000004/tokenizer.json" || fail "the checkpoint's tokenizer.json is not the one given"
expect_rc 0 "$DTRAIN_BIN/dtrain-ckpt" sample "$T/l11" --prompt "Q: why" --tokens 12 --seed 3
# the prompt as the tokenizer encodes it: its template's begin-of-text first
head -c 23 "$T/out" | cmp -s - <(printf '<|begin_of_text|>Q: why') ||
	{ cat "$T/out"; fail "the sample does not start with its prompt as text"; }
pass "a Llama of 70004 tokens trained on the stream; its checkpoint carries tokenizer.json; sample writes text"

# --- refusals ---
# refused NAME JQ MESSAGE: llama3.json edited by JQ, refused naming MESSAGE
refused() {
	jq "$2" "$T/llama3.json" >"$T/$1.json"
	expect_rc 1 "$DATA" text "${tricky[0]}" "$T/x" --tokenizer "$T/$1.json"
	must_contain "$T/err" "$T/$1.json: $3"
	[ ! -e "$T/x" ] || fail "a refused import left $T/x behind"
}
refused sp '.model.byte_fallback = true' "model.byte_fallback: a SentencePiece-style tokenizer (Llama 2, TinyLlama, Mistral 7B v0.1): not supported"
refused nfkc '.normalizer = {"type": "NFKC"}' "normalizer: \"NFKC\" is not supported"
refused wp '.model.type = "WordPiece"' "model.type: \"WordPiece\": dtrain reads BPE tokenizers only"
refused regex '.pre_tokenizer.pretokenizers[0].pattern.Regex = "\\s+"' "pre_tokenizer.pretokenizers[0].pattern.Regex: \"\\s+\" is not Llama 3's or Qwen2's"
refused prefix '.pre_tokenizer.pretokenizers[1].add_prefix_space = true' "pre_tokenizer: not one dtrain reads"
refused gap '.added_tokens[1].id = 70009' "added tokens: no token has id 70001"
refused merge '.model.merges[3] = "Ġ zzzq"' "model.merges[3]: merge \"Ġ zzzq\": \"zzzq\" is not a token of the encoder"
refused lstrip '.added_tokens[0].lstrip = true' "added_tokens[0] (\"<|begin_of_text|>\"): lstrip, rstrip and single_word are not supported"
head -c 300 "$T/llama3.json" >"$T/cut.json"
expect_rc 1 "$DATA" text "${tricky[0]}" "$T/x" --tokenizer "$T/cut.json"
must_contain "$T/err" "$T/cut.json: line 1, column"
expect_rc 2 "$DATA" text "${tricky[0]}" "$T/x" --tokenizer "$T/llama3.json" --bpe "$T/a" "$T/b"
must_contain "$T/err" "--bpe and --tokenizer: one tokenizer, not both"
# Qwen2's NFC normalizer: a text NFC would change (e and a combining acute
# accent, at byte 4) is refused where it changes
printf 'caf\x65\xcc\x81 ok\n' >"$T/nfd.txt"
expect_rc 1 "$DATA" text "$T/nfd.txt" "$T/x" --tokenizer "$T/qwen2.json"
must_contain "$T/err" "$T/nfd.txt: cannot encode"
must_contain "$T/err" "byte 4: U+0301: the text is not in Unicode's NFC there (or may not be)"
[ ! -e "$T/x" ] || fail "a refused import left $T/x behind"
pass "refusals name the file and the JSON path: SentencePiece, NFKC, WordPiece, another regex, add_prefix_space, an id gap, a merge, lstrip, cut JSON; text not in NFC for Qwen2's"
