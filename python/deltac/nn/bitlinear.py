"""BitLinear: the BitNet b1.58 linear layer (Ma et al., 2024, arXiv:2402.17764)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def weight_quant(w: Tensor, eps: float = 1e-5) -> Tensor:
    """Ternary weights with an absmean scale: ``gamma * clip(round(w / gamma), -1, 1)``,
    ``gamma = mean(|w|)`` over the whole matrix. Returns the dequantised weight."""
    w32 = w.float()
    gamma = w32.abs().mean().clamp(min=eps)
    return ((w32 / gamma).round().clamp(-1, 1) * gamma).to(w.dtype)


def activation_quant(x: Tensor, eps: float = 1e-5) -> Tensor:
    """8-bit per-token absmax activations: ``round(x * 127 / max|x|)`` clipped to
    [-128, 127], scaled back. Returns the dequantised activations."""
    x32 = x.float()
    s = 127.0 / x32.abs().amax(dim=-1, keepdim=True).clamp(min=eps)
    return ((x32 * s).round().clamp(-128, 127) / s).to(x.dtype)


class BitLinear(nn.Linear):
    """A drop-in ``nn.Linear`` whose forward uses BitNet b1.58 quantisation.

    * weights: ternary {-1, 0, +1} times one absmean scale per matrix;
    * activations: 8-bit, one absmax scale per token (last dimension);
    * training: the straight-through estimator (the quantisation's gradient is the
      identity: ``x + (q(x) - x).detach()``), so the latent float weights learn.

    Choices the seed leaves open: no normalisation inside the layer (the models
    that use BitLinear put their norms outside it; adding one here would change
    what the surrounding layer computes), quantisation arithmetic in float32 with
    the result cast back to the input's dtype, and the parameters are exactly
    ``nn.Linear``'s (``weight``, optional ``bias``: default no bias), so state dicts
    are those of ``nn.Linear`` and hold the latent float weights. The matrix product
    itself runs in floating point on the dequantised values (the same numbers an int8
    kernel computes, up to rounding); int8 kernels are the C++ layers' work.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = False,
                 device=None, dtype=None, eps: float = 1e-5):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        w = self.weight
        wq = w + (weight_quant(w, self.eps) - w).detach()
        xq = x + (activation_quant(x, self.eps) - x).detach()
        return F.linear(xq, wq, self.bias)
