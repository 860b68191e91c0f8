#!/usr/bin/env bash
# dtrain-data without a cluster: help and usage errors; the real Fashion-MNIST
# converted and checked with `dtrain-data info` and HDF5's own h5ls/h5dump;
# a synthetic set, byte-identical when made twice; refusals (missing --src,
# corrupt IDX and gzip files made here, files that are not data sets) with
# their exit codes, leaving nothing behind.
. "$(dirname "$0")/lib.sh"
DATA=$DTRAIN_BIN/dtrain-data
FM=/usr/share/datasets/fashion-mnist

# --- help and usage errors (exit 2) ---
for sub in "" fashion-mnist synthetic info bench; do
	expect_rc 0 $DATA $sub --help
	must_contain "$T/out" "usage: dtrain-data"
done
expect_rc 2 $DATA
expect_rc 2 $DATA frobnicate
must_contain "$T/err" 'unknown command "frobnicate"'
expect_rc 2 $DATA infos
must_contain "$T/err" 'dtrain-data: unknown command "infos"; did you mean "info"?'
expect_rc 2 $DATA synthetic
must_contain "$T/err" "missing argument"
expect_rc 2 $DATA synthetic "$T/x.h5" --samples abc
must_contain "$T/err" '--samples: expected an integer in [1, '
expect_rc 2 $DATA synthetic "$T/x.h5" --classes 1
must_contain "$T/err" '--classes: expected an integer in [2, 1000000] (got "1")'
expect_rc 2 $DATA info --bogus "$T/x.h5"
must_contain "$T/err" 'unknown option "--bogus"'
expect_rc 2 $DATA info --hepl "$T/x.h5"
must_contain "$T/err" 'unknown option "--hepl"; did you mean "--help"?'
expect_rc 0 $DATA text --help # the README's --bpe gpt2/vocab.json gpt2/merges.txt
must_contain "$T/out" "vocab.json"
must_contain "$T/out" "merges.txt"
expect_rc 2 $DATA fashion-mnist --src
must_contain "$T/err" "--src: missing its value"
[ ! -e "$T/x.h5" ] || fail "a usage error wrote $T/x.h5"
pass "--help everywhere; usage errors exit 2 and name the flag"

# --- Fashion-MNIST, the real one ---
[ -d "$FM" ] || fail "$FM is missing: install the Debian package dataset-fashion-mnist (site/install-deps.sh)"
expect_rc 0 $DATA fashion-mnist --src "$FM/" "$T/fm//" # trailing slashes: one slash in the paths
must_contain "$T/err" "wrote $T/fm/train.h5: 60000 samples"
must_contain "$T/err" "wrote $T/fm/test.h5: 10000 samples"
[ "$(ls "$T/fm")" = "$(printf 'test.h5\ntrain.h5')" ] || fail "unexpected files in $T/fm: $(ls "$T/fm")"
expect_rc 0 $DATA info "$T/fm/train.h5"
must_contain "$T/out" "samples: 60000"
must_contain "$T/out" "features: 784"
must_contain "$T/out" "classes: 10"
must_contain "$T/out" "samples per class: 6000 6000 6000 6000 6000 6000 6000 6000 6000 6000"
must_contain "$T/out" "source: Fashion-MNIST"
must_contain "$T/out" '/format = "dtrain-dataset"'
must_contain "$T/out" "/version = 1"
must_contain "$T/out" "/features/mean = 0.2860"
must_contain "$T/out" "/features/std = 0.3530"
grep normalisation: "$T/out" >"$T/norm-train"
expect_rc 0 $DATA info "$T/fm/test.h5"
must_contain "$T/out" "samples: 10000"
must_contain "$T/out" "samples per class: 1000 1000 1000 1000 1000 1000 1000 1000 1000 1000"
grep normalisation: "$T/out" | cmp -s - "$T/norm-train" || fail "the test set is not standardised with the training statistics"
h5ls "$T/fm/train.h5" >"$T/h5ls"
must_contain "$T/h5ls" "Dataset {60000, 784}"
must_contain "$T/h5ls" "Dataset {60000}"
h5dump -A -a /format "$T/fm/test.h5" >"$T/h5dump"
must_contain "$T/h5dump" '"dtrain-dataset"'
pass "fashion-mnist: 60000 + 10000 samples x 784 features, 10 classes, train statistics"

# --- a user block in front (h5jam): still read, through HDF5 instead of directly ---
head -c 512 /dev/zero >"$T/ublock"
h5jam -i "$T/fm/test.h5" -u "$T/ublock" -o "$T/jammed.h5" >/dev/null
expect_rc 0 $DATA info "$T/jammed.h5"
must_contain "$T/out" "samples per class: 1000 1000 1000 1000 1000 1000 1000 1000 1000 1000"
expect_rc 0 $DATA bench "$T/jammed.h5" --steps 5
must_contain "$T/out" "file, random rows:"
pass "a file with a user block reads through HDF5"

# --- synthetic ---
expect_rc 0 $DATA synthetic "$T/syn.h5" --samples 2000 --features 20 --classes 5 --seed 3
expect_rc 0 $DATA info "$T/syn.h5"
must_contain "$T/out" "samples: 2000"
must_contain "$T/out" "features: 20"
must_contain "$T/out" "classes: 5"
must_contain "$T/out" "/nearest_centroid_accuracy = "
must_contain "$T/out" "/seed = 3"
expect_rc 0 $DATA synthetic "$T/syn2.h5" --samples 2000 --features 20 --classes 5 --seed 3
cmp -s "$T/syn.h5" "$T/syn2.h5" || fail "the same synthetic command gave different files"
expect_rc 0 $DATA synthetic "$T/syn3.h5" --samples 2000 --features 20 --classes 5 --seed 3 --stream 1
! cmp -s "$T/syn.h5" "$T/syn3.h5" || fail "another --stream gave the same file"
expect_rc 0 $DATA bench "$T/syn.h5" --batch 64 --steps 20
must_contain "$T/out" "memory, random rows:"
pass "synthetic: described by info, byte-identical when repeated, another stream differs"

# --- refusals: exit 1, the file named, nothing written ---
expect_rc 1 $DATA fashion-mnist --src "$T/nope" "$T/out1"
must_contain "$T/err" "$T/nope: cannot use as the source directory: No such file or directory"
[ ! -e "$T/out1" ] || fail "a missing --src created $T/out1"

mkdir "$T/bad"
cp "$FM"/*-ubyte.gz "$T/bad/"
printf 'this is not an IDX file' | gzip >"$T/bad/train-images-idx3-ubyte.gz"
expect_rc 1 $DATA fashion-mnist --src "$T/bad" "$T/out2"
must_contain "$T/err" "$T/bad/train-images-idx3-ubyte.gz: not an IDX file of unsigned bytes with 3 dimensions (magic number 0x74686973, expected 0x00000803)"

cp "$FM/train-images-idx3-ubyte.gz" "$T/bad/"
gzip -dc "$FM/t10k-labels-idx1-ubyte.gz" | head -c 5000 | gzip >"$T/bad/t10k-labels-idx1-ubyte.gz"
expect_rc 1 $DATA fashion-mnist --src "$T/bad" "$T/out2"
must_contain "$T/err" "$T/bad/t10k-labels-idx1-ubyte.gz: truncated: the header promises 10000 items (10000 bytes of data) but the file has 4992"

cp "$FM/t10k-labels-idx1-ubyte.gz" "$T/bad/"
head -c 100000 "$FM/t10k-images-idx3-ubyte.gz" >"$T/bad/t10k-images-idx3-ubyte.gz"
expect_rc 1 $DATA fashion-mnist --src "$T/bad" "$T/out2"
must_contain "$T/err" "$T/bad/t10k-images-idx3-ubyte.gz: truncated gzip data"
[ ! -e "$T/out2" ] || fail "corrupt input created $T/out2"
pass "fashion-mnist refuses a missing --src and corrupt IDX/gzip files, writing nothing"

printf 'not hdf5\n' >"$T/text.h5"
expect_rc 1 $DATA info "$T/text.h5"
must_contain "$T/err" "$T/text.h5: not an HDF5 file"
expect_rc 1 $DATA info "$T/missing.h5"
must_contain "$T/err" "$T/missing.h5: cannot open: No such file or directory"
h5copy -i "$T/syn.h5" -o "$T/labels-only.h5" -s /labels -d /labels
expect_rc 1 $DATA info "$T/labels-only.h5"
must_contain "$T/err" "$T/labels-only.h5: not a dtrain data set: no \"format\" attribute on /"
cp "$T/fm/test.h5" "$T/cut.h5"
truncate -s 1000000 "$T/cut.h5"
expect_rc 1 $DATA info "$T/cut.h5"
must_contain "$T/err" "$T/cut.h5: HDF5 cannot open it: truncated file"
pass "info refuses files that are not dtrain data sets, naming them"

# --- token streams (runtime/data/tokens.h) ---

# text: every byte a token, the files in order, the last tenth held out
printf 'The quick brown fox.\n%%\nJumps over the lazy dog.\n' >"$T/a.txt"
printf 'Second file, and its bytes: \xc3\xa9\n' >"$T/b.txt"
expect_rc 0 $DATA text "$T/a.txt" "$T/b.txt" "$T/tok"
expect_rc 0 $DATA info "$T/tok/train.h5"
must_contain "$T/out" "format: dtrain-tokens version 1"
must_contain "$T/out" "vocabulary: 256 (byte-level)"
all=$(cat "$T/a.txt" "$T/b.txt" | wc -c)
val=$((all / 10))
must_contain "$T/out" "tokens: $((all - val))"
expect_rc 0 $DATA info "$T/tok/val.h5"
must_contain "$T/out" "tokens: $val"
# the stored ids are the bytes, in order (h5dump prints the uint16 values)
h5dump -d /tokens -w 0 "$T/tok/val.h5" | tr -cs '0-9' '\n' | tail -n "$val" | head -n "$val" >"$T/ids" || true
cat "$T/a.txt" "$T/b.txt" | tail -c "$val" | od -An -v -tu1 | tr -s ' ' '\n' | grep -v '^$' >"$T/bytes"
cmp -s "$T/ids" "$T/bytes" || { paste "$T/ids" "$T/bytes" | head; fail "val.h5 does not hold the last bytes of the text"; }
expect_rc 0 $DATA text "$T/a.txt" "$T/tok2" --val "$T/b.txt"
expect_rc 0 $DATA info "$T/tok2/val.h5"
must_contain "$T/out" "tokens: $(wc -c <"$T/b.txt")"
pass "text: byte-level tokens, the last tenth or --val files held out"

# shards: llm.c's (header: magic 20240520, version 1, count; uint16) and
# nanoGPT's raw uint16, told apart by the magic; bad ones name file and offset
python3 - "$T" <<'PY'
import struct, sys
t = sys.argv[1]
def llmc(path, toks, magic=20240520, version=1, count=None):
    head = [magic, version, len(toks) if count is None else count] + [0] * 253
    open(path, "wb").write(struct.pack("<256i", *head) + struct.pack("<%dH" % len(toks), *toks))
llmc(t + "/s1.bin", list(range(1000, 1040)))
open(t + "/raw.bin", "wb").write(struct.pack("<20H", *range(50000, 50020)))
llmc(t + "/bigtok.bin", [1, 2, 60000, 4])
llmc(t + "/short.bin", [1, 2, 3, 4], count=9)
llmc(t + "/v2.bin", [1, 2, 3, 4], version=2)
open(t + "/odd.bin", "wb").write(b"\x01\x02\x03")
PY
expect_rc 0 $DATA tokens "$T/s1.bin" "$T/raw.bin" "$T/sh" --val-fraction 0.2
expect_rc 0 $DATA info "$T/sh/train.h5"
must_contain "$T/out" "tokens: 48"
must_contain "$T/out" "vocabulary: 50257"
expect_rc 0 $DATA info "$T/sh/val.h5"
must_contain "$T/out" "tokens: 12"
expect_rc 1 $DATA tokens "$T/s1.bin" "$T/bigtok.bin" "$T/refused"
must_contain "$T/err" "$T/bigtok.bin: offset 1028: token 60000 is not below the vocabulary size 50257"
expect_rc 1 $DATA tokens "$T/short.bin" "$T/refused"
must_contain "$T/err" "$T/short.bin: offset 8: the header says 9 tokens (1042 bytes with the header) but the file has 1032 bytes"
expect_rc 1 $DATA tokens "$T/v2.bin" "$T/refused"
must_contain "$T/err" "$T/v2.bin: offset 4: llm.c shard version 2, expected 1"
expect_rc 1 $DATA tokens "$T/odd.bin" "$T/refused"
must_contain "$T/err" "$T/odd.bin: 3 bytes, an odd size"
expect_rc 1 $DATA tokens "$T/s1.bin" "$T/refused" --vocab 1020
must_contain "$T/err" "$T/s1.bin: offset 1064: token 1020 is not below the vocabulary size 1020"
[ ! -e "$T/refused" ] || fail "a refused import created $T/bad"
expect_rc 2 $DATA tokens "$T/s1.bin"
must_contain "$T/err" "expected one input file or more, then OUT_DIR"
expect_rc 2 $DATA text "$T/a.txt" "$T/x" --val-fraction 1
must_contain "$T/err" "--val-fraction: expected a number in (0, 1)"
pass "tokens: llm.c and nanoGPT shards imported; a token past the vocabulary, a short or odd file, another version refused naming file and offset, nothing written"
