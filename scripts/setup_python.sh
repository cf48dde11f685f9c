#!/usr/bin/env bash
# Python side of deltac's setup (called by scripts/setup.sh): a virtual
# environment with the pinned PyTorch, NumPy and pytest, from PyPI only.
#
# The PyPI Linux wheel of torch pulls about 3 GB of nvidia-* wheels (CUDA
# runtime, cuBLAS, cuDNN, NCCL...): 75 s to 3 min to download and install on
# the CI machine (measured 3 times), ~4.7 GB on disk. So the environment lives OUTSIDE the clone, at
# ${DELTAC_VENV:-~/.cache/deltac/venv-<python>-<torch>}, and is reused by every
# later run on the same machine (CI clones afresh but keeps the machine): a
# stamp file holding the pins says whether it is complete; anything else is
# rebuilt. <repo>/.venv is a symlink to it (git-ignored), which is where
# CMake (tests/python) and the docs look for the interpreter.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

TORCH_VERSION=2.11.0   # the version of the H200 image's torch, too
NUMPY_VERSION=2.4.6
PYTEST_VERSION=9.2.0
pins="torch==$TORCH_VERSION numpy==$NUMPY_VERSION pytest==$PYTEST_VERSION"

python="${DELTAC_PYTHON_BASE:-}"
if [ -z "$python" ]; then
  for c in python3.11 python3.12 python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
      python="$(command -v "$c")"; break
    fi
  done
fi
if [ -z "$python" ] && [ -x /usr/bin/apt-get ]; then
  # A bare Debian 12: its python3 (3.11) with the venv module from Debian.
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    python3 python3-venv >/dev/null
  python=/usr/bin/python3
fi
if [ -z "$python" ]; then
  echo "deltac setup_python: need Python >= 3.10 with the venv module (set DELTAC_PYTHON_BASE)" >&2
  exit 1
fi
pyver="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
venv="${DELTAC_VENV:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/deltac/venv-py$pyver-torch$TORCH_VERSION}"
stamp="$venv/.deltac-pins"
mkdir -p "$(dirname "$venv")"
# One setup at a time per environment (worktrees and CI on one machine share it).
exec 9>"$venv.lock"
flock 9

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pins" ] &&
   "$venv/bin/python" -c 'import torch, numpy, pytest' 2>/dev/null; then
  echo "deltac setup_python: reusing $venv ($pins)"
else
  echo "deltac setup_python: creating $venv ($pins; first time ~2 min, ~5 GB)"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  start=$(date +%s)
  # PyPI only: pip's default index, no extra index, no local wheel directory.
  PIP_FIND_LINKS= PIP_EXTRA_INDEX_URL= "$venv/bin/python" -m pip install --quiet \
    --disable-pip-version-check $pins
  echo "deltac setup_python: installed in $(( $(date +%s) - start )) s"
  echo "$pins" >"$stamp"
fi

# <repo>/.venv -> the shared environment (a real directory there is left alone).
if [ -L "$root/.venv" ] || [ ! -e "$root/.venv" ]; then
  ln -sfn "$venv" "$root/.venv"
fi
