#!/usr/bin/env bash
# dtrain-data text --bpe against a reference written from GPT-2's published
# algorithm (bpe_ref.py, standard library only): a GPT-2-like tokenizer of
# 2000 merges is trained here on Debian's fortunes and tricky strings (the
# real GPT-2 files are not available offline), then the fortunes and the
# tricky strings (spaces, digits, Unicode, emoji, contractions, CRLF, tabs,
# invalid UTF-8) are tokenized by both: the ids must be equal and
# `dtrain-data decode` must give back every byte. Then the refusals: a
# broken vocab.bpe or encoder.json, --bpe without its files, decoding a
# stream that records no tokenizer.
. "$(dirname "$0")/lib.sh"
DATA=$DTRAIN_BIN/dtrain-data
PY=/usr/bin/python3 # Debian's; unicodedata of the same Unicode as runtime/data/unicode_classes.c
REF="$PY $DTRAIN_SOURCE_DIR/tests/integration/bpe_ref.py"

mapfile -t texts < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' | sort)
[ "${#texts[@]}" -gt 10 ] || fail "the fortunes are missing (Debian package fortunes; make deps installs it)"

# --- the tricky strings ---
tricky_text "$T"

# --- a GPT-2-like tokenizer: 256 bytes, 2000 merges, <|endoftext|> ---
$REF train "$T/tok" 2000 "${texts[@]:0:12}" "$T/tricky.txt" || fail "bpe_ref.py train"
vocab=$($PY -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$T/tok/encoder.json")
[ "$vocab" = 2257 ] || fail "the trained encoder has $vocab tokens, expected 2257"
pass "bpe_ref.py trained 2000 merges (vocabulary $vocab)"

# --- the fortunes: the same ids as the reference, and every byte back ---
tricky=("$T/tricky.txt" "$T/tricky2.txt" "$T/tricky3.txt")
expect_rc 0 "$DATA" text "${texts[@]}" "$T/bpe" --bpe "$T/tok/encoder.json" "$T/tok/vocab.bpe" \
	--val "$T/tricky.txt" --val "$T/tricky2.txt" --val "$T/tricky3.txt"
expect_rc 0 "$DATA" info "$T/bpe/train.h5"
must_contain "$T/out" "vocabulary: 2257"
must_contain "$T/out" "tokenizer: gpt2-bpe"
must_contain "$T/out" "source: GPT-2 BPE tokens of ${#texts[@]} files"
for split in train val; do
	if [ $split = train ]; then files=("${texts[@]}"); else files=("${tricky[@]}"); fi
	$REF encode "$T/tok/encoder.json" "$T/tok/vocab.bpe" "${files[@]}" >"$T/$split.ref" ||
		fail "bpe_ref.py encode"
	"$DATA" decode "$T/bpe/$split.h5" --ids >"$T/$split.ids" || fail "dtrain-data decode --ids $split.h5"
	cmp -s "$T/$split.ref" "$T/$split.ids" ||
		{ diff "$T/$split.ref" "$T/$split.ids" | head; fail "$split.h5: ids differ from bpe_ref.py's"; }
	"$DATA" decode "$T/bpe/$split.h5" >"$T/$split.back" || fail "dtrain-data decode $split.h5"
	cat "${files[@]}" | cmp -s - "$T/$split.back" || fail "$split.h5: decoding does not give the text back"
	n=$(wc -l <"$T/$split.ids")
	bytes=$(wc -c <"$T/$split.back")
	pass "$split.h5: $n ids equal to the reference's, $bytes bytes back ($(awk -v b="$bytes" -v n="$n" 'BEGIN { printf "%.2f", b / n }') bytes a token)"
done
# a range of tokens
"$DATA" decode "$T/bpe/val.h5" --first 0 --count 3 --ids >"$T/three" || fail "decode --count"
head -n 3 "$T/val.ids" | cmp -s - "$T/three" || fail "decode --first 0 --count 3 --ids"

# --- byte-level output keeps no tokenizer ---
expect_rc 0 "$DATA" text "$T/tricky.txt" "$T/bytes"
expect_rc 0 "$DATA" info "$T/bytes/train.h5"
must_not_contain "$T/out" "tokenizer"
"$DATA" decode "$T/bytes/train.h5" >"$T/bytes.back" || fail "decode of a byte-level stream"
"$DATA" decode "$T/bytes/val.h5" >>"$T/bytes.back" || fail "decode of a byte-level stream"
cmp -s "$T/tricky.txt" "$T/bytes.back" || fail "byte-level decode does not give the text back"
pass "byte-level streams: no tokenizer recorded, decoded back"

# --- refusals ---
expect_rc 2 "$DATA" text "$T/tricky.txt" "$T/x" --bpe "$T/tok/encoder.json"
must_contain "$T/err" "--bpe: expected two files, ENCODER_JSON VOCAB_BPE"
{ head -n 3 "$T/tok/vocab.bpe"; echo "a b c"; } >"$T/bad.bpe"
expect_rc 1 "$DATA" text "$T/tricky.txt" "$T/x" --bpe "$T/tok/encoder.json" "$T/bad.bpe"
must_contain "$T/err" "$T/bad.bpe: line 4: a merge is two symbols separated by one space (got \"a b c\")"
{ head -n 2 "$T/tok/vocab.bpe"; echo "Ġ zzzq"; } >"$T/bad2.bpe"
expect_rc 1 "$DATA" text "$T/tricky.txt" "$T/x" --bpe "$T/tok/encoder.json" "$T/bad2.bpe"
must_contain "$T/err" "$T/bad2.bpe: line 3: merge \"Ġ zzzq\": \"zzzq\" is not a token of the encoder"
head -c 100 "$T/tok/encoder.json" >"$T/bad.json"
expect_rc 1 "$DATA" text "$T/tricky.txt" "$T/x" --bpe "$T/bad.json" "$T/tok/vocab.bpe"
must_contain "$T/err" "$T/bad.json: line 1, column"
[ ! -e "$T/x" ] || fail "a refused import left $T/x behind"
printf '\x01\x00\x02\x00\x03\x00\x04\x00' >"$T/shard.bin"
expect_rc 0 "$DATA" tokens "$T/shard.bin" "$T/shard" --val "$T/shard.bin"
expect_rc 1 "$DATA" decode "$T/shard/train.h5"
must_contain "$T/err" "records no tokenizer"
must_contain "$T/err" "hint: --ids prints the ids"
expect_rc 2 "$DATA" decode "$T/shard/train.h5" --count x
expect_rc 1 "$DATA" decode "$T/shard/train.h5" --first 3 --count 5 --ids
must_contain "$T/err" "outside the stream's 4"
expect_rc 0 "$DATA" decode --help
must_contain "$T/out" "usage: dtrain-data decode"
pass "refusals: malformed files named, decode without a tokenizer"
