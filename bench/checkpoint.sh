#!/usr/bin/env bash
# bench/checkpoint.sh - checkpoint speed of the 100M-parameter example
# (jobs/mlp-100m-4stage.json: 4 pipeline stages, 4 ranks on this host),
# each figure against its peer measured in the same run:
#   - write bandwidth of a synchronous save (bytes / the longest writer's
#     write phase: pwrite, CRC, fsync, all writers in parallel; and end to
#     end, from the start of the save to the end of its commit) against
#     `dd conv=fsync` of the same number of bytes into the same directory,
#     the two alternating over five runs: each run's median save against
#     the dd before and after it, and the median of the five ratios;
#   - the training stall of an async save against the time of a sync save;
#   - the time to load the checkpoint on resume.
# Prints a table and writes it as JSON (checkpoint.json in the bench folder of the build
# directory). Usage: bench/checkpoint.sh [BUILD_DIR]   (default: build)
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
bin=$build/bin
work=$build/bench/checkpoint
[ -x "$bin/dtrain-run" ] || { echo "bench/checkpoint.sh: build first (make build)" >&2; exit 2; }
rm -rf "$work"
mkdir -p "$work" "$build/data"
data=$build/data/synthetic-784.h5
[ -f "$data" ] || "$bin/dtrain-data" synthetic "$data" --samples 4096 --features 784 --classes 10 >/dev/null

# run NAME ASYNC [extra --set...]: 12 steps, a save every 3 (steps 3, 6, 9
# as ASYNC says, then the final save at 12, which is always synchronous);
# 3 steps take longer than an async save, so none waits for the previous one
run() {
	local name=$1 async=$2
	shift 2
	"$bin/dtrain-submit" validate "$src/jobs/mlp-100m-4stage.json" --set run_dir="$work/$name" \
		--set data.train="$data" --set train.max_steps=12 --set checkpoint.every_steps=3 \
		--set checkpoint.keep=1 --set checkpoint.async="$async" "$@" >"$work/$name.json"
	mkdir -p "$work/$name"
	OMPI_MCA_mpi_yield_when_idle=1 mpirun --allow-run-as-root --oversubscribe -np 4 \
		"$bin/dtrain-run" --quiet "$work/$name.json" >"$work/$name.out" 2>&1 ||
		{ cat "$work/$name.out"; echo "bench/checkpoint.sh: run $name failed" >&2; exit 1; }
}

# field NAME EVENT KEY: that key of every EVENT line of NAME's metrics
field() {
	sed -n "s/.*\"event\":\"$2\".*\"$3\":\([0-9.e+-]*\).*/\1/p" "$work/$1/metrics.jsonl"
}
# saves NAME KEY: KEY of the periodic saves after the first (the first
# allocates the snapshot buffers: page faults, not steady state)
saves() { field "$1" checkpoint "$2" | sed -n '2,3p'; }
# sync_saves NAME KEY: the same, with the final save (synchronous too)
sync_saves() { field "$1" checkpoint "$2" | sed -n '2,$p'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# dd_once: dd of the checkpoint's bytes into the same directory, fsync at
# the end; prints its seconds
dd_once() {
	local t0 t1
	t0=$(date +%s.%N)
	dd if=/dev/zero of="$work/dd.tmp" bs=1M count=$(((bytes + 1048575) / 1048576)) conv=fsync status=none
	t1=$(date +%s.%N)
	rm -f "$work/dd.tmp"
	awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
}

# The disk's speed here moves by half from one minute to the next, so the
# sync runs (3 measured saves each) and dd alternate, dd after every run:
# run 1, dd, run 2, dd, ... (the first run gives the byte count). Each run
# is compared with the dd next to it, before and after (the mean of their
# seconds; run 1 has only the one after): the median of its saves' write
# seconds against that, and the row is the median of the runs' ratios.
rounds=5
echo "bench/checkpoint.sh: 100M-parameter model, 4 ranks: $rounds sync runs (3 measured saves each), each followed by dd; then an async run" >&2
run sync1 false
bytes=$(field sync1 checkpoint bytes | head -n 1)
dd_all=() write_all=() total_all=() stall_all=() ratio_all=()
prev_dd=
for i in $(seq 1 "$rounds"); do
	[ "$i" = 1 ] || run "sync$i" false
	mapfile -t -O "${#write_all[@]}" write_all < <(sync_saves "sync$i" write_s)
	mapfile -t -O "${#total_all[@]}" total_all < <(sync_saves "sync$i" total_s)
	mapfile -t -O "${#stall_all[@]}" stall_all < <(sync_saves "sync$i" stall_s)
	this_dd=$(dd_once)
	dd_all+=("$this_dd")
	run_write=$(sync_saves "sync$i" write_s | median)
	ratio_all+=("$(awk -v a="${prev_dd:-$this_dd}" -v b="$this_dd" -v w="$run_write" 'BEGIN { print (a + b) / 2 / w }')")
	prev_dd=$this_dd
	# keep the last round's checkpoints for the load below
	[ "$i" = "$rounds" ] || rm -rf "$work/sync$i/checkpoints"
done
run async true
async_stall=$(saves async stall_s | median)
async_total=$(saves async total_s | median)
sync_write=$(printf '%s\n' "${write_all[@]}" | median)
sync_total=$(printf '%s\n' "${total_all[@]}" | median)
sync_stall=$(printf '%s\n' "${stall_all[@]}" | median)
dd_med=$(printf '%s\n' "${dd_all[@]}" | median)
write_ratio=$(printf '%s\n' "${ratio_all[@]}" | median)
echo "bench/checkpoint.sh: seconds of each sync write: ${write_all[*]}; of each dd: ${dd_all[*]}; each run's write bandwidth / its dd's: ${ratio_all[*]}" >&2

# load: resume the sync run's last checkpoint on a fresh run (nothing left to train)
run load false --set checkpoint.resume="$work/sync$rounds/checkpoints"
load_s=$(field load resume load_s | head -n 1)

awk -v bytes="$bytes" -v wr="$write_ratio" -v rs="$(IFS=,; echo "${ratio_all[*]}")" -v st="$sync_total" -v sw="$sync_write" -v ss="$sync_stall" -v as="$async_stall" -v at="$async_total" \
	-v dd="$dd_med" -v load="$load_s" -v json="$work/../checkpoint.json" \
	-v ws="$(IFS=,; echo "${write_all[*]}")" -v ds="$(IFS=,; echo "${dd_all[*]}")" 'BEGIN {
	mb = bytes / 1e6
	w = mb / sw; e = mb / st; d = mb / dd
	printf "%-44s %12s %12s %8s\n", "checkpoint, 100M parameters (" sprintf("%.0f", mb) " MB)", "dtrain", "peer", "ratio"
	printf "%-44s %10.0f/s %10.0f/s %8.2f   (peer: dd conv=fsync, same bytes, same disk; ratio: median of the runs, each against the dd next to it)\n", "write bandwidth, sync save (MB)", w, d, wr
	printf "%-44s %10.0f/s %10.0f/s %8.2f   (snapshot to commit, old checkpoint deleted)\n", "  end to end (MB)", e, d, e / d
	printf "%-44s %11.3fs %11.3fs %8.3f   (peer: the sync save)\n", "training stall, async save", as, st, as / st
	printf "%-44s %11.3fs %12s %8s\n", "  sync save, snapshot to commit", st, "", ""
	printf "%-44s %11.3fs %12s %8s\n", "  async save, snapshot to commit", at, "", ""
	printf "%-44s %11.3fs %12s %8s\n", "load on resume (read, check, broadcast)", load, "", ""
	printf "{\"bytes\":%d,\"write_mb_s\":%.1f,\"end_to_end_mb_s\":%.1f,\"dd_mb_s\":%.1f,\"write_ratio\":%.3f,\"write_ratio_medians\":%.3f,\"sync_save_s\":%.4f,\"async_stall_s\":%.4f,\"stall_ratio\":%.4f,\"async_save_s\":%.4f,\"load_s\":%.4f,\"write_samples_s\":[%s],\"dd_samples_s\":[%s],\"run_ratios\":[%s]}\n",
		bytes, w, e, d, wr, w / d, st, as, as / st, at, load, ws, ds, rs > json
}'
echo "bench/checkpoint.sh: table written to $(cd "$work/.." && pwd)/checkpoint.json" >&2
