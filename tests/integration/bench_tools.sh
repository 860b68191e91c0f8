#!/usr/bin/env bash
# The peers of `make bench` (bench/README.md) that the table's rows trust:
#  - dtrain-bench-sgemm --part K/L: the L blocks of an MLP step's products
#    add up to the whole step's flop, as the split way's blocks do (the
#    10-class head cut by rows among 2 and 3 blocks);
#  - --lockstep: a copy waits for its partners (one started alone does not
#    finish), and partners run the same number of steps, with --part and
#    with --copies (whole products, meeting once a step);
#  - --lib (OpenBLAS, oneDNN float32 and bf16) counts the GPT's linear
#    products alike;
#  - bad --part, --copies, --lockstep and --lib use: exit 2 naming the flag.
. "$(dirname "$0")/lib.sh"

SG=$DTRAIN_BIN/dtrain-bench-sgemm
W=784,512,512,10

field() { sed -n "s/.*\"$2\":\\([^,}]*\\).*/\\1/p" "$1"; }
per_step() { awk -v f="$(field "$1" flop)" -v r="$(field "$1" rounds)" 'BEGIN { printf "%.0f\n", f / r }'; }

"$SG" --seconds 0.2 mlp 64 $W >"$T/whole" || fail "whole step"
"$SG" --seconds 0.2 --part 0/2 mlp 64 $W >"$T/p0" || fail "part 0/2"
"$SG" --seconds 0.2 --part 1/2 mlp 64 $W >"$T/p1" || fail "part 1/2"
whole=$(per_step "$T/whole")
parts=$(($(per_step "$T/p0") + $(per_step "$T/p1")))
# 784-512-512-10 at batch 64: forward and weight gradients of all 3
# layers, input gradients of the last 2
want=$((64 * 2 * (784 * 512 + 512 * 512 + 512 * 10) * 2 + 64 * 2 * (512 * 512 + 512 * 10)))
[ "$whole" = "$want" ] || fail "the whole step's flop: $whole, want $want"
[ "$parts" = "$want" ] || fail "blocks 0/2 and 1/2 add up to $parts flop a step, want $want"
parts=0
for k in 0 1 2; do
	"$SG" --seconds 0.2 --part $k/3 mlp 64 $W >"$T/q$k" || fail "part $k/3"
	parts=$((parts + $(per_step "$T/q$k")))
done
[ "$parts" = "$want" ] || fail "blocks k/3 add up to $parts flop a step, want $want"
pass "--part: the blocks of a step (2 and 3 of them) add up to its $want flop"

rm -f "$T/barrier"
"$SG" --seconds 0.3 --part 0/2 --lockstep "$T/barrier" mlp 64 $W >"$T/l0" &
first=$!
sleep 1
kill -0 "$first" 2>/dev/null || fail "--lockstep: copy 0 finished without copy 1: $(cat "$T/l0")"
"$SG" --seconds 0.3 --part 1/2 --lockstep "$T/barrier" mlp 64 $W >"$T/l1" 2>"$T/l1.err" ||
	{ rc=$?; kill "$first"; cat "$T/l1.err"; fail "lockstep copy 1 (exit $rc)"; }
wait "$first" || fail "lockstep copy 0"
r0=$(field "$T/l0" rounds)
r1=$(field "$T/l1" rounds)
[ -n "$r0" ] && [ "$r0" = "$r1" ] || fail "--lockstep: copies ran $r0 and $r1 steps"
[ "$(field "$T/l0" lockstep)" = true ] || fail "--lockstep not reported: $(cat "$T/l0")"
pass "--lockstep: copy 0 waited for copy 1, both ran $r0 steps"

rm -f "$T/barrier"
"$SG" --seconds 0.3 --copies 2 --lockstep "$T/barrier" mlp 32 $W >"$T/c0" &
first=$!
sleep 1
kill -0 "$first" 2>/dev/null || fail "--copies: copy 0 finished without copy 1: $(cat "$T/c0")"
"$SG" --seconds 0.3 --copies 2 --lockstep "$T/barrier" mlp 32 $W >"$T/c1" 2>"$T/c1.err" ||
	{ rc=$?; kill "$first"; cat "$T/c1.err"; fail "--copies copy 1 (exit $rc)"; }
wait "$first" || fail "--copies copy 0"
# one barrier a step: a copy that asks to stop at step n + 1 while its
# partner has not yet read step n's answer must not stop the partner early
# (a hang of the other copy, seen on a loaded machine); short runs, many
# step ends, each under a limit so a hang fails here and names itself
for i in 1 2 3 4 5 6 7 8 9 10; do
	rm -f "$T/barrier"
	timeout 60 "$SG" --seconds 0.02 --copies 2 --lockstep "$T/barrier" mlp 8 $W >"$T/s0" &
	first=$!
	timeout 60 "$SG" --seconds 0.02 --copies 2 --lockstep "$T/barrier" mlp 8 $W >"$T/s1" ||
		fail "--copies: short run $i, copy 1 hung or failed (exit $?)"
	wait "$first" || fail "--copies: short run $i, copy 0 hung or failed (exit $?)"
	[ "$(field "$T/s0" rounds)" = "$(field "$T/s1" rounds)" ] ||
		fail "--copies: short run $i: $(cat "$T/s0" "$T/s1")"
done
r0=$(field "$T/c0" rounds)
r1=$(field "$T/c1" rounds)
[ -n "$r0" ] && [ "$r0" = "$r1" ] || fail "--copies: copies ran $r0 and $r1 steps"
half=$(per_step "$T/c0")
[ $((2 * half)) = "$want" ] || fail "--copies 2 at batch 32: $half flop a step each, want $want / 2"
pass "--copies 2 --lockstep: whole products at batch 32, both ran $r0 steps of $half flop"

# the GPT's linear products (--linear) through OpenBLAS and oneDNN (--lib):
# B 2 x T 32 positions, C 64, 2 layers, V 256: per layer 3 products (forward,
# weight and input gradients) of its 4 linear layers (12 C^2 weights), and
# the head's 3 of N x C x V
want=$((3 * 2 * 64 * 12 * 64 * 64 * 2 + 3 * 2 * 64 * 64 * 256))
for lib in openblas onednn-f32 onednn-bf16; do
	"$SG" --seconds 0.2 --lib $lib --linear gpt 2 32 64 2 256 4 >"$T/g-$lib" || fail "--lib $lib"
	[ "$(per_step "$T/g-$lib")" = "$want" ] || fail "--lib $lib: $(per_step "$T/g-$lib") flop a step, want $want"
	grep -q "\"what\":\"gpt 2 32 64 2 256 4 linear $lib\"" "$T/g-$lib" || fail "--lib $lib: $(cat "$T/g-$lib")"
	awk -v g="$(field "$T/g-$lib" gflops)" 'BEGIN { exit !(g > 0) }' || fail "--lib $lib: no rate"
done
"$SG" --seconds 0.2 gpt 2 32 64 2 256 4 >"$T/g-all" || fail "gpt with attention"
[ "$(per_step "$T/g-all")" -gt "$want" ] || fail "gpt without --linear: no attention products counted"
pass "--lib openblas, onednn-f32, onednn-bf16: the GPT's linear products, $want flop a step each"
expect_rc 2 "$SG" --lib mkl gpt 2 32 64 2 256 4
must_contain "$T/err" "--lib: want openblas, onednn-f32 or onednn-bf16"
expect_rc 2 "$SG" --lib onednn-f32 mlp 64 $W
must_contain "$T/err" "--lib and --linear: with \`gpt\` only"

expect_rc 2 "$SG" --part 2/2 mlp 64 $W
must_contain "$T/err" "--part: want K/L with 0 <= K < L"
expect_rc 2 "$SG" --part 1/2 square 64
must_contain "$T/err" "--part, --copies and --lockstep are for \`mlp\` only"
expect_rc 2 "$SG" --copies 2 mlp 64 $W
must_contain "$T/err" "--copies: with --lockstep, and not with --part"
expect_rc 2 "$SG" --copies 2 --part 0/2 --lockstep "$T/barrier" mlp 64 $W
must_contain "$T/err" "--copies: with --lockstep, and not with --part"
expect_rc 1 "$SG" --part 0/2 --lockstep "$T/no/such/dir/barrier" mlp 64 $W
must_contain "$T/err" "--lockstep: \"$T/no/such/dir/barrier\": No such file or directory"
pass "bad --part, --copies and --lockstep: an error naming the flag"
