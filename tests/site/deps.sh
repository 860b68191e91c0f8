#!/usr/bin/env bash
# deps.sh - site/deps.list against what the project's shell scripts call:
#  1. every command that a shell script calls by name is a bash builtin or
#     keyword, a function of one of the scripts, or listed in
#     site/deps.list: the first word of every simple command, and the
#     command that a wrapper runs, both the programs (timeout, exec, env,
#     xargs, nohup, setsid, command -v) and the scripts' own functions that
#     run their arguments (expect_rc, launch, solo);
#  2. every command listed comes from the package named on its line (or
#     from one that package depends on, or that package ships a program of
#     that name: Debian's alternatives may point awk at gawk), found on the
#     system's PATH, when that package is installed; a package of the
#     "base" set must be.
# What it cannot see: a command named by a variable, or inside a string
# (sh -c '...', trap), and the programs that Python (bench/run.py) and the
# Makefile call; those are listed by hand.
# Scripts are parsed, not grepped: shfmt --to-json gives the syntax tree and
# jq picks its calls. A command built from a variable ("$bin/dtrain-run")
# is not checked.
# Usage: tests/site/deps.sh (DTRAIN_SOURCE_DIR: the source tree)
set -euo pipefail

src=${DTRAIN_SOURCE_DIR:?DTRAIN_SOURCE_DIR must point at the source tree}
list=$src/site/deps.list
# where Debian's packages put programs; not a user's own python3 or CUDA
sys_path=/usr/sbin:/usr/bin:/sbin:/bin
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
# timeout's duration, env's assignments, and the leading arguments of the
# scripts' own wrappers: expect_rc WANT CMD..., launch NAME CMD..., solo CMD...).
wrapped() {
	local w=$1 skip=0
	shift
	case $w in expect_rc | launch) skip=1 ;; esac
	while (($#)); do
		case $w:$1 in
		timeout:-s | timeout:-k | timeout:--signal | timeout:--kill-after | env:-u | env:--unset) shift ;;
		expect_rc:* | launch:* | solo:*) ;;
		*:-*) ;;
		timeout:*) w=timeout-done ;; # the duration, literal or not
		env:*=*) ;;
		*) echo "$1"; return ;;
		esac
		if ((skip > 0)); then
			skip=$((skip - 1))
		elif [[ $w == expect_rc || $w == launch || $w == solo ]]; then
			echo "$1"
			return
		fi
		shift
	done
}

# check FILE CMD: CMD is a builtin, a function or listed.
check() {
	local file=$1 cmd=$2
	[[ -z $cmd || $cmd == \? || $cmd == *=* ]] && return 0
	[[ $cmd == */* ]] && cmd=${cmd##*/} # /usr/bin/python3: python3
	checked=$((checked + 1))
	[[ -n ${known[$cmd]:-} || -n ${pkg_of[$cmd]:-} ]] && return 0
	bad "$file: calls '$cmd', which $list does not list; hint: add it to the line of the package that ships it (dpkg -S \$(command -v $cmd))"
	known[$cmd]=reported
}

checked=0
while IFS=$'\t' read -r kind file cmd args; do
	[[ $kind == call ]] || continue
	read -ra a <<<"$args"
	check "$file" "$cmd"
	case $cmd in
	timeout | exec | env | xargs | nohup | setsid | command | expect_rc | launch | solo)
		check "$file" "$(wrapped "$cmd" "${a[@]}")" ;;
	esac
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
	# Debian's alternatives: /usr/bin/awk may lead to gawk where mawk is
	# installed too; the listed package must still ship a program of the name
	((ok)) || ! dpkg-query -L "$pkg" 2>/dev/null | grep -qE "/s?bin/$c\$" || ok=1
	((ok)) || bad "$list: '$c' (${path_of[$c]}) is not shipped by '$pkg' but by '${who:-no package}'"
done

((failed == 0)) || exit 1
echo "ok: ${#scripts[@]} scripts, $checked calls: every command listed in site/deps.list, ${#path_of[@]} commands from their packages"
