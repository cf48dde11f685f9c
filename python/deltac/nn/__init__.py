"""deltac.nn: PyTorch layers whose delta-rule recurrence runs in deltac's kernels."""

from .bitlinear import BitLinear, activation_quant, weight_quant
from .deltanet import DeltaNetAttention, DeltaNetConfig
from .gated_deltanet import (
    GatedDeltaNet,
    GatedDeltaNetCache,
    GatedDeltaNetConfig,
    KernelCall,
    RMSNormGated,
    causal_conv_silu,
)
from .kda import KimiDeltaAttention, KimiDeltaAttentionConfig, RMSNormSigmoidGated

__all__ = [
    "BitLinear",
    "activation_quant",
    "weight_quant",
    "DeltaNetAttention",
    "DeltaNetConfig",
    "GatedDeltaNet",
    "GatedDeltaNetCache",
    "GatedDeltaNetConfig",
    "KernelCall",
    "RMSNormGated",
    "causal_conv_silu",
    "KimiDeltaAttention",
    "KimiDeltaAttentionConfig",
    "RMSNormSigmoidGated",
]
