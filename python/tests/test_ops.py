"""torch.ops.simdnorm.* against the PyTorch ops.

Tolerance: both sides compute in float32 with different summation orders (simdnorm: Welford in
SIMD lanes merged with Chan's formula; PyTorch: its own vectorized reductions), so outputs differ
by a few float32 roundings of the statistics, amplified by gamma / std. For the sizes here
(<= 4096 elements per statistic) that stays below 2e-5 of the output's scale (max |y|); the
running statistics below 1e-5 relative (the unbiased variance is rounded once more).

normalize (Lp, y = x / max(||x||_p, eps)) has per-element bounds, relative to |y| (first order
in u = 2^-24). Its norm is a float sum of n non-negative terms, which has no cancellation: the
sum's relative error is at most u times the number of roundings on its longest chain. simdnorm's
chains have D = ceil(min(n, 2048) / W) + log2(W) + 2 roundings for a kernel of W lanes
(_C.kernel_lanes(); one chain per lane, 2048-element chunks added in double, a log2(W) tree;
tests/reference.hpp, sum_depth); sqrt halves the relative error for p = 2, and the sqrt,
1 / max(norm, eps), the float rs and x * rs add at most four roundings: ((D / 2 or D) + 4) u |y|
against the float64 reference (whose own error, about n 2^-53, is left out). PyTorch's float32
norm sums in an order of its own; any order of n terms keeps the error below (n - 1) u (Higham,
Accuracy and Stability of Numerical Algorithms, 4.2), and its sqrt and x / norm add two
roundings: (((n - 1) / 2 or n - 1) + 2) u |y|. simdnorm against F.normalize is within the sum of
the two bounds (each holds against the exact value). Row lengths: below, at and past a vector
(1, 3, 16, 17), a short row (100, <= 256), a long row in one 2048-element chunk (1000) and one
over two chunks (4099).

bfloat16 and float16 (row ops): simdnorm reads x exactly into float32, computes as for float32
and rounds y once into the output type. Against the float64 reference on the same (exactly
converted) input, the float32 bound above plus the final rounding holds: |y - ref| <=
RTOL * scale + u * (|ref| + RTOL * scale) + t, with u half an ulp of the output type (2^-8
relative for bfloat16, 2^-11 for float16) and t half its smallest subnormal (2^-134, 2^-25: the
rounding error of results below the normal range); for normalize (rel + u + rel * u) |ref| + t. The fused
residual add rounds h = x + residual once into the dtype, exactly as PyTorch's
(x.float() + r.float()).to(dtype); the norm then sees h as stored.
"""
import math

import pytest
import torch
import torch.nn.functional as F

import simdnorm_torch

ops = torch.ops.simdnorm
RTOL = 2e-5


def assert_close(got, want, rtol=RTOL):
    scale = max(want.abs().max().item(), 1.0)
    err = (got - want).abs().max().item()
    assert err <= rtol * scale, f"max abs diff {err:.3g} > {rtol:.1g} * {scale:.3g}"


def layouts(x, channels_last=True):
    """The tensor contiguous, channels_last (4D / 5D) and with padded rows (a batch slice)."""
    out = {"contiguous": x}
    if x.dim() == 4 and channels_last:
        out["channels_last"] = x.contiguous(memory_format=torch.channels_last)
    if x.dim() == 5 and channels_last:
        out["channels_last_3d"] = x.contiguous(memory_format=torch.channels_last_3d)
    padded = torch.zeros((2 * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype)
    padded[::2] = x
    out["batch_slice"] = padded[::2]
    return out


@pytest.mark.parametrize("shape,norm_ndim", [((3, 7), 1), ((2, 5, 64), 1), ((2, 3, 8, 8), 2),
                                             ((4, 1000), 1), ((1, 4096), 1)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(shape, norm_ndim, affine):
    x = torch.randn(shape) * 3 + 2
    ns = list(shape[-norm_ndim:])
    w = torch.randn(ns) if affine else None
    b = torch.randn(ns) if affine else None
    want = F.layer_norm(x, ns, w, b, 1e-5)
    for name, xl in layouts(x, channels_last=False).items():
        got = ops.layer_norm(xl, ns, w, b, 1e-5)
        assert got.shape == x.shape, name
        assert_close(got, want)


def rms_reference(x, ns, w, eps):
    dims = tuple(range(-len(ns), 0))
    y = x * torch.rsqrt(x.double().pow(2).mean(dims, keepdim=True) + eps).float()
    return y if w is None else y * w


@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 64), (4, 4096)])
def test_rms_norm(shape):
    x = torch.randn(shape)
    w = torch.randn(shape[-1])
    assert_close(ops.rms_norm(x, [shape[-1]], w, 1e-6), rms_reference(x, [shape[-1]], w, 1e-6))
    assert_close(ops.rms_norm(x, [shape[-1]], None, 1e-6),
                 rms_reference(x, [shape[-1]], None, 1e-6))


BN_SHAPES = [(8, 5), (4, 6, 10), (2, 16, 7, 9), (2, 4, 3, 5, 6)]


@pytest.mark.parametrize("shape", BN_SHAPES)
def test_batch_norm_inference(shape):
    c = shape[1]
    x = torch.randn(shape)
    rm, rv = torch.randn(c), torch.rand(c) + 0.1
    w, b = torch.randn(c), torch.randn(c)
    want = F.batch_norm(x, rm, rv, w, b, False, 0.1, 1e-5)
    for name, xl in layouts(x).items():
        got = ops.batch_norm(xl, w, b, rm, rv, None, False, 0.1, False, 1e-5)
        assert_close(got, want)
        if name.startswith("channels_last"):
            assert got.is_contiguous(memory_format=torch.channels_last if x.dim() == 4
                                     else torch.channels_last_3d)


@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_training(shape, momentum):
    c = shape[1]
    for name, xl in layouts(torch.randn(shape)).items():
        ref_m, ref_v = torch.randn(c), torch.rand(c) + 0.5
        m, v, n = ref_m.clone(), ref_v.clone(), torch.tensor(3)
        ref_n = 3
        w, b = torch.randn(c), torch.randn(c)
        for step in range(3):
            x = torch.randn(shape) + step
            x = layouts(x)[name]
            ref_n += 1
            factor = 1.0 / ref_n if momentum is None else momentum
            want = F.batch_norm(x, ref_m, ref_v, w, b, True, factor, 1e-5)
            got = ops.batch_norm(x, w, b, m, v, n, True, momentum or 0.0, momentum is None, 1e-5)
            assert_close(got, want)
            assert_close(m, ref_m, 1e-5)
            assert_close(v, ref_v, 1e-5)
            assert n.item() == ref_n
    assert m._version > 0 and n._version > 0  # in-place updates are visible to autograd


def test_batch_norm_training_without_running_stats():
    x = torch.randn(4, 6, 5, 5)
    want = F.batch_norm(x, None, None, None, None, True, 0.1, 1e-3)
    assert_close(ops.batch_norm(x, None, None, None, None, None, True, 0.1, False, 1e-3), want)


@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((2, 32, 8, 8), 8), ((1, 8, 4, 4, 4), 2),
                                          ((3, 4), 2)])
def test_group_norm(shape, groups):
    c = shape[1]
    x = torch.randn(shape) * 2 - 1
    w, b = torch.randn(c), torch.randn(c)
    want = F.group_norm(x, groups, w, b, 1e-5)
    for xl in layouts(x).values():
        assert_close(ops.group_norm(xl, groups, w, b, 1e-5), want)
    assert_close(ops.group_norm(x, groups, None, None, 1e-5), F.group_norm(x, groups))


@pytest.mark.parametrize("shape", [(2, 6, 5), (2, 4, 8, 8), (1, 3, 4, 4, 4)])
def test_instance_norm(shape):
    c = shape[1]
    x = torch.randn(shape) + 5
    w, b = torch.randn(c), torch.randn(c)
    want = F.instance_norm(x, weight=w, bias=b, eps=1e-5)
    for xl in layouts(x).values():
        assert_close(ops.instance_norm(xl, w, b, 1e-5), want)
    assert_close(ops.instance_norm(x, None, None, 1e-5), F.instance_norm(x, eps=1e-5))


def test_torch_threads_run_the_tasks():
    """The operators' executor runs on PyTorch's intra-op threads: torch.set_num_threads(n) has
    n threads take tasks (an extension built without OpenMP ran them all on one)."""
    for threads in (1, 2, 3):
        torch.set_num_threads(threads)
        assert simdnorm_torch._C.executor_threads(64) == threads
    assert simdnorm_torch._C.executor_threads(1) == 1


def test_threads_give_identical_bits():
    x = torch.randn(64, 256, 8, 8)
    w, b = torch.randn(256), torch.randn(256)
    results = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        results.append((ops.group_norm(x, 32, w, b, 1e-5),
                        ops.layer_norm(x, [8, 8], None, None, 1e-5),
                        ops.batch_norm(x, w, b, None, None, None, True, 0.1, False, 1e-5),
                        ops.normalize(x, 2.0, -1, 1e-12), ops.normalize(x.view(64, -1), 1.0, 1,
                                                                        1e-12)))
    for a, b in zip(*results):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_inference_cache_sees_updates(dtype):
    """BatchNorm inference folds its running stats into the cached plan: any change to them,
    even one that bypasses the version counter (.data), must give a new plan. The entry
    compares the parameters' own bytes (bfloat16 ones too, never converted on a hit)."""
    simdnorm_torch.clear_cache()
    x = torch.randn(2, 4, 3, 3).to(dtype)
    rm, rv, w, b = (t.to(dtype) for t in (torch.zeros(4), torch.ones(4), torch.ones(4),
                                         torch.zeros(4)))
    for update in (lambda: None, lambda: rm.add_(1), lambda: rv.data.mul_(4),
                   lambda: w.data.fill_(2), lambda: b.copy_(torch.arange(4.0))):
        update()
        got = ops.batch_norm(x, w, b, rm, rv, None, False, 0.1, False, 1e-5)
        want = F.batch_norm(x.float(), rm.float(), rv.float(), w.float(), b.float(), False, 0.1,
                            1e-5)
        assert_close(got.float(), want, RTOL if dtype == torch.float32 else 2.0 ** -8)
    info = simdnorm_torch.cache_info()
    assert info["stale"] == 4 and info["size"] == 1


def test_cache_capacity():
    simdnorm_torch.clear_cache()
    simdnorm_torch.set_cache_capacity(2)
    try:
        for n in range(1, 6):
            ops.layer_norm(torch.randn(n, 8), [8], None, None, 1e-5)
        assert simdnorm_torch.cache_info()["size"] == 2
        ops.layer_norm(torch.randn(5, 8), [8], None, None, 1e-5)
        assert simdnorm_torch.cache_info()["hits"] == 1
    finally:
        simdnorm_torch.set_cache_capacity(256)


def test_errors_name_the_problem():
    x = torch.randn(2, 4, 8)
    with pytest.raises(RuntimeError, match="float32"):
        ops.layer_norm(x.double(), [8], None, None, 1e-5)
    with pytest.raises(RuntimeError, match="float32, bfloat16 or float16, got Double"):
        ops.batch_norm(x.double(), None, None, None, None, None, True, 0.1, False, 1e-5)
    with pytest.raises(RuntimeError, match="unsupported_layout"):
        ops.layer_norm(x.transpose(1, 2), [4], None, None, 1e-5)
    with pytest.raises(RuntimeError, match="weight has 7 elements, expected 8"):
        ops.layer_norm(x, [8], torch.ones(7), None, 1e-5)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        ops.rms_norm(x, [4], None, 1e-5)
    with pytest.raises(RuntimeError, match="num_groups"):
        ops.group_norm(x, 0, None, None, 1e-5)
    with pytest.raises(RuntimeError, match="running_mean and running_var"):
        ops.batch_norm(x, None, None, torch.zeros(4), None, None, False, 0.1, False, 1e-5)
    with pytest.raises(RuntimeError, match="more than one value|1 value"):
        ops.batch_norm(torch.randn(1, 4), None, None, None, None, None, True, 0.1, False, 1e-5)
    with pytest.raises(RuntimeError, match="strided"):
        ops.layer_norm(torch.eye(3).to_sparse(), [3], None, None, 1e-5)


def test_no_silent_autograd():
    x = torch.randn(2, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        ops.layer_norm(x, [8], None, None, 1e-5)
    w = torch.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        ops.group_norm(torch.randn(2, 4, 3), 2, w, None, 1e-5)
    with torch.no_grad():
        assert_close(ops.layer_norm(x, [8], None, None, 1e-5), F.layer_norm(x, [8]))


def test_empty_inputs():
    assert ops.layer_norm(torch.randn(0, 8), [8], None, None, 1e-5).shape == (0, 8)
    assert ops.group_norm(torch.randn(2, 4, 0), 2, None, None, 1e-5).shape == (2, 4, 0)
    rm = torch.zeros(4)
    y = ops.batch_norm(torch.randn(0, 4, 3), None, None, rm, torch.ones(4), None, True, 0.1,
                       False, 1e-5)
    assert y.shape == (0, 4, 3) and torch.equal(rm, torch.zeros(4))


# ---- normalize (torch.nn.functional.normalize, p = 1 and 2) -----------------------------------

U32 = 2.0 ** -24
LP_LENGTHS = [1, 3, 16, 17, 100, 1000, 4099]


def lp_bound(n, p):
    """Bound on |simdnorm - exact| / |y| for rows of n elements (header)."""
    w = simdnorm_torch._C.kernel_lanes()
    depth = math.ceil(min(n, 2048) / w) + math.log2(w) + 2
    return ((depth / 2 if p == 2 else depth) + 4) * U32


def torch_lp_bound(n, p):
    """Bound on |F.normalize - exact| / |y| for rows of n elements, in any summation order."""
    depth = max(n - 1, 0)
    return ((depth / 2 if p == 2 else depth) + 2) * U32


def lp_reference(x, p, dim, eps):
    """float64 F.normalize with eps rounded to float32, as both float32 sides use it."""
    xd = x.double()
    eps32 = torch.tensor(eps, dtype=torch.float32).item()
    return xd / xd.norm(p, dim, keepdim=True).clamp_min(eps32)


def assert_lp_close(got, want, ref, rel):
    """|got - want| <= rel * |ref| per element (ref: the float64 reference), NaN where ref is."""
    assert got.shape == ref.shape and got.dtype == torch.float32
    nan = ref.isnan()
    assert torch.equal(got.isnan(), nan), "NaN outside the reference's NaN"
    err = (got.double() - want.double()).abs()[~nan]
    bound = rel * ref.abs()[~nan] + 1e-37
    worst = (err / bound).max().item() if err.numel() else 0.0
    assert worst <= 1.0, f"error {worst:.3g} times the bound {rel:.3g} * |y|"


def check_normalize(x, p, dim, eps=1e-12):
    """ops.normalize against the float64 reference and against F.normalize."""
    n = x.size(dim) if x.dim() else 1
    got = ops.normalize(x, float(p), dim, eps)
    ref = lp_reference(x, p, dim, eps)
    assert_lp_close(got, ref, ref, lp_bound(n, p))
    assert_lp_close(got, F.normalize(x, p, dim, eps), ref, lp_bound(n, p) + torch_lp_bound(n, p))
    return got


@pytest.mark.parametrize("n", LP_LENGTHS)
@pytest.mark.parametrize("p", [1, 2])
def test_normalize(n, p):
    rows = 37 if n <= 2048 else 3  # several short-row groups and a tail
    x = torch.randn(rows, n) * 2 + 0.25
    got = check_normalize(x, p, 1)
    assert torch.equal(ops.normalize(x, float(p), -1, 1e-12), got)
    before = simdnorm_torch.fallback_counts()
    assert torch.equal(simdnorm_torch.normalize(x, p, -1), got)
    if p == 2:
        assert torch.equal(simdnorm_torch.normalize(x), got)  # defaults: p=2, dim=1, eps=1e-12
        assert torch.equal(ops.normalize(x), got)
    assert simdnorm_torch.fallback_counts() == before


@pytest.mark.parametrize("n", [1, 17, 1000])
@pytest.mark.parametrize("p", [1, 2])
def test_normalize_layouts(n, p):
    """Padded and sliced rows, outer dims that do not merge (the output keeps x's strides),
    broadcast rows, size-1 dims before and after dim (the plan folds the latter into the row)."""
    padded = torch.randn(6, n + 5)
    batch = torch.zeros(12, n)
    batch[::2] = torch.randn(6, n)
    cases = [
        (padded[:, :n], 1),                                   # row stride n + 5
        (padded[:, 3:3 + n], -1),                             # and an offset start
        (batch[::2], 1),                                      # every other row
        (torch.randn(4, 5, n).transpose(0, 1), 2),            # outer strides that do not merge
        (torch.randn(3, 4, 2, n)[:, 1:3], -1),                # a slice of an outer dim
        (torch.randn(1, n).expand(5, n), 1),                  # one row broadcast (stride 0)
        (torch.randn(5, n, 1), 1),                            # size-1 dims after dim
        (torch.randn(5, n, 1, 1), -3),
        (torch.randn(5, 1, n), 2),                            # a size-1 dim before it
        (torch.randn(n), 0),                                  # one row
        (torch.randn(n, 1), 0),                               # a column: dim 0 is the row
    ]
    for x, dim in cases:
        check_normalize(x, p, dim)


def test_normalize_scalar_and_empty():
    for v in (-3.0, 0.0, 2.5):
        x = torch.tensor(v)
        for dim in (0, -1):
            assert torch.equal(ops.normalize(x, 2.0, dim, 1e-12), F.normalize(x, 2.0, dim))
    for shape, dim in [((0, 8), 1), ((8, 0), 1), ((3, 0, 4), -1)]:
        x = torch.randn(shape)
        assert ops.normalize(x, 2.0, dim, 1e-12).shape == shape
        assert simdnorm_torch.normalize(x, 2, dim).shape == shape


@pytest.mark.parametrize("n", [1, 5, 16, 1000, 4099])
@pytest.mark.parametrize("p", [1, 2])
def test_normalize_eps(n, p):
    """Norms below eps are clamped to eps: a row of zeros gives zeros, a row of tiny values
    x / eps; with eps = 0 the row of zeros gives 0 / 0 = NaN, as in PyTorch."""
    x = torch.randn(4, n)
    x[1] = 0.0
    x[2] = 1e-14 * torch.linspace(-1, 1, n)  # ||x||_p <= n * 1e-14 < 1e-10: clamped to 1e-10
    for eps in (1e-12, 1e-10, 0.0):
        got = check_normalize(x, p, 1, eps)
        if eps > 0:
            assert torch.equal(got[1], torch.zeros(n))
            if eps == 1e-10:
                ref = x[2].double() / torch.tensor(eps, dtype=torch.float32).item()
                assert_lp_close(got[2], ref, ref, lp_bound(n, p))
        else:
            assert bool(got[1].isnan().all())
        assert bool(got[[0, 3]].isfinite().all())


@pytest.mark.parametrize("n", [1, 5, 16, 64, 1000, 4099])
@pytest.mark.parametrize("p", [1, 2])
def test_normalize_nan_inf_stay_in_their_row(n, p):
    """A NaN makes its row NaN; an Inf makes its row 0 except Inf / Inf = NaN (as x / Inf in
    PyTorch); the rows around them are untouched."""
    x = torch.randn(7, n)
    x[1, n // 2] = float("nan")
    x[3, n // 2] = float("inf")
    x[5, n - 1] = float("-inf")
    got = check_normalize(x, p, 1)
    assert bool(got[1].isnan().all())
    for r, i in ((3, n // 2), (5, n - 1)):
        assert bool(got[r, i].isnan())
        others = torch.cat([got[r, :i], got[r, i + 1:]])
        assert torch.equal(others, torch.zeros_like(others))
    assert bool(got[[0, 2, 4, 6]].isfinite().all())


@pytest.mark.parametrize("n", [10, 1000])
@pytest.mark.parametrize("p", [1, 2])
def test_normalize_extreme_magnitudes(n, p):
    """Rows whose float32 sum of squares (or of |x|) overflows or underflows get the right
    norm (simdnorm sums them again, scaled or in double); PyTorch's float32 sum gives Inf (then
    zeros) or 0 (then x / eps) there, so these rows are checked against float64 only."""
    x = torch.ones(4, n)
    x[0] *= 1e25 if p == 2 else 3e35  # p = 1: n * 3e35 > FLT_MAX = 3.4e38 for n >= 1000
    x[1] *= 1e-25
    x[2] *= -1e-30
    got = ops.normalize(x, float(p), 1, 0.0)
    ref = lp_reference(x, p, 1, 0.0)
    assert_lp_close(got, ref, ref, lp_bound(n, p))


def test_normalize_plan_cache():
    simdnorm_torch.clear_cache()
    x = torch.randn(8, 32)
    ops.normalize(x, 2.0, 1, 1e-12)
    ops.normalize(x, 2.0, -1, 1e-12)        # the same plan: dim is wrapped
    assert simdnorm_torch.cache_info()["hits"] == 1
    ops.normalize(x, 1.0, 1, 1e-12)         # p, eps and the layout each make their own plan
    ops.normalize(x, 2.0, 1, 1e-6)
    ops.normalize(x[:, :16], 2.0, 1, 1e-12)
    info = simdnorm_torch.cache_info()
    assert info["size"] == 4 and info["misses"] == 4


def test_normalize_errors_name_the_problem():
    x = torch.randn(4, 8)
    with pytest.raises(RuntimeError, match="float32"):
        ops.normalize(x.double(), 2.0, 1, 1e-12)
    with pytest.raises(RuntimeError, match="p=3 is not supported"):
        ops.normalize(x, 3.0, 1, 1e-12)
    with pytest.raises(RuntimeError, match="p=1.5 is not supported"):
        ops.normalize(x, 1.5, 1, 1e-12)
    with pytest.raises(RuntimeError, match="dims after the normalized axis must have size 1.*"
                                           "unsupported_layout"):
        ops.normalize(x, 2.0, 0, 1e-12)
    with pytest.raises(RuntimeError, match="dense row-major.*unsupported_layout"):
        ops.normalize(x.t(), 2.0, 1, 1e-12)
    with pytest.raises(RuntimeError, match="dense row-major.*unsupported_layout"):
        ops.normalize(torch.randn(4, 16)[:, ::2], 2.0, 1, 1e-12)
    with pytest.raises(RuntimeError, match="eps.*must be finite and >= 0"):
        ops.normalize(x, 2.0, 1, -1.0)
    with pytest.raises(IndexError, match="out of range"):
        ops.normalize(x, 2.0, 2, 1e-12)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        ops.normalize(x.requires_grad_(), 2.0, 1, 1e-12)
    with torch.no_grad():
        check_normalize(x, 2, 1)


def test_normalize_fallbacks():
    """simdnorm_torch.normalize runs F.normalize for what the operator cannot take, counted."""
    x = torch.randn(4, 8, 3)

    def expect(reason, *args, x=x, **kwargs):
        before = simdnorm_torch.fallback_counts().get(f"normalize: {reason}", 0)
        got = simdnorm_torch.normalize(x, *args, **kwargs)
        want = F.normalize(x, *args, **kwargs)
        assert got.shape == want.shape
        assert got.device.type == "meta" or torch.equal(got, want)
        assert simdnorm_torch.fallback_counts()[f"normalize: {reason}"] == before + 1
        return got

    expect("dtype", x=x.double())
    expect("dtype", 1, -1, x=x.to(torch.int32).double())
    expect("device", x=torch.empty(4, 8, device="meta"))
    expect("p", 3)
    expect("p", float("inf"), -1)
    expect("p", 0.5)
    expect("layout")                        # the default dim=1 of a 3-D tensor
    expect("layout", 2, 0)
    expect("layout", 2, -1, x=x.transpose(1, 2))  # dim -1 is strided
    expect("layout", 1, 1, x=torch.randn(8, 4).t())
    expect("eps", 2, -1, -1.0)
    expect("dim", 2, (1, 2))
    xg = torch.randn(4, 8, requires_grad=True)
    y = expect("autograd", 2, 1, x=xg)
    y.sum().backward()                      # the fallback keeps the graph
    assert xg.grad is not None
    before = simdnorm_torch.fallback_counts()
    with torch.no_grad():                   # no graph wanted: simdnorm
        check_normalize(xg, 2, 1)
        simdnorm_torch.normalize(xg, 2, 1)
    with torch.inference_mode():
        simdnorm_torch.normalize(xg, 1, -1)
    assert simdnorm_torch.fallback_counts() == before
    with pytest.raises(IndexError):         # an out-of-range dim fails as in PyTorch
        simdnorm_torch.normalize(torch.randn(4, 8), 2, 2)


# ---- bfloat16 and float16 (row ops) ------------------------------------------------------------

HALF = [torch.bfloat16, torch.float16]
HALF_U = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
# Below the normal range the rounding error is absolute: half the smallest subnormal.
HALF_TINY = {torch.bfloat16: 2.0 ** -134, torch.float16: 2.0 ** -25}


def half_bound(ref, dtype, rtol=RTOL):
    """Per-element bound on |y - ref| for a y rounded into dtype (header)."""
    u = HALF_U[dtype]
    scale = max(ref.abs().max().item(), 1.0)
    return rtol * scale + u * (ref.abs() + rtol * scale) + HALF_TINY[dtype]


def assert_half_close(got, ref, dtype, bound=None):
    """got (of dtype) within `bound` (default half_bound) of the float64 reference."""
    assert got.dtype == dtype and got.shape == ref.shape
    bound = half_bound(ref, dtype) if bound is None else bound
    worst = ((got.double() - ref).abs() / bound).max().item()
    assert worst <= 1.0, f"error {worst:.3g} times the bound"


def weights_of(kind, n, dtype):
    """(weight, bias): None, float32, or of the input's dtype."""
    if kind is None:
        return None, None
    w, b = torch.randn(n), torch.randn(n)
    return (w, b) if kind == "f32" else (w.to(dtype), b.to(dtype))


def ln_reference(x, ns, w, b, eps):
    return F.layer_norm(x.double(), ns, None if w is None else w.double(),
                        None if b is None else b.double(), eps)


# The channel ops on bfloat16 and float16: the float64 reference of the same (exactly converted)
# input and parameters, within the float32 bound plus y's rounding (half_bound). Parameters and
# running statistics float32 or of the input's dtype; updated running statistics of the input's
# dtype are the float32 update rounded once.
def _params(c, dtype, kind):
    w, b = torch.randn(c), torch.randn(c)
    rm, rv = torch.randn(c), torch.rand(c) + 0.1
    return [t if kind == "f32" else t.to(dtype) for t in (w, b, rm, rv)]


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("shape", [(2, 3, 5, 5), (4, 16, 8, 8), (8, 5)])
@pytest.mark.parametrize("kind", ["f32", "same"])
def test_batch_norm_half(dtype, shape, kind):
    c = shape[1]
    x = (torch.randn(shape) * 2 + 1).to(dtype)
    w, b, rm, rv = _params(c, dtype, kind)
    want = F.batch_norm(x.double(), rm.double(), rv.double(), w.double(), b.double(), False, 0.1,
                        1e-5)
    for name, xl in layouts(x).items():
        got = ops.batch_norm(xl, w, b, rm, rv, None, False, 0.1, False, 1e-5)
        assert_half_close(got, want, dtype)
    # training: batch statistics, and the running statistics updated in their own dtype
    m, v, n = rm.clone(), rv.clone(), torch.tensor(0)
    ref_m, ref_v = rm.double(), rv.double()
    want = F.batch_norm(x.double(), ref_m, ref_v, w.double(), b.double(), True, 0.1, 1e-5)
    got = ops.batch_norm(x, w, b, m, v, n, True, 0.1, False, 1e-5)
    assert_half_close(got, want, dtype)
    assert m.dtype == rm.dtype and v.dtype == rv.dtype and n.item() == 1
    u = HALF_U[dtype] if kind == "same" else 2.0 ** -24  # the statistics' own rounding
    for got_s, ref_s in ((m, ref_m), (v, ref_v)):
        bound = u * ref_s.abs() + RTOL * max(ref_s.abs().max().item(), 1.0)
        assert ((got_s.double() - ref_s).abs() <= bound).all()


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((2, 32, 8, 8), 8), ((1, 8, 4, 4, 4), 2)])
@pytest.mark.parametrize("kind", ["f32", "same"])
def test_group_and_instance_norm_half(dtype, shape, groups, kind):
    c = shape[1]
    x = (torch.randn(shape) * 3 - 1).to(dtype)
    w, b, _, _ = _params(c, dtype, kind)
    want_gn = F.group_norm(x.double(), groups, w.double(), b.double(), 1e-5)
    want_in = F.instance_norm(x.double(), weight=w.double(), bias=b.double(), eps=1e-5)
    for xl in layouts(x).values():
        assert_half_close(ops.group_norm(xl, groups, w, b, 1e-5), want_gn, dtype)
        assert_half_close(ops.instance_norm(xl, w, b, 1e-5), want_in, dtype)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("shape,norm_ndim", [((3, 7), 1), ((2, 5, 64), 1), ((2, 3, 8, 8), 2),
                                             ((4, 1000), 1), ((1, 4096), 1)])
@pytest.mark.parametrize("wkind", [None, "f32", "same"])
def test_layer_norm_half(dtype, shape, norm_ndim, wkind):
    x = (torch.randn(shape) * 3 + 2).to(dtype)
    ns = list(shape[-norm_ndim:])
    w, b = weights_of(wkind, ns, dtype)
    ref = ln_reference(x, ns, w, b, 1e-5)
    for name, xl in layouts(x, channels_last=False).items():
        got = ops.layer_norm(xl, ns, w, b, 1e-5)
        assert got.dtype == dtype, name
        assert_half_close(got, ref, dtype)


@pytest.mark.parametrize("shape", [(64, 1000), (256, 64), (16, 4096)])
def test_layer_norm_bf16_against_torch(shape):
    """For information: PyTorch 1.13's own bfloat16 LayerNorm (bfloat16 weights: it takes no
    mix). It computes the statistics in float32 but rounds into bfloat16 after each step of
    y = (x * rstd + (-mean * rstd)) * gamma + beta (scale and shift, the product, the sum, the
    gamma product, the beta sum): at most six roundings of u = 2^-8 times a term bounded by
    M = max((|x| + |mean|) * rstd) * max|gamma| + max|beta|. Its bound, RTOL * scale + 6 u M,
    plus simdnorm's (half_bound) bounds the difference."""
    n = shape[-1]
    x = (torch.randn(shape) * 3 + 2).bfloat16()
    w, b = torch.randn(n).bfloat16(), torch.randn(n).bfloat16()
    ref = ln_reference(x, [n], w, b, 1e-5)
    xd = x.double()
    mean = xd.mean(-1, keepdim=True)
    rstd = (xd.var(-1, unbiased=False, keepdim=True) + 1e-5).rsqrt()
    m = ((xd.abs() + mean.abs()) * rstd).max() * w.double().abs().max() + b.double().abs().max()
    scale = max(ref.abs().max().item(), 1.0)
    torch_bound = RTOL * scale + 6 * HALF_U[torch.bfloat16] * m.item()
    got = ops.layer_norm(x, [n], w, b, 1e-5)
    want = F.layer_norm(x, [n], w, b, 1e-5)
    assert_half_close(want, ref, torch.bfloat16, torch_bound)
    assert_half_close(got, want.double(), torch.bfloat16,
                      half_bound(ref, torch.bfloat16) + torch_bound)


def rms_reference64(x, ns, w, eps, offset=0.0):
    dims = tuple(range(-len(ns), 0))
    xd = x.double()
    y = xd * (xd.pow(2).mean(dims, keepdim=True) + eps).rsqrt()
    return y if w is None else y * (w.double() + offset)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 64), (4, 4096)])
@pytest.mark.parametrize("wkind", [None, "f32", "same"])
def test_rms_norm_half(dtype, shape, wkind):
    x = torch.randn(shape).to(dtype)
    n = shape[-1]
    w, _ = weights_of(wkind, n, dtype)
    ref = rms_reference64(x, [n], w, 1e-6)
    for xl in layouts(x, channels_last=False).values():
        assert_half_close(ops.rms_norm(xl, [n], w, 1e-6), ref, dtype)


@pytest.mark.parametrize("dtype", [torch.float32] + HALF)
@pytest.mark.parametrize("wdtype", ["f32", "same"])
def test_rms_norm_weight_offset(dtype, wdtype):
    """weight_offset=1 (Gemma) gives exactly the bits of weight + 1 (added in float32)."""
    x = torch.randn(5, 96).to(dtype)
    w = torch.randn(96) * 0.1
    w = w if wdtype == "f32" else w.to(dtype)
    got = ops.rms_norm(x, [96], w, 1e-6, 1.0)
    assert torch.equal(got, ops.rms_norm(x, [96], w.float() + 1, 1e-6))
    assert torch.equal(ops.rms_norm(x, [96], w, 1e-6, 0.0), ops.rms_norm(x, [96], w, 1e-6))
    if dtype != torch.float32:
        assert_half_close(got, rms_reference64(x, [96], w, 1e-6, 1.0), dtype)
    else:
        assert_close(got, rms_reference(x, [96], w.float() + 1, 1e-6))
    with pytest.raises(RuntimeError, match="weight_offset=1 needs a weight"):
        ops.rms_norm(x, [96], None, 1e-6, 1.0)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("n", [1, 17, 1000, 4099])
@pytest.mark.parametrize("p", [1, 2])
def test_normalize_half(dtype, n, p):
    x = (torch.randn(9, n) * 2 + 0.25).to(dtype)
    got = ops.normalize(x, float(p), 1, 1e-12)
    assert got.dtype == dtype
    ref = lp_reference(x, p, 1, 1e-12)
    rel = lp_bound(n, p)
    u = HALF_U[dtype]
    assert_half_close(got, ref, dtype, (rel + u + rel * u) * ref.abs() + HALF_TINY[dtype])
    before = simdnorm_torch.fallback_counts()
    assert torch.equal(simdnorm_torch.normalize(x, p, -1), got)
    assert simdnorm_torch.fallback_counts() == before


def fused_case(dtype, shape, layout):
    x = torch.randn(shape).to(dtype)
    r = (torch.randn(shape) * 4).to(dtype)
    return layouts(x, channels_last=False)[layout], layouts(r, channels_last=False)[layout]


@pytest.mark.parametrize("dtype", [torch.float32] + HALF)
@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 64), (4, 4096)])
@pytest.mark.parametrize("layout", ["contiguous", "batch_slice"])
def test_fused_add_rms_norm(dtype, shape, layout):
    """vLLM's semantics, in place: residual <- input + residual, input <- rms_norm(residual)."""
    n = shape[-1]
    x, r = fused_case(dtype, shape, layout)
    w = torch.randn(n).to(dtype)
    x0, r0 = x.clone(), r.clone()
    versions = x._version, r._version
    assert ops.fused_add_rms_norm(x, r, w, 1e-6) is None
    assert torch.equal(r, (x0.float() + r0.float()).to(dtype))
    assert torch.equal(x, ops.rms_norm(r, [n], w, 1e-6))  # the norm of h as stored
    ref = rms_reference64(r, [n], w, 1e-6)
    if dtype == torch.float32:
        assert_close(x, ref.float())
    else:
        assert_half_close(x, ref, dtype)
    assert x._version > versions[0] and r._version > versions[1]


@pytest.mark.parametrize("dtype", [torch.float32] + HALF)
@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 64), (4, 4096)])
@pytest.mark.parametrize("layout", ["contiguous", "batch_slice"])
def test_fused_add_layer_norm(dtype, shape, layout):
    n = shape[-1]
    x, r = fused_case(dtype, shape, layout)
    w, b = torch.randn(n), torch.randn(n)  # float32 parameters with any input dtype
    x0, r0 = x.clone(), r.clone()
    ops.fused_add_layer_norm(x, r, w, b, 1e-5)
    assert torch.equal(r, (x0.float() + r0.float()).to(dtype))
    assert torch.equal(x, ops.layer_norm(r, [n], w, b, 1e-5))
    ref = ln_reference(r, [n], w, b, 1e-5)
    if dtype == torch.float32:
        assert_close(x, ref.float())
    else:
        assert_half_close(x, ref, dtype)


def test_half_plan_cache_keys_on_dtype():
    simdnorm_torch.clear_cache()
    x = torch.randn(4, 32)
    for dtype in [torch.float32] + HALF + [torch.bfloat16]:
        ops.layer_norm(x.to(dtype), [32], None, None, 1e-5)
    info = simdnorm_torch.cache_info()
    assert info["misses"] == 3 and info["hits"] == 1 and info["size"] == 3
    ops.rms_norm(x, [32], torch.ones(32), 1e-6, 1.0)    # weight_offset: a plan of its own
    ops.rms_norm(x, [32], torch.ones(32), 1e-6)
    assert simdnorm_torch.cache_info()["misses"] == 5


def test_half_errors_name_the_problem():
    x = torch.randn(2, 4, 8)
    xb = x.bfloat16()
    with pytest.raises(RuntimeError, match="float32, bfloat16 or float16, got Double"):
        ops.rms_norm(x.double(), [8], None, 1e-6)
    with pytest.raises(RuntimeError, match="weight must be a float32 CPU tensor or one of the "
                                           "input's dtype \\(BFloat16\\), got Half"):
        ops.layer_norm(xb, [8], torch.ones(8).half(), None, 1e-5)
    with pytest.raises(RuntimeError, match="weight must be a float32 CPU tensor, got BFloat16"):
        ops.layer_norm(x, [8], torch.ones(8).bfloat16(), None, 1e-5)  # float32 as before
    with pytest.raises(RuntimeError, match="bias has 7 elements"):
        ops.layer_norm(xb, [8], None, torch.ones(7).bfloat16(), 1e-5)
    for half in (xb, x.half()):  # channel ops: parameters float32 or of the input's dtype
        other = torch.ones(4, dtype=torch.float16 if half.dtype == torch.bfloat16 else
                           torch.bfloat16)
        with pytest.raises(RuntimeError, match="weight must be a float32 CPU tensor or one of"):
            ops.group_norm(half, 2, other, None, 1e-5)
        with pytest.raises(RuntimeError, match="bias must be a float32 CPU tensor or one of"):
            ops.instance_norm(half, None, other, 1e-5)
        with pytest.raises(RuntimeError, match="running_mean must be a float32 CPU tensor or"):
            ops.batch_norm(half, None, None, other, other, None, True, 0.1, False, 1e-5)
    w = torch.ones(8)
    with pytest.raises(RuntimeError, match="residual must be a CPU tensor of the input's dtype"):
        ops.fused_add_rms_norm(xb, x.clone(), w, 1e-6)
    with pytest.raises(RuntimeError, match="residual must have the input's sizes and strides"):
        ops.fused_add_rms_norm(xb, xb[:, :2].clone(), w, 1e-6)
    with pytest.raises(RuntimeError, match="residual must have the input's sizes and strides"):
        ops.fused_add_rms_norm(xb, xb.transpose(0, 1).contiguous().transpose(0, 1), w, 1e-6)
    with pytest.raises(RuntimeError, match="overlap"):
        ops.fused_add_rms_norm(xb, xb, w, 1e-6)  # h and y would be the same memory
    with pytest.raises(RuntimeError, match="weight has 4 elements, expected 8"):
        ops.fused_add_layer_norm(xb, xb.clone(), torch.ones(4), torch.zeros(4), 1e-5)
    with pytest.raises(RuntimeError, match="input must be float32, bfloat16 or float16"):
        ops.fused_add_rms_norm(x.double(), x.double(), w, 1e-6)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        ops.fused_add_rms_norm(x.clone().requires_grad_(), x.clone(), w, 1e-6)
    with torch.inference_mode():
        inf_x = torch.randn(2, 8)
    with pytest.raises(RuntimeError, match="inference tensor"):
        ops.fused_add_rms_norm(inf_x, torch.randn(2, 8), w, 1e-6)
