#!/usr/bin/env bash
# Install the Debian 12 packages dtrain needs to build, test and run: those
# of site/deps.list (the one list of packages and of the commands the
# project's scripts call from them).
# Idempotent: does nothing (and touches no network) when every package is
# already installed; otherwise runs `apt-get update` once and installs the rest.
#   --bench  also the peers of `make bench`: PyTorch 1.13 (CPU) and h5py
# Exit codes: 0 installed (or nothing to do), 1 failure (not root, apt-get
# failed, a listed command still missing), 2 usage error.
set -euo pipefail

list=$(dirname "$0")/deps.list
sets=" base "
case "${1:-}" in
  --bench) sets+="bench " ;;
  -h | --help) sed -n '2,9s/^# \{0,1\}//p' "$0"; exit 0 ;;
  "") ;;
  *) echo "install-deps: unknown argument: $1 (usage: install-deps.sh [--bench])" >&2; exit 2 ;;
esac
command -v dpkg-query >/dev/null ||
  { echo "install-deps: dpkg-query not found: this script installs Debian 12 packages; install the packages of $list by hand" >&2; exit 1; }

# The packages of our sets, and the commands they must give.
pkgs=() cmds=()
while read -r pkg set rest; do
  [[ -z $pkg || $pkg == \#* ]] && continue
  [[ $sets == *" $set "* ]] || continue
  pkgs+=("$pkg")
  read -ra more <<<"$rest"
  cmds+=("${more[@]}")
done <"$list"

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
