"""pytest setup for deltac's Python tests.

Run through ctest (tests/python/CMakeLists.txt sets PYTHONPATH and DELTAC_LIBRARY),
or by hand:

    DELTAC_LIBRARY=build/python/libdeltac_c.so PYTHONPATH=python .venv/bin/python -m pytest tests/python

Randomized tests take the ``seed`` fixture: DELTAC_TEST_SEED (decimal or 0x hex) when
set, else a fresh random seed; it seeds torch's global generator and is printed
("DELTAC_TEST_SEED=<n>"), which pytest shows with a failing test's output, so
``DELTAC_TEST_SEED=<n> pytest tests/python -k <test>`` replays it.
"""

import os
import random
import sys

import pytest

_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if not os.environ.get("DELTAC_LIBRARY"):
    try:
        import deltac  # noqa: F401  (an installed package with its bundled library)
    except ImportError:
        for build in ("build", "build-py"):
            lib = os.path.join(_root, build, "python", "libdeltac_c.so")
            if os.path.exists(lib):
                os.environ["DELTAC_LIBRARY"] = lib
                break
        sys.path.insert(0, os.path.join(_root, "python"))


def _seed_from_env():
    s = os.environ.get("DELTAC_TEST_SEED")
    if s is None:
        return None
    try:
        v = int(s, 0)
        if v < 0 or v >= 1 << 64:
            raise ValueError
    except ValueError:
        raise pytest.UsageError(
            f'DELTAC_TEST_SEED="{s}": expected an unsigned 64-bit integer (decimal or 0x hex)')
    return v


def pytest_report_header(config):
    import torch
    import deltac

    v = _seed_from_env()
    return [f"torch {torch.__version__}, deltac library {deltac.library_path}, "
            f"CUDA in library: {deltac.cuda_available()}, torch.cuda: {torch.cuda.is_available()}",
            "DELTAC_TEST_SEED=" + (str(v) if v is not None else "(unset: a fresh seed per test)")]


@pytest.fixture
def seed():
    import torch

    v = _seed_from_env()
    if v is None:
        v = random.SystemRandom().getrandbits(63)
    print(f"DELTAC_TEST_SEED={v}")
    torch.manual_seed(v)
    return v
