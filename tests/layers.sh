#!/usr/bin/env bash
# layers.sh - the folders' includes form layers: base/ includes no other
# folder, and no two folders include each other, directly or through others
# (no cycle in the graph of `#include "folder/..."` between the top-level
# folders of the sources; tests/ and bench/ are not part of it).
# Usage: tests/layers.sh (DTRAIN_SOURCE_DIR: the source tree)
set -euo pipefail
src=${DTRAIN_SOURCE_DIR:?DTRAIN_SOURCE_DIR must point at the source tree}
cd "$src"
folders=(base jobs site launcher checkpoint runtime)

# "from to" for every include of another folder, from any file below from/
declare -A deps
edges=0
for f in "${folders[@]}"; do
	for to in $(grep -rhoE '^#include "[a-z_]+/' "$f" --include='*.c' --include='*.h' --include='*.cu' |
		sed -E 's/.*"([a-z_]+)\/.*/\1/' | sort -u); do
		[[ $to == "$f" ]] && continue
		deps[$f]+=" $to"
		edges=$((edges + 1))
	done
done
((edges >= 5)) || { echo "FAIL: only $edges includes between folders found; is the scan working?" >&2; exit 1; }
[[ -z ${deps[base]:-} ]] || { echo "FAIL: base/ includes${deps[base]}; base/ is below every other folder" >&2; exit 1; }

# Peel off the folders that include no folder left; a cycle stays behind.
left=("${folders[@]}")
while ((${#left[@]})); do
	next=() peeled=0
	for f in "${left[@]}"; do
		blocked=0
		for to in ${deps[$f]:-}; do
			for g in "${left[@]}"; do [[ $g == "$to" ]] && blocked=1; done
		done
		if ((blocked)); then next+=("$f"); else peeled=1; fi
	done
	if ((!peeled)); then
		echo "FAIL: these folders include each other (a cycle):" >&2
		for f in "${next[@]}"; do echo "  $f/ includes${deps[$f]}" >&2; done
		exit 1
	fi
	left=("${next[@]+"${next[@]}"}")
done
echo "ok: no include cycle between ${folders[*]}; base/ includes no other folder"
