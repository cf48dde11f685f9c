#!/usr/bin/env bash
# The Python package's GPU checks on the H200, from the repository root, carrying
# .peer (fla) — e.g. run(command="bash tests/python/gpu_check.sh", carry=[".peer"]).
# Builds deltac_c with CUDA into build-gpu-py/ (git-ignored, so a second call only
# rebuilds what changed; no network needed: the image's python3 has torch and pytest), then
#   stage "tests": the CUDA cases and the fla drop-in cases (the CPU cases run in CI),
#                  with each drop-in case's errors (fla and deltac vs float64);
#   stage "bench": host overhead per op call on the GPU path (tiny and Qwen3-Next
#                  decode sizes), the CPU path there, and the layers vs fla's layers.
# Usage: bash tests/python/gpu_check.sh [build|tests|bench|all]   (default all)
# "build" only builds (ninja resumes where a call that ran out of time stopped).
# Logs go to $OUT (py_*.log).
# The catalogue's tuning DB needs nlohmann-json at configure time; if the image has
# none, carry Debian's package unpacked in build-nlohmann/ (git-ignored):
#   mkdir -p build-nlohmann && cd build-nlohmann && apt-get download nlohmann-json3-dev &&
#   dpkg -x nlohmann-json3-dev_*.deb .        # then carry=[".peer", "build-nlohmann"]
set -u
stage=${1:-all}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=${DELTAC_PY_BUILD:-build-gpu-py}
case $B in /*) ;; *) B=$PWD/$B ;; esac
rc=0
step() { echo "== $1: exit $2"; [ "$2" -eq 0 ] || rc=1; }
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())'
nl=()
[ -d build-nlohmann/usr/share/cmake/nlohmann_json ] &&
  nl=(-Dnlohmann_json_DIR="$PWD/build-nlohmann/usr/share/cmake/nlohmann_json")
{ # always: ninja only rebuilds what changed
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELTAC_BUILD_COMPILER=OFF \
    -DDELTAC_BUILD_TESTS=OFF -DDELTAC_BUILD_BENCH=OFF "${nl[@]}" \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" >"$OUT/py_build.log" 2>&1 &&
    cmake --build "$B" -j "$(nproc)" --target deltac_c >>"$OUT/py_build.log" 2>&1 &&
    [ -f "$B/python/libdeltac_c.so" ]
  r=$?; step "build deltac_c with CUDA" $r
  [ $r -eq 0 ] || { tail -30 "$OUT/py_build.log"; exit 1; }
}
[ "$stage" = build ] && exit 0
export DELTAC_LIBRARY="$B/python/libdeltac_c.so" PYTHONPATH="$PWD/python:$PWD/.peer"
python3 -c 'import deltac; assert deltac.cuda_available(), "deltac_c has no CUDA"; print("deltac CUDA ok")'
r=$?; step "deltac CUDA available" $r
[ $r -eq 0 ] || exit 1

if [ "$stage" = tests ] || [ "$stage" = all ]; then
  python3 -m pytest -q -rs -p no:cacheprovider -W ignore::DeprecationWarning \
    tests/python/test_cuda.py >"$OUT/py_cuda_tests.log" 2>&1
  r=$?; tail -8 "$OUT/py_cuda_tests.log"; step "pytest test_cuda.py" $r
  python3 -m pytest -q -rs -s -p no:cacheprovider -W ignore::DeprecationWarning \
    tests/python/test_fla_dropin.py >"$OUT/py_fla_dropin.log" 2>&1
  r=$?; grep -E "rel. error|passed|failed|skipped|Error" "$OUT/py_fla_dropin.log" | tail -20
  step "pytest test_fla_dropin.py" $r
fi
if [ "$stage" = bench ] || [ "$stage" = all ]; then
  {
    python3 tests/python/bench_overhead.py --device=cuda
    python3 tests/python/bench_overhead.py --device=cuda --heads 32 --dim 128 --dtype bfloat16 --n 1000
    python3 tests/python/bench_overhead.py
  } 2>&1 | tee "$OUT/py_overhead.log"
  step "overhead bench" "${PIPESTATUS[0]}"
  python3 tests/python/bench_layers.py --tokens 8192 2>&1 | tee "$OUT/py_layers.log"
  step "layer bench" "${PIPESTATUS[0]}"
fi
exit $rc
