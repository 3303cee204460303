"""simdnorm's SIMD normalization kernels inside PyTorch (CPU, forward; float32, bfloat16 and
float16).

Importing this package registers the operators ``torch.ops.simdnorm.layer_norm``,
``rms_norm``, ``batch_norm``, ``group_norm``, ``instance_norm``, ``normalize``,
``fused_add_rms_norm``, ``fused_add_layer_norm`` (with an optional ``residual_bias``),
``rms_norm_gated``, the quantized ``rms_norm_quant`` / ``layer_norm_quant`` (dynamic symmetric
scales) with their ``_asymmetric`` (scales and zero points per row or block) and ``_static``
(torch.quantize_per_tensor) forms, and the split statistics ``*_moments`` / ``*_apply`` /
``merge_moments``, and provides
drop-in modules, :func:`normalize` (torch.nn.functional.normalize) and :func:`convert`, which
swaps the normalization modules of a model in place::

    import simdnorm_torch
    report = simdnorm_torch.convert(model)
    print(report)
    with torch.inference_mode():
        y = model(x)

The operators run on PyTorch's intra-op threads (``torch.set_num_threads``).
"""
import torch  # loads libtorch before the extension needs it

from . import _C
from .functional import normalize
from .modules import (BatchNorm1d, BatchNorm2d, BatchNorm3d, ConvertReport, GroupNorm,
                      InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LayerNorm, RMSNorm,
                      RMSNormGated, convert, fallback_counts)

cache_info = _C.cache_info
clear_cache = _C.clear_cache
set_cache_capacity = _C.set_cache_capacity
kernel_isa = _C.kernel_isa

ops = torch.ops.simdnorm

__all__ = [
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "ConvertReport", "GroupNorm",
    "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LayerNorm", "RMSNorm", "RMSNormGated",
    "cache_info", "clear_cache", "convert", "fallback_counts", "kernel_isa", "normalize", "ops",
    "set_cache_capacity",
]
