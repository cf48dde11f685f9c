#!/usr/bin/env bash
# README command 2: install what is missing, build, run every test suite.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
cd "${DELTAC_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)"
