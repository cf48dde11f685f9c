#!/usr/bin/env bash
# Installs what deltac needs from Debian's packages, only what is missing.
set -euo pipefail
bash "$(dirname "$0")/apt_missing.sh" cmake ninja-build g++ pkg-config ccache \
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools \
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libopenblas-dev
# Python: a venv with the pinned PyTorch from PyPI (scripts/setup_python.sh).
bash "$(dirname "$0")/setup_python.sh"
