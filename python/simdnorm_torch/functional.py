"""Functional forms on simdnorm's operators, falling back to torch.nn.functional like the modules.

A call runs ``torch.ops.simdnorm.*`` when the operator can take it and the torch.nn.functional
counterpart otherwise; each fallback is counted by reason in :func:`fallback_counts`
(``"normalize: <reason>"``), as the modules' are.
"""
import torch
import torch.nn.functional as F

from . import _C
from .modules import _fallbacks

_ops = torch.ops.simdnorm
_FLOAT32_MAX = torch.finfo(torch.float32).max


def _rows_dense(x, ndim):
    """Whether the trailing `ndim` dims of x are dense row-major, as the row plans need."""
    expected = 1
    for d in range(x.dim() - 1, x.dim() - 1 - ndim, -1):
        if x.size(d) != 1 and x.stride(d) != expected:
            return False
        expected *= x.size(d)
    return True


def _normalize_why_not(x, p, dim, eps):
    """None when simdnorm's Lp plan can take these arguments, else the reason (after those of
    _C.call_obstacle: dtype, device, autograd)."""
    if not isinstance(p, (int, float)) or p not in (1, 2):
        return "p"
    if not isinstance(eps, (int, float)) or not 0 <= eps <= _FLOAT32_MAX:
        return "eps"  # negative, NaN or beyond float32: the plan wants a finite float >= 0
    if not isinstance(dim, int) or isinstance(dim, bool):
        return "dim"  # a tuple of dims, for one
    n = x.dim()
    if not -max(n, 1) <= dim < max(n, 1):
        return None  # out of range: the operator raises IndexError, as PyTorch does
    d = dim % n if n else 0
    # The row: dim and the size-1 dims after it, dense (stride 1 inside the row).
    if any(x.size(i) != 1 for i in range(d + 1, n)) or not _rows_dense(x, n - d):
        return "layout"
    return None


def normalize(x, p=2.0, dim=1, eps=1e-12):
    """torch.nn.functional.normalize(x, p, dim, eps) on simdnorm: y = x / max(||x||_p, eps)
    along `dim`.

    Runs ``torch.ops.simdnorm.normalize`` for float32, bfloat16 and float16 CPU tensors (the
    output has the input's dtype), p = 1 or 2 and a `dim` that is
    the innermost dim of size > 1 with its elements contiguous (the rows of an embedding matrix
    [N, D] with dim=1 or -1, padded or sliced batches included), when no autograd graph is
    needed. Anything else (other dtypes or devices, other p, eps < 0, a non-innermost or strided
    dim, grad mode with an input that requires grad) runs torch.nn.functional.normalize and is
    counted in fallback_counts().
    """
    def slow(x):
        return F.normalize(x, p, dim, eps)

    why = _C.call_obstacle(x) or _normalize_why_not(x, p, dim, eps)
    if why is None:
        try:
            return _ops.normalize(x, float(p), dim, float(eps))
        except RuntimeError as e:
            if "unsupported_layout" not in str(e):
                raise
            why = "layout"
    _fallbacks[f"normalize: {why}"] += 1
    return slow(x)
