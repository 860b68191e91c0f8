#!/usr/bin/env bash
# Install the Debian 12 packages dtrain needs for a purpose: those that
# site/deps.list (the one list of packages and of the commands the project's
# scripts call from them) marks for it, and always those marked "demo".
# Idempotent: does nothing (and touches no network) when every package is
# already installed; otherwise runs `apt-get update` once and installs the rest.
#   --for PURPOSE  demo (the default: make build, make demo), test (adds the
#                  test tools: make test), bench (adds the peers: make bench);
#                  several as test,bench
#   --list         print the packages of the purpose, one a line; install nothing
# Exit codes: 0 installed (or nothing to do), 1 failure (not root, apt-get
# failed, a listed command still missing), 2 usage error.
set -euo pipefail

list=$(dirname "$0")/deps.list
usage="usage: install-deps.sh [--for demo|test|bench[,...]] [--list]"
purposes=demo only_list=false
while (($#)); do
  case $1 in
    --for) [ $# -ge 2 ] || { echo "install-deps: --for needs a purpose ($usage)" >&2; exit 2; }
      purposes=$2; shift ;;
    --for=*) purposes=${1#--for=} ;;
    --list) only_list=true ;;
    -h | --help) sed -n '2,13s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "install-deps: unknown argument: $1 ($usage)" >&2; exit 2 ;;
  esac
  shift
done
sets=" demo "
for p in ${purposes//,/ }; do
  case $p in
    demo | test | bench) sets+="$p " ;;
    *) echo "install-deps: --for $purposes: unknown purpose '$p'; hint: demo, test or bench ($usage)" >&2; exit 2 ;;
  esac
done

# The packages for our purposes, and the commands they must give (their
# Python modules, py:NAME, are tests/site/deps.sh's to check).
pkgs=() cmds=()
while read -r pkg purpose rest; do
  [[ -z $pkg || $pkg == \#* ]] && continue
  mine=false
  for f in ${purpose//,/ }; do [[ $sets == *" $f "* ]] && mine=true; done
  $mine || continue
  pkgs+=("$pkg")
  for c in $rest; do [[ $c == py:* ]] || cmds+=("$c"); done
done <"$list"
if $only_list; then
  printf '%s\n' "${pkgs[@]}"
  exit 0
fi
command -v dpkg-query >/dev/null ||
  { echo "install-deps: dpkg-query not found: this script installs Debian 12 packages; install the packages of $list by hand" >&2; exit 1; }

# one dpkg-query for all of them: every `make build` runs this
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${pkgs[@]}" 2>/dev/null |
  awk '$NF == "installed" && $(NF-1) == "ok" { print $1 }' || true)
missing=()
for p in "${pkgs[@]}"; do
  grep -qxF -- "$p" <<<"$installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: run as root (or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Every command the list promises, where the scripts will look for it.
export PATH="$PATH:/usr/sbin:/sbin"
absent=()
for c in "${cmds[@]}"; do command -v "$c" >/dev/null || absent+=("$c"); done
if [ ${#absent[@]} -gt 0 ]; then
  echo "install-deps: installed, but not found on PATH: ${absent[*]}; hint: check $list against 'dpkg -S <command>'" >&2
  exit 1
fi
