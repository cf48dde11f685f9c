"""deltac: delta-rule linear attention (DeltaNet, Gated DeltaNet, KDA) on deltac's kernels.

* ``deltac.ops``: PyTorch custom ops with flash-linear-attention's signatures
  (``chunk_gated_delta_rule``, ``fused_recurrent_gated_delta_rule``, ``chunk_delta_rule``,
  ``fused_recurrent_delta_rule``, ``chunk_kda``, ``fused_recurrent_kda``).
* ``deltac.nn``: layers (``DeltaNetAttention``, ``GatedDeltaNet``, ``KimiDeltaAttention``,
  ``BitLinear``).

The kernels run in deltac's LLVM-free runtime (``libdeltac_c.so``), called through
ctypes; docs/python.md explains the choice and the costs.
"""

from . import _lib
from ._lib import DeltacError, LibraryError, cuda_available, library_path
from . import ops
from . import nn

__version__ = "0.1.0"

__all__ = ["ops", "nn", "DeltacError", "LibraryError", "cuda_available", "library_path"]
