"""The fused forms: gated RMSNorm, the residual add's bias, the post-norm residual, adaLN
modulation, quantized outputs and split statistics (torch.ops.simdnorm.rms_norm_gated,
fused_add_*(residual_bias=...), rms_norm_add / layer_norm_add, *_norm_modulate,
rms_norm_quant / layer_norm_quant and their _asymmetric and _static forms,
batch_norm_quant_static, group_norm_quant_static, instance_norm_quant_static, *_moments /
*_apply / merge_moments).
"""
import copy
import math

import pytest
import torch
import torch.nn.functional as F

import simdnorm_torch

ops = torch.ops.simdnorm
RTOL = 2e-5
U32 = 2.0 ** -24
HALF_U = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
HALF_TINY = {torch.bfloat16: 2.0 ** -134, torch.float16: 2.0 ** -25}
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def bound_of(ref, dtype):
    """Per-element bound on |y - ref| for a y of dtype (test_ops.py's)."""
    scale = max(ref.abs().max().item(), 1.0)
    if dtype == torch.float32:
        return RTOL * scale + 4 * U32 * ref.abs()
    u = HALF_U[dtype]
    return RTOL * scale + u * (ref.abs() + RTOL * scale) + HALF_TINY[dtype]


def assert_within(got, ref, dtype):
    assert got.dtype == dtype and got.shape == ref.shape
    worst = ((got.double() - ref).abs() / bound_of(ref, dtype)).max().item()
    assert worst <= 1.0, f"error {worst:.3g} times the bound"


def rms64(x, w=None, eps=1e-6, offset=0.0):
    x = x.double()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if w is None else y * (w.double() + offset)


def ln64(x, w=None, b=None, eps=1e-5):
    return F.layer_norm(x.double(), [x.size(-1)], None if w is None else w.double(),
                        None if b is None else b.double(), eps)


# ---- gated RMSNorm ----------------------------------------------------------------------------

def qwen3_next_rms_norm_gated(x, gate, weight, eps):
    """Qwen3-Next's RMSNormGated.forward (Hugging Face transformers): norm, then gate."""
    input_dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    h = weight * h.to(input_dtype)
    h = h * F.silu(gate.to(torch.float32))
    return h.to(input_dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 64), (4, 128), (2, 4096)])
@pytest.mark.parametrize("wkind", [None, "f32", "same"])
def test_rms_norm_gated(dtype, shape, wkind):
    x = torch.randn(shape).to(dtype)
    z = (torch.randn(shape) * 2).to(dtype)
    w = None if wkind is None else torch.randn(shape[-1])
    w_arg = None if w is None else (w if wkind == "f32" else w.to(dtype))
    got = ops.rms_norm_gated(x, z, w_arg, 1e-6)
    zd = z.double()
    ref = rms64(x, None if w_arg is None else w_arg) * (zd * torch.sigmoid(zd))
    assert_within(got, ref, dtype)
    if w_arg is not None:  # Hugging Face rounds norm(x) into the dtype first: a few ulps apart
        hf = qwen3_next_rms_norm_gated(x, z, w_arg.to(dtype), 1e-6)
        tol = 0 if dtype == torch.float32 else 4 * HALF_U[dtype]
        err = (got.double() - hf.double()).abs()
        assert (err <= tol * hf.double().abs() + bound_of(ref, dtype)).all()


def mamba_rms_norm_ref(x, z, weight, eps):
    """mamba_ssm's rms_norm_ref(norm_before_gate=False, upcast=True): gate, then norm, in
    float32 without rounding the product."""
    xf = x.float() * F.silu(z.float())
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return y.to(x.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 64), (4, 128), (2, 4096)])
def test_rms_norm_gated_before_norm(dtype, shape):
    """Mamba-2's default (norm_before_gate=False): rms_norm(x * silu(z)) * weight. simdnorm
    stores h = x * silu(z) rounded into the dtype and normalizes it, so against the float64
    reference of the unrounded product it adds 2u to the bound (u: half an ulp of the dtype);
    against Mamba's float32 reference (no rounding of h, y rounded once) it is that close too."""
    x = torch.randn(shape).to(dtype)
    z = (torch.randn(shape) * 2).to(dtype)
    w = torch.randn(shape[-1]).to(dtype)
    got = ops.rms_norm_gated(x, z, w, 1e-6, 0.0, False)
    zd = z.double()
    ref = rms64(x.double() * (zd * torch.sigmoid(zd)), w)
    u = 0.0 if dtype == torch.float32 else HALF_U[dtype]
    extra = 2 * u * ref.abs()
    assert got.dtype == dtype
    assert ((got.double() - ref).abs() <= bound_of(ref, dtype) + extra).all()
    mamba = mamba_rms_norm_ref(x, z, w, 1e-6).double()
    assert ((got.double() - mamba).abs() <= 2 * (bound_of(ref, dtype) + extra)).all()
    assert not torch.equal(got, ops.rms_norm_gated(x, z, w, 1e-6))  # not norm, then gate


def test_rms_norm_gated_layouts_and_offset():
    proj = torch.randn(6, 256)
    x, z = proj[:, :128], proj[:, 128:]  # both slices of one projection: padded rows
    w = torch.randn(128)
    ref = rms64(x, w, offset=1.0) * (z.double() * torch.sigmoid(z.double()))
    assert_within(ops.rms_norm_gated(x, z, w, 1e-6, 1.0), ref, torch.float32)
    # a gate of another layout than x is copied into one
    xc = x.contiguous()
    assert_within(ops.rms_norm_gated(xc, z, w, 1e-6, 1.0), ref, torch.float32)
    zt = z.t().contiguous().t()  # column-major gate
    assert_within(ops.rms_norm_gated(xc, zt, w, 1e-6, 1.0), ref, torch.float32)
    assert ops.rms_norm_gated(torch.empty(0, 8), torch.empty(0, 8)).shape == (0, 8)


def test_rms_norm_gated_module():
    m = simdnorm_torch.RMSNormGated(64, eps=1e-6)
    assert set(m.state_dict()) == {"weight"} and torch.equal(m.weight, torch.ones(64))
    with torch.no_grad():
        m.weight.copy_(torch.randn(64))
    x, z = torch.randn(5, 64), torch.randn(5, 64)
    with torch.no_grad():
        got = m(x, z)
        assert torch.equal(got, ops.rms_norm_gated(x, z, m.weight, 1e-6))
        assert torch.equal(m(x), ops.rms_norm(x, [64], m.weight, 1e-6))  # no gate: RMSNorm
    before = simdnorm_torch.fallback_counts().get("rms_norm_gated: autograd", 0)
    y = m(x, z)  # grad mode and a parameter requiring grad: PyTorch's forward
    assert y.requires_grad
    assert simdnorm_torch.fallback_counts()["rms_norm_gated: autograd"] == before + 1
    assert torch.allclose(y, got, rtol=1e-5, atol=1e-5)


def test_rms_norm_gated_errors():
    x = torch.randn(2, 8)
    with pytest.raises(RuntimeError, match="gate must be a CPU tensor of the input's dtype"):
        ops.rms_norm_gated(x, x.bfloat16())
    with pytest.raises(RuntimeError, match="gate must have the input's sizes"):
        ops.rms_norm_gated(x, torch.randn(2, 4))
    with pytest.raises(RuntimeError, match="weight has 4 elements, expected 8"):
        ops.rms_norm_gated(x, x, torch.ones(4))
    with pytest.raises(RuntimeError, match="weight_offset=1 needs a weight"):
        ops.rms_norm_gated(x, x, None, 1e-6, 1.0)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        ops.rms_norm_gated(x, x.clone().requires_grad_())


# ---- residual bias ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 64), (4, 4096)])
@pytest.mark.parametrize("op", ["rms", "layer"])
def test_fused_add_residual_bias(dtype, shape, op):
    """ONNX Runtime SkipLayerNormalization: h = input + skip + bias (float32, one rounding),
    y = norm(h); the residual keeps h, the input becomes y."""
    n = shape[-1]
    x, r = torch.randn(shape).to(dtype), (torch.randn(shape) * 4).to(dtype)
    w, b, rb = torch.randn(n), torch.randn(n), torch.randn(n)
    x0, r0 = x.clone(), r.clone()
    if op == "rms":
        ops.fused_add_rms_norm(x, r, w, 1e-6, rb)
        ref = rms64(r, w)
        assert torch.equal(x, ops.rms_norm(r, [n], w, 1e-6))
    else:
        ops.fused_add_layer_norm(x, r, w, b, 1e-5, residual_bias=rb)
        ref = ln64(r, w, b)
        assert torch.equal(x, ops.layer_norm(r, [n], w, b, 1e-5))
    assert torch.equal(r, ((x0.float() + r0.float()) + rb).to(dtype))
    assert_within(x, ref, dtype)
    # the bias in the input's dtype: converted exactly
    x, r = x0.clone(), r0.clone()
    if op == "rms":
        ops.fused_add_rms_norm(x, r, w, 1e-6, rb.to(dtype))
    else:
        ops.fused_add_layer_norm(x, r, w, b, 1e-5, rb.to(dtype))
    assert torch.equal(r, ((x0.float() + r0.float()) + rb.to(dtype).float()).to(dtype))


def test_residual_bias_errors():
    x, r = torch.randn(2, 8), torch.randn(2, 8)
    with pytest.raises(RuntimeError, match="residual_bias has 4 elements, expected 8"):
        ops.fused_add_rms_norm(x, r, torch.ones(8), 1e-6, torch.ones(4))
    with pytest.raises(RuntimeError, match="residual_bias must be a float32 CPU tensor"):
        ops.fused_add_layer_norm(x, r, torch.ones(8), torch.ones(8), 1e-5,
                                 torch.ones(8).double())
    with pytest.raises(RuntimeError, match="no autograd formula"):
        ops.fused_add_rms_norm(x, r, torch.ones(8), 1e-6, torch.ones(8).requires_grad_())


# ---- post-norm residual -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 64), (4, 4096), (1, 70000)])
@pytest.mark.parametrize("op", ["rms", "layer"])
def test_norm_add(dtype, shape, op):
    """Gemma 2's sandwich norm: residual <- residual + norm(input) (* (w + offset) + b), the
    sum in float32 after the norm, rounded once; input untouched. In float32 it is bit for bit
    the plain norm followed by +; in bfloat16 / float16 within the norm's bound plus one
    rounding of the sum. (1, 70000): one row split across threads."""
    n = shape[-1]
    x, r = torch.randn(shape).to(dtype), (torch.randn(shape) * 4).to(dtype)
    w, b = torch.randn(n), torch.randn(n)
    x0, r0 = x.clone(), r.clone()
    if op == "rms":
        ops.rms_norm_add(x, r, w, 1e-6, 1.0)
        norm, ref = ops.rms_norm(x0, [n], w, 1e-6, 1.0), rms64(x0, w, offset=1.0)
    else:
        ops.layer_norm_add(x, r, w, b, 1e-5)
        norm, ref = ops.layer_norm(x0, [n], w, b, 1e-5), ln64(x0, w, b)
    assert torch.equal(x, x0)
    if dtype == torch.float32:
        assert torch.equal(r, norm + r0)
    assert_within(r, ref + r0.double(), dtype)


def test_norm_add_in_place_over_input_and_errors():
    x = torch.randn(4, 16)
    x0 = x.clone()
    ops.rms_norm_add(x, x)  # x <- x + rms_norm(x): the residual may be the input
    assert torch.equal(x, x0 + ops.rms_norm(x0, [16]))
    with pytest.raises(RuntimeError, match="residual must have the input's sizes and strides"):
        ops.rms_norm_add(x, torch.randn(4, 32)[:, :16])
    with pytest.raises(RuntimeError, match="residual must be a CPU tensor of the input's dtype"):
        ops.layer_norm_add(x, x.double())
    with pytest.raises(RuntimeError, match="weight_offset=1 needs a weight"):
        ops.rms_norm_add(x, x.clone(), None, 1e-6, 1.0)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        ops.layer_norm_add(x, x.clone(), torch.ones(16).requires_grad_())


# ---- adaLN modulation --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["rms", "layer"])
@pytest.mark.parametrize("form", ["chunks", "broadcast", "no_affine", "dtype_scale"])
def test_norm_modulate(dtype, op, form):
    """DiT's modulate(norm(x), shift, scale) = norm(x) * (1 + scale[b]) + shift[b], x [B, T, D]:
    scale and shift chunks of the [B, 6 D] adaLN_modulation output (strided rows), one row
    for all batches, no affine, and in the input's dtype (converted exactly)."""
    B, T, D = 3, 5, 64
    x = torch.randn(B, T, D).to(dtype)
    ada = torch.randn(B, 6 * D)
    shift, scale = ada[:, :D], ada[:, D:2 * D]  # adaLN_modulation(c).chunk(6, dim=1)
    if form == "broadcast":
        shift, scale = shift[0], scale[0]
    if form == "dtype_scale":
        shift, scale = shift.to(dtype), scale.to(dtype)
    w, b = (None, None) if form == "no_affine" else (torch.randn(D), torch.randn(D))
    if op == "rms":
        y = ops.rms_norm_modulate(x, scale, shift, w, 1e-6)
        ref = rms64(x, w)
    else:
        y = ops.layer_norm_modulate(x, scale, shift, w, b, 1e-6)
        ref = ln64(x, w, b, 1e-6)
    per_batch = (lambda t: t.double()) if scale.dim() == 1 else (lambda t: t.double()[:, None])
    assert_within(y, ref * (1 + per_batch(scale)) + per_batch(shift), dtype)


def test_norm_modulate_errors():
    x = torch.randn(2, 3, 8)
    with pytest.raises(RuntimeError, match=r"scale must be \[B, 8\] or \[8\]"):
        ops.layer_norm_modulate(x, torch.randn(2, 4), torch.randn(2, 4))
    with pytest.raises(RuntimeError, match="shift must have scale's sizes"):
        ops.layer_norm_modulate(x, torch.randn(2, 8), torch.randn(1, 8))
    with pytest.raises(RuntimeError, match="4 modulation rows must divide the input's 6 rows"):
        ops.rms_norm_modulate(x, torch.randn(4, 8), torch.randn(4, 8))
    with pytest.raises(RuntimeError, match="scale must be a float32 CPU tensor"):
        ops.rms_norm_modulate(x, torch.randn(2, 8).double(), torch.randn(2, 8))
    with pytest.raises(RuntimeError, match="no autograd formula"):
        ops.layer_norm_modulate(x, torch.randn(2, 8).requires_grad_(), torch.randn(2, 8))


# ---- dynamic per-token quantization -------------------------------------------------------------

QMAX = {"int8": 127.0, "float8_e4m3fn": 448.0}


def _f8_table():
    """Values of the E4M3FN codes 0 .. 0x7e (positive, increasing), from the format's
    definition: 4 exponent bits with bias 7, 3 mantissa bits, no Inf, 0x7f NaN."""
    vals = []
    for c in range(0x7f):
        e, m = c >> 3, c & 7
        vals.append(m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return torch.tensor(vals, dtype=torch.float64)


F8 = _f8_table()


def ordinals(codes, dtype):
    """Positions of the codes on the number line (adjacent values one apart; +0 and -0 both
    0): int8 codes as they are, fp8 sign-magnitude codes as signed magnitudes."""
    if dtype == "int8":
        return codes.long()
    c = codes.long()
    return torch.where(c >= 0x80, -(c - 0x80), c)


def ref_ordinals(v, dtype):
    """The reference quantizer on v = y / scale (float64): ordinals of its codes."""
    if dtype == "int8":
        return torch.round(v).clamp(-128, 127).long()  # torch.round: half to even
    a = v.abs().clamp(max=448.0)
    hi = torch.searchsorted(F8, a).clamp(max=0x7e)
    lo = (hi - 1).clamp(min=0)
    dl, dh = a - F8[lo], F8[hi] - a
    pick = torch.where((dl < dh) | ((dl == dh) & (lo % 2 == 0)), lo, hi)
    pick = torch.where(a >= F8[hi], hi, pick)  # exact hits and saturation
    return torch.where(v < 0, -pick, pick)


def check_quantized(q, scales, y_ref, bound, dtype, block, tally):
    """q and scales against the reference quantizer applied to y_ref (float64), allowing one
    step where y_ref / scale is within bound / scale (+ 2 float32 roundings) of a boundary."""
    qmax = QMAX[dtype]
    d = y_ref.size(-1)
    seg = block or d
    yr = y_ref.reshape(-1, d // seg, seg)
    br = bound.reshape(-1, d // seg, seg) if torch.is_tensor(bound) else torch.full_like(
        yr, bound)
    amax, at = yr.abs().max(-1)
    amax_bound = br.gather(-1, at.unsqueeze(-1)).squeeze(-1)
    s = scales.reshape(-1, d // seg).double()
    assert ((s - amax / qmax).abs() <= (amax_bound + 2 * U32 * amax) / qmax).all(), "scales"
    inv = (1 / s.float()).double().unsqueeze(-1)  # 1 / scale rounded once in float32
    inv = torch.where(s.unsqueeze(-1) == 0, torch.zeros_like(inv), inv)
    v = yr * inv
    vb = br * inv + 2 * U32 * v.abs()
    o = ordinals(q.reshape(-1, d // seg, seg), dtype)
    o_ref, o_lo, o_hi = (ref_ordinals(t, dtype) for t in (v, v - vb, v + vb))
    ok = (o >= o_lo) & (o <= o_hi) & ((o - o_ref).abs() <= 1)
    assert ok.all(), f"{(~ok).sum().item()} codes off, first at {(~ok).nonzero()[0].tolist()}"
    tally[0] += (o != o_ref).sum().item()
    tally[1] += o.numel()


@pytest.fixture(scope="module")
def quant_tally():
    tally = [0, 0]
    yield tally
    assert tally[0] * 200 <= tally[1], f"{tally[0]} boundary cases of {tally[1]} codes"


@pytest.mark.parametrize("qdtype", ["int8", "float8_e4m3fn"])
@pytest.mark.parametrize("xdtype", DTYPES)
@pytest.mark.parametrize("op", ["rms", "layer"])
@pytest.mark.parametrize("d,block", [(7, 0), (64, 0), (64, 32), (256, 64), (4096, 0),
                                     (4096, 128)])
def test_norm_quant(qdtype, xdtype, op, d, block, quant_tally):
    x = (torch.randn(6, d) * 2 + 0.5).to(xdtype)
    w, b = torch.randn(d), torch.randn(d)
    if op == "rms":
        q, scales = ops.rms_norm_quant(x, w, 1e-6, qdtype, block)
        y_ref, y = rms64(x, w), ops.rms_norm(x, [d], w, 1e-6)
    else:
        q, scales = ops.layer_norm_quant(x, w, b, 1e-5, qdtype, block)
        y_ref, y = ln64(x, w, b), ops.layer_norm(x, [d], w, b, 1e-5)
    assert q.dtype == (torch.int8 if qdtype == "int8" else torch.uint8)
    assert q.shape == x.shape and q.is_contiguous()
    assert scales.dtype == torch.float32
    assert scales.shape == ((6,) if block == 0 else (6, d // block))
    check_quantized(q, scales, y_ref, bound_of(y_ref, torch.float32), qdtype, block, quant_tally)
    if qdtype == "int8":
        assert q.min() >= -127
    # y is computed in float32 as for the float output: the 8-bit output's amax is y's (when y
    # is float32, the row op's y exactly)
    if xdtype == torch.float32:
        seg = block or d
        amax = y.reshape(6, -1, seg).abs().amax(-1).reshape(scales.shape)
        assert torch.equal(scales, amax / QMAX[qdtype])


@pytest.mark.parametrize("qdtype", ["int8", "float8_e4m3fn"])
def test_norm_quant_fused(qdtype, quant_tally):
    """The residual add (with its bias) and the gate before the quantizer; padded rows."""
    d = 128
    base = torch.randn(2 * 5, d)
    x, r = base[::2], (torch.randn(2 * 5, d) * 3)[::2]  # padded batch slices
    z, w, rb = torch.randn(5, d), torch.randn(d), torch.randn(d)
    x0, r0 = x.clone(), r.clone()
    versions = x._version, r._version
    q, s = ops.rms_norm_quant(x, w, 1e-6, qdtype, 32, residual=r, residual_bias=rb, gate=z)
    assert x._version == versions[0] and r._version > versions[1]
    assert torch.equal(x, x0)  # the input is only read
    assert torch.equal(r, (x0 + r0) + rb)
    ref = rms64(r, w) * (z.double() * torch.sigmoid(z.double()))
    check_quantized(q, s, ref, bound_of(ref, torch.float32), qdtype, 32, quant_tally)
    r.copy_(r0)
    q, s = ops.layer_norm_quant(x, w, rb, 1e-5, qdtype, 0, r)
    assert torch.equal(r, x0 + r0)
    ref = ln64(r, w, rb)
    check_quantized(q, s, ref, bound_of(ref, torch.float32), qdtype, 0, quant_tally)


@pytest.mark.parametrize("qdtype,nan_code", [("int8", 0), ("float8_e4m3fn", 0x7f)])
@pytest.mark.parametrize("op", ["rms", "layer"])
def test_norm_quant_constant_and_nan_rows(qdtype, nan_code, op):
    """A row whose y is all 0 (zeros; for LayerNorm any constant row) gets scale 0 and code 0;
    a NaN in a row makes its scale NaN and every code of the row the NaN code (int8: 0,
    fp8: 0x7f); the other rows are untouched."""
    d = 64
    x = torch.randn(4, d)
    x[0] = 0.0
    x[1] = 3.0 if op == "layer" else 0.0
    x[2, 10] = math.nan
    f = ops.rms_norm_quant if op == "rms" else ops.layer_norm_quant
    q, s = f(x, dtype=qdtype)
    assert s[0] == 0 and s[1] == 0 and (q[:2] == 0).all()
    assert math.isnan(s[2].item()) and (q[2].long() == nan_code).all()
    q3, s3 = f(x[3:], dtype=qdtype)
    assert torch.equal(q[3], q3[0]) and torch.equal(s[3], s3[0])


def test_norm_quant_plan_cache_and_errors():
    simdnorm_torch.clear_cache()
    x = torch.randn(4, 64)
    ops.rms_norm_quant(x, None, 1e-6, "int8")
    ops.rms_norm_quant(x, None, 1e-6, "float8_e4m3fn")
    ops.rms_norm_quant(x, None, 1e-6, "int8", 32)
    ops.rms_norm(x, [64], None, 1e-6)
    assert simdnorm_torch.cache_info()["misses"] == 4  # y type and block are keyed
    ops.rms_norm_quant(x, None, 1e-6, "int8", 32)
    assert simdnorm_torch.cache_info()["hits"] == 1
    with pytest.raises(RuntimeError, match="dtype='int4' is not supported"):
        ops.rms_norm_quant(x, dtype="int4")
    with pytest.raises(RuntimeError, match="block"):
        ops.rms_norm_quant(x, block=48)  # does not divide 64
    with pytest.raises(RuntimeError, match="block"):
        ops.layer_norm_quant(x, block=-1)
    with pytest.raises(RuntimeError, match="residual_bias needs a residual"):
        ops.layer_norm_quant(x, residual_bias=torch.ones(64))
    with pytest.raises(RuntimeError, match="residual must have the input's sizes and strides"):
        ops.rms_norm_quant(x, residual=torch.randn(4, 32))
    with pytest.raises(RuntimeError, match="input must be float32, bfloat16 or float16"):
        ops.rms_norm_quant(x.double())
    q, s = ops.rms_norm_quant(torch.empty(0, 64), block=32)
    assert q.shape == (0, 64) and s.shape == (0, 2)


# ---- asymmetric dynamic and static quantization -------------------------------------------------

LOWEST = {"uint8": 0, "int8": -128}
CODES = {"uint8": torch.uint8, "int8": torch.int8}


def asymmetric_reference(y, dtype, block):
    """ONNX DynamicQuantizeLinear per row or block, in float32 as simdnorm computes it from y
    (float32): [lo, hi] = [min(0, min y), max(0, max y)], scale = (hi - lo) / 255 (1 if 0),
    zp = rne(lowest - lo / scale), q = sat(rne(y * (1 / scale)) + zp)."""
    d = y.size(-1)
    seg = block or d
    yr = y.reshape(-1, d // seg, seg)
    lo = yr.amin(-1).clamp(max=0)
    hi = yr.amax(-1).clamp(min=0)
    scale = torch.where(hi == lo, torch.ones_like(lo), (hi - lo) / 255)
    base = LOWEST[dtype]
    zp = (base - lo / scale).round().clamp(base, base + 255)
    q = ((yr * (1 / scale).unsqueeze(-1)).round() + zp.unsqueeze(-1)).clamp(base, base + 255)
    return q.reshape(y.shape), scale, zp


@pytest.mark.parametrize("qdtype", ["uint8", "int8"])
@pytest.mark.parametrize("xdtype", DTYPES)
@pytest.mark.parametrize("op", ["rms", "layer"])
@pytest.mark.parametrize("d,block", [(7, 0), (64, 32), (4096, 0), (4096, 128)])
def test_norm_quant_asymmetric(qdtype, xdtype, op, d, block):
    """Codes, scales and zero points: exactly the float32 reference quantizer on simdnorm's own
    float32 y (float32 input, where ops.*_norm returns that y); for every input type,
    dequantized codes within half a step (+ y's bound) of the float64 norm."""
    x = (torch.randn(6, d) * 2 + 0.5).to(xdtype)
    w, b = torch.randn(d), torch.randn(d)
    if op == "rms":
        q, scales, zps = ops.rms_norm_quant_asymmetric(x, w, 1e-6, qdtype, block)
        y_ref, y = rms64(x, w), ops.rms_norm(x, [d], w, 1e-6)
    else:
        q, scales, zps = ops.layer_norm_quant_asymmetric(x, w, b, 1e-5, qdtype, block)
        y_ref, y = ln64(x, w, b), ops.layer_norm(x, [d], w, b, 1e-5)
    shape = (6,) if block == 0 else (6, d // block)
    assert q.dtype == CODES[qdtype] and q.shape == x.shape
    assert scales.dtype == torch.float32 and scales.shape == shape
    assert zps.dtype == torch.int32 and zps.shape == shape
    if xdtype == torch.float32:
        q_ref, s_ref, z_ref = asymmetric_reference(y, qdtype, block)
        assert torch.equal(scales, s_ref.reshape(shape))
        assert torch.equal(zps, z_ref.reshape(shape).int())
        assert torch.equal(q.long(), q_ref.long())
    seg = block or d
    step = scales.double().reshape(-1, d // seg, 1)
    deq = (q.double().reshape(-1, d // seg, seg) - zps.double().reshape(-1, d // seg, 1)) * step
    err = (deq - y_ref.reshape(-1, d // seg, seg)).abs()
    bound = bound_of(y_ref, torch.float32)
    bound = bound.reshape(err.shape) if torch.is_tensor(bound) else bound
    assert (err <= step / 2 * (1 + 1e-5) + bound).all()


@pytest.mark.parametrize("qdtype,torch_qdtype,zero_point",
                         [("uint8", torch.quint8, 128), ("int8", torch.qint8, -3)])
@pytest.mark.parametrize("op", ["rms", "layer"])
def test_norm_quant_static(qdtype, torch_qdtype, zero_point, op):
    """A static scale and zero point: the codes of torch.quantize_per_tensor on the norm's
    float32 output (PyTorch multiplies by 1 / scale too), bit for bit; with the residual add."""
    d, scale = 96, 0.02
    x, r = torch.randn(5, d), torch.randn(5, d)
    w, b = torch.randn(d), torch.randn(d)
    r0 = r.clone()
    if op == "rms":
        q = ops.rms_norm_quant_static(x, scale, zero_point, w, 1e-6, qdtype, residual=r)
        y = ops.rms_norm(x + r0, [d], w, 1e-6)
    else:
        q = ops.layer_norm_quant_static(x, scale, zero_point, w, b, 1e-5, qdtype, residual=r)
        y = ops.layer_norm(x + r0, [d], w, b, 1e-5)
    assert torch.equal(r, x + r0)
    want = torch.quantize_per_tensor(y, scale, zero_point, torch_qdtype).int_repr()
    assert q.dtype == want.dtype and torch.equal(q, want)


def batch_norm_codes_bounds(x, w, b, rm, rv, eps, scale, zp, qmin, qmax, relu):
    """The codes a BatchNorm inference into static scales may give: v = y / scale + zp in
    float64, the plan's f32 fma(x, A, B) with A = a / scale and B = shift / scale + zp each
    rounded once (u |x A| + u |B|) and the fma's own rounding (u |v|) widening it by
    d = 3 u (|x A| + |B|); any code from rne(v - d) to rne(v + d), saturated."""
    shape = [1, -1] + [1] * (x.dim() - 2)
    a = w.double() / torch.sqrt(rv.double() + float(torch.tensor(eps, dtype=torch.float32)))
    shift = b.double() - rm.double() * a
    s, z = scale.double().reshape(shape), zp.double().reshape(shape)
    xa = x.double() * (a.reshape(shape) / s)
    bb = shift.reshape(shape) / s + z
    v = xa + bb
    if relu:
        v = torch.maximum(v, z.expand_as(v))
    d = 3 * U32 * (xa.abs() + bb.abs())
    return (torch.round(v - d).clamp(qmin, qmax), torch.round(v + d).clamp(qmin, qmax))


@pytest.mark.parametrize("qdtype,torch_qdtype,qmin,qmax",
                         [("uint8", torch.quint8, 0, 255), ("int8", torch.qint8, -128, 127)])
@pytest.mark.parametrize("xdtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("relu", [False, True])
def test_batch_norm_quant_static(qdtype, torch_qdtype, qmin, qmax, xdtype, per_channel,
                                 channels_last, relu):
    """BatchNorm inference into 8-bit codes: within the float64 bound of
    batch_norm_codes_bounds, and at most one code from torch.quantize_per_tensor /
    quantize_per_channel of the float output; the input's memory format; refolded when a
    running statistic changes in place."""
    c = 24
    x = (torch.randn(3, c, 5, 7) * 3).to(xdtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    w, b, rm = torch.randn(c), torch.randn(c), torch.randn(c)
    rv = torch.rand(c) + 0.5
    zero = 3 if qdtype == "int8" else 128
    if per_channel:
        scale = torch.rand(c) * 0.05 + 0.01
        zp = torch.full((c,), zero) if relu else torch.randint(zero - 20, zero + 20, (c,))
    else:
        scale, zp = torch.tensor([0.03]), torch.tensor([zero])
    for step in range(2):
        q = ops.batch_norm_quant_static(x, w, b, rm, rv, scale, zp, 1e-5, qdtype, relu)
        assert q.dtype == (torch.int8 if qdtype == "int8" else torch.uint8)
        assert q.shape == x.shape
        if channels_last:
            assert q.is_contiguous(memory_format=torch.channels_last)
        lo, hi = batch_norm_codes_bounds(x, w, b, rm, rv, 1e-5, scale, zp, qmin, qmax, relu)
        assert ((q.double() >= lo) & (q.double() <= hi)).all()
        y = F.batch_norm(x.float(), rm, rv, w, b, False, 0.0, 1e-5)
        if relu:
            y = y.relu()
        if per_channel:
            want = torch.quantize_per_channel(y, scale.double(), zp, 1, torch_qdtype)
        else:
            want = torch.quantize_per_tensor(y, scale.item(), zp.item(), torch_qdtype)
        assert (q.int() - want.int_repr().int()).abs().max().item() <= 1
        rm.add_(0.5)  # the cached plan folded the old values: it must be remade


@pytest.mark.parametrize("qdtype,torch_qdtype", [("uint8", torch.quint8), ("int8", torch.qint8)])
@pytest.mark.parametrize("op", ["group", "instance"])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("channels_last", [False, True])
def test_channel_norm_quant_static(qdtype, torch_qdtype, op, per_channel, channels_last):
    """GroupNorm and InstanceNorm into 8-bit codes: dequantized within half a step plus the float
    output's bound of float64, and at most one code from torch's quantizer of the float op; a
    new scale makes a new plan."""
    c = 12
    x = torch.randn(2, c, 6, 5) * 2 + 1
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    w, b = torch.randn(c), torch.randn(c)
    zero = -5 if qdtype == "int8" else 120
    for scale0 in (0.02, 0.05):
        if per_channel:
            scale = torch.rand(c) * 0.03 + scale0
            zp = torch.randint(zero - 10, zero + 10, (c,))
        else:
            scale, zp = torch.tensor([scale0]), torch.tensor([zero])
        if op == "group":
            q = ops.group_norm_quant_static(x, 3, w, b, scale, zp, 1e-5, qdtype)
            y = F.group_norm(x, 3, w, b, 1e-5)
            y64 = F.group_norm(x.double(), 3, w.double(), b.double(), 1e-5)
        else:
            q = ops.instance_norm_quant_static(x, w, b, scale, zp, 1e-5, qdtype)
            y = F.instance_norm(x, weight=w, bias=b, eps=1e-5)
            y64 = F.instance_norm(x.double(), weight=w.double(), bias=b.double(), eps=1e-5)
        assert q.dtype == (torch.int8 if qdtype == "int8" else torch.uint8)
        if channels_last:
            assert q.is_contiguous(memory_format=torch.channels_last)
        if per_channel:
            want = torch.quantize_per_channel(y, scale.double(), zp, 1, torch_qdtype)
        else:
            want = torch.quantize_per_tensor(y, scale.item(), zp.item(), torch_qdtype)
        assert (q.int() - want.int_repr().int()).abs().max().item() <= 1
        s, z = scale.double().reshape(1, -1, 1, 1), zp.double().reshape(1, -1, 1, 1)
        qmin, qmax = (-128, 127) if qdtype == "int8" else (0, 255)
        y_sat = torch.minimum(torch.maximum(y64, (qmin - z) * s), (qmax - z) * s)
        err = ((q.double() - z) * s - y_sat).abs()
        assert (err <= s / 2 * (1 + 1e-5) + bound_of(y64, torch.float32)).all()


def test_batch_norm_quant_static_errors():
    x = torch.randn(2, 4, 3, 3)
    w, b, rm, rv = torch.randn(4), torch.randn(4), torch.randn(4), torch.rand(4) + 0.5
    one, zp = torch.tensor([0.1]), torch.tensor([0])
    f = ops.batch_norm_quant_static
    with pytest.raises(RuntimeError, match="scale must be a CPU tensor of 1 element"):
        f(x, w, b, rm, rv, torch.ones(3), torch.zeros(3, dtype=torch.long))
    with pytest.raises(RuntimeError, match="zero_point must be an integer CPU tensor"):
        f(x, w, b, rm, rv, one, torch.tensor([0.0]))
    with pytest.raises(RuntimeError, match="zero point of channel 0 = 300 must be in"):
        f(x, w, b, rm, rv, one, torch.tensor([300]))
    with pytest.raises(RuntimeError, match="not supported"):
        f(x, w, b, rm, rv, one, zp, dtype="int4")
    with pytest.raises(RuntimeError, match="running_var has 3 elements"):
        f(x, w, b, rm, torch.ones(3), one, zp)
    # a fused ReLU needs one zero point for every channel
    with pytest.raises(RuntimeError, match="zero point"):
        f(x, w, b, rm, rv, torch.full((4,), 0.1), torch.tensor([1, 2, 3, 4]), relu=True)
    with pytest.raises(RuntimeError, match="scale must be a CPU tensor of 1 element"):
        ops.group_norm_quant_static(x, 2, w, b, torch.ones(2), torch.zeros(2, dtype=torch.long))
    with pytest.raises(RuntimeError, match="num_groups=3 must be >= 1 and divide C=4"):
        ops.group_norm_quant_static(x, 3, w, b, one, zp)
    with pytest.raises(RuntimeError, match="scale"):
        ops.instance_norm_quant_static(x, w, b, torch.tensor([0.0]), zp)


def test_norm_quant_asymmetric_errors():
    x = torch.randn(4, 64)
    with pytest.raises(RuntimeError, match="f8e4m3fn has no zero point"):
        ops.rms_norm_quant_asymmetric(x, dtype="float8_e4m3fn")
    with pytest.raises(RuntimeError, match="u8 has no symmetric scale"):
        ops.rms_norm_quant(x, dtype="uint8")
    with pytest.raises(RuntimeError, match="quant.zero_point=300"):
        ops.layer_norm_quant_static(x, 0.1, 300)
    with pytest.raises(RuntimeError, match="quant.scale=0"):
        ops.rms_norm_quant_static(x, 0.0)


# ---- split statistics ---------------------------------------------------------------------------

def shard(x, cuts):
    """The column shards of x at `cuts` (tensor parallelism over the hidden dim)."""
    edges = [0] + list(cuts) + [x.size(-1)]
    return [x[..., a:b] for a, b in zip(edges, edges[1:])], edges


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["rms", "layer"])
@pytest.mark.parametrize("shape,cuts", [((5, 100), (40,)), ((2, 3, 1000), (100, 500, 777)),
                                        ((4, 4096), (1024, 2048, 3072))])
def test_split_statistics(dtype, op, shape, cuts):
    x = (torch.randn(shape) * 2 + 3).to(dtype)
    n = shape[-1]
    w, b = torch.randn(n), torch.randn(n)
    parts, edges = shard(x, cuts)
    moments = ops.rms_norm_moments if op == "rms" else ops.layer_norm_moments
    records = [moments(p) for p in parts]  # the shards as views: padded rows
    for p, rec in zip(parts, records):
        assert rec.dtype == torch.uint8 and rec.shape == shape[:-1] + (32,)
        fields = rec.view(torch.int64)
        assert (fields[..., 0] == p.size(-1)).all()  # count
        if op == "layer":
            mean = rec.view(torch.float64)[..., 1]
            assert torch.allclose(mean, p.double().mean(-1), rtol=1e-6, atol=1e-6)
    merged = ops.merge_moments(torch.stack(records))
    assert (merged.view(torch.int64)[..., 0] == n).all()
    ys = []
    for p, a, e in zip(parts, edges, edges[1:]):
        if op == "rms":
            ys.append(ops.rms_norm_apply(p, merged, w[a:e], 1e-6))
        else:
            ys.append(ops.layer_norm_apply(p, merged, w[a:e], b[a:e], 1e-5))
    got = torch.cat(ys, -1)
    assert_within(got, rms64(x, w) if op == "rms" else ln64(x, w, b), dtype)
    # one part: moments, a merge of that part and apply are the one-call op's bits (rows > 256)
    whole = moments(x)
    one = ops.merge_moments(whole.unsqueeze(0))
    assert torch.equal(one, whole)
    if n > 256:
        if op == "rms":
            assert torch.equal(ops.rms_norm_apply(x, one, w, 1e-6), ops.rms_norm(x, [n], w, 1e-6))
        else:
            assert torch.equal(ops.layer_norm_apply(x, one, w, b, 1e-5),
                               ops.layer_norm(x, [n], w, b, 1e-5))


def test_split_statistics_errors():
    x = torch.randn(3, 16)
    rec = ops.layer_norm_moments(x)
    with pytest.raises(RuntimeError, match="moments must have sizes"):
        ops.layer_norm_apply(x, rec[:2])
    with pytest.raises(RuntimeError, match="moments must be a uint8 CPU tensor"):
        ops.layer_norm_apply(x, rec.float())
    with pytest.raises(RuntimeError, match="needs centered moments"):
        ops.layer_norm_apply(x, ops.rms_norm_moments(x))
    with pytest.raises(RuntimeError, match="parts must be"):
        ops.merge_moments(rec[0])  # one record, no parts dim
    with pytest.raises(RuntimeError, match="kind"):
        ops.merge_moments(torch.stack([rec, ops.rms_norm_moments(x)]))
    with pytest.raises(RuntimeError, match="kind=0"):
        ops.layer_norm_apply(x, torch.zeros(3, 32, dtype=torch.uint8))
    empty = rec.clone()
    empty.view(torch.int64)[1, 0] = 0  # a record of no values
    with pytest.raises(RuntimeError, match="count=0: must be positive"):
        ops.layer_norm_apply(x, empty)
    with pytest.raises(RuntimeError, match="8-byte aligned"):
        ops.layer_norm_apply(x, torch.zeros(3 * 32 + 1, dtype=torch.uint8)[1:].view(3, 32))


def test_rms_norm_gated_module_gate_before_norm():
    """simdnorm_torch.RMSNormGated(norm_before_gate=False) runs simdnorm and matches its own
    PyTorch fallback (mamba_ssm's reference) within the float32 bound."""
    m = simdnorm_torch.RMSNormGated(64, eps=1e-5, norm_before_gate=False)
    with torch.no_grad():
        m.weight.normal_()
    x, z = torch.randn(3, 64), torch.randn(3, 64) * 2
    before = simdnorm_torch.fallback_counts()
    with torch.no_grad():
        got = m(x, z)
    assert simdnorm_torch.fallback_counts() == before
    want = m._reference(x, z).double()
    assert ((got.double() - want).abs() <= bound_of(want, torch.float32)).all()
    assert "norm_before_gate=False" in repr(m)


class UserGatedRMSNorm(torch.nn.Module):
    """A model's own gated RMSNorm, as Hugging Face's Qwen3-Next writes it: forward(x, gate)."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states, gate=None):
        if gate is None:
            h = hidden_states.float()
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
            return self.weight * h.to(hidden_states.dtype)
        return qwen3_next_rms_norm_gated(hidden_states, gate, self.weight, self.variance_epsilon)


class MambaGatedRMSNorm(torch.nn.Module):
    """mamba_ssm's gated RMSNorm (layernorm_gated.RMSNorm, reference path): forward(x, z),
    norm_before_gate and group_size attributes."""

    def __init__(self, hidden_size, eps=1e-5, group_size=None, norm_before_gate=True):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.register_parameter("bias", None)
        self.group_size = group_size
        self.norm_before_gate = norm_before_gate

    def forward(self, x, z=None):
        dtype = x.dtype
        h, w = x.float(), self.weight.float()
        if z is not None and not self.norm_before_gate:
            h = h * F.silu(z.float())
        g = self.group_size or h.size(-1)
        hg = h.unflatten(-1, (-1, g))
        h = (hg * torch.rsqrt(hg.pow(2).mean(-1, keepdim=True) + self.eps)).flatten(-2)
        out = h * w
        if z is not None and self.norm_before_gate:
            out = out * F.silu(z.float())
        return out.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_convert_gated_rms_norm_classes(dtype):
    """convert(gated_rms_norm_classes=...) runs a model's own gated RMSNorm on rms_norm_gated:
    the gate positional or by keyword, norm before or after the gate, without a gate; a
    group-wise norm is left to PyTorch."""
    model = torch.nn.ModuleDict({
        "hf": UserGatedRMSNorm(64), "mamba": MambaGatedRMSNorm(64, norm_before_gate=False),
        "grouped": MambaGatedRMSNorm(64, group_size=16)}).to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(1.0, 0.5)
    ref = copy.deepcopy(model)  # the originals
    report = simdnorm_torch.convert(
        model, gated_rms_norm_classes=(UserGatedRMSNorm, MambaGatedRMSNorm))
    assert report.converted == {"UserGatedRMSNorm": 1, "MambaGatedRMSNorm": 1}
    assert [(n, why.startswith("group_size=16")) for n, _, why in report.skipped] == [
        ("grouped", True)]
    assert set(model.state_dict()) == {"hf.weight", "mamba.weight", "grouped.weight"}
    x, z = torch.randn(3, 5, 64).to(dtype), (2 * torch.randn(3, 5, 64)).to(dtype)
    w_hf, w_mamba = model["hf"].weight, model["mamba"].weight
    before = simdnorm_torch.fallback_counts()
    with torch.inference_mode():
        got = {"positional": model["hf"](x, z), "keyword": model["hf"](x, gate=z),
               "no gate": model["hf"](x), "mamba": model["mamba"](x, z=z)}
        assert torch.equal(got["positional"], ops.rms_norm_gated(x, z, w_hf, 1e-6))
        assert torch.equal(got["keyword"], got["positional"])
        assert torch.equal(got["no gate"], ops.rms_norm(x, [64], w_hf, 1e-6))
        assert torch.equal(got["mamba"], ops.rms_norm_gated(x, z, w_mamba, 1e-5, 0.0, False))
        # each within the float32 bound plus the dtype's roundings of the exact value (the
        # originals round norm(x) (Hugging Face) or x * silu(z) (simdnorm) once more)
        exact_hf = rms64(x) * w_hf.double() * F.silu(z.double())
        xz = x.double() * F.silu(z.double())
        exact_mamba = rms64(xz, w_mamba, eps=1e-5)
        for mine, theirs, exact in ((got["positional"], ref["hf"](x, z), exact_hf),
                                    (got["mamba"], ref["mamba"](x, z), exact_mamba)):
            bound = 3 * bound_of(exact, dtype)
            assert ((mine.double() - exact).abs() <= bound).all()
            assert ((theirs.double() - exact).abs() <= bound).all()
        assert torch.equal(model["grouped"](x, z), ref["grouped"](x, z))  # PyTorch's own
    assert simdnorm_torch.fallback_counts() == before
    with pytest.raises(ValueError, match="both as an RMSNorm and a gated RMSNorm"):
        simdnorm_torch.convert(UserGatedRMSNorm(4), rms_norm_classes=(UserGatedRMSNorm,),
                               gated_rms_norm_classes=(UserGatedRMSNorm,))
