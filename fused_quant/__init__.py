"""fused-quant: activation + input quantization as one fused producer feeding a checked quantized linear.

This module only re-exports: importing it probes nothing, reads no environment
variable, imports neither triton nor vllm, and never initializes CUDA.
"""

from fused_quant.contract import (
    QuantizedActivation,
    as_quantized_activation,
    expose_input_quant_key,
    get_input_quant_key,
)
from fused_quant.gemm import quant_gemm, register_gemm_provider, unregister_gemm_provider
from fused_quant.keys import (
    GroupShape,
    QuantKey,
    ScaleDesc,
    key_from_name,
    kFp8DynamicTokenSym,
    kFp8StaticTensorSym,
    kInt8DynamicTokenSym,
    kInt8StaticTensorSym,
)
from fused_quant.activations import ReLUSquared, SiluAndMul
from fused_quant.modules import FusedSiluAndMulAndQuant, QuantLinear, linear_act_quant, name_quant_linears
from fused_quant.numerics import NumericsProfile, get_profile
from fused_quant.registry import (
    fused_act_quant,
    fusion_counts,
    maybe_fused_act_quant,
    quantize,
    register_producer,
    reset_fusion_counts,
    unregister_producer,
)
from fused_quant.runtime import reset
from fused_quant.selection import current_backend, select_backend
from fused_quant.errors import (
    BackendUnavailableError,
    BiasError,
    DeviceMismatchError,
    FusedQuantError,
    GemmProviderError,
    LayoutError,
    NumericsProfileError,
    ProducerError,
    QuantDTypeError,
    QuantKeyMismatchError,
    ScaleError,
    ShapeMismatchError,
    UnsupportedError,
)

# Register every backend's producers and GEMM providers now (plain Python: no probe, no
# device, no triton import), so no registration ever happens inside a torch.compile trace.
from fused_quant.selection import load_backends as _load_backends

_load_backends()

__version__ = "0.1.0"

__all__ = [
    "BackendUnavailableError", "BiasError", "DeviceMismatchError", "FusedQuantError", "FusedSiluAndMulAndQuant",
    "GemmProviderError", "GroupShape", "LayoutError", "NumericsProfile", "NumericsProfileError",
    "ProducerError", "QuantDTypeError", "QuantKey", "QuantKeyMismatchError", "QuantLinear",
    "QuantizedActivation", "ReLUSquared", "ScaleDesc", "ScaleError", "ShapeMismatchError", "SiluAndMul",
    "UnsupportedError", "__version__", "as_quantized_activation", "current_backend", "expose_input_quant_key",
    "fused_act_quant", "fusion_counts", "get_input_quant_key", "get_profile", "kFp8DynamicTokenSym",
    "linear_act_quant",
    "kFp8StaticTensorSym", "kInt8DynamicTokenSym", "kInt8StaticTensorSym", "key_from_name",
    "maybe_fused_act_quant", "name_quant_linears", "quant_gemm", "quantize", "register_gemm_provider",
    "register_producer", "reset", "reset_fusion_counts", "select_backend", "unregister_gemm_provider",
    "unregister_producer",
]
