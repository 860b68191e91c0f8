#!/usr/bin/env bash
# Install the Debian 12 packages dtrain needs to build, test and run.
# Idempotent: does nothing (and touches no network) when every package is
# already installed; otherwise runs `apt-get update` once and installs the rest.
#   --bench  also the peers of `make bench`: PyTorch 1.13 (CPU) and h5py
set -euo pipefail

PKGS=(
  cmake make gcc pkg-config
  libjson-c-dev libcmocka-dev
  libopenblas-dev
  libpmix-dev openmpi-bin libopenmpi-dev
  libhdf5-openmpi-dev hdf5-tools zlib1g-dev
  munge slurm-wlm slurmctld slurmd slurm-client libslurm-dev
  dataset-fashion-mnist
)
case "${1:-}" in
  --bench) PKGS+=(python3-torch python3-h5py) ;;
  "") ;;
  *) echo "install-deps: unknown argument: $1 (usage: install-deps.sh [--bench])" >&2; exit 2 ;;
esac

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
