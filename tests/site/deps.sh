#!/usr/bin/env bash
# deps.sh - site/deps.list against what the project's shell scripts call:
#  1. every command that a script calls by name (the first word of a simple
#     command, and the command after timeout, exec, env, xargs, nohup,
#     setsid, command -v) is a bash builtin or keyword, a function of one of
#     the scripts, or listed in site/deps.list;
#  2. every command listed comes from the package named on its line (or
#     from one that package depends on), found on the system's PATH, when
#     that package is installed; a package of the "base" set must be.
# Scripts are parsed, not grepped: shfmt --to-json gives the syntax tree and
# jq picks its calls. A command built from a variable ("$bin/dtrain-run")
# is not checked.
# Usage: tests/site/deps.sh (DTRAIN_SOURCE_DIR: the source tree)
set -euo pipefail

src=${DTRAIN_SOURCE_DIR:?DTRAIN_SOURCE_DIR must point at the source tree}
list=$src/site/deps.list
# where Debian's packages put programs; not a user's own python3 or CUDA
sys_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
failed=0
bad() { echo "FAIL: $*" >&2; failed=1; }

for c in shfmt jq dpkg-query; do
	command -v "$c" >/dev/null || { echo "FAIL: '$c' not found; hint: run site/install-deps.sh" >&2; exit 1; }
done

# --- the list: command -> package, package -> set ---
declare -A pkg_of set_of
while read -r pkg set rest; do
	[[ -z $pkg || $pkg == \#* ]] && continue
	[[ $set == base || $set == bench || $set == gpu ]] || bad "$list: package '$pkg': set '$set' is not base, bench or gpu"
	set_of[$pkg]=$set
	for c in $rest; do
		[[ -z ${pkg_of[$c]:-} ]] || bad "$list: command '$c' listed twice ('${pkg_of[$c]}' and '$pkg')"
		pkg_of[$c]=$pkg
	done
done <"$list"
((${#pkg_of[@]} > 20)) || bad "$list: only ${#pkg_of[@]} commands read; is the file complete?"

# --- the scripts' calls ---
mapfile -t scripts < <(cd "$src" && find site bench tests runtime launcher checkpoint jobs \
	-name '*.sh' -type f | sort; echo .ci/run)
((${#scripts[@]} > 10)) || bad "only ${#scripts[@]} scripts found under $src"

# One line per call: "call<TAB>FILE<TAB>word<TAB>word...", a word that is not
# a plain literal printed as "?"; one per function: "func<TAB>NAME".
calls=$(mktemp "${TMPDIR:-/tmp}/dtrain-deps-XXXXXX")
trap 'rm -f "$calls"' EXIT
for f in "${scripts[@]}"; do
	shfmt --to-json <"$src/$f" | jq -r --arg f "$f" '
		(.. | objects | select(.Type == "FuncDecl") | "func\t" + .Name.Value),
		(.. | objects | select(.Type == "CallExpr") | select((.Args // []) | length > 0) |
		 "call\t" + $f + "\t" + ([.Args[] | if ((.Parts | length) == 1 and .Parts[0].Type == "Lit")
		   then .Parts[0].Value else "?" end] | join("\t")))' >>"$calls" ||
		bad "$f: shfmt could not parse it"
done

declare -A known
while read -r w; do known[$w]=builtin; done < <(compgen -b; compgen -k)
while IFS=$'\t' read -r kind name; do [[ $kind == func ]] && known[$name]=function; done <"$calls"

# The command a wrapper runs: the first word after its options (and after
# timeout's duration, env's assignments).
wrapped() {
	local w=$1
	shift
	while (($#)); do
		case $w:$1 in
		timeout:-s | timeout:-k | timeout:--signal | timeout:--kill-after | env:-u | env:--unset) shift ;;
		*:-*) ;;
		timeout:[0-9]*) w=timeout-done ;;
		env:*=*) ;;
		*) echo "$1"; return ;;
		esac
		shift
	done
}

checked=0
while IFS=$'\t' read -r kind file cmd args; do
	[[ $kind == call ]] || continue
	read -ra a <<<"$args"
	case $cmd in
	timeout | exec | env | xargs | nohup | setsid | command) cmd=$(wrapped "$cmd" "${a[@]}") ;;
	esac
	[[ -z $cmd || $cmd == \? || $cmd == *=* ]] && continue
	[[ $cmd == */* ]] && cmd=${cmd##*/} # /usr/bin/python3: python3
	checked=$((checked + 1))
	[[ -n ${known[$cmd]:-} || -n ${pkg_of[$cmd]:-} ]] && continue
	bad "$file: calls '$cmd', which $list does not list; hint: add it to the line of the package that ships it (dpkg -S \$(command -v $cmd))"
	known[$cmd]=reported
done <"$calls"
((checked > 500)) || bad "only $checked calls found in ${#scripts[@]} scripts; is the parser working?"

# --- each listed command from its package ---
# One dpkg-query for every package's status and dependencies, one for the
# owners of every path on the way from each command to its file (dpkg
# takes about 0.2 s a call here).
declare -A status deps owner_of path_of
while IFS=$'\t' read -r p st d; do
	status[$p]=$st
	deps[$p]=$(tr ',|' '\n\n' <<<"$d" | awk '{ sub(/:.*/, "", $1); if ($1 != "") print $1 }')
done < <(dpkg-query -W -f='${Package}\t${Status}\t${Depends}, ${Pre-Depends}\n' "${!set_of[@]}" 2>/dev/null)

# chain PATH: PATH and every link it goes through, each also with and
# without /usr (merged /usr: dpkg may know /bin/x as /usr/bin/x)
chain() {
	local p=$1 i to
	for ((i = 0; i < 10; i++)); do
		echo "$p"
		case $p in /usr/*) echo "${p#/usr}" ;; *) echo "/usr$p" ;; esac
		[[ -L $p ]] || return 0
		to=$(readlink "$p")
		[[ $to == /* ]] || to=$(dirname "$p")/$to
		p=$to
	done
}

paths=()
for c in "${!pkg_of[@]}"; do
	pkg=${pkg_of[$c]}
	if [[ ${status[$pkg]:-} != "install ok installed" ]]; then
		[[ ${set_of[$pkg]} == base ]] && bad "$list: package '$pkg' (for '$c') is not installed; hint: run site/install-deps.sh"
		continue
	fi
	path_of[$c]=$(PATH=$sys_path command -v "$c") ||
		{ bad "$list: '$c' not found on $sys_path although '$pkg' is installed"; unset "path_of[$c]"; continue; }
	mapfile -t -O ${#paths[@]} paths < <(chain "${path_of[$c]}")
done
# "pkg[:arch][, pkg2...]: /path" lines
while IFS= read -r line; do
	o=${line%%: /*}
	owner_of[${line#"$o: "}]=$(sed 's/:[a-z0-9]*//g' <<<"$o")
done < <(dpkg-query -S "${paths[@]}" 2>/dev/null || true)

for c in "${!path_of[@]}"; do
	pkg=${pkg_of[$c]} ok=0 who=""
	while read -r p; do
		o=${owner_of[$p]:-}
		[[ -n $o ]] || continue
		who=${who:-$o}
		if [[ ", $o, " == *", $pkg, "* ]] || grep -qxF -- "${o%%,*}" <<<"${deps[$pkg]}"; then ok=1; break; fi
	done < <(chain "${path_of[$c]}")
	((ok)) || bad "$list: '$c' (${path_of[$c]}) is not shipped by '$pkg' but by '${who:-no package}'"
done

((failed == 0)) || exit 1
echo "ok: ${#scripts[@]} scripts, $checked calls: every command listed in site/deps.list, ${#path_of[@]} commands from their packages"
