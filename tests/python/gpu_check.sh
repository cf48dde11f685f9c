#!/usr/bin/env bash
# The Python package's GPU checks, in one call on the H200 (run from the repo root;
# carry .peer for fla). Builds deltac_c with CUDA (no network needed: the image's
# python3 has torch, pytest, scikit-build-core), runs the Python suites (the CUDA
# cases and the fla drop-in cases run there), the host-overhead bench on the GPU
# path, and the layer speed comparison with fla. Logs go to $OUT.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=${DELTAC_PY_BUILD:-/tmp/deltac-py}
rc=0
step() { echo "== $1: exit $2"; [ "$2" -eq 0 ] || rc=1; }
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())'
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELTAC_BUILD_COMPILER=OFF \
  -DDELTAC_BUILD_TESTS=OFF -DDELTAC_BUILD_BENCH=OFF \
  -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" >"$OUT/py_build.log" 2>&1 &&
  cmake --build "$B" -j "$(nproc)" --target deltac_c >>"$OUT/py_build.log" 2>&1
r=$?; step "build deltac_c with CUDA" $r
[ $r -eq 0 ] || { tail -30 "$OUT/py_build.log"; exit 1; }
export DELTAC_LIBRARY="$B/python/libdeltac_c.so" PYTHONPATH="$PWD/python:$PWD/.peer"
python3 -m pytest -q -rs -p no:cacheprovider -W ignore::DeprecationWarning tests/python \
  >"$OUT/py_tests.log" 2>&1
r=$?; tail -15 "$OUT/py_tests.log"; step "pytest tests/python (CPU + CUDA + fla drop-in)" $r
python3 -m pytest -q -s -p no:cacheprovider tests/python/test_fla_dropin.py 2>&1 | grep -E "rel. error|passed|failed|skipped" | tee "$OUT/py_fla_errors.log"
for a in "" "--heads 32 --dim 128 --dtype bfloat16 --n 1000"; do
  python3 tests/python/bench_overhead.py --device=cuda $a 2>&1 | tee -a "$OUT/py_overhead.log"
done
python3 tests/python/bench_overhead.py 2>&1 | tee -a "$OUT/py_overhead.log"  # the CPU path there
python3 tests/python/bench_layers.py --tokens 8192 2>&1 | tee "$OUT/py_layers.log"
step "benches" ${PIPESTATUS[0]}
exit $rc
