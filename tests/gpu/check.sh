#!/usr/bin/env bash
# tests/gpu/check.sh - the device check, run from the GPU bundle on a lent
# machine (site/gpu-bundle.sh packs it as dtrain-gpu/check.sh):
#
#   tar xJf dtrain-gpu.tar.xz && bash dtrain-gpu/check.sh [OUT_DIR]
#
# Prints one table, a row per check: PASS, FAIL (with why), or NOT YET (a
# part of the GPU path this build does not have: runtime/gpu/README.md says
# what is built). Every check has its own time limit; the whole stays under
# 8 minutes. Logs go to OUT_DIR (default $OUT when the device tool sets it,
# else /tmp/dtrain-gpu-check), one file per check.
# Exit code: 0 when no row FAILs (NOT YET rows do not fail it), 1 otherwise.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$here/bin
# shellcheck source=/dev/null
. "$here/env.sh"
logs=${1:-${OUT:-/tmp/dtrain-gpu-check}}
mkdir -p "$logs"
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-gpu-XXXXXX")
trap 'rm -rf "$work"' EXIT
rows=()
failed=0

# row NAME RESULT DETAIL
row() {
	rows+=("$(printf '%-46s %-8s %s' "$1" "$2" "$3")")
	[ "$2" = FAIL ] && failed=$((failed + 1))
	printf '%-46s %-8s %s\n' "$1" "$2" "$3" >&2
}

# run NAME SECONDS CMD...: the command's output in $logs/NAME.log; its exit code
run() {
	local name=$1 s=$2
	shift 2
	timeout -k 5 "$s" "$@" >"$logs/$name.log" 2>&1
}

# what a log says went wrong: dtrain's own first error line, else its last
# line that is not mpirun's frame
last() {
	local l
	l=$(grep -m1 -E '^dtrain-[a-z]+: .*(error|cannot|failed|not |no )' "$logs/$1.log")
	[ -n "$l" ] || l=$(grep -vE '^\s*$|^-+$' "$logs/$1.log" | tail -n 1)
	echo "$l" | cut -c1-110
}

# --- the machine ---
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
[ -n "$gpu" ] && row "GPU" PASS "$gpu" || row "GPU" FAIL "nvidia-smi sees no GPU"
nccl_at=$(IFS=:; for d in $LD_LIBRARY_PATH; do [ -e "$d/libnccl.so.2" ] && { echo "$d"; break; }; done)
[ -n "$nccl_at" ] || nccl_at=$(ldconfig -p 2>/dev/null | awk '/libnccl.so.2/ { print $NF; exit }')
[ -n "$nccl_at" ] && row "NCCL library" PASS "$nccl_at" ||
	row "NCCL library" FAIL "libnccl.so.2 in no directory of LD_LIBRARY_PATH, nor ldconfig's"

if run version 30 "$bin/dtrain-run" --version; then
	row "dtrain-run from the bundle" PASS "$(grep 'GPU path' "$logs/version.log")"
else
	row "dtrain-run from the bundle" FAIL "$(last version)"
fi

# --- the GPU unit tests, and memcheck on them ---
for t in test_gpu_device test_gpu_kernels test_gpu_transformer test_cuda_device; do
	rc=0
	run "$t" 180 "$here/tests/$t" || rc=$?
	if [ "$rc" -eq 0 ]; then
		row "$t" PASS "$(grep -c '\[       OK \]' "$logs/$t.log") cases"
	elif [ "$rc" -eq 77 ]; then
		row "$t" FAIL "skipped on a GPU machine: $(grep -m1 -i skip "$logs/$t.log" | cut -c1-90)"
	else
		row "$t" FAIL "exit $rc: $(grep -m1 -E 'ERROR|FAILED|error' "$logs/$t.log" | cut -c1-100)"
	fi
done
if command -v compute-sanitizer >/dev/null; then
	for t in test_gpu_device test_gpu_kernels test_gpu_transformer test_cuda_device; do
		if run "memcheck-$t" 240 compute-sanitizer --tool memcheck --error-exitcode 9 "$here/tests/$t"; then
			row "memcheck $t" PASS "$(grep -m1 'ERROR SUMMARY' "$logs/memcheck-$t.log")"
		else
			row "memcheck $t" FAIL "$(grep -m1 -E 'ERROR SUMMARY|Invalid|error' "$logs/memcheck-$t.log" | cut -c1-100)"
		fi
	done
else
	row "memcheck" FAIL "compute-sanitizer not on PATH"
fi

# --- the bundle's MPI: two CPU ranks under its mpirun ---
"$bin/dtrain-data" synthetic "$work/syn.h5" --samples 2000 --features 32 --classes 5 --seed 3 >/dev/null 2>&1
cat >"$work/mlp.json" <<JSON
{ "name": "gpucheck", "model": { "inputs": 32, "hidden": [64, 64], "outputs": 5 },
  "data": { "train": "$work/syn.h5" },
  "train": { "max_steps": 20, "epochs": 1, "global_batch": 40, "log_every": 1,
             "optimizer": { "type": "adamw", "lr": 0.003 } } }
JSON
spec() { "$bin/dtrain-submit" validate "$work/mlp.json" --set run_dir="$work/$1" "${@:2}" >"$work/$1.json" 2>"$logs/spec-$1.log" && mkdir -p "$work/$1"; }
if spec cpu2 --set resources.tasks_per_node=2 --set parallel.data=2 &&
	run mpi-cpu2 120 mpirun --oversubscribe --bind-to none -np 2 "$bin/dtrain-run" "$work/cpu2.json"; then
	row "2 CPU ranks under the bundle's mpirun" PASS "$(grep -c '"event":"step"' "$work/cpu2/metrics.jsonl") steps"
else
	row "2 CPU ranks under the bundle's mpirun" FAIL "$(last mpi-cpu2)"
fi

# --- training on the GPU: the same loop as the CPU's (runtime/model/device.h) ---
cmp_py=$here/compare.py
cat >"$work/gpt.json" <<JSON
{ "name": "gpucheck-gpt", "model": { "type": "gpt", "vocab_size": 256, "context": 64, "layers": 4, "heads": 4, "embd": 128 },
  "data": { "train": "$here/data/fortunes/train.h5", "test": "$here/data/fortunes/val.h5" },
  "train": { "max_steps": 20, "epochs": 1, "global_batch": 8, "log_every": 1, "eval_every": 10,
             "optimizer": { "type": "adamw", "lr": 0.001, "weight_decay": 0.1, "betas": [0.9, 0.95] },
             "grad_clip": 1.0 },
  "parallel": { "grad_sync": "allreduce" },
  "checkpoint": { "every_steps": 10 } }
JSON
gspec() { "$bin/dtrain-submit" validate "$work/gpt.json" --set run_dir="$work/$1" "${@:2}" >"$work/$1.json" 2>"$logs/spec-$1.log" && mkdir -p "$work/$1"; }
cuda=(--set train.device=cuda --set resources.gpus_per_node=1)

# train WHAT SPECFN NAME NP [--set ...]: a run; a row only when it fails
train() {
	local what=$1 specfn=$2 name=$3 np=$4
	shift 4
	if ! "$specfn" "$name" --set resources.tasks_per_node="$np" "$@"; then
		row "$what" FAIL "spec $name: $(tail -n 1 "$logs/spec-$name.log")"
		return 1
	fi
	run "$name" 240 mpirun --oversubscribe --bind-to none -np "$np" "$bin/dtrain-run" "$work/$name.json" && return 0
	row "$what" FAIL "$name: $(last "$name")"
	return 1
}

# same WHAT A B [compare.py options]: a row from two runs' loss curves
same() {
	local what=$1 a=$2 b=$3 out
	shift 3
	out=$(python3 "$cmp_py" "$work/$a/metrics.jsonl" "$work/$b/metrics.jsonl" "$@" 2>&1) &&
		row "$what" PASS "$out" || row "$what" FAIL "$out"
}

if train "MLP, 1 GPU" spec mlp-cpu 1 && train "MLP, 1 GPU" spec mlp-gpu 1 "${cuda[@]}"; then
	same "MLP, 1 GPU against the CPU (1e-5)" mlp-cpu mlp-gpu
	grep -m1 "device cuda" "$logs/mlp-gpu.log" | cut -c1-110 >"$logs/device-line.txt"
fi
if train "GPT, 1 GPU" gspec gpt-cpu 1 && train "GPT, 1 GPU" gspec gpt-gpu 1 "${cuda[@]}"; then
	same "GPT, 1 GPU against the CPU (1e-5)" gpt-cpu gpt-gpu
fi
# bf16 products on both (oneDNN on the CPU, cuBLAS on the GPU): the same
# rounded inputs, float32 sums in other orders and the roundings this flips
if train "GPT bf16, 1 GPU" gspec gpt-cpu-bf16 1 --set train.precision=bf16 &&
	train "GPT bf16, 1 GPU" gspec gpt-gpu-bf16 1 "${cuda[@]}" --set train.precision=bf16; then
	same "GPT bf16, 1 GPU against the CPU's bf16 (1e-3)" gpt-cpu-bf16 gpt-gpu-bf16 --tol 1e-3
fi
if train "GPT, 2 ranks sharing the GPU (data 2)" gspec gpt-d2 2 "${cuda[@]}" --set parallel.data=2; then
	same "GPT, data 2 on the GPU against 1 rank (1e-5)" gpt-gpu gpt-d2
fi
if train "GPT, 2 ranks sharing the GPU (data 2, sharded optimizer)" gspec gpt-s2 2 "${cuda[@]}" --set parallel.data=2 \
	--set parallel.optimizer=sharded; then
	same "GPT, data 2 sharded on the GPU against 1 rank (1e-5)" gpt-gpu gpt-s2
fi
if train "GPT, 2 ranks sharing the GPU (pipeline 2)" gspec gpt-p2 2 "${cuda[@]}" --set parallel.pipeline=2 \
	--set parallel.micro_batches=2; then
	same "GPT, pipeline 2 on the GPU against 1 rank (1e-5)" gpt-gpu gpt-p2
fi
# the GPU run's step-10 checkpoint, resumed on the CPU
if [ -d "$work/gpt-gpu/checkpoints/step-00000010" ] &&
	train "GPT checkpoint of the GPU resumed on the CPU" gspec gpt-resume 1 \
		--set checkpoint.resume="$work/gpt-gpu/checkpoints/step-00000010"; then
	same "GPT checkpoint of the GPU resumed on the CPU (1e-5)" gpt-gpu gpt-resume --from 11 --min 10
fi
# dtrain-ckpt eval and sample on the GPU (--device cuda)
ck=$work/gpt-gpu/checkpoints/step-00000020
if [ -d "$ck" ]; then
	if run eval-cpu 60 "$bin/dtrain-ckpt" eval "$ck" "$here/data/fortunes/val.h5" --samples 64 &&
		run eval-gpu 60 "$bin/dtrain-ckpt" eval "$ck" "$here/data/fortunes/val.h5" --samples 64 --device cuda; then
		out=$(python3 - "$logs/eval-cpu.log" "$logs/eval-gpu.log" <<'PY'
import sys
def loss(p):
    w = open(p).read().split()
    return float(w[w.index("loss") + 1])
a, b = loss(sys.argv[1]), loss(sys.argv[2])
d = abs(a - b) / abs(a)
print("loss %.9g on the CPU, %.9g on the GPU: %.3g relative" % (a, b, d))
sys.exit(0 if d <= 1e-5 else 1)
PY
		) && row "dtrain-ckpt eval on the GPU (1e-5)" PASS "$out" ||
			row "dtrain-ckpt eval on the GPU (1e-5)" FAIL "${out:-$(last eval-gpu)}"
	else
		row "dtrain-ckpt eval on the GPU (1e-5)" FAIL "$(last eval-gpu)"
	fi
	if run sample-gpu 60 "$bin/dtrain-ckpt" sample "$ck" --tokens 64 --temperature 0 --device cuda &&
		run sample-cpu 60 "$bin/dtrain-ckpt" sample "$ck" --tokens 64 --temperature 0; then
		cmp -s "$logs/sample-gpu.log" "$logs/sample-cpu.log" &&
			row "dtrain-ckpt sample on the GPU (greedy)" PASS "the CPU's 64 bytes" ||
			row "dtrain-ckpt sample on the GPU (greedy)" PASS "64 bytes; differs from the CPU's greedy text (near ties)"
	else
		row "dtrain-ckpt sample on the GPU (greedy)" FAIL "$(last sample-gpu)"
	fi
fi
# the GPT example as it is (jobs/gpt-tiny-2x2.json: data 2 x pipeline 2,
# 1000 steps) with its 4 ranks on the GPU: the validation loss its README
# states (2.86 bits per byte on the CPU; at most 2.9)
ex=$here/jobs/gpt-tiny-2x2.json
if [ -f "$ex" ] && "$bin/dtrain-submit" validate "$ex" --set run_dir="$work/example" \
	--set data.train="$here/data/fortunes/train.h5" --set data.test="$here/data/fortunes/val.h5" \
	--set resources.nodes=1 --set resources.tasks_per_node=4 "${cuda[@]}" \
	>"$work/example.json" 2>"$logs/spec-example.log" && mkdir -p "$work/example"; then
	if run example 300 mpirun --oversubscribe --bind-to none -np 4 "$bin/dtrain-run" "$work/example.json"; then
		bpb=$(sed -n 's/^dtrain-run: step 1000 val loss [0-9.]* bits\/byte \([0-9.]*\) .*/\1/p' "$logs/example.log")
		took=$(sed -n 's/^dtrain-run: done: .* in \([0-9.]* s\).*/\1/p' "$logs/example.log")
		if [ -n "$bpb" ] && awk -v b="$bpb" 'BEGIN { exit !(b <= 2.9) }'; then
			row "GPT example 2x2 on the GPU (<= 2.9 bits/byte)" PASS "$bpb bits per byte at step 1000, trained in ${took:-?}"
		else
			row "GPT example 2x2 on the GPU (<= 2.9 bits/byte)" FAIL "step 1000: ${bpb:-no validation line} bits per byte"
		fi
	else
		row "GPT example 2x2 on the GPU (<= 2.9 bits/byte)" FAIL "$(last example)"
	fi
else
	row "GPT example 2x2 on the GPU (<= 2.9 bits/byte)" FAIL "spec: $(tail -n 1 "$logs/spec-example.log" 2>/dev/null || echo "$ex is missing")"
fi
# the trainer's own kernels under memcheck: 3 steps of the GPT
if command -v compute-sanitizer >/dev/null && gspec gpt-mc --set resources.tasks_per_node=1 "${cuda[@]}" \
	--set train.max_steps=3 --set checkpoint.every_steps=0; then
	if run memcheck-gpt 240 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/dtrain-run" "$work/gpt-mc.json"; then
		row "memcheck dtrain-run (GPT, 3 steps)" PASS "$(grep -m1 'ERROR SUMMARY' "$logs/memcheck-gpt.log")"
	else
		row "memcheck dtrain-run (GPT, 3 steps)" FAIL "$(grep -m1 -E 'ERROR SUMMARY|Invalid|error' "$logs/memcheck-gpt.log" | cut -c1-100)"
	fi
fi

# --- performance: GPT-2 small against PyTorch and cuBLAS on this card (perf.py) ---
# perf_rows: a row from each pair of perf.py's `RESULT name=value` lines
perf_rows() {
	local rc=0 m d t f r
	run perf 200 python3 "$here/perf.py" "$here" "$work" "$logs" || rc=$?
	perf_value() { sed -n "s/^RESULT $1=//p" "$logs/perf.log" | tail -n 1; }
	for m in fp32 tf32; do
		d=$(perf_value "dtrain_${m}_tok_s") t=$(perf_value "torch_${m}_tok_s")
		[ -n "$d" ] && [ -n "$t" ] || continue
		awk -v d="$d" -v t="$t" 'BEGIN { exit !(d >= t) }' && r=PASS || r=FAIL
		row "GPT-2 small $m tokens/s vs PyTorch" "$r" \
			"$(awk -v d="$d" -v t="$t" 'BEGIN { printf "dtrain %.0f, PyTorch %.0f tokens/s (x%.2f)", d, t, d / t }')"
	done
	f=$(perf_value step_vs_cublas)
	if [ -n "$f" ]; then
		awk -v f="$f" 'BEGIN { exit !(f >= 0.60) }' && r=PASS || r=FAIL
		row "GPT-2 small step vs cuBLAS on its shapes" "$r" "$f of cuBLAS's FLOP/s (dtrain $(perf_value dtrain_fp32_tflops), cuBLAS $(perf_value cublas_fp32_tflops) TFLOP/s; target 0.60)"
	fi
	[ "$rc" -eq 124 ] && row "GPT-2 small performance (perf.py)" FAIL "timed out after 200 s: $(tail -n 1 "$logs/perf.log" | cut -c1-80)"
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && row "GPT-2 small performance (perf.py)" FAIL "exit $rc: $(tail -n 1 "$logs/perf.log" | cut -c1-100)"
	return 0
}
perf_rows

echo
printf '%-46s %-8s %s\n' "check" "result" "detail"
printf '%s\n' "${rows[@]}"
echo "logs: $logs"
[ "$failed" -eq 0 ]
