#!/usr/bin/env bash
# README command 2: install what is missing, build, run every test suite.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" -DDELTAC_BUILD_TESTS=ON
cd "${DELTAC_BUILD_DIR:-$root/build}"
ctest --output-on-failure --no-tests=error -j "$(nproc)"
