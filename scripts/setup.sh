#!/usr/bin/env bash
# Install everything resil needs from Debian 12's packages (root, idempotent).
# Every package is justified in docs/reference/dependencies.md.
set -euo pipefail

packages=(
  build-essential cmake pkg-config ninja-build
  libhdf5-dev hdf5-tools libisal-dev libmpich-dev mpich libcli11-dev catch2
  nlohmann-json3-dev zlib1g-dev libxxhash-dev libssl-dev libdeflate-dev
  python3-h5py python3-numpy python3-matplotlib python3-scipy dataset-fashion-mnist fortunes python3-torch
  clang libclang-rt-14-dev
  slurm-wlm munge
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  echo "setup: missing packages (${missing[*]}); run scripts/setup.sh as root" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
