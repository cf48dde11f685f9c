#!/usr/bin/env bash
# ctest nn_vs_pytorch: nn_vs_pytorch.py with the project's venv; exit 77
# (registered as SKIP) when the venv or torch is missing.
# Usage: nn_vs_pytorch.sh PYTHON DELTAC_NN_BINARY DELTAC_C_LIBRARY [--bench]
set -u
py="$1" bin="$2" lib="$3"
shift 3
here="$(cd "$(dirname "$0")" && pwd)"
if [ ! -x "$py" ] || ! "$py" -c 'import torch, numpy' 2>/dev/null; then
  echo "nn_vs_pytorch: SKIP: no python with torch and numpy at $py (scripts/setup_python.sh)"
  exit 77
fi
export DELTAC_LIBRARY="$lib" PYTHONPATH="$here/../../python" PYTHONDONTWRITEBYTECODE=1
exec "$py" "$here/nn_vs_pytorch.py" "$bin" "$@"
