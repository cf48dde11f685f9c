"""ctypes binding of deltac's C API (runtime/include/deltac/runtime.h).

The shared library ``libdeltac_c.so`` (CMake target ``deltac_c``, built from
python/CMakeLists.txt) is looked up, in order:

1. ``$DELTAC_LIBRARY``: a path to the library (tests and build trees use it);
2. ``libdeltac_c.so`` next to this file (what ``pip install ./python`` bundles).

At load, the ctypes mirror of ``deltac_fwd_params`` below is compared field by
field with the offsets the library reports (``deltac_abi_layout``), so a
library built from a different ``params.h`` is refused instead of being handed
a wrong struct. The options are passed as plain arguments to
``deltac_py_forward`` (python/abi.cpp), which fills ``deltac_options`` from
``deltac_default_options()``: that struct (and ``deltac_run_info``) can grow
without this package mirroring it.
"""

from __future__ import annotations

import ctypes
import os
import struct
from ctypes import (POINTER, byref, c_char_p, c_float, c_int, c_int32, c_int64, c_longlong,
                    c_size_t, c_void_p)

# deltac_variant, deltac_dtype, deltac_state_layout (params.h)
VARIANT_DELTA, VARIANT_GATED, VARIANT_KDA = 0, 1, 2
DTYPE_F32, DTYPE_BF16, DTYPE_F16 = 0, 1, 2
STATE_KV, STATE_VK = 0, 1
# deltac_device_kind, deltac_mode (runtime.h)
DEVICE_AUTO, DEVICE_CPU, DEVICE_CUDA = 0, 1, 2
MODE_AUTO, MODE_CHUNKED, MODE_RECURRENT = 0, 1, 2


class FwdParams(ctypes.Structure):
    """Mirror of ``deltac_fwd_params`` (templates/include/deltac/params.h)."""

    _fields_ = [
        ("variant", c_int32),
        ("B", c_int32),
        ("T", c_int32),
        ("H", c_int32),
        ("HV", c_int32),
        ("K", c_int32),
        ("V", c_int32),
        ("N", c_int32),
        ("in_dtype", c_int32),
        ("out_dtype", c_int32),
        ("state_dtype", c_int32),
        ("state_layout", c_int32),
        ("q", c_void_p),
        ("k", c_void_p),
        ("v", c_void_p),
        ("g", c_void_p),
        ("beta", c_void_p),
        ("h0", c_void_p),
        ("o", c_void_p),
        ("ht", c_void_p),
        ("cu_seqlens", c_void_p),
        ("scale", c_float),
        ("qk_l2norm", c_int32),
        ("threads", c_int32),
        # decode for serving engines (state pools, state_steps, accepted): unused here, 0
        ("num_slots", c_int32),
        ("read_slots", c_void_p),
        ("write_slots", c_void_p),
        ("state_steps", c_void_p),
        ("accepted", c_void_p),
        ("state_scale", c_void_p),  # fp8 states only: unused here, 0
    ]


class BwdParams(ctypes.Structure):
    """Mirror of ``deltac_bwd_params`` (templates/include/deltac/backward.h)."""

    _fields_ = [(name, c_int32) for name in
                ("variant", "B", "T", "H", "HV", "K", "V", "N", "in_dtype", "out_dtype",
                 "state_layout")] + [
        (name, c_void_p) for name in
        ("q", "k", "v", "g", "beta", "h0", "dout", "dht", "dq", "dk", "dv", "dg", "dbeta",
         "dh0", "cu_seqlens")] + [
        ("scale", c_float),
        ("qk_l2norm", c_int32),
        ("threads", c_int32),
        ("chunk", c_int32),
        ("saved_states", c_void_p),  # the forward's saved states (deltac_saved_states_size)
        ("saved_states_bytes", c_size_t),
    ]


# in_dtype of a float64 backward call (deltac/backward.h)
DTYPE_BWD_F64 = 3


# The same layout as a struct format, for the hot path: packing the fields into
# bytes is ~4x cheaper than building a FwdParams (checked equal at load).
PARAMS_STRUCT = struct.Struct("@12i9Pf3i5P")
# deltac_py_call (python/abi.cpp): the params, then device, mode, chunk,
# flags (bit 0 device pointers, bit 1 allow_neg_eigval), cuda_stream; passed as one argument to deltac_py_call_forward
# (checked against deltac_abi_call_layout at load).
CALL_STRUCT = struct.Struct("@12i9Pf3i5P4iP")


class LibraryError(ImportError):
    """The deltac shared library is missing or does not match this package."""


def _candidates():
    env = os.environ.get("DELTAC_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, "libdeltac_c.so")]


def _expected_layout(cls=None):
    cls = cls or FwdParams
    vals = [ctypes.sizeof(cls)]
    vals += [getattr(cls, name).offset for name, _ in cls._fields_]
    return vals


def _load():
    tried = []
    for path in _candidates():
        if not os.path.exists(path):
            tried.append(f"{path} (missing)")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:  # pragma: no cover - depends on the system
            tried.append(f"{path} ({e})")
            continue
        break
    else:
        raise LibraryError(
            "deltac: the runtime library libdeltac_c.so was not found: tried "
            + "; ".join(tried)
            + ". Install the package with `pip install ./python` from the deltac "
            "repository, or build the CMake target deltac_c and set "
            "DELTAC_LIBRARY=<build>/python/libdeltac_c.so."
        )

    lib.deltac_abi_layout.argtypes = [POINTER(c_longlong), c_int]
    lib.deltac_abi_layout.restype = c_int
    want = _expected_layout()
    buf = (c_longlong * len(want))()
    total = lib.deltac_abi_layout(buf, len(want))
    got = list(buf)
    if total != len(want) or got != want:
        raise LibraryError(
            f"deltac: {path} was built from a different params.h than "
            f"this package mirrors (struct layout {got[:total]} != {want}); "
            "rebuild the library and the package from one checkout."
        )

    lib.deltac_abi_bwd_layout.argtypes = [POINTER(c_longlong), c_int]
    lib.deltac_abi_bwd_layout.restype = c_int
    want = _expected_layout(BwdParams)
    buf = (c_longlong * len(want))()
    total = lib.deltac_abi_bwd_layout(buf, len(want))
    if total != len(want) or list(buf) != want:
        raise LibraryError(
            f"deltac: {path} was built from a different backward.h than this package mirrors "
            f"(deltac_bwd_params layout {list(buf)[:total]} != {want}); rebuild the library "
            "and the package from one checkout.")

    probe = (tuple(range(1, 13)) + tuple(range(1 << 40, (1 << 40) + 9)) + (0.5, 13, 14, 15)
             + tuple(range(1 << 41, (1 << 41) + 5)))
    if PARAMS_STRUCT.size != ctypes.sizeof(FwdParams) or \
            PARAMS_STRUCT.pack(*probe) != bytes(FwdParams(*probe)):
        raise LibraryError("deltac: PARAMS_STRUCT does not match FwdParams (deltac/_lib.py)")

    if not hasattr(lib, "deltac_abi_call_layout"):
        raise LibraryError(
            f"deltac: {path} has no deltac_py_call_forward (a library older than this package); "
            "rebuild the CMake target deltac_c and the package from one checkout.")
    lib.deltac_abi_call_layout.argtypes = [POINTER(c_longlong), c_int]
    lib.deltac_abi_call_layout.restype = c_int
    buf = (c_longlong * 7)()
    n = PARAMS_STRUCT.size
    want = [CALL_STRUCT.size, 0, n, n + 4, n + 8, n + 12, n + 16]
    total = lib.deltac_abi_call_layout(buf, 7)
    if total != 7 or list(buf) != want:
        raise LibraryError(
            f"deltac: {path} packs deltac_py_call differently from this package (layout "
            f"{list(buf)[:total]} != {want}); rebuild the library and the package from one "
            "checkout.")
    lib.deltac_py_call_forward.argtypes = [c_char_p]  # CALL_STRUCT bytes
    lib.deltac_py_call_forward.restype = c_int
    lib.deltac_py_call_forward_saved.argtypes = [c_char_p, c_void_p, c_size_t]
    lib.deltac_py_call_forward_saved.restype = c_int
    lib.deltac_saved_states_size.argtypes = [c_int32, c_int64, c_int64, c_int32, c_int32,
                                             c_int32, c_int32]
    lib.deltac_saved_states_size.restype = c_size_t
    lib.deltac_saved_states_pay.argtypes = [c_int32, c_int64, c_int64, c_int32, c_int32,
                                            c_int32, c_int32]
    lib.deltac_saved_states_pay.restype = c_int

    # The params argument is a FwdParams (byref) or its PARAMS_STRUCT bytes.
    lib.deltac_py_forward.argtypes = [c_void_p, c_int32, c_int32, c_int32, c_int32,
                                      c_void_p, POINTER(c_int32)]
    lib.deltac_py_forward.restype = c_int
    lib.deltac_last_error.argtypes = []
    lib.deltac_last_error.restype = c_char_p
    lib.deltac_backward.argtypes = [POINTER(BwdParams), c_void_p]
    lib.deltac_backward.restype = c_int
    lib.deltac_py_backward.argtypes = [POINTER(BwdParams), c_int32, c_void_p, c_void_p, c_size_t,
                                       POINTER(c_size_t)]
    lib.deltac_py_backward.restype = c_int
    lib.deltac_cuda_available.argtypes = []
    lib.deltac_cuda_available.restype = c_int
    lib.deltac_cuda_supports.argtypes = [c_int32, c_int32, c_int32, c_int32]
    lib.deltac_cuda_supports.restype = c_int
    # the layers' fused kernels (deltac/fused_ops.h; deltac.ops_fused), stream last
    P, I, F = c_void_p, c_int64, c_float
    for name, args in (
            ("deltac_conv_gates", [P, I, I, P, P, P, P, P, P, I, I, I, P, P, F, P, P, P, P, P,
                                   I, I, I, I, I, I, c_int32, c_int32, c_int32, P]),
            ("deltac_gated_rmsnorm", [P, P, P, I, I, I, I, I, I, P, F, c_int32, c_int32, P]),
            ("deltac_layernorm_gate", [P, P, P, I, I, I, P, P, F, c_int32, c_int32, P]),
            ("deltac_sigmoid", [P, P, I, F, c_int32, P])):
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = c_int
    return lib, path


lib, library_path = _load()
_py_forward = lib.deltac_py_forward
call_forward = lib.deltac_py_call_forward  # (CALL_STRUCT bytes) -> rc; deltac.ops' eager path
# (CALL_STRUCT bytes, saved states pointer, bytes) -> rc: options.saved_states
call_forward_saved = lib.deltac_py_call_forward_saved
# (variant, tokens, sequences, HV, K, V, in_dtype) -> bytes of options.saved_states (0: not offered)
saved_states_size = lib.deltac_saved_states_size
# (same arguments) -> 1 where keeping them is the faster choice on this GPU, else 0
saved_states_pay = lib.deltac_saved_states_pay
_last_error = lib.deltac_last_error


class DeltacError(RuntimeError):
    """A call the C runtime refused or failed; the message is the runtime's."""


def last_error() -> str:
    """This thread's deltac_last_error() message."""
    return _last_error().decode("utf-8", "replace")


def forward(params, device: int, mode: int = MODE_AUTO, chunk: int = 0,
            device_pointers: int = 0, cuda_stream=None, ran=None) -> None:
    """Runs ``deltac_forward_info`` (through ``deltac_py_forward``) on ``params``, a
    FwdParams or ``PARAMS_STRUCT.pack(...)`` bytes; raises DeltacError with the
    runtime's message. ``device_pointers``: deltac_py_forward's flags (bit 0 device
    pointers, bit 1 allow_neg_eigval). ``ran``: an optional ``(c_int32 * 4)`` that receives what ran
    (device, mode, chunk, specialized)."""
    if isinstance(params, FwdParams):
        params = byref(params)
    rc = _py_forward(params, device, mode, chunk, device_pointers, cuda_stream, ran)
    if rc != 0:
        raise DeltacError("deltac runtime: " + _last_error().decode("utf-8", "replace"))


def backward(params: BwdParams, device_pointers: int = 0, cuda_stream=None, workspace=None,
             workspace_bytes: int = 0) -> None:
    """Runs ``deltac_backward`` on ``params``: host pointers (the CPU), or with
    ``device_pointers=1`` CUDA device pointers, enqueued on ``cuda_stream`` with
    ``workspace`` (``backward_workspace(params)`` bytes; None: the runtime takes one
    from the stream-ordered allocator). Raises DeltacError with the runtime's message."""
    if lib.deltac_py_backward(byref(params), device_pointers, cuda_stream, workspace,
                              workspace_bytes, None) != 0:
        raise DeltacError("deltac runtime: "
                          + _last_error().decode("utf-8", "replace"))


def backward_workspace(params: BwdParams) -> int:
    """The device workspace bytes of the CUDA backward of ``params`` (device pointers)."""
    need = c_size_t(0)
    if lib.deltac_py_backward(byref(params), 1, None, None, 0, byref(need)) != 0:
        raise DeltacError("deltac runtime: "
                          + _last_error().decode("utf-8", "replace"))
    return need.value


def last_run(params, device: int, mode: int = MODE_AUTO, chunk: int = 0,
             device_pointers: int = 0, cuda_stream=None) -> dict:
    """Like forward(), and returns what ran: {device, mode, chunk, specialized}."""
    ran = (c_int32 * 4)()
    forward(params, device, mode, chunk, device_pointers, cuda_stream, ran)
    names = {DEVICE_CPU: "cpu", DEVICE_CUDA: "cuda"}
    modes = {MODE_CHUNKED: "chunked", MODE_RECURRENT: "recurrent"}
    return dict(device=names.get(ran[0], ran[0]), mode=modes.get(ran[1], ran[1]),
                chunk=ran[2], specialized=bool(ran[3]))


_cuda_available = None


def cuda_available() -> bool:
    """True when the library was built with CUDA and a GPU is usable."""
    global _cuda_available
    if _cuda_available is None:
        _cuda_available = bool(lib.deltac_cuda_available())
    return _cuda_available


def cuda_supports(variant: int, K: int, V: int, in_dtype: int) -> bool:
    return bool(lib.deltac_cuda_supports(variant, K, V, in_dtype))
