#!/usr/bin/env bash
# deps.sh - site/deps.list against what the project's scripts call and import:
#  1. every command that a shell script calls by name is a bash builtin or
#     keyword, a function of one of the scripts, or listed in
#     site/deps.list for the purpose of that script: the first word of every
#     simple command, and the command that a wrapper runs, both the programs
#     (timeout, exec, env, xargs, nohup, setsid, command -v) and the scripts'
#     own functions that run their arguments (expect_rc, launch, solo);
#  2. every module that a Python script imports (anywhere in it) is Python's
#     own, one of the project's, or listed (py:NAME) for the script's purpose;
#  3. a script's purpose is its folder's: tests/ and .ci/ test, bench/ bench,
#     any other demo; a package is for a script when deps.list marks it for
#     demo, gpu (never installed; the scripts check for it), or the script's
#     purpose, and install-deps.sh --for that purpose picks it;
#  4. the Makefile's goals install their purposes: make demo and build the
#     demo packages, make test and test-fast the test ones, make bench the
#     bench ones (make -n: what they would run);
#  5. every command and module listed comes from the package named on its
#     line (or from one that package depends on, or that package ships a
#     program of that name: Debian's alternatives may point awk at gawk),
#     found on the system's PATH (modules: by /usr/bin/python3), when that
#     package is installed; a package for demo or test must be.
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

# --- the list: command -> package, package -> purposes ---
declare -A pkg_of for_of
while read -r pkg purposes rest; do
	[[ -z $pkg || $pkg == \#* ]] && continue
	for p in ${purposes//,/ }; do
		[[ $p == demo || $p == test || $p == bench || $p == gpu ]] ||
			bad "$list: package '$pkg': purpose '$p' is not demo, test, bench or gpu"
	done
	for_of[$pkg]=",$purposes,"
	for c in $rest; do
		[[ -z ${pkg_of[$c]:-} ]] || bad "$list: command '$c' listed twice ('${pkg_of[$c]}' and '$pkg')"
		pkg_of[$c]=$pkg
	done
done <"$list"
((${#pkg_of[@]} > 20)) || bad "$list: only ${#pkg_of[@]} commands read; is the file complete?"

# What install-deps.sh installs for each purpose: the test holds the
# installer to the list, not a reading of the list of its own.
declare -A installs
for p in demo test bench; do
	installs[$p]=" $(bash "$src/site/install-deps.sh" --for $p --list | tr '\n' ' ')"
done

# purpose_of FILE: sets want to the purpose of a script, by its folder
# (no subshell: it runs for each of some 5000 calls)
purpose_of() {
	case $1 in
	tests/* | .ci/*) want=test ;;
	bench/*) want=bench ;;
	*) want=demo ;;
	esac
}

# for_script FILE PKG: PKG is installed for FILE's purpose (or is a GPU's)
# not_for FILE PKG: why it is not, for a message
for_script() {
	local want
	purpose_of "$1"
	[[ ${for_of[$2]} == *,gpu,* ]] && return 0
	[[ ${for_of[$2]} == *,demo,* || ${for_of[$2]} == *,$want,* ]] || return 1
	[[ ${installs[$want]} == *" $2 "* ]]
}
not_for() {
	local want purposes=${for_of[$2]#,}
	purpose_of "$1"
	echo "$list marks '$2' for ${purposes%,} only, and a script in ${1%%/*}/ runs with the $want packages (install-deps.sh --for $want); hint: add $want to its line"
}

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

# check FILE CMD: CMD is a builtin, a function or listed for FILE's purpose;
# each command reported once (not listed) or once a script (not for it).
declare -A reported
check() {
	local file=$1 cmd=$2 pkg key
	[[ -z $cmd || $cmd == \? || $cmd == *=* ]] && return 0
	[[ $cmd == */* ]] && cmd=${cmd##*/} # /usr/bin/python3: python3
	key="$file $cmd"
	checked=$((checked + 1))
	[[ -n ${known[$cmd]:-} ]] && return 0
	pkg=${pkg_of[$cmd]:-}
	if [[ -z $pkg ]]; then
		[[ -n ${reported[$cmd]:-} ]] || bad "$file: calls '$cmd', which $list does not list; hint: add it to the line of the package that ships it (dpkg -S \$(command -v $cmd))"
		reported[$cmd]=1
	elif ! for_script "$file" "$pkg" && [[ -z ${reported[$key]:-} ]]; then
		bad "$file: calls '$cmd', but $(not_for "$file" "$pkg")"
		reported[$key]=1
	fi
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

# --- the Python scripts' imports ---
# "FILE<TAB>module" for each module imported by name, found by Python's own
# parser; Python's standard modules and the project's own (a .py file of
# the tree, as tests/integration/gpt_torch.py imports bench/torch_gpt.py)
# left out.
mapfile -t pys < <(cd "$src" && find site bench tests runtime launcher checkpoint jobs -name '*.py' -type f | sort)
((${#pys[@]} > 5)) || bad "only ${#pys[@]} Python scripts found under $src"
imported=0
while IFS=$'\t' read -r file mod; do
	imported=$((imported + 1))
	key=py:$mod
	pkg=${pkg_of[$key]:-}
	if [[ -z $pkg ]]; then
		bad "$file: imports '$mod', which $list does not list; hint: add py:$mod to the line of the package that ships it (dpkg -S /usr/lib/python3/dist-packages/$mod)"
	elif ! for_script "$file" "$pkg"; then
		bad "$file: imports '$mod', but $(not_for "$file" "$pkg")"
	fi
done < <(cd "$src" && /usr/bin/python3 -c '
import ast, os, sys
own = {os.path.basename(f)[:-3] for f in sys.argv[1:]}
for f in sys.argv[1:]:
    mods = set()
    for n in ast.walk(ast.parse(open(f).read(), f)):
        if isinstance(n, ast.Import):
            mods.update(a.name.split(".")[0] for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.level == 0:
            mods.add(n.module.split(".")[0])
    for m in sorted(mods - own - set(sys.stdlib_module_names)):
        print(f + "\t" + m)' "${pys[@]}")
((imported >= 3)) || bad "only $imported imports of packages found in ${#pys[@]} Python scripts; is the parser working?"

# --- the Makefile's goals and the purposes they install ---
# (not under the settings of a make that runs this test: make test DEPS_FOR=x)
for goal in build:demo demo:demo test:test test-fast:test bench:bench; do
	ran=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u DEPS_FOR make -n -C "$src" "${goal%:*}" 2>/dev/null | grep -o 'install-deps\.sh --for [a-z,]*' || true)
	[[ ",${ran##* }," == *",${goal#*:},"* ]] ||
		bad "Makefile: 'make ${goal%:*}' runs '${ran:-no install-deps.sh}', not install-deps.sh --for ${goal#*:}; hint: its goal belongs in DEPS_FOR"
done

# --- each listed command from its package ---
# One dpkg-query for every package's status and dependencies, one for the
# owners of every path on the way from each command to its file (dpkg
# takes about 0.2 s a call here).
declare -A status deps owner_of path_of
while IFS=$'\t' read -r p st d; do
	status[$p]=$st
	deps[$p]=$(tr ',|' '\n\n' <<<"$d" | awk '{ sub(/:.*/, "", $1); if ($1 != "") print $1 }')
done < <(dpkg-query -W -f='${Package}\t${Status}\t${Depends}, ${Pre-Depends}\n' "${!for_of[@]}" 2>/dev/null)

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

# where /usr/bin/python3 finds each listed module: "py:NAME<TAB>FILE"
declare -A module_at
while IFS=$'\t' read -r c at; do module_at[$c]=$at; done < <(/usr/bin/python3 -c '
import importlib.util, sys
for c in sys.argv[1:]:
    s = importlib.util.find_spec(c[3:])
    print(c + "\t" + (s.origin if s and s.origin else ""))' $(printf '%s\n' "${!pkg_of[@]}" | grep '^py:'))

paths=()
for c in "${!pkg_of[@]}"; do
	pkg=${pkg_of[$c]}
	if [[ ${status[$pkg]:-} != "install ok installed" ]]; then
		[[ ${for_of[$pkg]} == *,demo,* || ${for_of[$pkg]} == *,test,* ]] &&
			bad "$list: package '$pkg' (for '$c') is not installed; hint: run site/install-deps.sh --for test"
		continue
	fi
	if [[ $c == py:* ]]; then
		path_of[$c]=${module_at[$c]:-}
		[[ -n ${path_of[$c]} ]] ||
			{ bad "$list: /usr/bin/python3 cannot import '${c#py:}' although '$pkg' is installed"; unset "path_of[$c]"; continue; }
	else
		path_of[$c]=$(PATH=$sys_path command -v "$c") ||
			{ bad "$list: '$c' not found on $sys_path although '$pkg' is installed"; unset "path_of[$c]"; continue; }
	fi
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
	[[ $c == py:* ]] || ((ok)) || ! dpkg-query -L "$pkg" 2>/dev/null | grep -qE "/s?bin/$c\$" || ok=1
	((ok)) || bad "$list: '$c' (${path_of[$c]}) is not shipped by '$pkg' but by '${who:-no package}'"
done

((failed == 0)) || exit 1
echo "ok: ${#scripts[@]} shell scripts, $checked calls, ${#pys[@]} Python scripts, $imported imports: each listed in site/deps.list for its script's purpose; ${#path_of[@]} commands and modules from their packages"
