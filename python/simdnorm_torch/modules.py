"""Drop-in normalization modules on simdnorm's operators, and convert().

Each module subclasses its torch.nn counterpart: same constructor, parameters, buffers and
state_dict keys, same results up to float32 rounding. A call runs on simdnorm when it can and on
PyTorch's own forward otherwise:

* CPU input: float32, bfloat16 or float16, with the parameters (and BatchNorm's running
  statistics) of the input's dtype (the output has that dtype, as in PyTorch; simdnorm computes
  in float32 and rounds once);
* no autograd graph wanted: the operators are forward-only, so a call that needs gradients
  (grad mode on and the input or a parameter requires grad) runs PyTorch's forward. Run
  inference under ``torch.no_grad()`` or ``torch.inference_mode()``;
* strides the plan accepts (contiguous, channels_last, padded rows ...).

Each fallback is counted by reason in :func:`fallback_counts`.
"""
import collections
import dataclasses

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.instancenorm import _InstanceNorm

from . import _C

_fallbacks = collections.Counter()


def fallback_counts():
    """Calls that ran PyTorch's forward instead of simdnorm, as {"op: reason": count}."""
    return dict(_fallbacks)


_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _fallback(op, why, slow, x):
    """PyTorch's forward slow(x), for a call simdnorm cannot take (`why` from the _C.*_call
    functions: dtype, device, autograd or layout), counted."""
    _fallbacks[f"{op}: {why}"] += 1
    return slow(x)


class LayerNorm(nn.LayerNorm):
    """torch.nn.LayerNorm on simdnorm."""

    def forward(self, x):
        y = _C.layer_norm_call(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return _fallback("layer_norm", y, super().forward, x) if isinstance(y, str) else y


class GroupNorm(nn.GroupNorm):
    """torch.nn.GroupNorm on simdnorm."""

    def forward(self, x):
        y = _C.group_norm_call(x, self.num_groups, self.weight, self.bias, self.eps)
        return _fallback("group_norm", y, super().forward, x) if isinstance(y, str) else y


class _SimdBatchNorm:
    """The forward of torch.nn.BatchNorm*d: running statistics and num_batches_tracked are
    updated as PyTorch does (momentum=None: cumulative average)."""

    def forward(self, x):
        self._check_input_dim(x)
        running_mean, running_var = self.running_mean, self.running_var
        if not self.training and running_mean is not None:
            y = _C.batch_norm_call(x, self.weight, self.bias, running_mean, running_var, None,
                                   False, 0.1, False, self.eps)
        else:  # batch statistics: training mode, or eval mode without running statistics
            track = self.training and self.track_running_stats
            cumulative = self.momentum is None
            y = _C.batch_norm_call(x, self.weight, self.bias, running_mean if track else None,
                                   running_var if track else None,
                                   self.num_batches_tracked if track else None, True,
                                   0.0 if cumulative else self.momentum, cumulative, self.eps)
        return _fallback("batch_norm", y, super().forward, x) if isinstance(y, str) else y


class BatchNorm1d(_SimdBatchNorm, nn.BatchNorm1d):
    """torch.nn.BatchNorm1d on simdnorm."""


class BatchNorm2d(_SimdBatchNorm, nn.BatchNorm2d):
    """torch.nn.BatchNorm2d on simdnorm."""


class BatchNorm3d(_SimdBatchNorm, nn.BatchNorm3d):
    """torch.nn.BatchNorm3d on simdnorm."""


class _SimdInstanceNorm:
    """The forward of torch.nn.InstanceNorm*d with track_running_stats=False."""

    def forward(self, x):
        if self.track_running_stats:
            return super().forward(x)
        self._check_input_dim(x)
        if x.dim() == self._get_no_batch_dim():
            return self.forward(x.unsqueeze(0)).squeeze(0)
        y = _C.instance_norm_call(x, self.weight, self.bias, self.eps)
        return _fallback("instance_norm", y, super().forward, x) if isinstance(y, str) else y


class InstanceNorm1d(_SimdInstanceNorm, nn.InstanceNorm1d):
    """torch.nn.InstanceNorm1d on simdnorm (track_running_stats=False)."""


class InstanceNorm2d(_SimdInstanceNorm, nn.InstanceNorm2d):
    """torch.nn.InstanceNorm2d on simdnorm (track_running_stats=False)."""


class InstanceNorm3d(_SimdInstanceNorm, nn.InstanceNorm3d):
    """torch.nn.InstanceNorm3d on simdnorm (track_running_stats=False)."""


def _rms_reference(x, normalized_shape, weight, eps):
    dims = tuple(range(-len(normalized_shape), 0))
    y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    return y if weight is None else y * weight


class RMSNorm(nn.Module):
    """RMSNorm over the trailing dims: y = x / sqrt(mean(x^2) + eps) * weight (parameter
    ``weight``, as in torch.nn.RMSNorm of later PyTorch versions and most LLM code)."""

    def __init__(self, normalized_shape, eps=1e-6, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape, device=device,
                                                  dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def forward(self, x):
        y = _C.rms_norm_call(x, self.normalized_shape, self.weight, self.eps, 0.0)
        return _fallback("rms_norm", y, self._reference, x) if isinstance(y, str) else y

    def _reference(self, x):
        return _rms_reference(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class RMSNormGated(nn.Module):
    """Gated RMSNorm over the last dim (Qwen3-Next's ``RMSNormGated``, Mamba-2's):
    forward(x, gate=None) = rms_norm(x) * weight * silu(gate), one float32 computation rounded
    once into x's dtype, or with ``norm_before_gate=False`` (Mamba-2's layers)
    rms_norm(x * silu(gate)) * weight, the product rounded into x's dtype first
    (``torch.ops.simdnorm.rms_norm_gated``). Without a gate, RMSNorm. Parameter ``weight``
    (ones), attribute ``variance_epsilon`` as in the Hugging Face module, so its checkpoints
    load. The PyTorch fallback (autograd, other dtypes or devices, rows that are not dense) is
    Hugging Face's forward, which rounds norm(x) into x's dtype before the products (bfloat16
    and float16 results may differ from simdnorm's by an ulp or two)."""

    def __init__(self, hidden_size, eps=1e-6, norm_before_gate=True, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))
        self.variance_epsilon = eps
        self.norm_before_gate = norm_before_gate

    def forward(self, x, gate=None):
        y = _C.rms_norm_gated_call(x, gate, self.weight, float(self.variance_epsilon),
                                   self.norm_before_gate)
        if isinstance(y, str):
            return _fallback("rms_norm_gated", y, lambda x: self._reference(x, gate), x)
        return y

    def _reference(self, x, gate):
        input_dtype = x.dtype
        h = x.to(torch.float32)
        if gate is not None and not self.norm_before_gate:  # mamba_ssm's rms_norm_ref
            h = h * torch.nn.functional.silu(gate.to(torch.float32))
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
            return (h * self.weight.to(torch.float32)).to(input_dtype)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        h = self.weight * h.to(input_dtype)
        if gate is not None:
            h = h * torch.nn.functional.silu(gate.to(torch.float32))
        return h.to(input_dtype)

    def extra_repr(self):
        return (f"{self.weight.shape[0]}, eps={self.variance_epsilon}, "
                f"norm_before_gate={self.norm_before_gate}")


_RMS_EPS_NAMES = ("eps", "variance_epsilon", "epsilon")
_rms_subclasses = {}


def _rms_subclass(base):
    """A subclass of a user's RMSNorm class whose forward runs on simdnorm."""
    if base not in _rms_subclasses:
        def forward(self, x):
            eps = getattr(self, self._simdnorm_eps_name)
            eps = torch.finfo(torch.float32).eps if eps is None else float(eps)
            y = _C.rms_norm_call(x, self._simdnorm_shape, self.weight, eps,
                                 self._simdnorm_weight_offset)
            return _fallback("rms_norm", y, super(cls, self).forward, x) if isinstance(y, str) else y

        cls = type("Simdnorm" + base.__name__, (base,), {"forward": forward,
                                                         "__module__": __name__})
        _rms_subclasses[base] = cls
    return _rms_subclasses[base]


_gated_subclasses = {}
_GATE_NAMES = ("gate", "z")  # Hugging Face's RMSNormGated, mamba_ssm's RMSNorm


def _gated_subclass(base):
    """A subclass of a user's gated RMSNorm class, forward(x, gate=None) (the gate also by the
    keyword gate or z), whose forward runs on simdnorm's rms_norm_gated."""
    if base not in _gated_subclasses:
        def forward(self, x, *args, **kwargs):
            slow = super(cls, self).forward
            gate = args[0] if args else next((kwargs[n] for n in _GATE_NAMES if n in kwargs), None)
            if len(args) + len(kwargs) > 1 or (kwargs and not set(kwargs) <= set(_GATE_NAMES)):
                return slow(x, *args, **kwargs)  # arguments this conversion does not know
            y = _C.rms_norm_gated_call(x, gate, self.weight,
                                       float(getattr(self, self._simdnorm_eps_name)),
                                       bool(getattr(self, "norm_before_gate", True)))
            if isinstance(y, str):
                return _fallback("rms_norm_gated", y, lambda x: slow(x, *args, **kwargs), x)
            return y

        cls = type("Simdnorm" + base.__name__, (base,), {"forward": forward,
                                                         "__module__": __name__})
        _gated_subclasses[base] = cls
    return _gated_subclasses[base]


def _gated_problem(m):
    """Checks a user gated RMSNorm; returns a reason or None."""
    eps_name = next((n for n in _RMS_EPS_NAMES if hasattr(m, n)), None)
    if eps_name is None:
        return "no eps attribute (" + ", ".join(_RMS_EPS_NAMES) + ")"
    weight = getattr(m, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.dim() != 1:
        return "no one-dimensional weight"
    group = getattr(m, "group_size", None)
    if group is not None and group != weight.shape[0]:
        return f"group_size={group}: a norm per group of the row (only whole rows run here)"
    m._simdnorm_eps_name = eps_name
    return None


_CONVERSIONS = {
    nn.LayerNorm: LayerNorm,
    nn.GroupNorm: GroupNorm,
    nn.BatchNorm1d: BatchNorm1d,
    nn.BatchNorm2d: BatchNorm2d,
    nn.BatchNorm3d: BatchNorm3d,
    nn.InstanceNorm1d: InstanceNorm1d,
    nn.InstanceNorm2d: InstanceNorm2d,
    nn.InstanceNorm3d: InstanceNorm3d,
}
_NORM_BASES = (nn.LayerNorm, nn.GroupNorm, _BatchNorm, _InstanceNorm)


@dataclasses.dataclass
class ConvertReport:
    """What convert() did: converted modules counted by class, the others with a reason."""
    converted: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    skipped: list = dataclasses.field(default_factory=list)  # (name, class name, reason)

    @property
    def num_converted(self):
        return sum(self.converted.values())

    def __str__(self):
        lines = [f"converted {self.num_converted} modules: " +
                 (", ".join(f"{k} x{v}" for k, v in sorted(self.converted.items())) or "none")]
        if self.skipped:
            lines.append(f"left {len(self.skipped)} modules to PyTorch:")
            lines += [f"  {name} ({cls}): {why}" for name, cls, why in self.skipped]
        return "\n".join(lines)


def _tensors_problem(m):
    """Parameters and floating buffers must be float32, bfloat16 or float16 on the CPU."""
    tensors = list(m.parameters(recurse=False)) + [b for b in m.buffers(recurse=False)
                                                   if b.is_floating_point()]
    if any(t.dtype not in _DTYPES for t in tensors):
        return "parameters or buffers are not float32, bfloat16 or float16"
    if any(t.device.type != "cpu" for t in tensors):
        return "parameters or buffers are not on the CPU"
    return None


def _rms_problem(m, weight_offset):
    """Checks a user RMSNorm and records what its forward needs; returns a reason or None."""
    eps_name = next((n for n in _RMS_EPS_NAMES if hasattr(m, n)), None)
    if eps_name is None:
        return "no eps attribute (" + ", ".join(_RMS_EPS_NAMES) + ")"
    weight = getattr(m, "weight", None)
    shape = getattr(m, "normalized_shape", None)
    if shape is None and isinstance(weight, torch.Tensor):
        shape = tuple(weight.shape)
    if shape is None:
        return "neither normalized_shape nor a weight to take the shape from"
    if weight_offset != 0.0 and not isinstance(weight, torch.Tensor):
        return "weight_offset without a weight"
    m._simdnorm_weight_offset = weight_offset
    m._simdnorm_eps_name = eps_name
    m._simdnorm_shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return None


def convert(model, rms_norm_classes=(), gated_rms_norm_classes=()):
    """Swaps, in place, the normalization modules of `model` for simdnorm's.

    Converts modules whose class is exactly nn.LayerNorm, nn.GroupNorm, nn.BatchNorm1d/2d/3d or
    nn.InstanceNorm1d/2d/3d (track_running_stats=False), plus modules of the classes in
    `rms_norm_classes` (and torch.nn.RMSNorm where PyTorch has it): RMSNorm modules computing
    x * rsqrt(mean(x^2 over normalized_shape) + eps) * weight, with an `eps` (or
    `variance_epsilon`) attribute and `normalized_shape` or a `weight` of that shape. An entry
    may be a pair (cls, weight_offset) for classes that scale by weight + weight_offset, such as
    Gemma's RMSNorm, x * rsqrt(...) * (1 + weight): (GemmaRMSNorm, 1.0).

    `gated_rms_norm_classes`: gated RMSNorm modules over the last dim, forward(x, gate=None)
    (the gate also as the keyword gate or z), computing rms_norm(x) * weight * silu(gate), or
    with an attribute norm_before_gate that is False, rms_norm(x * silu(gate)) * weight
    (Hugging Face's Qwen3-Next RMSNormGated, mamba_ssm's RMSNorm with group_size None or the
    whole row), with an eps attribute and a one-dimensional `weight`; see RMSNormGated for
    where the roundings differ.

    A module keeps its identity, parameters, buffers, hooks and state_dict keys: only its class
    changes (to a subclass of the original), so converted and original models load the same
    checkpoints. Modules that cannot run on simdnorm (subclasses with their own forward,
    InstanceNorm tracking running stats, parameters of other dtypes than float32 (LayerNorm and
    RMSNorm: float32, bfloat16 or float16) or not on the CPU) are left as they are and listed in
    the returned ConvertReport.
    """
    report = ConvertReport()
    rms_offsets = {nn.RMSNorm: 0.0} if hasattr(nn, "RMSNorm") else {}
    for entry in rms_norm_classes:
        cls, offset = entry if isinstance(entry, tuple) else (entry, 0.0)
        if rms_offsets.get(cls, offset) != offset:
            raise ValueError(f"convert: {cls.__name__} given with weight offsets "
                             f"{rms_offsets[cls]} and {offset}")
        rms_offsets[cls] = float(offset)
    gated = set(gated_rms_norm_classes)
    if gated & set(rms_offsets):
        raise ValueError("convert: a class given both as an RMSNorm and a gated RMSNorm: " +
                         ", ".join(c.__name__ for c in gated & set(rms_offsets)))
    simd_classes = (set(_CONVERSIONS.values()) | {RMSNorm, RMSNormGated} |
                    set(_rms_subclasses.values()) | set(_gated_subclasses.values()))
    for name, m in model.named_modules():
        cls = type(m)
        if cls in simd_classes:
            continue
        if cls in _CONVERSIONS:
            target = _CONVERSIONS[cls]
            why = _tensors_problem(m)
            if why is None and isinstance(m, _InstanceNorm) and m.track_running_stats:
                why = "InstanceNorm with track_running_stats=True"
        elif cls in rms_offsets:
            target = _rms_subclass(cls)
            why = _tensors_problem(m) or _rms_problem(m, rms_offsets[cls])
        elif cls in gated:
            target = _gated_subclass(cls)
            why = _tensors_problem(m) or _gated_problem(m)
        elif isinstance(m, _NORM_BASES):
            why = "subclass of a torch.nn norm class (its own forward)"
        else:
            continue
        if why is not None:
            report.skipped.append((name or "<model>", cls.__name__, why))
            continue
        m.__class__ = target
        report.converted[cls.__name__] += 1
    return report
