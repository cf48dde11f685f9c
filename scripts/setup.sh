#!/usr/bin/env bash
# Installs what deltac needs from Debian's packages, only what is missing.
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config ccache
      libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
      libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libopenblas-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deltac setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Python: a venv with the pinned PyTorch from PyPI (scripts/setup_python.sh).
bash "$(dirname "$0")/setup_python.sh"
