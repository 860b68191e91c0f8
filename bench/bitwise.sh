#!/usr/bin/env bash
# bench/bitwise.sh OLD_BIN NEW_BIN OUT: a refactor's check that the numbers
# did not move. The same specs (the MLP on 13 layouts and grad-sync ways,
# with and without clipping; the GPT on 5 layouts, its tied embedding
# across stages, its optimizer replicated and sharded) through two builds'
# dtrain-run under mpirun; the saved
# parameters, every loss line of metrics.jsonl and every tensor of every
# checkpoint must be bitwise equal (a format-1 /layers/<l>/... path is
# compared with the format-2 name /model/<2l>....). OLD_BIN: e.g. a build of
# an earlier commit (git worktree add /tmp/old REV; cmake -S /tmp/old -B
# /tmp/oldbuild -DDTRAIN_TESTS=OFF; make -C /tmp/oldbuild dtrain-run).
# Specs are resolved by NEW_BIN's dtrain-submit (the old runs' by
# OLD_BIN's when it is there: make -C /tmp/oldbuild dtrain-submit too).
# ONLY_NEW=1 skips the first 10 MLP layouts.
# Prints one line per layout and "failures: N"; exits 1 when N > 0.
set -u
OLD=$1 NEW=$2 OUT=$3 SUB=$2/dtrain-submit
rm -rf "$OUT"; mkdir -p "$OUT"
"$NEW"/dtrain-data synthetic "$OUT/syn.h5" --samples 600 --features 32 --classes 5 --seed 3 >/dev/null
cat >"$OUT/base.json" <<JSON
{ "name": "bw", "model": { "inputs": 32, "hidden": [48, 40, 24], "outputs": 5, "activation": "gelu" },
  "data": { "train": "$OUT/syn.h5" },
  "train": { "epochs": 2, "global_batch": 60, "log_every": 1,
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.01 },
             "lr_schedule": { "warmup_steps": 5 }, "grad_clip": 1.0 },
  "checkpoint": { "every_steps": 7, "keep": 10, "async": false } }
JSON
fails=0

# cmpck OLD_CKPT NEW_CKPT: every dataset of every shard of OLD bitwise equal
# to its counterpart in NEW (the same path, or format 1's path as format 2's)
cmpck() {
	local o=$1 n=$2 rc=0 sh b ds nds l
	for sh in "$o"/shard-*.h5; do
		b=$(basename "$sh")
		for ds in $(h5ls -r "$sh" | awk '$2 == "Dataset" { print $1 }'); do
			nds=$ds
			if ! h5ls "$n/$b$ds" >/dev/null 2>&1; then
				nds=$(echo "$ds" | sed -E 's#^/layers/([0-9]+)/(weight|bias)$#/model/L\1.\2#; s#^/optimizer/([a-z_]+)/layers/([0-9]+)/(weight|bias)$#/optimizer/\1/L\2.\3#')
				l=$(echo "$nds" | sed -E 's#.*/L([0-9]+)\..*#\1#')
				nds=$(echo "$nds" | sed -E "s#/L$l\.#/$((2 * l)).#")
			fi
			rm -f "$OUT/.a" "$OUT/.b"
			h5dump -d "$ds" -b LE -o "$OUT/.a" "$sh" >/dev/null 2>&1
			h5dump -d "$nds" -b LE -o "$OUT/.b" "$n/$b" >/dev/null 2>&1
			[ -s "$OUT/.a" ] && cmp -s "$OUT/.a" "$OUT/.b" || { echo "  $b $ds vs $nds differ"; rc=1; }
		done
	done
	return $rc
}

# cfg NAME D P M SCHED [--set ...]
cfg() {
	local name=$1 d=$2 p=$3 m=$4 sch=$5 np=$(($2 * $3)); shift 5
	for which in old new; do
		local bin=$OLD sub=$SUB; [ $which = new ] && bin=$NEW
		# the old build resolves its own specs when it has its dtrain-submit
		# (a key added since, with its default, is unknown to its dtrain-run)
		[ $which = old ] && [ -x "$OLD/dtrain-submit" ] && sub=$OLD/dtrain-submit
		local dir="$OUT/$name-$which"
		$sub validate "$OUT/${BASE:-base}.json" --set run_dir="$dir" --set resources.tasks_per_node=$np \
			--set parallel.data=$d --set parallel.pipeline=$p --set parallel.micro_batches=$m \
			--set parallel.schedule=$sch "$@" >"$dir.json" 2>"$dir.err" || { cat "$dir.err"; return 1; }
		mkdir -p "$dir"
		mpirun --allow-run-as-root --oversubscribe --bind-to none -np $np "$bin/dtrain-run" --quiet \
			--save-params "$dir/params" "$dir.json" >"$dir.out" 2>&1 || { echo "run $name $which failed"; tail "$dir.out"; fails=$((fails+1)); return 1; }
	done
	local o="$OUT/$name-old" n="$OUT/$name-new" bad=0
	for f in "$o"/params/*.f32; do cmp -s "$f" "$n/params/$(basename "$f")" || { echo "$name: params $(basename $f) differ"; bad=1; }; done
	cmp -s <(grep -o '"loss":[^,]*' "$o/metrics.jsonl") <(grep -o '"loss":[^,]*' "$n/metrics.jsonl") || { echo "$name: losses differ"; bad=1; }
	for ck in "$o"/checkpoints/step-*; do
		s=$(basename "$ck")
		[ -d "$n/checkpoints/$s" ] || { echo "$name: $s missing in new"; bad=1; continue; }
		cmpck "$ck" "$n/checkpoints/$s" || { echo "$name: $s tensors differ"; bad=1; }
	done
	nl=$(grep -c '"loss"' "$o/metrics.jsonl"); nck=$(ls -d "$o"/checkpoints/step-* | wc -l)
	[ $bad = 0 ] && echo "$name: identical ($nl loss lines, $nck checkpoints, $(ls "$o"/params | wc -l) param files)" || fails=$((fails+1))
}
if [ -z "${ONLY_NEW:-}" ]; then
cfg d1p1 1 1 1 gpipe
cfg d2p2 2 2 2 gpipe --set parallel.grad_sync=allreduce
cfg d1p4-1f1b 1 4 4 1f1b
cfg d2p1-allreduce 2 1 1 gpipe --set parallel.grad_sync=allreduce
cfg d2p1-shared 2 1 1 gpipe --set parallel.grad_sync=shared
cfg d2p1-split 2 1 1 gpipe --set parallel.grad_sync=split
cfg d1p1-threads 1 1 1 gpipe --set parallel.threads=split --set resources.cpus_per_task=2
cfg d2p2-sgd-1f1b 2 2 3 1f1b --set train.optimizer.type=sgd --set train.optimizer.momentum=0.9
cfg d4p1-shared 4 1 1 gpipe --set parallel.grad_sync=shared
cfg d2p1-split-threads 2 1 1 gpipe --set parallel.grad_sync=split --set parallel.threads=split --set resources.cpus_per_task=2
fi
cfg d2p1-shared-noclip 2 1 1 gpipe --set parallel.grad_sync=shared --set train.grad_clip=0
cfg d2p1-split-noclip 2 1 1 gpipe --set parallel.grad_sync=split --set train.grad_clip=0
cfg d2p2-noclip 2 2 2 1f1b --set train.grad_clip=0 --set train.optimizer.type=sgd --set train.optimizer.momentum=0.9

# The GPT: a byte-level corpus from Debian's fortunes (its first 256 KiB)
head -c 262144 /usr/share/games/fortunes/fortunes >"$OUT/corpus.txt"
"$NEW"/dtrain-data text "$OUT/corpus.txt" "$OUT/text" >/dev/null
cat >"$OUT/gpt.json" <<JSON
{ "name": "bwgpt", "model": { "type": "gpt", "vocab_size": 256, "context": 32, "layers": 4, "heads": 2, "embd": 32 },
  "data": { "train": "$OUT/text/train.h5", "test": "$OUT/text/val.h5" },
  "train": { "epochs": 1, "max_steps": 16, "global_batch": 8, "log_every": 1, "eval_every": 8,
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.1, "betas": [0.9, 0.95] },
             "lr_schedule": { "warmup_steps": 4 }, "grad_clip": 1.0 },
  "checkpoint": { "every_steps": 8, "keep": 10, "async": false } }
JSON
BASE=gpt cfg gpt-d1p1 1 1 1 gpipe
BASE=gpt cfg gpt-d2p1 2 1 1 gpipe
BASE=gpt cfg gpt-d1p2-1f1b 1 2 2 1f1b
BASE=gpt cfg gpt-d2p2-sharded 2 2 2 gpipe --set parallel.optimizer=sharded
BASE=gpt cfg gpt-d2p1-sharded-threads 2 1 1 gpipe --set parallel.optimizer=sharded --set parallel.threads=split --set resources.cpus_per_task=2
echo "failures: $fails"
[ "$fails" -eq 0 ]
